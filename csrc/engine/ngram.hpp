// n-gram self-speculation options (llama-server's --spec-type ngram-* and their sizes).
// llama.cpp's drafters (common/speculative.cpp) look the slot's own tokens up for what
// followed the same n-gram before; the engine verifies their drafts as a draft model's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct common_speculative;

namespace pyllama::engine {

struct NgramMap {  // ngram-simple, ngram-map-k, ngram-map-k4v
    uint16_t size_n = 12;   // the n-gram looked up
    uint16_t size_m = 48;   // the m-gram drafted after it
    uint16_t min_hits = 1;  // times seen before it is drafted
};

struct NgramSpec {
    // in llama.cpp's names: ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache;
    // each step a slot takes the first that drafts (llama.cpp's order); empty: none
    std::vector<std::string> types;
    int32_t mod_n_match = 24;  // ngram-mod: lookup length
    int32_t mod_n_min = 48;    // ngram-mod: shorter drafts are dropped
    int32_t mod_n_max = 64;    // ngram-mod: longest draft
    NgramMap simple, map_k, map_k4v;
    std::string lookup_cache_static;   // ngram-cache: files written by llama-lookup-create
    std::string lookup_cache_dynamic;
};

// frees llama.cpp's drafter state
struct NgramDrafterFree {
    void operator()(common_speculative * s) const;
};

}  // namespace pyllama::engine
