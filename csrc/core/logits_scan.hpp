// Scans over one row of logits that the engine does once per sequence per step: the
// argmax (greedy) and the top k candidates (a chain whose first acting stage is top_k),
// each with a sparse logit bias. Vectorised (AVX-512 or AVX2 picked at run time on x86-64, SSE2
// otherwise; NEON on AArch64): _core is built for the baseline ISA, so the compiler alone
// would leave these loops scalar. Plain functions of their arguments: thread-safe.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "llama.h"

namespace pyllama {

// A logit bias as (token, bias) pairs sorted by token, each token once: a few entries
// (the end-of-generation tokens for ignore_eos, a request's logit_bias), not a dense row.
class SparseBias {
public:
    SparseBias() = default;
    // later entries for the same token add up; `-inf` entries override (ignore_eos)
    explicit SparseBias(std::vector<std::pair<llama_token, float>> entries);
    bool empty() const { return v_.empty(); }
    bool has(llama_token t) const;
    float at(llama_token t) const;  // the token's bias, 0 when it has none
    const std::vector<std::pair<llama_token, float>> & entries() const { return v_; }

private:
    std::vector<std::pair<llama_token, float>> v_;
};

// The first index of the largest of l[0, n) (NaN never wins); -1 when all are -inf.
// One pass over the row with the widest kernel this CPU runs.
llama_token argmax(const float * l, int32_t n);

// The kernels argmax chooses from, each callable where the CPU has it (for tests).
enum class ScanIsa { Scalar, Sse2, Avx2, Avx512, Neon };
bool scan_isa_available(ScanIsa isa);
// argmax with one kernel; std::invalid_argument when this build or CPU lacks it
llama_token argmax_with(ScanIsa isa, const float * l, int32_t n);

// argmax of l + bias, the first of equal maxima; -1 when every value is -inf.
llama_token biased_argmax(const float * l, int32_t n, const SparseBias & bias);

// log(sum(exp(l[i]))) over l[0, n), computed as max + log(sum(exp(l[i] - max))): the
// normaliser of the logits' softmax (n_probs). -inf when all are -inf.
float log_sum_exp(const float * l, int32_t n);
// The same with the maximum already known (one pass fewer).
float log_sum_exp(const float * l, int32_t n, float max);

// The k largest of l + bias written to out[0, k) in llama.cpp's top_k order (logit
// descending; equal logits by token id), p = 0. False (out untouched) when k <= 0, k > 128
// (llama.cpp's partial sort then takes another route) or fewer than k values are finite.
// `scratch` is the caller's buffer, reused across calls: no allocation in steady state.
bool top_k_candidates(const float * l, int32_t n, int32_t k, const SparseBias & bias, std::vector<llama_token_data> & scratch,
                      llama_token_data * out);

}  // namespace pyllama
