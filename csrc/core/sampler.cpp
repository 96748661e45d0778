#include "core/sampler.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/log.hpp"
#include "json-schema-to-grammar.h"

namespace pyllama {

namespace {
void require(bool ok, const char * msg) {
    if (!ok) throw std::invalid_argument(msg);
}
bool finite(float x) { return std::isfinite(x); }
}  // namespace

Sampler::Sampler(llama_sampler * raw) : p_(raw) {
    if (!p_) fail("failed to create sampler");
}

llama_sampler * Sampler::get() const {
    if (!p_) throw std::invalid_argument("this sampler was added to a chain and belongs to it now");
    return p_.get();
}

llama_sampler * Sampler::release() {
    get();
    return p_.release();
}

Sampler Sampler::clone() const { return Sampler(llama_sampler_clone(get())); }

llama_token Sampler::sample_logits(const float * logits, size_t n_vocab) {
    require(n_vocab > 0, "no logits to sample from");
    std::vector<llama_token_data> cur(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) cur[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
    llama_token_data_array arr{cur.data(), cur.size(), -1, false};
    llama_sampler_apply(get(), &arr);
    if (arr.selected < 0 || static_cast<size_t>(arr.selected) >= arr.size)
        throw std::runtime_error("the sampler selected no token");
    const llama_token t = arr.data[arr.selected].id;
    llama_sampler_accept(get(), t);
    return t;
}

Sampler Sampler::chain(bool no_perf) {
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = no_perf;
    return Sampler(llama_sampler_chain_init(cp));
}

void Sampler::add(Sampler & stage) {
    require(is_chain(), "add() needs a chain: create it with Sampler.chain()");
    require(&stage != this, "a chain cannot contain itself");
    llama_sampler_chain_add(get(), stage.release());
}

int32_t Sampler::chain_size() const { return is_chain() ? llama_sampler_chain_n(get()) : 1; }

namespace samplers {

Sampler greedy() { return Sampler(llama_sampler_init_greedy()); }
Sampler dist(uint32_t seed) { return Sampler(llama_sampler_init_dist(seed)); }

Sampler top_k(int32_t k) { return Sampler(llama_sampler_init_top_k(k)); }  // k <= 0: no-op

Sampler top_p(float p, size_t min_keep) {
    require(finite(p) && p >= 0.0f && p <= 1.0f, "top_p must be in [0, 1]");
    return Sampler(llama_sampler_init_top_p(p, min_keep));
}

Sampler min_p(float p, size_t min_keep) {
    require(finite(p) && p >= 0.0f && p <= 1.0f, "min_p must be in [0, 1]");
    return Sampler(llama_sampler_init_min_p(p, min_keep));
}

Sampler typical(float p, size_t min_keep) {
    require(finite(p) && p >= 0.0f && p <= 1.0f, "typical_p must be in [0, 1]");
    return Sampler(llama_sampler_init_typical(p, min_keep));
}

Sampler temp(float t) {
    require(finite(t), "temperature must be finite");
    return Sampler(llama_sampler_init_temp(t));
}

Sampler temp_ext(float t, float delta, float exponent) {
    require(finite(t) && finite(delta) && finite(exponent), "temperature, dynatemp range and exponent must be finite");
    require(delta >= 0.0f, "dynatemp range must be >= 0");
    return Sampler(llama_sampler_init_temp_ext(t, delta, exponent));
}

Sampler xtc(float p, float t, size_t min_keep, uint32_t seed) {
    require(finite(p) && p >= 0.0f && p <= 1.0f, "xtc probability must be in [0, 1]");
    require(finite(t) && t >= 0.0f && t <= 1.0f, "xtc threshold must be in [0, 1]");
    return Sampler(llama_sampler_init_xtc(p, t, min_keep, seed));
}

Sampler top_n_sigma(float n) {
    require(finite(n), "top_n_sigma must be finite");
    return Sampler(llama_sampler_init_top_n_sigma(n));
}

Sampler mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m) {
    require(n_vocab > 0 && m > 0, "mirostat needs n_vocab > 0 and m > 0");
    require(finite(tau) && finite(eta) && tau >= 0.0f && eta >= 0.0f, "mirostat tau and eta must be >= 0");
    return Sampler(llama_sampler_init_mirostat(n_vocab, seed, tau, eta, m));
}

Sampler mirostat_v2(uint32_t seed, float tau, float eta) {
    require(finite(tau) && finite(eta) && tau >= 0.0f && eta >= 0.0f, "mirostat tau and eta must be >= 0");
    return Sampler(llama_sampler_init_mirostat_v2(seed, tau, eta));
}

Sampler grammar(const Model & model, const std::string & gbnf, const std::string & root) {
    log_clear();
    llama_sampler * s = llama_sampler_init_grammar(model.vocab(), gbnf.c_str(), root.c_str());
    if (!s) {
        const std::string detail = log_take();
        throw std::invalid_argument("invalid grammar" + (detail.empty() ? std::string() : ": " + detail));
    }
    return Sampler(s);
}

Sampler grammar_lazy(const Model & model, const std::string & gbnf, const std::string & root,
                     const std::vector<std::string> & trigger_patterns,
                     const std::vector<llama_token> & trigger_tokens) {
    require(!trigger_patterns.empty() || !trigger_tokens.empty(), "a lazy grammar needs trigger patterns or tokens");
    for (llama_token t : trigger_tokens) model.check_token(t);
    std::vector<const char *> pats;
    for (const auto & p : trigger_patterns) pats.push_back(p.c_str());
    log_clear();
    llama_sampler * s = llama_sampler_init_grammar_lazy_patterns(model.vocab(), gbnf.c_str(), root.c_str(), pats.data(),
                                                                 pats.size(), trigger_tokens.data(), trigger_tokens.size());
    if (!s) {
        const std::string detail = log_take();
        throw std::invalid_argument("invalid grammar or trigger pattern" + (detail.empty() ? std::string() : ": " + detail));
    }
    return Sampler(s);
}

Sampler penalties(int32_t last_n, float repeat, float freq, float present) {
    require(last_n >= -1, "penalty_last_n must be >= -1");
    require(finite(repeat) && repeat > 0.0f, "repeat_penalty must be > 0");
    require(finite(freq) && finite(present), "frequency and presence penalties must be finite");
    return Sampler(llama_sampler_init_penalties(0, last_n, repeat, freq, present));
}

Sampler dry(const Model & model, float multiplier, float base, int32_t allowed_length, int32_t last_n,
            const std::vector<std::string> & seq_breakers) {
    require(finite(multiplier) && multiplier >= 0.0f, "dry_multiplier must be >= 0");
    require(finite(base) && base >= 1.0f, "dry_base must be >= 1");
    require(allowed_length >= 0, "dry_allowed_length must be >= 0");
    require(last_n >= -1, "dry_penalty_last_n must be >= -1");
    std::vector<const char *> br;
    for (const auto & b : seq_breakers) br.push_back(b.c_str());
    return Sampler(llama_sampler_init_dry(model.vocab(), multiplier, base, allowed_length, last_n, br.data(), br.size()));
}

Sampler adaptive_p(float target, float decay, uint32_t seed) {
    require(finite(target) && target <= 1.0f, "adaptive_p target must be <= 1 (negative disables)");
    require(finite(decay) && decay >= 0.0f && decay <= 0.99f, "adaptive_p decay must be in [0, 0.99]");
    return Sampler(llama_sampler_init_adaptive_p(target, decay, seed));
}

Sampler logit_bias(int32_t n_vocab, const std::vector<std::pair<llama_token, float>> & biases) {
    std::vector<llama_logit_bias> lb;
    lb.reserve(biases.size());
    for (const auto & [tok, bias] : biases) {
        if (tok < 0 || tok >= n_vocab) throw std::out_of_range("logit_bias token " + std::to_string(tok) + " outside the vocabulary");
        require(!std::isnan(bias), "logit_bias value must not be NaN");
        lb.push_back({tok, bias});
    }
    return Sampler(llama_sampler_init_logit_bias(n_vocab, static_cast<int32_t>(lb.size()), lb.data()));
}

Sampler infill(const Model & model) { return Sampler(llama_sampler_init_infill(model.vocab())); }

}  // namespace samplers

std::string json_schema_to_grammar(const std::string & schema_json) {
    try {
        return ::json_schema_to_grammar(common_json::parse(schema_json));
    } catch (const std::exception & e) {
        throw std::invalid_argument(std::string("invalid JSON schema: ") + e.what());
    }
}

}  // namespace pyllama
