// SamplingParams: every sampling option llama-server takes, and the chain built from
// them in llama-server's order (common_sampler_init), so outputs match it token for token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/logits_scan.hpp"
#include "core/model.hpp"
#include "core/sampler.hpp"

namespace pyllama {

struct SamplingParams {
    uint32_t seed = LLAMA_DEFAULT_SEED;
    int32_t min_keep = 0;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float xtc_probability = 0.0f;
    float xtc_threshold = 0.1f;
    float typical_p = 1.0f;
    float temperature = 0.8f;
    float dynatemp_range = 0.0f;
    float dynatemp_exponent = 1.0f;
    int32_t repeat_last_n = 64;  // -1: the context size (resolve before building)
    float repeat_penalty = 1.0f;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    float dry_multiplier = 0.0f;
    float dry_base = 1.75f;
    int32_t dry_allowed_length = 2;
    int32_t dry_penalty_last_n = -1;  // -1: the context size (resolve before building)
    std::vector<std::string> dry_sequence_breakers{"\n", ":", "\"", "*"};
    int32_t mirostat = 0;  // 0 off, 1 v1, 2 v2
    float mirostat_tau = 5.0f;
    float mirostat_eta = 0.1f;
    float top_n_sigma = -1.0f;
    float adaptive_target = -1.0f;
    float adaptive_decay = 0.9f;
    bool ignore_eos = false;
    std::vector<std::pair<llama_token, float>> logit_bias;
    std::string grammar;  // GBNF; empty: none
    bool grammar_lazy = false;
    std::vector<std::string> grammar_trigger_patterns;
    std::vector<llama_token> grammar_trigger_tokens;
    // tokens the (non-lazy) grammar accepts before sampling: a chat's tool-call or output
    // grammar begins with the generation prompt the template already wrote (llama.cpp's
    // common_sampler_init prefill); empty for a user's own grammar
    std::vector<llama_token> grammar_prefill;
    // stage order; names as llama-server's "samplers" field
    std::vector<std::string> samplers{"penalties", "dry", "top_n_sigma", "top_k", "typ_p",
                                      "top_p", "min_p", "xtc", "temperature"};
    // llama-server's backend_sampling: the engine attaches the chain to the task's sequence
    // so its stages with a backend implementation run inside the graph (Engine::attach_sampler)
    bool backend_sampling = false;

    void validate() const;  // throws std::invalid_argument with the offending field
};

// llama-server's reasoning budget (common_reasoning_budget_init): counts the tokens of a
// thinking block and, past `budget`, forces `forced` (a message, then the first end tag).
// Armed when start and end are set and the budget is >= 0, `control` asks for it (the
// block can then be ended by Engine::control) or a lazy grammar must wait for the block
// to end; `prefill` (the generation prompt's tokens) is accepted first, so a prompt that
// opened the block starts it counting.
struct ReasoningBudget {
    std::vector<llama_token> start;
    std::vector<std::vector<llama_token>> end;
    std::vector<llama_token> forced;
    std::vector<llama_token> prefill;
    int32_t budget = -1;  // -1: no limit
    bool control = false;
};

// The reasoning budget stage (nullopt when not armed), the prefill already accepted.
std::optional<Sampler> build_reasoning_budget(const Model & model, const ReasoningBudget & rb, bool grammar_lazy);

// Build the sampler chain for params; n_ctx resolves the "-1 = context size" windows.
// with_grammar=false leaves the grammar out (see build_grammar_sampler).
Sampler build_sampler_chain(const Model & model, const SamplingParams & params, int32_t n_ctx,
                            bool with_grammar = true);

// The grammar stage alone (lazy or not); empty when params has no grammar. Used apart from
// the chain for llama-server's rejection sampling: sample without it, check the token, and
// only if it does not fit constrain every candidate and sample again.
std::optional<Sampler> build_grammar_sampler(const Model & model, const SamplingParams & params);

// True when the chain built for params without its grammar always picks the highest biased
// logit (temperature <= 0 and no stage that could drop or reorder the top token), so a caller
// may take the argmax of logits + sparse_logit_bias() instead of running the chain.
bool is_plain_greedy(const SamplingParams & params);

// The chain's logit_bias stage (ignore_eos included) as sorted (token, bias) pairs.
SparseBias sparse_logit_bias(const Model & model, const SamplingParams & params);

// The index in the chain built for params without its grammar of its top_k stage when every
// stage before it leaves the candidates as they are (the logit bias aside: a caller applies
// it sparsely), so a caller may take the top k of the biased logits itself (one pass, no
// candidate array of the whole vocabulary) and run the stages after it; -1 otherwise.
int32_t fused_top_k_stage(const SamplingParams & params);

}  // namespace pyllama
