// The engine's life: construction (model, context, slots), the loop thread and its
// turns, and stopping. What each turn does is in admission.cpp (tasks into slots),
// batch.cpp (one decode), sampling.cpp (tokens out), events.cpp (results to callers).

#include "engine/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "engine/slot.hpp"

#include "core/log.hpp"

namespace pyllama::engine {

const char * stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::None: return "none";
        case StopReason::Eos: return "eos";
        case StopReason::Limit: return "limit";
        case StopReason::Word: return "word";
        case StopReason::Context: return "context";
        case StopReason::Timeout: return "timeout";
        case StopReason::Cancelled: return "cancelled";
    }
    return "none";
}

Engine::Engine(std::shared_ptr<Model> model, const EngineParams & p) : model_(std::move(model)), params_(p) {
    if (p.n_parallel < 1) throw std::invalid_argument("n_parallel must be >= 1");
    if (p.max_queue < 0) throw std::invalid_argument("max_queue must be >= 0");
    if (p.n_keep < -1) throw std::invalid_argument("n_keep must be >= -1 (-1: the whole prompt)");
    ContextParams cp = p.ctx;
    cp.n_seq_max = static_cast<uint32_t>(p.n_parallel);
    embeddings_ = cp.embeddings;
    // Pooled embeddings need each sequence whole in one ubatch. Separate KV streams make
    // llama.cpp split a batch into equal-length ubatches, cutting sequences apart, so an
    // embedding engine always uses the unified cache (its KV is never reused anyway).
    if (embeddings_) cp.kv_unified = true;
    // An encoder decodes a batch in one ubatch (llama.cpp asserts it) and a pooled input is
    // never split: a batch holds at most a ubatch, as llama-server lowers n_batch to n_ubatch
    if (embeddings_ && cp.n_ubatch > 0 && cp.n_batch > cp.n_ubatch) cp.n_batch = cp.n_ubatch;
    // an encoder's embedding steps stop taking inputs at n_embd/2 tokens (EngineParams)
    if (params_.embd_step_tokens < 0) {
        const bool encoder = embeddings_ && model_->is_encoder();
        params_.embd_step_tokens = encoder ? llama_model_n_embd(model_->get()) / 2 : 0;
    }
    // llama-server's output limit: without embeddings or speculation a step asks for one row
    // of logits per slot at most (a prompt's last token or a sampled one); reserving n_batch
    // rows instead costs n_ubatch x n_vocab floats of compute buffer (~100 MiB at a 50k
    // vocabulary, on the GPU when offloaded). --fit projects the same (bind_model.cpp's fit
    // calls outputs_max too). A batch asking for more rows than this aborts in llama.cpp.
    if (cp.n_outputs_max == 0) {
        cp.n_outputs_max = outputs_max(p.n_parallel, cp.n_batch, embeddings_, p.draft || !p.ngram.types.empty());
    }
    if (p.n_ctx_checkpoints < 0) throw std::invalid_argument("n_ctx_checkpoints must be >= 0");
    if (p.checkpoint_min_step < 0) throw std::invalid_argument("checkpoint_min_step must be >= 0");
    // llama-server's per-sequence output limit (it matters only to backend sampling): one
    // row, or one plus the longest draft when it speculates (common_speculative_n_max)
    int32_t n_draft = 0;
    if (p.draft) n_draft = std::max(n_draft, p.spec_n_max);
    for (const auto & t : p.ngram.types) {
        if (t == "ngram-simple") n_draft = std::max<int32_t>(n_draft, p.ngram.simple.size_m);
        if (t == "ngram-map-k") n_draft = std::max<int32_t>(n_draft, p.ngram.map_k.size_m);
        if (t == "ngram-map-k4v") n_draft = std::max<int32_t>(n_draft, p.ngram.map_k4v.size_m);
        if (t == "ngram-mod") n_draft = std::max(n_draft, p.ngram.mod_n_max);
        if (t == "ngram-cache") n_draft = std::max(n_draft, 8);
    }
    outputs_per_seq_ = static_cast<int32_t>(std::min<int64_t>(cp.n_batch, 1 + static_cast<int64_t>(std::max(0, n_draft))));
    if (embeddings_) outputs_per_seq_ = 1;
    if (cp.n_outputs_max_per_seq == 0) cp.n_outputs_max_per_seq = static_cast<uint32_t>(outputs_per_seq_);
    outputs_per_seq_ = static_cast<int32_t>(cp.n_outputs_max_per_seq);
    graph_greedy_ = std::make_unique<GraphGreedy>(p.n_parallel);
    ctx_ = std::make_unique<Context>(model_, cp);
    rs_only_ = llama_model_is_recurrent(model_->get()) || llama_model_is_hybrid(model_->get());
    n_swa_ = cp.swa_full ? 0 : llama_model_n_swa(model_->get());
    // embeddings on a model with a KV cache (a generative one): completions too, as
    // llama-server serves both; each decode is one kind, embeddings switched to match
    mixed_ = embeddings_ && llama_get_memory(ctx_->get()) != nullptr;
    if (mixed_) {
        ctx_->set_embeddings(false);
        embd_on_ = false;
    }
    n_ctx_slot_ = static_cast<int32_t>(llama_n_ctx_seq(ctx_->get()));
    // embeddings always share one KV cache (above); a slot's limit stays what separate
    // caches would give it, as llama-server's n_ctx per slot
    if (embeddings_ && !p.ctx.kv_unified) n_ctx_slot_ /= std::max<int32_t>(1, p.n_parallel);
    if (p.n_ctx_slot_max > 0) n_ctx_slot_ = std::min(n_ctx_slot_, p.n_ctx_slot_max);
    projector_ = p.projector;
    if (projector_) {
        if (projector_->model().get() != model_.get()) {
            throw std::invalid_argument("the multimodal projector was loaded for another model");
        }
        // a generative model's embeddings may hold media, as llama-server's: the prompt's
        // last batch gives the rows (or the pooled row); a BERT-like encoder takes none
        if (embeddings_ && !mixed_) throw std::invalid_argument("a multimodal projector is for generative models, not this embedding model");
        if (p.draft) throw std::invalid_argument("a draft model cannot be used with a multimodal projector (--mmproj)");
        // an image is all or nothing in the KV cache: none can be shifted out in part
        params_.context_shift = false;
    }
    if (p.cache_ram_mib != 0 && !embeddings_) {
        const size_t bytes = p.cache_ram_mib < 0 ? 0 : static_cast<size_t>(p.cache_ram_mib) << 20;
        prompt_cache_ = std::make_unique<PromptCache>(bytes, ctx_->n_ctx());
        if (p.cache_idle_slots) trace("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__");
    }
    if (!p.ngram.types.empty()) {
        if (!serves_completions()) throw std::invalid_argument("n-gram speculation is for completions, not embeddings");
        ngram_ = make_ngram_drafter(p.ngram);
    }
    if (!p.draft && !ngram_ && !p.spec_synth_probs.empty()) {
        throw std::invalid_argument("synthetic acceptance needs a speculative decoder (a draft model or --spec-type)");
    }
    if (p.draft) {
        if (embeddings_) throw std::invalid_argument("a draft model is for completions, not embeddings");
        if (p.spec_n_max < 0 || p.spec_n_min < 0 || p.spec_p_min < 0.0f || p.spec_p_min > 1.0f) {
            throw std::invalid_argument("speculative: n_max and n_min must be >= 0, p_min in [0, 1]");
        }
        if (llama_vocab_type(p.draft->vocab()) != llama_vocab_type(model_->vocab()) ||
            p.draft->n_vocab() != model_->n_vocab()) {
            throw std::invalid_argument("the draft model's vocabulary does not match the model's");
        }
        ContextParams dp = cp;
        if (p.draft_threads > 0) dp.n_threads = p.draft_threads;
        if (p.draft_threads_batch > 0) dp.n_threads_batch = p.draft_threads_batch;
        if (p.draft_cpu) dp.cpu = *p.draft_cpu;
        if (p.draft_cpu_batch) dp.cpu_batch = *p.draft_cpu_batch;
        if (!p.draft_type_k.empty()) dp.type_k = p.draft_type_k;
        if (!p.draft_type_v.empty()) dp.type_v = p.draft_type_v;
        dp.n_outputs_max_per_seq = 1;  // one row per sequence and draft decode
        dctx_ = std::make_unique<Context>(p.draft, dp);
        dbatch_ = std::make_unique<Batch>(static_cast<int32_t>(dctx_->n_batch()), 1);
        if (p.draft_backend_sampling) {
            // as llama.cpp's drafters: a top-k 10 chain per sequence inside the draft's graph;
            // the host then picks from those 10 instead of scanning the vocabulary
            for (int32_t i = 0; i < p.n_parallel; ++i) {
                llama_sampler_ptr chain(llama_sampler_chain_init(llama_sampler_chain_default_params()));
                llama_sampler_chain_add(chain.get(), llama_sampler_init_top_k(10));
                if (!dctx_->set_sampler(i, chain.get())) {
                    for (int32_t j = 0; j < i; ++j) dctx_->set_sampler(j, nullptr);  // kept on the host
                    draft_chains_.clear();
                    break;
                }
                draft_chains_.push_back(std::move(chain));
            }
        }
    }
    for (const auto & [path, scale] : p.lora) {
        lora_.push_back(std::make_shared<LoraAdapter>(model_, path));
        lora_paths_.push_back(path);
        lora_defaults_.push_back(scale);
    }
    lora_scales_now_.assign(lora_.size(), 0.0f);
    if (!lora_.empty()) apply_lora(lora_defaults_);
    if (!p.control_vectors.empty()) {
        ctx_->set_control_vectors(p.control_vectors, p.control_vector_start, p.control_vector_end);
    }
    for (int32_t i = 0; i < p.n_parallel; ++i) {
        auto s = std::make_unique<Slot>();
        s->id = i;
        slots_.push_back(std::move(s));
    }
    batch_ = std::make_unique<Batch>(static_cast<int32_t>(ctx_->n_batch()), 1);
    cur_.resize(static_cast<size_t>(model_->n_vocab()));
    publish();
    thread_ = std::thread(&Engine::loop, this);
    if (p.warmup) {  // after the adapters, as llama-server: the first request pays nothing
        // On the loop thread, as every decode: with OpenMP, each thread that computes a
        // graph keeps its own team of workers, and more workers than cores make libgomp
        // sleep at every barrier instead of spinning (a third of the decode speed on 2 cores).
        try {
            warmup_ms_ = run_on_loop<double>([this] {
                const auto t0 = std::chrono::steady_clock::now();
                ctx_->warmup();
                if (dctx_) dctx_->warmup();
                return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            });
        } catch (...) {
            stop();  // a constructor that throws runs no destructor: join the loop here
            throw;
        }
    }
}

Engine::~Engine() {
    stop();
    for (size_t i = 0; i < draft_chains_.size(); ++i) dctx_->set_sampler(static_cast<llama_seq_id>(i), nullptr);
    // greedy stages parked on idle sequences (engine/sampling.cpp), before the slots go
    for (auto & s : slots_) {
        if (s->graph_chain) ctx_->set_sampler(s->id, nullptr);
    }
}

void Engine::stop() {
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        stopping_ = true;
    }
    in_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
    while (true) {
        bool busy = !queue_.empty();
        for (const auto & s : slots_) busy = busy || s->state != Slot::State::Idle;
        std::vector<uint64_t> cancels;
        std::deque<std::function<void()>> commands;
        {
            std::unique_lock<std::mutex> lk(in_mu_);
            if (!busy) {
                in_cv_.wait(lk, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || !commands_.empty(); });
            }
            if (stopping_) break;
            while (!inbox_.empty()) {
                // by priority, FIFO among equals: after every queued task of its priority or
                // lower, so a waiting batch line never stands before an interactive request
                auto task = std::move(inbox_.front());
                inbox_.pop_front();
                const int32_t p = task->params.priority;
                auto at = std::find_if(queue_.begin(), queue_.end(),
                                       [p](const auto & q) { return q->params.priority > p; });
                queue_.insert(at, std::move(task));
            }
            cancels.swap(cancels_);
            commands.swap(commands_);
        }
        for (auto & c : commands) c();
        for (uint64_t id : cancels) {
            auto qit = std::find_if(queue_.begin(), queue_.end(), [id](const auto & t) { return t->id == id; });
            if (qit != queue_.end()) {
                queue_.erase(qit);
                n_waiting_--;
            }
            for (auto & s : slots_) {
                if (s->task && s->task->id == id) release(*s);
            }
        }
        admit();
        step();
        publish();
        bool more = !queue_.empty();  // else the loop waits next turn: deliver now
        for (const auto & s : slots_) more = more || s->state != Slot::State::Idle;
        notify(!more);
    }
    // shutdown: whatever is queued or running ends with an error event
    for (auto & s : slots_) {
        if (s->task) fail_slot(*s, "unavailable", "the engine is shutting down");
    }
    for (auto & t : queue_) {
        Event ev;
        ev.type = Event::Type::Error;
        ev.error_kind = "unavailable";
        ev.message = "the engine is shutting down";
        ev.done = true;
        emit(t->id, std::move(ev), true);
    }
    queue_.clear();
    notify(true);
    std::lock_guard<std::mutex> lk(in_mu_);
    for (auto & c : commands_) c();  // their futures complete (with the "stopped" state they observe)
    commands_.clear();
}

}  // namespace pyllama::engine
