// The engine's per-task and per-slot state, shared by its loop-thread sources
// (engine.cpp, speculative.cpp). Only the loop thread touches these.
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "core/media_batch.hpp"
#include "engine/engine.hpp"

namespace pyllama::engine {

struct Engine::TaskState {
    uint64_t id = 0;
    TaskParams params;
    std::vector<Sampler> chains;  // one per completion, built (and validated) at submit
    std::vector<std::optional<Sampler>> grammars;  // apart from the chains: rejection sampling
    std::vector<std::optional<Sampler>> budgets;   // reasoning budgets, applied before the chain
    int32_t finals_left = 1;
    bool failed = false;
    std::vector<float> lora;      // resolved adapter scales
    // plain greedy sampling: argmax of logits + bias, without filling the candidate array
    bool greedy = false;
    SparseBias bias;  // the chain's logit_bias stage, for the greedy and top_k paths
    // the chain's top_k stage when nothing before it acts (fused_top_k_stage): the slot
    // takes the top k of the biased logits itself and runs the stages after it; -1: none
    int32_t top_k_at = -1;
};

// A context checkpoint: the part of a sequence's memory that cannot be rolled back, as it
// was after its first n_tokens tokens (llama-server's server_prompt_checkpoint).
struct Checkpoint {
    uint64_t id_task = 0;
    int64_t n_tokens = 0;
    llama_pos pos_min = -1, pos_max = -1;
    std::string data;
};

struct Engine::Slot {
    enum class State { Idle, Waiting, Prompt, Generating };
    int32_t id = 0;
    State state = State::Idle;
    std::vector<llama_token> cache;  // tokens whose KV is in sequence `id`
    // the media whose placeholders `cache` holds, in order (a slot file carries them);
    // entries past a cut are dropped with it, stale ones are skipped when saving
    std::vector<MediaChunk> media_cached;
    std::vector<Checkpoint> checkpoints;  // oldest first; only where the engine keeps them
    std::shared_ptr<TaskState> task;
    uint32_t index = 0;
    Slot * parent = nullptr;  // n > 1: the slot evaluating the shared prompt
    // Waiting for another task's slot to evaluate the first share_len prompt tokens
    Slot * donor = nullptr;
    size_t share_len = 0;
    int32_t n_shared = 0;  // prompt tokens copied from another slot
    size_t n_past = 0;
    // media: the next chunk of the prompt to evaluate, and the positions media in the cache
    // took beyond their tokens (M-RoPE: an image of n tokens takes fewer positions); the
    // position of cache index i past the last medium is i + pos_delta
    size_t media_next = 0;
    llama_pos pos_delta = 0;
    // the prompt's media encoded together, kept across steps until each is decoded; the
    // task's end drops it (engine/media_batch.cpp)
    std::unique_ptr<MediaBatch> media_batch;
    int32_t n_cached = 0;
    std::optional<Sampler> chain;
    std::optional<Sampler> grammar;
    std::optional<Sampler> budget;
    bool backend = false;  // `chain` (or `graph_chain`) is attached to the context for sequence `id`
    // -bs with a plain greedy task: pyllama's argmax stage in the graph (engine/graph_greedy);
    // still attached, parked, after the task (backend false): see Engine::attach_sampler
    std::optional<Sampler> graph_chain;
    // this step's scan of its logits row, done ahead by Engine::prescan when it is set
    struct Prescan {
        bool ready = false;
        llama_token pick = -1;  // greedy
        bool top_ok = false;    // top_k_candidates' result, in `top`
        std::vector<llama_token_data> top, scratch;
        // n_probs of the raw logits: the top n (logit order) and the softmax normaliser
        bool probs_ok = false;
        float lse = 0.0f;
        std::vector<llama_token_data> probs;
    } pre;
    std::optional<TextStream> text;
    int32_t n_decoded = 0;
    uint64_t last_task_id = 0;    // kept after release, for /slots
    bool has_next_token = false;  // as llama-server's slot: false once the task stopped
    bool has_new_line = false;    // text sent for the running task held a newline
    bool truncated = false;  // tokens were dropped (context shift) or the context ran out
    llama_token sampled = -1;
    int32_t i_batch = -1;   // output row in the current batch
    int32_t chunk = 0;      // prompt tokens placed in the current batch
    int32_t first_row = 0;  // first batch row of an embedding prompt
    bool fed = false;       // its sampled token is in the current batch
    // speculative decoding: the draft context holds cache[0, d_past) for this sequence
    std::vector<llama_token> draft;  // drafted tokens placed after `sampled` in this step
    bool draft_ngram = false;        // `draft` came from the n-gram drafters, not the draft model
    size_t d_past = 0;
    size_t d_end = 0;  // positions the draft context decoded up to in the last drafting
    int32_t n_draft = 0, n_draft_accepted = 0;  // this task's, for its timings
    std::mt19937 synth_rng;  // synthetic acceptance draws, seeded from the task's seed
    int64_t t_start = 0, t_prompt_done = 0, t_last_used = 0;

    const std::vector<llama_token> & prompt() const { return task->params.prompt; }
    llama_pos pos(size_t i) const { return static_cast<llama_pos>(i) + pos_delta; }
};

}  // namespace pyllama::engine
