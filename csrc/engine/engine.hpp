// Engine: continuous batching over n_parallel slots on one loop thread.
//
// Threads: the loop thread alone touches the llama_context, the slots and the samplers.
// Other threads talk to it only through three mutex-guarded places: the inbox (new
// tasks, cancellations, commands), the outbox (events per task) and the published
// snapshot (slots, metrics). No Python object is ever touched here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/context.hpp"
#include "core/model.hpp"
#include "core/projector.hpp"
#include "core/sampler.hpp"
#include "engine/graph_greedy.hpp"
#include "engine/wake_socket.hpp"
#include "engine/ngram.hpp"
#include "engine/prompt_cache.hpp"
#include "engine/task.hpp"
#include "engine/text_stream.hpp"

namespace pyllama::engine {

// submit() refused: the queue of tasks waiting for a slot is full.
class OverloadedError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// submit() refused: the prompt does not fit a slot's context.
class ContextSizeError : public std::length_error {
public:
    ContextSizeError(const std::string & msg, int32_t n_prompt, int32_t n_ctx)
        : std::length_error(msg), n_prompt_tokens(n_prompt), n_ctx_slot(n_ctx) {}
    int32_t n_prompt_tokens;
    int32_t n_ctx_slot;
};

struct EngineParams {
    ContextParams ctx;                 // n_seq_max is set from n_parallel
    int32_t n_parallel = 1;
    int32_t max_queue = 256;           // tasks waiting for a slot; beyond: OverloadedError
    float slot_prompt_similarity = 0.1f;
    bool context_shift = false;
    int32_t n_keep = 0;                // context shift: prompt tokens always kept
    std::vector<std::pair<std::string, float>> lora;  // adapters loaded at start, default scales
    // speculative decoding with a draft model sharing the vocabulary (llama-server's
    // --spec-draft-model, --spec-draft-n-max/-n-min/-p-min and their defaults)
    std::shared_ptr<Model> draft;
    int32_t spec_n_max = 3;
    int32_t spec_n_min = 0;
    float spec_p_min = 0.0f;
    // synthetic acceptance for benchmarking (llama-server's --spec-synth-*): the chance
    // that draft position i is accepted given i-1 was, whatever the target samples;
    // empty: drafts are verified against the target
    std::vector<double> spec_synth_probs;
    // n-gram self-speculation (--spec-type ngram-*), tried before the draft model
    NgramSpec ngram;
    // host-memory prompt cache (llama-server's --cache-ram, MiB; 0: off, -1: no limit) and
    // --cache-idle-slots: on each new task, idle slots are saved there (and, with a unified
    // KV cache, cleared to give the room to busy ones)
    int64_t cache_ram_mib = 0;
    bool cache_idle_slots = true;
    bool verbose = false;  // trace lines on stderr (as llama-server's -v)
    // --mmproj: media chunks in prompts are encoded and decoded through it (no context
    // shift, cache reuse or draft model with it, as in llama-server)
    std::shared_ptr<Projector> projector;
    // llama-server's --control-vector(-scaled) and --control-vector-layer-range
    std::vector<ControlVector> control_vectors;
    int32_t control_vector_start = 0;  // <= 0: the first layer
    int32_t control_vector_end = 0;    // <= 0: the last layer
    bool warmup = true;                // --no-warmup
    // a prompt prefix another slot holds or is evaluating is copied from there instead of
    // evaluated again, when it saves at least share_min tokens (engine/shared_prefix.cpp)
    bool share_prefix = true;
    // --no-cont-batching: a prompt is evaluated only in a step where no slot generates
    bool cont_batching = true;
    // context checkpoints (-ctxcp, -cms): for a model whose memory cannot drop a sequence's
    // tail (recurrent, hybrid), the state a few tokens before each prompt's end, so a later
    // prompt sharing that prefix resumes from it instead of from nothing
    int32_t n_ctx_checkpoints = 32;
    int32_t checkpoint_min_step = 8192;
    int32_t share_min = 32;
    // an embedding step's token cap once it holds an input (0: up to n_batch; -1: n_embd/2
    // for an encoder, else 0). An encoder's attention is dense over the whole ubatch (other
    // inputs masked, not skipped), so a decode of many short inputs pays ~n_tokens^2 for it
    // (~n_tokens/(6 n_embd) of the weights' work by count); an input alone still goes whole
    int32_t embd_step_tokens = -1;
    int32_t n_ctx_slot_max = 0;        // a slot's context limit (--kv-unified-per-slot; 0: none)
    // the draft model's context: its own threads, CPU placement and KV types (the
    // main context's when left at these defaults)
    int32_t draft_threads = -1;
    int32_t draft_threads_batch = -1;
    std::optional<CpuParams> draft_cpu;
    std::optional<CpuParams> draft_cpu_batch;
    std::string draft_type_k;
    std::string draft_type_v;
    // --spec-draft-backend-sampling: the draft model's top-10 pick runs inside its graph
    bool draft_backend_sampling = false;
    // greedy tasks pick in the graph (engine/graph_greedy) even without backend_sampling,
    // where the pick is pyllama's CPU node: the same token as the host's argmax, without
    // reading each sequence's logits row back (off: the host picks, as llama-server). Only
    // with at least kGraphGreedySlots slots: the saving is ~8 us a sequence a step, while a
    // slot that switches between greedy and sampled tasks pays llama.cpp's scheduler
    // reserve (~3 ms on the demo model) at each switch
    bool graph_greedy = true;
    static constexpr int32_t kGraphGreedySlots = 8;
};

struct SlotInfo {
    int32_t id;
    std::string state;  // "idle", "waiting", "prompt", "generating"
    uint64_t task_id;
    int32_t n_ctx;
    int32_t n_past;
    int32_t n_prompt;
    int32_t n_decoded;
    int32_t n_cache;
    // llama-server's slot fields: the task running or, once it ended, the last one (0:
    // none yet); prompt tokens evaluated and taken from the cache by the running task;
    // whether it may still sample (false once it stopped) and has written a newline
    uint64_t last_task_id;
    int32_t n_prompt_processed;
    int32_t n_prompt_cached;
    bool has_next_token;
    bool has_new_line;
};

struct Metrics {
    uint64_t n_prompt_tokens_total = 0;   // evaluated, not taken from a cache
    uint64_t n_prompt_cached_total = 0;   // taken from a slot's cache
    uint64_t n_prompt_shared_total = 0;   // of those, copied from another slot's KV
    double t_prompt_ms_total = 0;
    uint64_t n_predicted_total = 0;
    double t_predicted_ms_total = 0;
    uint64_t n_decode_total = 0;
    double t_decode_ms_total = 0;  // inside llama_decode
    double t_sample_ms_total = 0;  // sampling, text and events after each decode
    double t_batch_ms_total = 0;   // building each decode's batch (drafts included)
    uint64_t n_busy_slots_total = 0;  // sum over decodes of busy slots
    uint64_t n_tasks_done = 0;
    int32_t n_processing = 0;
    int32_t n_deferred = 0;
    int32_t n_tokens_max = 0;  // largest n_past seen
    double kv_usage = 0;       // used cells / context size, from the slots' positions
    uint64_t n_draft_tokens = 0;    // drafted tokens sent for verification
    uint64_t n_draft_accepted = 0;  // of those, accepted by the target model
    uint64_t n_draft_steps = 0;     // verification steps
    // where each sampled token was picked (backend sampling, -bs): by the sampler chain
    // inside the graph; by the host after the chain's backend stages (a prefix of it) ran
    // in the graph; wholly on the host. Tokens forced by synthetic acceptance count nowhere.
    uint64_t n_sampled_backend = 0;
    uint64_t n_sampled_split = 0;
    uint64_t n_sampled_host = 0;
    uint64_t n_draft_sampled_backend = 0;  // draft model tokens picked from the backend's top 10
    uint64_t n_graph_greedy_rows = 0;      // rows pyllama's one greedy node picked on the CPU backend
};

class Engine {
public:
    bool serves_completions() const { return !embeddings_ || mixed_; }
    bool serves_embeddings() const { return embeddings_; }
    int32_t pooling() const { return ctx_->pooling(); }  // llama_pooling_type in effect
    // how long the start-up warm-up decode took (-1: none ran)
    double warmup_ms() const { return warmup_ms_; }
    Engine(std::shared_ptr<Model> model, const EngineParams & params);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine & operator=(const Engine &) = delete;

    uint64_t submit(TaskParams params);  // throws OverloadedError, ContextSizeError, invalid_argument
    std::vector<uint64_t> submit_many(std::vector<TaskParams> params);  // all admitted in one turn, or none
    void cancel(uint64_t task_id);

    // Async side: every task with new events, drained at once. When events arrive, one
    // byte is sent on the socket set here (a duplicate of the caller's connected socket;
    // -1 detaches); the reader empties its end before each take_ready, and the next
    // event after take_ready rings again (engine/wake_socket.hpp).
    std::vector<std::pair<uint64_t, std::vector<Event>>> take_ready();
    void set_notify_socket(int64_t handle);
    // Sync side: block until task_id has events (or timeout); returns them.
    std::vector<Event> wait(uint64_t task_id, int timeout_ms);

    std::vector<SlotInfo> slots() const;
    Metrics metrics() const;
    int32_t n_ctx_slot() const { return n_ctx_slot_; }
    int32_t n_parallel() const { return params_.n_parallel; }
    const std::shared_ptr<Model> & model() const { return model_; }
    const std::shared_ptr<Projector> & projector() const { return projector_; }
    const std::vector<std::string> & lora_paths() const { return lora_paths_; }
    std::vector<float> lora_scales();  // the defaults for tasks that name none

    // Run on the loop thread between steps; the slot must be idle. Return bytes/tokens.
    size_t save_slot(int32_t id, const std::string & path);
    size_t restore_slot(int32_t id, const std::string & path);
    void erase_slot(int32_t id);
    // llama-server's POST /v1/chat/completions/control on the running task whose cmpl_id
    // is `cmpl_id`: "reasoning_end" forces the end of its thinking block now. Returns
    // (success, why not); blocks until the loop thread has acted.
    std::pair<bool, std::string> control(const std::string & cmpl_id, const std::string & action);
    void set_lora_scales(const std::vector<float> & scales);  // new defaults, for tasks admitted from now on

    void stop();  // finish the loop thread; pending and running tasks end with an error

private:
    // embeddings and completions from one context (--embedding with a generative model)
    bool mixed_ = false;
    bool embd_on_ = true;     // the context's embeddings switch, as last set
    bool embd_turn_ = false;  // both kinds waiting: alternate the steps
    double warmup_ms_ = -1.0;
    struct TaskState;
    struct Slot;

    std::shared_ptr<TaskState> prepare(TaskParams p);  // validate, build sampler chains
    void check_media(const TaskParams & p, bool completion) const;
    void loop();
    void apply_inbox();
    void admit();
    bool step();
    void sample_slot(Slot & slot, int32_t row, llama_token forced = -1);
    void prescan();  // the step's greedy picks and top-k candidates, spread over threads
    // backend sampling (sampling.cpp): the slot's chain attached to its sequence when its
    // task asks for it and nothing needs the host's view of every logit; detached on release
    void attach_sampler(Slot & slot);
    void detach_sampler(Slot & slot);
    void finish(Slot & slot, StopReason reason);
    void fail_slot(Slot & slot, const std::string & kind, const std::string & msg);
    void make_kv_room();  // after a batch found the KV cache full
    void release(Slot & slot);
    void emit_progress(const Slot & s);
    static void stamp(Event & ev, const Slot & s, int64_t now);
    void emit(uint64_t task_id, Event && ev, bool last);
    void notify(bool force);
    void publish();
    void context_shift(Slot & slot);
    // forget the slot's KV from position `keep` on; returns what is kept (0 where the memory
    // cannot drop a tail: recurrent state is all or nothing)
    size_t drop_kv(Slot & slot, size_t keep);
    // context checkpoints (engine/checkpoints.cpp): how much of `lcp` a recurrent slot can
    // keep (restoring a checkpoint), and the chunk/checkpoint rule of prompt evaluation
    size_t checkpoint_restore(Slot & slot, size_t lcp, size_t n_prompt);
    int32_t checkpoint_chunk(const Slot & slot, int32_t chunk) const;
    void checkpoint_create(Slot & slot, int32_t chunk);
    bool checkpoints_on(const Slot & slot) const;
    size_t reuse_chunks(Slot & slot, const std::vector<llama_token> & prompt, size_t n_past, size_t min_chunk);
    void swap_prompt(Slot & slot, const std::vector<llama_token> & prompt, bool by_lru);  // --cache-ram
    void cache_idle_slots();  // --cache-idle-slots, after a task was placed
    // shared prefixes (engine/shared_prefix.cpp): a new task's slot takes the longest prefix
    // another slot holds, now or once that slot's prompt evaluation has reached it
    void share_prefix(Slot & slot);  // beyond what the slot's own KV (n_past) holds
    void copy_prefix(Slot & from, Slot & to, size_t len);
    void release_waiters(Slot & donor, bool failed);  // donor advanced, ended or failed
    void trace(const char * what) const;
    void draft_all();                // speculative: draft tokens for generating slots
    int32_t draft_room(const Slot & slot) const;  // most draft tokens the slot may take now
    std::unique_ptr<common_speculative, NgramDrafterFree> make_ngram_drafter(const NgramSpec & p) const;
    void ngram_begin(const Slot & slot);  // a generation starts: index its prompt
    void ngram_draft_all();               // n-gram drafts for generating slots
    void ngram_accept(const Slot & slot, size_t n_accepted);
    void verify_draft(Slot & slot);  // after sampling the first row: accept matching drafts
    void apply_lora(const std::vector<float> & scales);
    void finish_embedding(Slot & slot);
    void feed_prompt(Slot & slot);  // the prompt's tokens into the slot's sampler chain
    bool eval_media(Slot & slot);  // a media chunk at the slot's n_past, decoded on its own
    template <typename R>
    R run_on_loop(std::function<R()> fn);

    std::shared_ptr<Model> model_;
    EngineParams params_;
    // -bs greedy picks in the graph (engine/graph_greedy); before ctx_: outlives its graphs
    std::unique_ptr<GraphGreedy> graph_greedy_;
    int8_t greedy_on_cpu_ = -1;  // whether its stage runs on the CPU node (-1: not yet tried)
    std::unique_ptr<Context> ctx_;
    std::shared_ptr<Projector> projector_;
    std::unique_ptr<Context> dctx_;  // draft model context (speculative decoding), or null
    std::unique_ptr<common_speculative, NgramDrafterFree> ngram_;  // n-gram drafters, or null
    std::unique_ptr<PromptCache> prompt_cache_;  // --cache-ram, or null
    std::unique_ptr<Batch> dbatch_;
    int32_t n_ctx_slot_ = 0;
    bool embeddings_ = false;
    bool rs_only_ = false;  // the memory cannot drop a sequence's tail (recurrent / hybrid)
    int32_t n_swa_ = 0;     // a window-sized SWA cache's window (0: none, or --swa-full)
    std::vector<std::shared_ptr<LoraAdapter>> lora_;
    std::vector<std::string> lora_paths_;
    std::vector<float> lora_scales_now_;  // applied to the context (loop thread only)
    std::vector<float> lora_defaults_;    // for tasks that name no scales (guarded by in_mu_)

    // loop-thread state
    std::vector<std::unique_ptr<Slot>> slots_;
    std::deque<std::shared_ptr<TaskState>> queue_;  // admitted to the engine, waiting for slots
    std::unique_ptr<Batch> batch_;
    std::vector<llama_token_data> cur_;
    std::vector<llama_token_data> topk_scratch_, top_;  // top_k_candidates' buffers, reused
    std::vector<Slot *> prescan_work_;       // prescan()'s lists, reused every step
    std::vector<const float *> prescan_rows_;
    int32_t outputs_per_seq_ = 1;  // rows a backend-sampled sequence may have in one batch
    std::vector<llama_sampler_ptr> draft_chains_;  // per sequence, attached to dctx_ (or empty)

    // inbox
    mutable std::mutex in_mu_;
    std::condition_variable in_cv_;
    std::deque<std::shared_ptr<TaskState>> inbox_;
    std::vector<uint64_t> cancels_;
    std::deque<std::function<void()>> commands_;
    bool stopping_ = false;
    std::atomic<uint64_t> next_id_{1};
    std::atomic<int32_t> n_waiting_{0};  // tasks in inbox_ + queue_
    // admission: slots claimed by tasks submitted and not yet finished or cancelled (a
    // completion its n_cmpl; the inputs of one embedding request share one)
    std::unordered_map<uint64_t, double> live_;
    double live_load_ = 0;
    void forget_live(uint64_t id);

    // outbox
    mutable std::mutex out_mu_;
    std::condition_variable out_cv_;
    std::unordered_map<uint64_t, std::vector<Event>> out_;
    std::vector<uint64_t> ready_;
    bool notified_ = false;    // a byte was sent on wake_, not yet followed by take_ready
    bool unnotified_ = false;  // events queued since the last notify()
    int64_t last_notify_us_ = 0;
    bool urgent_ = false;  // an event that should not wait for the gap (see notify)
    static constexpr int64_t kNotifyGapUs = 3000;  // the most a busy engine delays an event
    WakeSocket wake_;

    // published snapshot
    mutable std::mutex pub_mu_;
    std::vector<SlotInfo> pub_slots_;
    Metrics metrics_;

    std::thread thread_;
};

// Runs fn on the loop thread between steps and returns its result (or rethrows).
template <typename R>
R Engine::run_on_loop(std::function<R()> fn) {
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto fut = task->get_future();
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        if (stopping_) throw std::runtime_error("the engine is stopped");
        commands_.emplace_back([task] { (*task)(); });
    }
    in_cv_.notify_one();
    return fut.get();
}

}  // namespace pyllama::engine
