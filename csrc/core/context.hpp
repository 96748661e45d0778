// Context: an owned llama_context bound to a shared Model. All methods lock the
// context's mutex, so a Context shared across Python threads cannot race inside
// llama.cpp (callers release the GIL before calling the blocking ones).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.hpp"
#include "core/compute_thread.hpp"
#include "core/model.hpp"
#include "core/threads.hpp"
#include "llama-cpp.h"

namespace pyllama {

struct ContextParams {
    uint32_t n_ctx = 0;  // 0: the model's training context
    uint32_t n_batch = 2048;
    uint32_t n_ubatch = 512;
    uint32_t n_seq_max = 1;
    uint32_t n_outputs_max = 0;    // rows of logits a batch may ask for; 0: n_batch
    // rows one sequence may ask for in a batch while a backend sampler is attached to it
    // (llama-server: 1, or 1 + the most draft tokens when it speculates); 0: n_outputs_max
    uint32_t n_outputs_max_per_seq = 0;
    int32_t n_threads = -1;        // -1: llama.cpp's default
    int32_t n_threads_batch = -1;  // -1: same as n_threads
    int32_t flash_attn = -1;       // -1 auto, 0 off, 1 on
    bool embeddings = false;
    int32_t pooling = -1;          // llama_pooling_type; -1: the model's
    int32_t attention = -1;        // llama_attention_type; -1: the model's
    std::string type_k = "f16";
    std::string type_v = "f16";
    bool offload_kqv = true;
    bool kv_unified = true;
    bool swa_full = true;
    bool no_perf = false;
    bool op_offload = true;        // host tensor operations may run on a device
    // compute on the context's own thread (contexts Python calls from any thread; the
    // engine computes on its own loop thread already): see core/compute_thread.hpp
    bool compute_thread = false;
    // RoPE and YaRN (llama-server's --rope-*, --yarn-*); these defaults: the model's
    int32_t rope_scaling_type = -1;  // llama_rope_scaling_type: -1 model, 0 none, 1 linear, 2 yarn
    float rope_freq_base = 0.0f;
    float rope_freq_scale = 0.0f;
    float yarn_ext_factor = -1.0f;
    float yarn_attn_factor = -1.0f;
    float yarn_beta_fast = -1.0f;
    float yarn_beta_slow = -1.0f;
    uint32_t yarn_orig_ctx = 0;
    // CPU placement of ggml's compute threads (generation, batch)
    CpuParams cpu;
    CpuParams cpu_batch;
};

// llama-server's n_outputs_max for a serving context: n_parallel rows of logits (one per
// slot and step) unless it embeds (every token is an output) or speculates (a slot's draft
// tokens are outputs too); 0 (llama.cpp's default: n_batch) for those.
uint32_t outputs_max(int32_t n_parallel, uint32_t n_batch, bool embeddings, bool speculative);

// A control vector file (GGUF of direction.N tensors) and its scale.
struct ControlVector {
    std::string path;
    float scale = 1.0f;
};

class LoraAdapter {
public:
    LoraAdapter(std::shared_ptr<Model> model, const std::string & path);
    llama_adapter_lora * get() const { return adapter_.get(); }
    const std::string & path() const { return path_; }

private:
    std::shared_ptr<Model> model_;  // an adapter must not outlive its model
    llama_adapter_lora_ptr adapter_;
    std::string path_;
};

ggml_type ggml_type_from_name(const std::string & name);
// llama.cpp's context parameters for p; throws std::invalid_argument on a bad value.
llama_context_params to_llama(const ContextParams & p);

class Context {
public:
    Context(std::shared_ptr<Model> model, const ContextParams & params);

    const std::shared_ptr<Model> & model() const { return model_; }
    llama_context * get() const { return ctx_.get(); }

    // Decode a batch; throws LlamaError on failure (no KV slot, invalid batch, abort).
    void decode(const Batch & batch);
    // The same, but a full KV cache returns false (nothing was decoded: llama.cpp places
    // every ubatch before computing any), so the caller can free room and retry.
    bool try_decode(const Batch & batch);
    void encode(const Batch & batch);

    // Output rows of the last decode. idx follows llama.cpp: batch position, or
    // negative from the end of the outputs. Throws std::out_of_range when idx has no output.
    float * logits_ith(int32_t idx);
    float * embeddings_ith(int32_t idx);
    float * embeddings_seq(llama_seq_id seq);
    int32_t n_outputs() const { return n_outputs_; }
    // llama_sampler_sample on output idx, under the context lock (checks idx first).
    llama_token sample(llama_sampler * smpl, int32_t idx);
    int32_t n_embd_out() const;  // floats per pooled/unpooled embedding row

    // Backend sampling (llama_set_sampler): a sampler chain run inside the graph for the
    // outputs of `seq`, as far as its stages have a backend implementation (a prefix of
    // the chain); null detaches. False when llama.cpp keeps it on the host. The chain must
    // outlive the attachment and can be attached once (llama.cpp initialises it for the graph).
    bool set_sampler(llama_seq_id seq, llama_sampler * chain);
    // What the backend left for output idx of the last decode: the token its chain picked
    // (-1 when the chain's backend part does not pick one), and the candidates the backend
    // stages kept (ids, logits and, after a dist stage, probabilities; null when none).
    struct Sampled {
        llama_token token = -1;
        const llama_token * ids = nullptr;
        const float * logits = nullptr;
        const float * probs = nullptr;
        uint32_t n = 0;  // candidates
    };
    Sampled sampled_ith(int32_t idx);

    uint32_t n_ctx() const { return llama_n_ctx(ctx_.get()); }
    uint32_t n_batch() const { return llama_n_batch(ctx_.get()); }
    uint32_t n_ubatch() const { return llama_n_ubatch(ctx_.get()); }
    uint32_t n_seq_max() const { return llama_n_seq_max(ctx_.get()); }
    int32_t pooling() const { return llama_pooling_type(ctx_.get()); }
    void set_n_threads(int32_t n, int32_t n_batch);
    int32_t n_threads() const { return llama_n_threads(ctx_.get()); }
    void set_embeddings(bool on);
    void set_causal_attn(bool on);

    // memory (KV cache)
    void memory_clear(bool data);
    bool seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1);
    void seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
    void seq_keep(llama_seq_id seq);
    void seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);
    void seq_div(llama_seq_id seq, llama_pos p0, llama_pos p1, int d);
    llama_pos seq_pos_min(llama_seq_id seq);
    llama_pos seq_pos_max(llama_seq_id seq);
    bool can_shift();

    // per-sequence state
    // flags: LLAMA_STATE_SEQ_FLAGS_* (PARTIAL_ONLY: the recurrent / SWA part a context checkpoint keeps)
    std::string seq_state_get(llama_seq_id seq, uint32_t flags = 0);
    void seq_state_set(const std::string & data, llama_seq_id seq, uint32_t flags = 0);
    size_t seq_state_save(const std::string & path, llama_seq_id seq, const std::vector<llama_token> & tokens);
    std::vector<llama_token> seq_state_load(const std::string & path, llama_seq_id seq, size_t max_tokens);

    void set_lora(const std::vector<std::pair<std::shared_ptr<LoraAdapter>, float>> & adapters);
    // Sum the vectors (each times its scale) and add them to layers [il_start, il_end]
    // (<= 0: the first / the last layer), as llama-server's --control-vector*; an empty
    // list removes them. Throws LlamaError on an unreadable file or a size mismatch.
    void set_control_vectors(const std::vector<ControlVector> & vectors, int32_t il_start, int32_t il_end);
    // llama-server's warm-up: decode BOS and EOS once, then forget them (first-use costs
    // such as weight repacking and kernel selection are paid before the first request).
    void warmup();

    llama_perf_context_data perf() const { return llama_perf_context(ctx_.get()); }
    void perf_reset() { llama_perf_context_reset(ctx_.get()); }

private:
    void check_seq(llama_seq_id seq) const;
    void record_outputs(const Batch & batch);
    int32_t resolve_output(int32_t idx) const;

    // Run fn on the compute thread when the context has one, else on the caller's.
    void compute(const std::function<void()> & fn);

    std::shared_ptr<Model> model_;
    std::unique_ptr<ComputeThread> compute_;  // null: compute on the caller's thread
    Threadpools pools_;  // declared before ctx_: freed after the context that uses them
    llama_context_ptr ctx_;
    std::vector<std::shared_ptr<LoraAdapter>> lora_;  // keep applied adapters alive
    std::vector<uint8_t> is_output_;  // per batch position: did it produce outputs (O(1) lookup)
    int32_t batch_size_ = 0;
    int32_t n_outputs_ = 0;
    std::mutex mu_;
};

}  // namespace pyllama
