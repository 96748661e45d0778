// Small helpers the engine's files share: plain functions of their arguments.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/logits_scan.hpp"
#include "core/projector.hpp"
#include "llama.h"

namespace pyllama::engine {

inline int64_t now_us() { return llama_time_us(); }

// The longest prefix of at most `len` tokens that ends outside every medium of `media`
// (sorted by start), with how many media it holds and their position shift.
struct MediaPrefix {
    size_t len = 0, n_media = 0;
    llama_pos delta = 0;
};

inline MediaPrefix cut_media(const std::vector<MediaChunk> & media, size_t len) {
    MediaPrefix out{len, 0, 0};
    for (const auto & m : media) {
        if (m.start + m.n_tokens > len) {
            if (m.start < len) out.len = m.start;
            break;
        }
        out.delta += m.n_pos - static_cast<llama_pos>(m.n_tokens);
        ++out.n_media;
    }
    return out;
}

// n_probs of a raw logits row: its k largest in out (logit order, k >= 1) and the softmax
// normaliser (the first of them is the maximum: one pass fewer). False where
// top_k_candidates is (k > 128, too few finite values): the caller sorts instead.
inline bool raw_probs(const float * l, int32_t n_vocab, size_t k, std::vector<llama_token_data> & scratch,
                      std::vector<llama_token_data> & out, float & lse) {
    out.resize(k);
    if (k == 0 || !top_k_candidates(l, n_vocab, static_cast<int32_t>(k), SparseBias{}, scratch, out.data())) return false;
    lse = log_sum_exp(l, n_vocab, out[0].logit);
    return true;
}

inline size_t common_prefix(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    size_t n = 0;
    const size_t m = std::min(a.size(), b.size());
    while (n < m && a[n] == b[n]) ++n;
    return n;
}

// As llama-server's common_embd_normalize.
inline void normalize(float * v, int32_t n, int32_t norm) {
    if (norm < 0) return;
    double sum = 0.0;
    if (norm == 0) {  // max absolute, scaled to int16 range
        for (int32_t i = 0; i < n; ++i) sum = std::max(sum, static_cast<double>(std::fabs(v[i])));
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
        sum = std::sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; ++i) sum += std::pow(std::fabs(v[i]), norm);
        sum = std::pow(sum, 1.0 / norm);
    }
    const float k = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; ++i) v[i] *= k;
}

}  // namespace pyllama::engine
