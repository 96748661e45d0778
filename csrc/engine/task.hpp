// Engine tasks and the closed set of events they produce. Plain C++17.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/projector.hpp"
#include "core/sampling.hpp"
#include "llama.h"

namespace pyllama::engine {

enum class TaskKind : uint8_t { Completion, Embedding, Rerank };

// Why a completion ended. "length" in OpenAI terms is Limit or Context.
enum class StopReason : uint8_t { None, Eos, Limit, Word, Context, Timeout, Cancelled };

const char * stop_reason_name(StopReason r);

struct TaskParams {
    TaskKind kind = TaskKind::Completion;
    std::vector<llama_token> prompt;  // tokenized by the caller
    // images and audio in the prompt, in order, each over its placeholder tokens
    // (Projector::tokenize); the engine must have the projector that made them
    std::vector<MediaChunk> media;
    SamplingParams sampling;
    int32_t n_predict = -1;           // -1: until EOS or the context is full
    std::vector<std::string> stop;    // stop strings (never part of the output)
    int64_t t_max_predict_ms = 0;     // 0: no time limit
    int32_t n_probs = 0;              // top-N log-probabilities per token
    bool post_sampling_probs = false; // probabilities after the sampler chain
    bool cache_prompt = true;         // reuse the slot's KV for a shared prefix
    int32_t n_cmpl = 1;               // completions sharing the prompt (OpenAI n)
    int32_t id_slot = -1;             // -1: the best idle slot
    int32_t priority = 0;             // admission order: lower first (vLLM's), FIFO among equals
    int32_t embd_normalize = 2;       // embeddings: -1 none, 0 max-abs, 2 euclidean, p>2 p-norm
    std::vector<float> lora_scales;   // one per loaded adapter; empty: the engine's defaults
    int32_t n_cache_reuse = 0;        // min chunk reused by KV shifting past the common prefix; 0: off
    // context shift (llama-server's n_keep / n_discard): prompt tokens kept, -1 the whole prompt,
    // -2 the engine's --keep; tokens dropped after them, 0 half of what follows
    int32_t n_keep = -2;
    int32_t n_discard = 0;
    int32_t spec_n_max = -1;          // draft tokens per step; -1: the engine's, 0: no drafting
    int32_t spec_n_min = -1;          // fewer drafted tokens are dropped; -1: the engine's
    float spec_p_min = -1.0f;         // draft confidence to go on drafting; < 0: the engine's
    std::vector<llama_token> preserved_tokens;  // special tokens written out as text (tool-call markers)
    bool special = false;                       // every special token written out (-sp)
    bool return_progress = false;     // Progress events while the prompt is evaluated
    std::string cmpl_id;              // the id the client sees; Engine::control finds the task by it
    ReasoningBudget reasoning;
};

struct TokenProb {
    llama_token id;
    float logprob;
};

struct Event {
    enum class Type : uint8_t { Token, Final, Error, Progress };
    Type type = Type::Token;
    uint32_t index = 0;  // which completion of an n > 1 task
    bool done = false;   // the task's last event: nothing follows it
    int32_t id_slot = -1;  // Final: the slot that ran this completion

    // Token
    llama_token token = -1;
    std::string text;  // text that became safe with this token (may be empty)
    float logprob = 0.0f;
    std::vector<TokenProb> top;

    // Progress (n_prompt, n_cached, n_processed, t_prompt_ms so far) and Final
    int32_t n_processed = 0;  // Progress: prompt tokens in the KV cache, cached ones included
    StopReason stop = StopReason::None;
    std::string stopping_word;
    int32_t n_prompt = 0;
    int32_t n_cached = 0;  // prompt tokens taken from the slot's cache
    int32_t n_shared = 0;  // of those, copied from another slot's KV (shared prefix)
    int32_t n_predicted = 0;
    double t_prompt_ms = 0.0;
    double t_predicted_ms = 0.0;
    bool truncated = false;        // the context was shifted, or ran out, during the task
    int32_t n_draft = 0;           // speculative: drafted tokens sent for verification
    int32_t n_draft_accepted = 0;  // of those, accepted
    std::vector<float> embedding;  // embedding / rerank tasks (rerank: the scores)
    int32_t n_embd_rows = 0;       // > 1 for per-token embeddings (pooling none)

    // Error
    std::string error_kind;  // "exceed_context_size", "decode", "cancelled", "invalid"
    std::string message;
};

}  // namespace pyllama::engine
