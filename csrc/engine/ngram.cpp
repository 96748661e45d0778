// n-gram self-speculation: llama.cpp's common_speculative drafters (ngram-simple,
// ngram-map-k/-k4v, ngram-mod, ngram-cache) propose tokens from each slot's own history;
// the step places them after the slot's sampled token and verify_draft accepts the run
// the slot's sampler agrees with, so the text is what plain decoding gives. A slot with
// no n-gram draft falls through to the draft model, if any (llama.cpp's order). Loop
// thread only.
#include "engine/ngram.hpp"
#include "core/dynlib.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "engine/engine.hpp"
#include "engine/slot.hpp"
#include "ngram-cache.h"
#include "speculative.h"

namespace pyllama::engine {

void NgramDrafterFree::operator()(common_speculative * s) const { common_speculative_free(s); }

namespace {

// llama.cpp aborts the process on a malformed lookup cache: walk the file first, so a bad
// one is an error naming it. Records: an n-gram (LLAMA_NGRAM_MAX tokens), a count of
// following tokens, then (token, count) pairs, every count > 0.
void check_lookup_cache(const std::string & path, int32_t n_vocab) {
    std::ifstream in(dynlib::from_utf8(path), std::ios::binary);
    if (!in) throw std::invalid_argument("cannot open lookup cache '" + path + "'");
    auto bad = [&](const char * why) {
        throw std::invalid_argument("lookup cache '" + path + "' is not an n-gram cache: " + why);
    };
    auto token_ok = [&](llama_token t) { return t >= 0 && t < n_vocab; };
    common_ngram ngram;
    while (in.read(reinterpret_cast<char *>(&ngram), sizeof(ngram))) {
        for (llama_token t : ngram.tokens) {
            if (t != LLAMA_TOKEN_NULL && !token_ok(t)) bad("a token outside the model's vocabulary");
        }
        int32_t n = 0;
        if (!in.read(reinterpret_cast<char *>(&n), sizeof(n)) || n <= 0) bad("a truncated or empty record");
        for (int32_t i = 0; i < n; ++i) {
            int32_t pair[2];
            if (!in.read(reinterpret_cast<char *>(pair), sizeof(pair))) bad("a truncated record");
            if (!token_ok(pair[0])) bad("a token outside the model's vocabulary");
            if (pair[1] <= 0) bad("a count that is not positive");
        }
    }
    if (in.gcount() != 0) bad("trailing bytes");
}

common_params_speculative_ngram_map map_of(const NgramMap & m) {
    common_params_speculative_ngram_map out;
    out.size_n = m.size_n;
    out.size_m = m.size_m;
    out.min_hits = m.min_hits;
    return out;
}

}  // namespace

std::unique_ptr<common_speculative, NgramDrafterFree> Engine::make_ngram_drafter(const NgramSpec & p) const {
    common_params_speculative sp;
    sp.types.clear();
    for (const auto & name : p.types) {
        const auto t = common_speculative_type_from_name(name);
        if (t != COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE && t != COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K &&
            t != COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V && t != COMMON_SPECULATIVE_TYPE_NGRAM_MOD &&
            t != COMMON_SPECULATIVE_TYPE_NGRAM_CACHE) {
            throw std::invalid_argument("not an n-gram speculative type: " + name);
        }
        sp.types.push_back(t);
    }
    auto sizes_ok = [](const NgramMap & m) { return m.size_n >= 1 && m.size_m >= 1 && m.min_hits >= 1; };
    if (!sizes_ok(p.simple) || !sizes_ok(p.map_k) || !sizes_ok(p.map_k4v)) {
        throw std::invalid_argument("n-gram sizes and min hits must be at least 1");
    }
    if (p.mod_n_match < 1 || p.mod_n_match > 1024 || p.mod_n_min < 0 || p.mod_n_min > 1024 || p.mod_n_max < 0 ||
        p.mod_n_max > 1024) {
        throw std::invalid_argument("ngram-mod: n_match in [1, 1024], n_min and n_max in [0, 1024]");
    }
    sp.ngram_simple = map_of(p.simple);
    sp.ngram_map_k = map_of(p.map_k);
    sp.ngram_map_k4v = map_of(p.map_k4v);
    sp.ngram_mod.n_match = p.mod_n_match;
    sp.ngram_mod.n_min = p.mod_n_min;
    sp.ngram_mod.n_max = p.mod_n_max;
    for (const auto * path : {&p.lookup_cache_static, &p.lookup_cache_dynamic}) {
        if (!path->empty()) check_lookup_cache(*path, model_->n_vocab());
    }
    sp.ngram_cache.lookup_cache_static = p.lookup_cache_static;
    sp.ngram_cache.lookup_cache_dynamic = p.lookup_cache_dynamic;
    std::unique_ptr<common_speculative, NgramDrafterFree> out(
        common_speculative_init(sp, static_cast<uint32_t>(params_.n_parallel)));
    if (!out) throw std::runtime_error("llama.cpp made no n-gram drafter");
    return out;
}

// A generation starts: the drafters index its prompt (ngram-map, ngram-mod).
void Engine::ngram_begin(const Slot & s) {
    if (ngram_) common_speculative_begin(ngram_.get(), s.id, s.cache);
}

void Engine::ngram_draft_all() {
    std::vector<Slot *> drafting;
    for (auto & s : slots_) {
        if (s->state != Slot::State::Generating) continue;
        const int32_t n = draft_room(*s);
        if (n <= 0) continue;
        // the drafters read the slot's tokens in the KV (prompt and output) and the
        // sampled token about to follow them; the draft lands in s->draft
        common_speculative_get_draft_params(ngram_.get(), s->id) = {
            /* .drafting = */ true,
            /* .n_max    = */ n,
            /* .pos0     = */ s->pos(s->n_past),
            /* .id_last  = */ s->sampled,
            /* .prompt   = */ &s->cache,
            /* .result   = */ &s->draft,
        };
        drafting.push_back(s.get());
    }
    if (drafting.empty()) return;
    common_speculative_draft(ngram_.get());
    for (Slot * s : drafting) {
        // a medium's placeholders (negative) are in the history, but are no tokens to decode
        const auto media = std::find_if(s->draft.begin(), s->draft.end(), [](llama_token t) { return t < 0; });
        s->draft.erase(media, s->draft.end());
        s->draft_ngram = !s->draft.empty();
    }
}

void Engine::ngram_accept(const Slot & s, size_t n_accepted) {
    common_speculative_accept(ngram_.get(), s.id, static_cast<uint16_t>(n_accepted));
}

}  // namespace pyllama::engine
