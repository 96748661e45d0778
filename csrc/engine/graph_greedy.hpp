// Greedy picking inside the graph (backend sampling, `-bs`) with one argmax.
//
// A plain greedy chain keeps only the argmax, but attached as it is llama.cpp runs each of
// its stages (top_k, top_p, temperature...) in the graph: on an H100 that held `-bs` greedy at
// 0.49-0.65 of llama-batched-bench; a one-stage argmax took it to 0.81-0.91 (measured 2026-11-26).
//
// On the CPU backend every greedy sequence of a graph is picked by ONE custom node, run by
// all of ggml's threads, straight from the output projection's rows: llama.cpp's sampling
// graph first copies the whole logits tensor into a padded one (GGML_OP_PAD, a per-element
// loop) and gives each sequence a view of it; the stage reads through that view to the
// unpadded rows, so the pad (and the raw logits' copy to the host: every row is sampled in
// the graph) drops out of the graph. It picks argmax(logits + the sparse bias) with
// pyllama's vectorised biased_argmax, the first of equal maxima, as the host path.
// Elsewhere it is ggml_argmax per sequence, as llama.cpp's greedy stage; there it declines
// when a bias would be needed, and the engine attaches the task's chain instead.
#pragma once

#include <cstdint>
#include <memory>

#include "core/logits_scan.hpp"
#include "core/sampler.hpp"

namespace pyllama::engine {

// One per engine context, shared by its sequences' stages; outlives the context's graphs.
class GraphGreedy {
public:
    explicit GraphGreedy(int32_t n_seq_max);
    ~GraphGreedy();
    GraphGreedy(const GraphGreedy &) = delete;
    GraphGreedy & operator=(const GraphGreedy &) = delete;

    // A chain of the one stage, for llama_set_sampler (which takes chains only). Its host
    // `apply` (used only where the graph did not pick) is the same argmax over candidates.
    Sampler chain(const SparseBias & bias);
    // Whether the chain's stage accepted the backend at llama_set_sampler (backend_init).
    static bool attached(const Sampler & chain);
    // Whether that stage picks with pyllama's CPU node (the host's rule exactly).
    static bool on_cpu(const Sampler & chain);
    // An attached chain's stage takes another task's bias, where it can pick with it (off
    // the CPU only an empty one). Loop thread, between decodes: a graph reads it when it runs.
    static bool rebias(const Sampler & chain, const SparseBias & bias);
    // Rows the CPU node has picked so far (the counters' proof that it ran).
    uint64_t rows_picked() const;

    struct Shared;  // what the stages share (graph_greedy.cpp)

private:
    std::unique_ptr<Shared> shared_;
};

}  // namespace pyllama::engine
