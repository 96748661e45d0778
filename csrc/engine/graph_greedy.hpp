// Greedy picking inside the graph (backend sampling, `-bs`) with one argmax.
//
// A plain greedy chain keeps only the argmax, but attached as it is llama.cpp runs each of
// its stages (top_k, top_p, temperature...) in the graph: on an H100 that held `-bs` greedy at
// 0.49-0.65 of llama-batched-bench; this stage took it to 0.81-0.91 (session 24). It picks
// argmax(logits + the sparse bias): on the CPU backend with pyllama's vectorised
// biased_argmax as a custom op (the first of equal maxima, as the host path; ggml's CPU
// GGML_OP_ARGMAX is a scalar loop on one thread), elsewhere with ggml_argmax, as llama.cpp's
// greedy stage does; off the CPU it declines when a bias would be needed, and the chain is
// attached instead.
#pragma once

#include "core/logits_scan.hpp"
#include "core/sampler.hpp"

namespace pyllama::engine {

// A chain of that one stage, for llama_set_sampler (which takes chains only). Its host
// `apply` (used only where the graph did not pick) is the same argmax over the candidates.
Sampler graph_greedy_chain(const SparseBias & bias);

// Whether the chain's stage accepted the backend at llama_set_sampler (backend_init).
bool graph_greedy_attached(const Sampler & chain);

}  // namespace pyllama::engine
