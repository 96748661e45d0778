// Greedy picking inside the graph (backend sampling, `-bs`) with pyllama's argmax.
//
// llama.cpp's greedy stage puts a GGML_OP_ARGMAX per sequence into the graph; ggml's CPU
// kernel for it is a scalar loop on one thread, so on the CPU `-bs` greedy was slower than
// picking on the host (session 24: ~50 µs a 49,152-entry row). This stage makes the same
// pick (argmax of logits + the sparse bias, the first of equal maxima: what the host path
// picks) as a custom op running pyllama's vectorised biased_argmax, on backends whose logits
// live in host memory (the CPU); elsewhere (a GPU) it emits ggml_argmax as llama.cpp's stage
// does, and declines when a bias would be needed there, so the host picks instead.
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
