// Sampler: one owned llama_sampler (a single stage or a chain of them).
// Adding a stage to a chain moves its ownership into the chain (llama.cpp frees it
// with the chain), so the added Sampler is left empty and refuses further use.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model.hpp"
#include "llama-cpp.h"

namespace pyllama {

class Sampler {
public:
    explicit Sampler(llama_sampler * raw);  // takes ownership; throws if raw is null

    llama_sampler * get() const;          // throws if moved into a chain
    llama_sampler * release();            // give up ownership (to a chain)
    bool empty() const { return !p_; }

    std::string name() const { return llama_sampler_name(get()); }
    uint32_t seed() const { return llama_sampler_get_seed(get()); }
    void accept(llama_token t) { llama_sampler_accept(get(), t); }
    void reset() { llama_sampler_reset(get()); }
    Sampler clone() const;
    // Apply the stages to caller-supplied logits (one per vocabulary entry), pick the
    // selected token and accept it: llama_sampler_sample without a context, for logits a
    // Python processor has rewritten.
    llama_token sample_logits(const float * logits, size_t n_vocab);

    // chains
    static Sampler chain(bool no_perf);
    void add(Sampler & stage);            // stage is moved into this chain
    int32_t chain_size() const;
    bool is_chain() const { return llama_sampler_chain_get(get(), -1) != nullptr; }

private:
    llama_sampler_ptr p_;
};

// Factories: each validates its arguments (std::invalid_argument) before calling llama.cpp.
namespace samplers {
Sampler greedy();
Sampler dist(uint32_t seed);
Sampler top_k(int32_t k);
Sampler top_p(float p, size_t min_keep);
Sampler min_p(float p, size_t min_keep);
Sampler typical(float p, size_t min_keep);
Sampler temp(float t);
Sampler temp_ext(float t, float delta, float exponent);
Sampler xtc(float p, float t, size_t min_keep, uint32_t seed);
Sampler top_n_sigma(float n);
Sampler mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
Sampler mirostat_v2(uint32_t seed, float tau, float eta);
Sampler grammar(const Model & model, const std::string & gbnf, const std::string & root);
Sampler grammar_lazy(const Model & model, const std::string & gbnf, const std::string & root,
                     const std::vector<std::string> & trigger_patterns,
                     const std::vector<llama_token> & trigger_tokens);
Sampler penalties(int32_t last_n, float repeat, float freq, float present);
Sampler dry(const Model & model, float multiplier, float base, int32_t allowed_length, int32_t last_n,
            const std::vector<std::string> & seq_breakers);
Sampler adaptive_p(float target, float decay, uint32_t seed);
Sampler logit_bias(int32_t n_vocab, const std::vector<std::pair<llama_token, float>> & biases);
Sampler infill(const Model & model);
}  // namespace samplers

// JSON schema (text) -> GBNF, by llama.cpp's own converter. Throws std::invalid_argument.
std::string json_schema_to_grammar(const std::string & schema_json);

}  // namespace pyllama
