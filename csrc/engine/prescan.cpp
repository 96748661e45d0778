// The step's per-sequence scans of the logits (greedy argmax, top-k candidates, the raw
// logits' n_probs), done
// before sampling and spread over the compute threads when many sequences sample: each
// reads its own 4 x n_vocab-byte row and writes only its own slot's buffers, so they run
// in parallel; everything after (chains, grammar, events) stays serial on the loop thread.

#include "engine/engine.hpp"

#include <algorithm>

#include "core/logits_scan.hpp"
#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

namespace {
// below this many sequences the serial path (in sample_slot) is as fast
constexpr size_t kMinParallel = 8;
}  // namespace

void Engine::prescan() {
    std::vector<Slot *> & work = prescan_work_;
    std::vector<const float *> & rows = prescan_rows_;
    work.clear();
    rows.clear();
    for (auto & s : slots_) {
        s->pre.ready = s->pre.probs_ok = false;
        // a generating slot that samples its one row on the host with a shortcut
        if (!s->task || !s->fed || !s->draft.empty() || s->backend || s->budget) continue;
        const TaskParams & tp = s->task->params;
        const bool probs = tp.n_probs > 0 && !tp.post_sampling_probs;
        if (tp.n_predict == 0 || !(s->task->greedy || s->task->top_k_at >= 0 || probs)) continue;
        work.push_back(s.get());
    }
    const int32_t n_threads = ctx_->n_threads();
    if (work.size() < kMinParallel || n_threads <= 1) return;
    for (Slot * s : work) rows.push_back(ctx_->logits_ith(s->i_batch));  // serial: it locks
    const auto n_vocab = static_cast<int32_t>(cur_.size());
    const auto n = static_cast<int64_t>(work.size());
    // The loop thread is the one that runs ggml's graphs, so this parallel region gets the
    // same libgomp pool of threads, idle (spinning) between graphs: no new threads.
#ifdef _OPENMP
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 4)
#endif
    for (int64_t j = 0; j < n; ++j) {
        // last row first: llama.cpp has just copied the rows out of the graph in order, so
        // the last ones are still in cache, and those read first stay there
        const auto i = static_cast<size_t>(n - 1 - j);
        Slot & s = *work[i];
        const TaskState & t = *s.task;
        const TaskParams & tp = t.params;
        const float * row = rows[i];
        if (tp.n_probs > 0 && !tp.post_sampling_probs) {
            const size_t k = std::min(static_cast<size_t>(tp.n_probs), static_cast<size_t>(n_vocab));
            s.pre.probs_ok = raw_probs(row, n_vocab, k, s.pre.scratch, s.pre.probs, s.pre.lse);
        }
        if (t.greedy) {
            // the raw top 1 is the argmax (equal logits by token id: the first of them)
            const bool known = s.pre.probs_ok && t.bias.empty();
            s.pre.pick = known ? s.pre.probs[0].id : biased_argmax(row, n_vocab, t.bias);
        } else if (t.top_k_at >= 0) {
            const int32_t k = tp.sampling.top_k;
            s.pre.top.resize(static_cast<size_t>(std::max(k, 1)));
            s.pre.top_ok = top_k_candidates(row, n_vocab, k, t.bias, s.pre.scratch, s.pre.top.data());
        }
        s.pre.ready = t.greedy || t.top_k_at >= 0;
    }
}

}  // namespace pyllama::engine
