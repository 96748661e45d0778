#include "core/context.hpp"
#include "core/dynlib.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "common.h"
#include "core/log.hpp"
#include "core/seq_state_file.hpp"

namespace pyllama {

using Lock = std::lock_guard<std::mutex>;

ggml_type ggml_type_from_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name(static_cast<ggml_type>(t));
        if (n && name == n) return static_cast<ggml_type>(t);
    }
    throw std::invalid_argument("unknown KV cache type '" + name + "' (e.g. f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)");
}

LoraAdapter::LoraAdapter(std::shared_ptr<Model> model, const std::string & path)
    : model_(std::move(model)), path_(path) {
    log_clear();
    adapter_.reset(llama_adapter_lora_init(model_->get(), path.c_str()));
    if (!adapter_) fail("failed to load LoRA adapter '" + path + "'");
}

llama_context_params to_llama(const ContextParams & p) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_ubatch = p.n_ubatch;
    cp.n_seq_max = p.n_seq_max;
    cp.n_outputs_max = p.n_outputs_max;
    cp.n_outputs_max_per_seq = p.n_outputs_max_per_seq;
    if (p.n_threads > 0) cp.n_threads = p.n_threads;
    cp.n_threads_batch = p.n_threads_batch > 0 ? p.n_threads_batch : cp.n_threads;
    cp.flash_attn_type = static_cast<enum llama_flash_attn_type>(p.flash_attn);
    cp.embeddings = p.embeddings;
    if (p.pooling >= 0) cp.pooling_type = static_cast<enum llama_pooling_type>(p.pooling);
    if (p.attention >= 0) cp.attention_type = static_cast<enum llama_attention_type>(p.attention);
    cp.type_k = ggml_type_from_name(p.type_k);
    cp.type_v = ggml_type_from_name(p.type_v);
    cp.offload_kqv = p.offload_kqv;
    cp.kv_unified = p.kv_unified;
    cp.swa_full = p.swa_full;
    cp.no_perf = p.no_perf;
    cp.op_offload = p.op_offload;
    if (p.rope_scaling_type < -1 || p.rope_scaling_type > LLAMA_ROPE_SCALING_TYPE_MAX_VALUE) {
        throw std::invalid_argument("rope_scaling_type must be -1 (the model's), 0 none, 1 linear or 2 yarn");
    }
    cp.rope_scaling_type = static_cast<enum llama_rope_scaling_type>(p.rope_scaling_type);
    cp.rope_freq_base = p.rope_freq_base;
    cp.rope_freq_scale = p.rope_freq_scale;
    cp.yarn_ext_factor = p.yarn_ext_factor;
    cp.yarn_attn_factor = p.yarn_attn_factor;
    cp.yarn_beta_fast = p.yarn_beta_fast;
    cp.yarn_beta_slow = p.yarn_beta_slow;
    cp.yarn_orig_ctx = p.yarn_orig_ctx;
    return cp;
}

uint32_t outputs_max(int32_t n_parallel, uint32_t n_batch, bool embeddings, bool speculative) {
    if (embeddings || speculative || n_parallel < 1 || static_cast<uint32_t>(n_parallel) > n_batch) return 0;
    return static_cast<uint32_t>(n_parallel);
}

Context::Context(std::shared_ptr<Model> model, const ContextParams & p) : model_(std::move(model)) {
    const llama_context_params cp = to_llama(p);
    // checked before the (slow) context allocation
    p.cpu.to_ggml(cp.n_threads);
    p.cpu_batch.to_ggml(cp.n_threads_batch);
    log_clear();
    ctx_.reset(llama_init_from_model(model_->get(), cp));
    if (!ctx_) fail("failed to create context");
    pools_.attach(ctx_.get(), p.cpu, cp.n_threads, p.cpu_batch, cp.n_threads_batch);
    if (p.compute_thread) compute_ = std::make_unique<ComputeThread>();
}

void Context::compute(const std::function<void()> & fn) {
    if (compute_) {
        compute_->run(fn);
    } else {
        fn();
    }
}

void Context::set_control_vectors(const std::vector<ControlVector> & vectors, int32_t il_start, int32_t il_end) {
    Lock lock(mu_);
    if (vectors.empty()) {
        llama_set_adapter_cvec(ctx_.get(), nullptr, 0, 0, 0, 0);
        return;
    }
    std::vector<common_control_vector_load_info> infos;
    for (const ControlVector & v : vectors) infos.push_back({v.scale, v.path});
    const int32_t n_layer = llama_model_n_layer(model_->get());
    log_clear();
    const common_control_vector_data data = common_control_vector_load(infos);
    if (data.n_embd == -1) fail("failed to load the control vector(s)");
    if (data.n_embd != llama_model_n_embd(model_->get())) {
        throw LlamaError("control vector has " + std::to_string(data.n_embd) + " values per layer, the model " +
                         std::to_string(llama_model_n_embd(model_->get())));
    }
    if (llama_set_adapter_cvec(ctx_.get(), data.data.data(), data.data.size(), data.n_embd,
                               il_start <= 0 ? 1 : il_start, il_end <= 0 ? n_layer : il_end) != 0) {
        fail("failed to apply the control vector(s)");
    }
}

void Context::warmup() {
    Lock lock(mu_);
    compute([&] {
        llama_model * model = model_->get();
        const llama_vocab * vocab = model_->vocab();
        std::vector<llama_token> tmp;
        for (llama_token t : {llama_vocab_bos(vocab), llama_vocab_eos(vocab)}) {
            if (t != LLAMA_TOKEN_NULL) tmp.push_back(t);  // some models (T5) have no BOS
        }
        if (tmp.empty()) tmp.push_back(0);
        log_clear();
        if (llama_model_has_encoder(model)) {
            if (llama_encode(ctx_.get(), llama_batch_get_one(tmp.data(), static_cast<int32_t>(tmp.size()))) != 0) {
                fail("warm-up: llama_encode failed");
            }
            llama_token start = llama_model_decoder_start_token(model);
            tmp.assign(1, start == LLAMA_TOKEN_NULL ? llama_vocab_bos(vocab) : start);
        }
        if (llama_model_has_decoder(model)) {
            tmp.resize(std::min(tmp.size(), static_cast<size_t>(llama_n_batch(ctx_.get()))));
            if (llama_decode(ctx_.get(), llama_batch_get_one(tmp.data(), static_cast<int32_t>(tmp.size()))) != 0) {
                fail("warm-up: llama_decode failed");
            }
        }
        llama_memory_clear(llama_get_memory(ctx_.get()), true);
        llama_synchronize(ctx_.get());
        llama_perf_context_reset(ctx_.get());
        n_outputs_ = 0;
        is_output_.clear();
    });
}

void Context::check_seq(llama_seq_id seq) const {
    if (seq < 0 || static_cast<uint32_t>(seq) >= llama_n_seq_max(ctx_.get())) {
        throw std::out_of_range("sequence id " + std::to_string(seq) + " outside [0, n_seq_max=" +
                                std::to_string(llama_n_seq_max(ctx_.get())) + ")");
    }
}

void Context::record_outputs(const Batch & batch) {
    const llama_batch & b = batch.raw();
    is_output_.assign(b.logits, b.logits + b.n_tokens);
    batch_size_ = b.n_tokens;
    n_outputs_ = 0;
    for (int32_t i = 0; i < b.n_tokens; ++i) n_outputs_ += b.logits[i] ? 1 : 0;
}

void Context::decode(const Batch & batch) {
    if (!try_decode(batch)) {
        fail("llama_decode: no KV cache slot for the batch (context full; reduce the batch or free sequences)");
    }
}

bool Context::try_decode(const Batch & batch) {
    Lock lock(mu_);
    if (batch.size() == 0) throw std::invalid_argument("cannot decode an empty batch");
    log_clear();
    int32_t rc = 0;
    compute([&] { rc = llama_decode(ctx_.get(), batch.raw()); });
    if (rc == 0) {
        record_outputs(batch);
        return true;
    }
    n_outputs_ = 0;
    is_output_.clear();
    switch (rc) {
        case 1: return false;
        case 2: fail("llama_decode: aborted");
        case -1: fail("llama_decode: invalid batch");
        default: fail("llama_decode failed with code " + std::to_string(rc));
    }
}

void Context::encode(const Batch & batch) {
    Lock lock(mu_);
    if (batch.size() == 0) throw std::invalid_argument("cannot encode an empty batch");
    log_clear();
    int32_t rc = 0;
    compute([&] { rc = llama_encode(ctx_.get(), batch.raw()); });
    if (rc != 0) {
        n_outputs_ = 0;
        is_output_.clear();
        fail("llama_encode failed with code " + std::to_string(rc));
    }
    record_outputs(batch);
}

int32_t Context::resolve_output(int32_t idx) const {
    if (idx < 0) {
        if (-idx > n_outputs_) throw std::out_of_range("output index " + std::to_string(idx) + " out of range");
        return idx;  // llama.cpp resolves negative indices itself
    }
    if (idx >= batch_size_) throw std::out_of_range("batch index " + std::to_string(idx) + " out of range");
    if (static_cast<size_t>(idx) < is_output_.size() && is_output_[static_cast<size_t>(idx)]) return idx;
    throw std::out_of_range("batch position " + std::to_string(idx) + " did not request logits/embeddings");
}

float * Context::logits_ith(int32_t idx) {
    Lock lock(mu_);
    const int32_t i = resolve_output(idx);
    float * p = llama_get_logits_ith(ctx_.get(), i);
    if (!p) fail("no logits for output " + std::to_string(idx));
    return p;
}

float * Context::embeddings_ith(int32_t idx) {
    Lock lock(mu_);
    const int32_t i = resolve_output(idx);
    float * p = llama_get_embeddings_ith(ctx_.get(), i);
    if (!p) fail("no embeddings for output " + std::to_string(idx) + " (was the context created with embeddings=True?)");
    return p;
}

float * Context::embeddings_seq(llama_seq_id seq) {
    Lock lock(mu_);
    check_seq(seq);
    float * p = llama_get_embeddings_seq(ctx_.get(), seq);
    if (!p) fail("no pooled embedding for sequence " + std::to_string(seq) + " (pooling none, or not in the last batch)");
    return p;
}

llama_token Context::sample(llama_sampler * smpl, int32_t idx) {
    Lock lock(mu_);
    const int32_t i = resolve_output(idx);
    return llama_sampler_sample(smpl, ctx_.get(), i);
}

bool Context::set_sampler(llama_seq_id seq, llama_sampler * chain) {
    Lock lock(mu_);
    check_seq(seq);
    return llama_set_sampler(ctx_.get(), seq, chain);
}

Context::Sampled Context::sampled_ith(int32_t idx) {
    Lock lock(mu_);
    const int32_t i = resolve_output(idx);
    llama_context * c = ctx_.get();
    Sampled out;
    out.token = llama_get_sampled_token_ith(c, i);
    // as common_sampler's set_logits: probabilities if a stage made them, else logits
    out.probs = llama_get_sampled_probs_ith(c, i);
    out.logits = llama_get_sampled_logits_ith(c, i);
    if (out.probs) {
        out.n = llama_get_sampled_probs_count_ith(c, i);
    } else if (out.logits) {
        out.n = llama_get_sampled_logits_count_ith(c, i);
    }
    if (out.n > 0) out.ids = llama_get_sampled_candidates_ith(c, i);
    return out;
}

int32_t Context::n_embd_out() const {
    if (llama_pooling_type(ctx_.get()) == LLAMA_POOLING_TYPE_RANK) {
        const uint32_t n = llama_model_n_cls_out(model_->get());
        return n > 0 ? static_cast<int32_t>(n) : 1;
    }
    return llama_model_n_embd_out(model_->get());
}

void Context::set_n_threads(int32_t n, int32_t n_batch) {
    Lock lock(mu_);
    if (n <= 0) throw std::invalid_argument("n_threads must be positive");
    if (pools_.attached()) {  // each pool is sized for the thread counts it was made with
        throw std::invalid_argument("a context with CPU placement (cpu_mask, priority, poll) keeps its thread counts");
    }
    llama_set_n_threads(ctx_.get(), n, n_batch > 0 ? n_batch : n);
}

void Context::set_embeddings(bool on) { Lock lock(mu_); llama_set_embeddings(ctx_.get(), on); }
void Context::set_causal_attn(bool on) { Lock lock(mu_); llama_set_causal_attn(ctx_.get(), on); }

void Context::memory_clear(bool data) { Lock lock(mu_); llama_memory_clear(llama_get_memory(ctx_.get()), data); }

bool Context::seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1) {
    Lock lock(mu_);
    if (seq != -1) check_seq(seq);  // -1: every sequence
    return llama_memory_seq_rm(llama_get_memory(ctx_.get()), seq, p0, p1);
}

void Context::seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    Lock lock(mu_);
    check_seq(src);
    check_seq(dst);
    llama_memory_seq_cp(llama_get_memory(ctx_.get()), src, dst, p0, p1);
}

void Context::seq_keep(llama_seq_id seq) {
    Lock lock(mu_);
    check_seq(seq);
    llama_memory_seq_keep(llama_get_memory(ctx_.get()), seq);
}

void Context::seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    Lock lock(mu_);
    check_seq(seq);
    if (!llama_memory_can_shift(llama_get_memory(ctx_.get()))) throw std::runtime_error("this context's memory cannot shift positions");
    llama_memory_seq_add(llama_get_memory(ctx_.get()), seq, p0, p1, delta);
}

void Context::seq_div(llama_seq_id seq, llama_pos p0, llama_pos p1, int d) {
    Lock lock(mu_);
    check_seq(seq);
    if (d <= 0) throw std::invalid_argument("divisor must be positive");
    if (!llama_memory_can_shift(llama_get_memory(ctx_.get()))) throw std::runtime_error("this context's memory cannot shift positions");
    llama_memory_seq_div(llama_get_memory(ctx_.get()), seq, p0, p1, d);
}

llama_pos Context::seq_pos_min(llama_seq_id seq) { Lock lock(mu_); check_seq(seq); return llama_memory_seq_pos_min(llama_get_memory(ctx_.get()), seq); }
llama_pos Context::seq_pos_max(llama_seq_id seq) { Lock lock(mu_); check_seq(seq); return llama_memory_seq_pos_max(llama_get_memory(ctx_.get()), seq); }
bool Context::can_shift() { Lock lock(mu_); return llama_memory_can_shift(llama_get_memory(ctx_.get())); }

std::string Context::seq_state_get(llama_seq_id seq, uint32_t flags) {
    Lock lock(mu_);
    check_seq(seq);
    const size_t n = llama_state_seq_get_size_ext(ctx_.get(), seq, flags);
    std::string out(n, '\0');
    const size_t w = llama_state_seq_get_data_ext(ctx_.get(), reinterpret_cast<uint8_t *>(out.data()), n, seq, flags);
    out.resize(w);
    return out;
}

void Context::seq_state_set(const std::string & data, llama_seq_id seq, uint32_t flags) {
    Lock lock(mu_);
    check_seq(seq);
    log_clear();
    const size_t r = llama_state_seq_set_data_ext(ctx_.get(), reinterpret_cast<const uint8_t *>(data.data()), data.size(), seq, flags);
    if (r == 0) fail("failed to restore sequence state");
}

size_t Context::seq_state_save(const std::string & path, llama_seq_id seq, const std::vector<llama_token> & tokens) {
    Lock lock(mu_);
    check_seq(seq);
    log_clear();
    const size_t n = llama_state_seq_save_file(ctx_.get(), path.c_str(), seq, tokens.data(), tokens.size());
    if (n == 0) fail("failed to save sequence state to '" + path + "'");
    // llama.cpp closes the file without checking: the last buffered write can fail (a full
    // disk) unseen, leaving a short file behind a success
    std::error_code ec;
    if (std::filesystem::file_size(dynlib::from_utf8(path), ec) != n || ec) {
        throw LlamaError("failed to save sequence state to '" + path + "': the file was cut short (" +
                         (ec ? ec.message() : std::string("disk full?")) + ")");
    }
    return n;
}

std::vector<llama_token> Context::seq_state_load(const std::string & path, llama_seq_id seq, size_t max_tokens) {
    Lock lock(mu_);
    check_seq(seq);
    SeqStateFile file = read_seq_state_file(path, seq, max_tokens);  // see seq_state_file.hpp
    log_clear();
    const size_t n = llama_state_seq_set_data(ctx_.get(), file.blob.data(), file.blob.size(), seq);
    if (n != file.blob.size()) {  // a failed read removed what it had restored; extra bytes too
        llama_memory_seq_rm(llama_get_memory(ctx_.get()), seq, -1, -1);
        fail(n == 0 ? "the slot state does not fit this model and context" : "the slot state file has extra bytes");
    }
    return std::move(file.tokens);
}

void Context::set_lora(const std::vector<std::pair<std::shared_ptr<LoraAdapter>, float>> & adapters) {
    Lock lock(mu_);
    std::vector<llama_adapter_lora *> ptrs;
    std::vector<float> scales;
    std::vector<std::shared_ptr<LoraAdapter>> keep;
    for (const auto & [a, s] : adapters) {
        if (!a) throw std::invalid_argument("LoRA adapter is None");
        if (a.get() && a->get() == nullptr) throw std::invalid_argument("LoRA adapter was freed");
        ptrs.push_back(a->get());
        scales.push_back(s);
        keep.push_back(a);
    }
    log_clear();
    if (llama_set_adapters_lora(ctx_.get(), ptrs.data(), ptrs.size(), scales.data()) != 0) {
        fail("failed to apply LoRA adapters");
    }
    lora_ = std::move(keep);
}

}  // namespace pyllama
