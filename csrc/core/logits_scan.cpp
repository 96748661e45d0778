#include "core/logits_scan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define PYLLAMA_X86 1
#elif defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>
#define PYLLAMA_NEON 1
#endif

// GCC and Clang compile an AVX2 body into a baseline build and pick it when the CPU has
// it; MSVC has no per-function target, so its build stays on SSE2.
#if defined(PYLLAMA_X86) && defined(__GNUC__)
#define PYLLAMA_AVX2 __attribute__((target("avx2")))
#define PYLLAMA_AVX512 __attribute__((target("avx512f")))
#define PYLLAMA_HAS_AVX2_BODY 1
#endif

namespace pyllama {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int lowest_bit(unsigned m) {
#if defined(__GNUC__)
    return __builtin_ctz(m);
#else
    int b = 0;
    while (!(m & 1u)) m >>= 1, ++b;
    return b;
#endif
}

#ifdef PYLLAMA_HAS_AVX2_BODY
bool use_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

bool use_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}

bool use_avx2_fma() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}

#endif

float max_scalar(const float * l, int32_t i, int32_t n, float m) {
    for (; i < n; ++i) m = l[i] > m ? l[i] : m;  // NaN never wins
    return m;
}

int32_t first_equal_scalar(const float * l, int32_t i, int32_t n, float v) {
    for (; i < n; ++i) {
        if (l[i] == v) return i;
    }
    return -1;
}

#if defined(PYLLAMA_X86)
float reduce(const float * lanes, int n) {
    float m = kNegInf;
    for (int i = 0; i < n; ++i) m = lanes[i] > m ? lanes[i] : m;
    return m;
}
#endif

// argmax in one pass over the row (it is read from L3 or memory when many sequences sample,
// so a second pass to find the maximum's index costs half a row more). The row goes by
// blocks; each block's lanes start from the best value so far, so a block whose maximum
// beats it is seen with one compare, and only then is the new best reduced and its block
// remembered. The first index of the maximum lies in the last block that raised the best
// (no earlier block holds a value as large), found again there. NaN never wins: max(x, acc)
// returns acc when x is NaN, and acc starts from the (finite or -inf) best.
int32_t argmax_tail(const float * l, int32_t i, int32_t n, int32_t block, int32_t len, float best) {
    int32_t at = -1;
    for (; i < n; ++i) {
        if (l[i] > best) best = l[i], at = i;
    }
    if (at >= 0) return at;
    if (block < 0) return -1;
    return first_equal_scalar(l, block, block + len, best);
}

#ifdef PYLLAMA_HAS_AVX2_BODY
// GCC 12 warns about its own AVX-512 headers (their `__Y = __Y` placeholders)
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
PYLLAMA_AVX512 int32_t argmax_avx512(const float * l, int32_t n) {
    constexpr int32_t kB = 128;
    float best = kNegInf;
    int32_t block = -1, i = 0;
    __m512 bv = _mm512_set1_ps(best);
    for (; i + kB <= n; i += kB) {
        __m512 a = _mm512_max_ps(_mm512_loadu_ps(l + i), bv), b = _mm512_max_ps(_mm512_loadu_ps(l + i + 16), bv);
        __m512 c = _mm512_max_ps(_mm512_loadu_ps(l + i + 32), bv), d = _mm512_max_ps(_mm512_loadu_ps(l + i + 48), bv);
        a = _mm512_max_ps(_mm512_loadu_ps(l + i + 64), a);
        b = _mm512_max_ps(_mm512_loadu_ps(l + i + 80), b);
        c = _mm512_max_ps(_mm512_loadu_ps(l + i + 96), c);
        d = _mm512_max_ps(_mm512_loadu_ps(l + i + 112), d);
        const __m512 m = _mm512_max_ps(_mm512_max_ps(a, b), _mm512_max_ps(c, d));
        if (_mm512_cmp_ps_mask(m, bv, _CMP_GT_OQ)) {
            best = _mm512_reduce_max_ps(m);
            bv = _mm512_set1_ps(best);
            block = i;
        }
    }
    return argmax_tail(l, i, n, block, kB, best);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

PYLLAMA_AVX2 int32_t argmax_avx2(const float * l, int32_t n) {
    constexpr int32_t kB = 64;
    float best = kNegInf;
    int32_t block = -1, i = 0;
    __m256 bv = _mm256_set1_ps(best);
    for (; i + kB <= n; i += kB) {
        __m256 a = _mm256_max_ps(_mm256_loadu_ps(l + i), bv), b = _mm256_max_ps(_mm256_loadu_ps(l + i + 8), bv);
        __m256 c = _mm256_max_ps(_mm256_loadu_ps(l + i + 16), bv), d = _mm256_max_ps(_mm256_loadu_ps(l + i + 24), bv);
        a = _mm256_max_ps(_mm256_loadu_ps(l + i + 32), a);
        b = _mm256_max_ps(_mm256_loadu_ps(l + i + 40), b);
        c = _mm256_max_ps(_mm256_loadu_ps(l + i + 48), c);
        d = _mm256_max_ps(_mm256_loadu_ps(l + i + 56), d);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
        if (_mm256_movemask_ps(_mm256_cmp_ps(m, bv, _CMP_GT_OQ))) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, m);
            best = reduce(lanes, 8);
            bv = _mm256_set1_ps(best);
            block = i;
        }
    }
    return argmax_tail(l, i, n, block, kB, best);
}
#endif

#if defined(PYLLAMA_X86)
int32_t argmax_sse2(const float * l, int32_t n) {
    constexpr int32_t kB = 32;
    float best = kNegInf;
    int32_t block = -1, i = 0;
    __m128 bv = _mm_set1_ps(best);
    for (; i + kB <= n; i += kB) {
        __m128 a = _mm_max_ps(_mm_loadu_ps(l + i), bv), b = _mm_max_ps(_mm_loadu_ps(l + i + 4), bv);
        __m128 c = _mm_max_ps(_mm_loadu_ps(l + i + 8), bv), d = _mm_max_ps(_mm_loadu_ps(l + i + 12), bv);
        a = _mm_max_ps(_mm_loadu_ps(l + i + 16), a);
        b = _mm_max_ps(_mm_loadu_ps(l + i + 20), b);
        c = _mm_max_ps(_mm_loadu_ps(l + i + 24), c);
        d = _mm_max_ps(_mm_loadu_ps(l + i + 28), d);
        const __m128 m = _mm_max_ps(_mm_max_ps(a, b), _mm_max_ps(c, d));
        if (_mm_movemask_ps(_mm_cmpgt_ps(m, bv))) {
            alignas(16) float lanes[4];
            _mm_store_ps(lanes, m);
            best = reduce(lanes, 4);
            bv = _mm_set1_ps(best);
            block = i;
        }
    }
    return argmax_tail(l, i, n, block, kB, best);
}
#elif defined(PYLLAMA_NEON)
int32_t argmax_neon(const float * l, int32_t n) {
    constexpr int32_t kB = 32;
    float best = kNegInf;
    int32_t block = -1, i = 0;
    float32x4_t bv = vdupq_n_f32(best);
    for (; i + kB <= n; i += kB) {
        // maxnm: a NaN lane yields the number
        float32x4_t a = vmaxnmq_f32(vld1q_f32(l + i), bv), b = vmaxnmq_f32(vld1q_f32(l + i + 4), bv);
        float32x4_t c = vmaxnmq_f32(vld1q_f32(l + i + 8), bv), d = vmaxnmq_f32(vld1q_f32(l + i + 12), bv);
        a = vmaxnmq_f32(vld1q_f32(l + i + 16), a);
        b = vmaxnmq_f32(vld1q_f32(l + i + 20), b);
        c = vmaxnmq_f32(vld1q_f32(l + i + 24), c);
        d = vmaxnmq_f32(vld1q_f32(l + i + 28), d);
        const float32x4_t m = vmaxnmq_f32(vmaxnmq_f32(a, b), vmaxnmq_f32(c, d));
        if (vmaxvq_u32(vcgtq_f32(m, bv))) {
            best = vmaxnmvq_f32(m);
            bv = vdupq_n_f32(best);
            block = i;
        }
    }
    return argmax_tail(l, i, n, block, kB, best);
}
#endif

#ifdef PYLLAMA_HAS_AVX2_BODY
PYLLAMA_AVX2 float max_avx2(const float * l, int32_t n) {
    __m256 a = _mm256_set1_ps(kNegInf), b = a;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {  // two accumulators: max has a latency of 4
        a = _mm256_max_ps(_mm256_loadu_ps(l + i), a);  // a NaN load yields the accumulator
        b = _mm256_max_ps(_mm256_loadu_ps(l + i + 8), b);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(a, b));
    return max_scalar(l, i, n, reduce(lanes, 8));
}

#endif

#if defined(PYLLAMA_X86)
float max_sse2(const float * l, int32_t n) {
    __m128 a = _mm_set1_ps(kNegInf), b = a;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a = _mm_max_ps(_mm_loadu_ps(l + i), a);
        b = _mm_max_ps(_mm_loadu_ps(l + i + 4), b);
    }
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, _mm_max_ps(a, b));
    return max_scalar(l, i, n, reduce(lanes, 4));
}

#elif defined(PYLLAMA_NEON)
float max_neon(const float * l, int32_t n) {
    float32x4_t a = vdupq_n_f32(kNegInf), b = a;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a = vmaxnmq_f32(vld1q_f32(l + i), a);  // maxnm: a NaN lane yields the number
        b = vmaxnmq_f32(vld1q_f32(l + i + 4), b);
    }
    return max_scalar(l, i, n, vmaxnmvq_f32(vmaxnmq_f32(a, b)));
}

#endif

float max_value(const float * l, int32_t n) {
#ifdef PYLLAMA_HAS_AVX2_BODY
    if (use_avx2()) return max_avx2(l, n);
#endif
#if defined(PYLLAMA_X86)
    return max_sse2(l, n);
#elif defined(PYLLAMA_NEON)
    return max_neon(l, n);
#else
    return max_scalar(l, 0, n, kNegInf);
#endif
}


// llama.cpp's top_k order; ties (unspecified there) by token id, so the result is stable
bool before(const llama_token_data & a, const llama_token_data & b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Candidates above a threshold that rises as they come: once the buffer holds `cap`, the
// k best are kept and the k-th becomes the threshold, so a row costs about one compare
// per value and a few hundred pushes.
struct Collector {
    const float * l;
    size_t k, cap;
    const SparseBias & bias;
    std::vector<llama_token_data> & buf;
    float thr = kNegInf;

    void push(int32_t i) {
        if (!bias.empty() && bias.has(i)) return;  // the caller adds it with its bias
        buf.push_back(llama_token_data{i, l[i], 0.0f});
        if (buf.size() >= cap) keep_best();
    }
    void keep_best() {
        std::nth_element(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(k - 1), buf.end(), before);
        buf.resize(k);
        thr = buf[k - 1].logit;
    }
    void scan_scalar(int32_t i, int32_t n) {
        for (; i < n; ++i) {
            if (l[i] > thr) push(i);
        }
    }
};

double sum_exp_scalar(const float * l, int32_t i, int32_t n, float m) {
    double s = 0.0;
    for (; i < n; ++i) s += std::exp(static_cast<double>(l[i] - m));
    return s;
}

#ifdef PYLLAMA_HAS_AVX2_BODY
// exp(x) for x <= 0 (Cephes' expf: x = k ln2 + r, |r| <= ln2/2, a degree-5 polynomial for
// exp(r), 2^k into the exponent bits; relative error about 2e-7); below -87.3 it is 0.
__attribute__((target("avx2,fma"))) inline __m256 exp_neg_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

__attribute__((target("avx2,fma"))) double sum_exp_avx2(const float * l, int32_t n, float m) {
    const __m256 mm = _mm256_set1_ps(m);
    __m256 a = _mm256_setzero_ps(), b = a;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_ps(a, exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(l + i), mm)));
        b = _mm256_add_ps(b, exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(l + i + 8), mm)));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(a, b));
    double s = 0.0;
    for (float v : lanes) s += v;
    return s + sum_exp_scalar(l, i, n, m);
}

PYLLAMA_AVX2 void scan_avx2(Collector & c, int32_t n) {
    int32_t i = 0;
    __m256 t = _mm256_set1_ps(c.thr);
    for (; i + 32 <= n; i += 32) {
        // 32 values a test: once the threshold has risen, almost no block has one above it
        const __m256 g0 = _mm256_cmp_ps(_mm256_loadu_ps(c.l + i), t, _CMP_GT_OQ);
        const __m256 g1 = _mm256_cmp_ps(_mm256_loadu_ps(c.l + i + 8), t, _CMP_GT_OQ);
        const __m256 g2 = _mm256_cmp_ps(_mm256_loadu_ps(c.l + i + 16), t, _CMP_GT_OQ);
        const __m256 g3 = _mm256_cmp_ps(_mm256_loadu_ps(c.l + i + 24), t, _CMP_GT_OQ);
        if (!_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(g0, g1), _mm256_or_ps(g2, g3)))) continue;
        c.scan_scalar(i, i + 32);
        t = _mm256_set1_ps(c.thr);
    }
    c.scan_scalar(i, n);
}
#endif

void scan(Collector & c, int32_t n) {
#ifdef PYLLAMA_HAS_AVX2_BODY
    if (use_avx2()) return scan_avx2(c, n);
#endif
#if defined(PYLLAMA_X86)
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        unsigned m = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(c.l + i), _mm_set1_ps(c.thr))));
        while (m) {
            c.push(i + lowest_bit(m));
            m &= m - 1;
        }
    }
    c.scan_scalar(i, n);
#elif defined(PYLLAMA_NEON)
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        if (vmaxvq_u32(vcgtq_f32(vld1q_f32(c.l + i), vdupq_n_f32(c.thr)))) c.scan_scalar(i, i + 4);
    }
    c.scan_scalar(i, n);
#else
    c.scan_scalar(0, n);
#endif
}

}  // namespace

SparseBias::SparseBias(std::vector<std::pair<llama_token, float>> entries) {
    std::stable_sort(entries.begin(), entries.end(), [](const auto & a, const auto & b) { return a.first < b.first; });
    for (const auto & [t, b] : entries) {
        if (!v_.empty() && v_.back().first == t) {
            float & acc = v_.back().second;
            acc = std::isinf(acc) && acc < 0 ? acc : (std::isinf(b) && b < 0 ? b : acc + b);
        } else {
            v_.emplace_back(t, b);
        }
    }
}

bool SparseBias::has(llama_token t) const {
    return std::binary_search(v_.begin(), v_.end(), std::make_pair(t, 0.0f),
                              [](const auto & a, const auto & b) { return a.first < b.first; });
}

float SparseBias::at(llama_token t) const {
    const auto it = std::lower_bound(v_.begin(), v_.end(), t, [](const auto & e, llama_token x) { return e.first < x; });
    return it != v_.end() && it->first == t ? it->second : 0.0f;
}

bool scan_isa_available(ScanIsa isa) {
    switch (isa) {
        case ScanIsa::Scalar: return true;
#if defined(PYLLAMA_X86)
        case ScanIsa::Sse2: return true;
#endif
#ifdef PYLLAMA_HAS_AVX2_BODY
        case ScanIsa::Avx2: return use_avx2();
        case ScanIsa::Avx512: return use_avx512();
#endif
#if defined(PYLLAMA_NEON)
        case ScanIsa::Neon: return true;
#endif
        default: return false;
    }
}

llama_token argmax_with(ScanIsa isa, const float * l, int32_t n) {
    if (!scan_isa_available(isa)) throw std::invalid_argument("argmax: this CPU or build lacks that kernel");
    if (n <= 0) return -1;
    switch (isa) {
#if defined(PYLLAMA_X86)
        case ScanIsa::Sse2: return argmax_sse2(l, n);
#endif
#ifdef PYLLAMA_HAS_AVX2_BODY
        case ScanIsa::Avx2: return argmax_avx2(l, n);
        case ScanIsa::Avx512: return argmax_avx512(l, n);
#endif
#if defined(PYLLAMA_NEON)
        case ScanIsa::Neon: return argmax_neon(l, n);
#endif
        default: return argmax_tail(l, 0, n, -1, 0, kNegInf);
    }
}

llama_token argmax(const float * l, int32_t n) {
    if (n <= 0) return -1;
#ifdef PYLLAMA_HAS_AVX2_BODY
    if (use_avx512()) return argmax_avx512(l, n);
    if (use_avx2()) return argmax_avx2(l, n);
#endif
#if defined(PYLLAMA_X86)
    return argmax_sse2(l, n);
#elif defined(PYLLAMA_NEON)
    return argmax_neon(l, n);
#else
    return argmax_tail(l, 0, n, -1, 0, kNegInf);
#endif
}

llama_token biased_argmax(const float * l, int32_t n, const SparseBias & bias) {
    llama_token best = argmax(l, n);
    if (bias.empty()) return best;
    if (best >= 0 && bias.has(best)) {
        // the raw maximum is biased (ignore_eos on an end token, say): the best unbiased
        // value needs a full pass; rare, so scalar
        best = -1;
        float v = kNegInf;
        for (int32_t i = 0; i < n; ++i) {
            if (l[i] > v && !bias.has(i)) v = l[i], best = i;
        }
    }
    float best_v = best >= 0 ? l[best] : kNegInf;
    for (const auto & [t, b] : bias.entries()) {
        if (t < 0 || t >= n) continue;
        const float v = l[t] + b;
        if (v > best_v || (v == best_v && v != kNegInf && t < best)) best_v = v, best = t;
    }
    return best;
}

float log_sum_exp(const float * l, int32_t n) { return log_sum_exp(l, n, n > 0 ? max_value(l, n) : kNegInf); }

float log_sum_exp(const float * l, int32_t n, float m) {
    if (m == kNegInf) return kNegInf;
    double s = 0.0;
#ifdef PYLLAMA_HAS_AVX2_BODY
    if (use_avx2_fma()) s = sum_exp_avx2(l, n, m);
    else
#endif
        s = sum_exp_scalar(l, 0, n, m);
    return m + static_cast<float>(std::log(s));
}

bool top_k_candidates(const float * l, int32_t n, int32_t k, const SparseBias & bias, std::vector<llama_token_data> & scratch,
                      llama_token_data * out) {
    if (k <= 0 || k > 128 || k > n) return false;
    const auto kk = static_cast<size_t>(k);
    scratch.clear();
    Collector c{l, kk, std::max<size_t>(4 * kk, 64), bias, scratch};
    scan(c, n);
    for (const auto & [t, b] : bias.entries()) {
        if (t >= 0 && t < n) scratch.push_back(llama_token_data{t, l[t] + b, 0.0f});
    }
    size_t finite = 0;
    for (const auto & d : scratch) finite += d.logit != kNegInf ? 1 : 0;
    if (finite < kk) return false;  // llama.cpp would keep -inf candidates: take its route
    if (scratch.size() > kk) c.keep_best();
    std::sort(scratch.begin(), scratch.end(), before);
    std::copy(scratch.begin(), scratch.end(), out);
    return true;
}

}  // namespace pyllama
