#include "core/sampling.hpp"

#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "reasoning-budget.h"

namespace pyllama {

namespace {
void require(bool ok, const std::string & msg) {
    if (!ok) throw std::invalid_argument(msg);
}
bool finite(float x) { return std::isfinite(x); }
}  // namespace

void SamplingParams::validate() const {
    require(min_keep >= 0, "min_keep must be >= 0");
    require(finite(top_p) && top_p >= 0.0f && top_p <= 1.0f, "top_p must be in [0, 1]");
    require(finite(min_p) && min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1]");
    require(finite(typical_p) && typical_p >= 0.0f && typical_p <= 1.0f, "typical_p must be in [0, 1]");
    require(finite(xtc_probability) && xtc_probability >= 0.0f && xtc_probability <= 1.0f, "xtc_probability must be in [0, 1]");
    require(finite(xtc_threshold) && xtc_threshold >= 0.0f, "xtc_threshold must be >= 0");
    require(finite(temperature), "temperature must be finite");
    require(finite(dynatemp_range) && dynatemp_range >= 0.0f, "dynatemp_range must be >= 0");
    require(finite(dynatemp_exponent), "dynatemp_exponent must be finite");
    require(repeat_last_n >= -1, "repeat_last_n must be >= -1");
    require(finite(repeat_penalty) && repeat_penalty > 0.0f, "repeat_penalty must be > 0");
    require(finite(frequency_penalty), "frequency_penalty must be finite");
    require(finite(presence_penalty), "presence_penalty must be finite");
    require(finite(dry_multiplier) && dry_multiplier >= 0.0f, "dry_multiplier must be >= 0");
    require(finite(dry_base) && (dry_base >= 1.0f || dry_multiplier == 0.0f), "dry_base must be >= 1");
    require(dry_allowed_length >= 0, "dry_allowed_length must be >= 0");
    require(dry_penalty_last_n >= -1, "dry_penalty_last_n must be >= -1");
    require(mirostat >= 0 && mirostat <= 2, "mirostat must be 0, 1 or 2");
    require(finite(mirostat_tau) && mirostat_tau >= 0.0f, "mirostat_tau must be >= 0");
    require(finite(mirostat_eta) && mirostat_eta >= 0.0f, "mirostat_eta must be >= 0");
    require(finite(top_n_sigma), "top_n_sigma must be finite");
    require(finite(adaptive_target) && adaptive_target <= 1.0f, "adaptive_target must be <= 1");
    require(finite(adaptive_decay) && adaptive_decay >= 0.0f && adaptive_decay <= 0.99f, "adaptive_decay must be in [0, 0.99]");
    for (const auto & [tok, bias] : logit_bias) {
        require(!std::isnan(bias), "logit_bias values must not be NaN");
        (void) tok;
    }
    static const char * known[] = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "typical_p", "top_p",
                                   "min_p", "xtc", "temperature", "infill", "adaptive_p"};
    for (const auto & s : samplers) {
        bool ok = false;
        for (const char * k : known) ok = ok || s == k;
        require(ok, "unknown sampler '" + s + "' in samplers");
    }
}

std::optional<Sampler> build_grammar_sampler(const Model & model, const SamplingParams & p) {
    if (p.grammar.empty()) return std::nullopt;
    namespace s = samplers;
    if (p.grammar_lazy) return s::grammar_lazy(model, p.grammar, "root", p.grammar_trigger_patterns, p.grammar_trigger_tokens);
    Sampler g = s::grammar(model, p.grammar, "root");
    for (llama_token t : p.grammar_prefill) g.accept(t);
    return g;
}

std::optional<Sampler> build_reasoning_budget(const Model & model, const ReasoningBudget & rb, bool grammar_lazy) {
    if (rb.budget < -1) throw std::invalid_argument("reasoning_budget_tokens must be >= -1");
    if (rb.start.empty() || rb.end.empty() || !(grammar_lazy || rb.budget >= 0 || rb.control)) return std::nullopt;
    Sampler s(common_reasoning_budget_init(model.vocab(), {rb.start}, rb.end, rb.forced,
                                           rb.budget < 0 ? INT_MAX : rb.budget));
    for (llama_token t : rb.prefill) s.accept(t);
    return s;
}

Sampler build_sampler_chain(const Model & model, const SamplingParams & p, int32_t n_ctx, bool with_grammar) {
    p.validate();
    namespace s = samplers;
    const int32_t n_vocab = model.n_vocab();
    const size_t min_keep = static_cast<size_t>(p.min_keep);
    Sampler chain = Sampler::chain(true);
    auto add = [&chain](Sampler st) { chain.add(st); };

    // Grammar first: the candidates reaching the other stages already fit it. (llama-server
    // applies it after, with rejection sampling; the result is the same distribution.)
    if (with_grammar) {
        if (auto g = build_grammar_sampler(model, p)) add(std::move(*g));
    }

    std::vector<std::pair<llama_token, float>> bias = p.logit_bias;
    if (p.ignore_eos) {
        for (llama_token t = 0; t < n_vocab; ++t) {
            if (llama_vocab_is_eog(model.vocab(), t)) bias.emplace_back(t, -std::numeric_limits<float>::infinity());
        }
    }
    if (!bias.empty()) add(s::logit_bias(n_vocab, bias));

    const int32_t rep_n = p.repeat_last_n == -1 ? n_ctx : p.repeat_last_n;
    const int32_t dry_n = p.dry_penalty_last_n == -1 ? n_ctx : p.dry_penalty_last_n;

    if (p.mirostat == 0) {
        bool adaptive = false;
        for (const auto & name : p.samplers) {
            if (name == "penalties") {
                add(s::penalties(rep_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty));
            } else if (name == "dry") {
                if (p.dry_multiplier > 0.0f) {
                    add(s::dry(model, p.dry_multiplier, p.dry_base, p.dry_allowed_length, dry_n, p.dry_sequence_breakers));
                }
            } else if (name == "top_n_sigma") {
                add(s::top_n_sigma(p.top_n_sigma));
            } else if (name == "top_k") {
                add(s::top_k(p.top_k));
            } else if (name == "typ_p" || name == "typical_p") {
                add(s::typical(p.typical_p, min_keep));
            } else if (name == "top_p") {
                add(s::top_p(p.top_p, min_keep));
            } else if (name == "min_p") {
                add(s::min_p(p.min_p, min_keep));
            } else if (name == "xtc") {
                add(s::xtc(p.xtc_probability, p.xtc_threshold, min_keep, p.seed));
            } else if (name == "temperature") {
                add(s::temp_ext(p.temperature, p.dynatemp_range, p.dynatemp_exponent));
            } else if (name == "infill") {
                add(s::infill(model));
            } else if (name == "adaptive_p") {
                adaptive = true;
            }
        }
        if (adaptive && p.adaptive_target >= 0.0f) {
            add(s::adaptive_p(p.adaptive_target, p.adaptive_decay, p.seed));
        } else {
            add(s::dist(p.seed));
        }
    } else if (p.mirostat == 1) {
        add(s::temp(p.temperature));
        add(s::mirostat(n_vocab, p.seed, p.mirostat_tau, p.mirostat_eta, 100));
    } else {
        add(s::temp(p.temperature));
        add(s::mirostat_v2(p.seed, p.mirostat_tau, p.mirostat_eta));
    }
    return chain;
}

bool is_plain_greedy(const SamplingParams & p) {
    if (p.mirostat != 0 || p.temperature > 0.0f || p.dynatemp_range > 0.0f) return false;
    bool temperature = false;
    for (const auto & name : p.samplers) {
        if (name == "temperature") {
            temperature = true;
        } else if (name == "infill") {
            return false;  // rewrites candidates around the top token
        } else if (name == "adaptive_p" && p.adaptive_target >= 0.0f) {
            return false;
        } else if (temperature) {
            continue;  // after a zero temperature only the top token is left
        } else if (name == "penalties") {
            if (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) return false;
        } else if (name == "dry") {
            if (p.dry_multiplier > 0.0f) return false;
        } else if (name == "typ_p" || name == "typical_p") {
            if (p.typical_p < 1.0f) return false;  // may drop the top token
        } else if (name == "xtc") {
            if (p.xtc_probability > 0.0f && p.xtc_threshold <= 0.5f) return false;  // removes top tokens
        }
        // top_n_sigma, top_k, top_p, min_p always keep the top token
    }
    return temperature;
}

SparseBias sparse_logit_bias(const Model & model, const SamplingParams & p) {
    std::vector<std::pair<llama_token, float>> v;
    const int32_t n_vocab = model.n_vocab();
    for (const auto & [tok, b] : p.logit_bias) {
        if (tok >= 0 && tok < n_vocab) v.emplace_back(tok, b);
    }
    if (p.ignore_eos) {
        for (llama_token t = 0; t < n_vocab; ++t) {
            if (llama_vocab_is_eog(model.vocab(), t)) v.emplace_back(t, -std::numeric_limits<float>::infinity());
        }
    }
    return SparseBias(std::move(v));
}

int32_t fused_top_k_stage(const SamplingParams & p) {
    if (p.mirostat != 0) return -1;
    // mirrors build_sampler_chain's order without the grammar
    int32_t at = (!p.logit_bias.empty() || p.ignore_eos) ? 1 : 0;
    for (const auto & name : p.samplers) {
        if (name == "penalties") {
            const bool off = p.repeat_last_n == 0 ||
                             (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f);
            if (!off) return -1;
            ++at;
        } else if (name == "dry") {
            if (p.dry_multiplier > 0.0f) return -1;  // not in the chain when off
        } else if (name == "top_n_sigma") {
            if (p.top_n_sigma > 0.0f) return -1;
            ++at;
        } else if (name == "top_k") {
            return p.top_k > 0 ? at : -1;
        } else if (name == "typ_p" || name == "typical_p") {
            if (p.typical_p < 1.0f) return -1;
            ++at;
        } else if (name == "top_p") {
            if (p.top_p < 1.0f) return -1;
            ++at;
        } else if (name == "min_p") {
            if (p.min_p > 0.0f) return -1;
            ++at;
        } else if (name != "adaptive_p") {
            return -1;  // xtc, temperature, infill: they act (or draw) before top_k
        }
    }
    return -1;
}

}  // namespace pyllama
