// The step's per-sequence scans of the logits (greedy argmax, top-k candidates), done
// before sampling and spread over the compute threads when many sequences sample: each
// reads its own 4 x n_vocab-byte row and writes only its own slot's buffers, so they run
// in parallel; everything after (chains, grammar, events) stays serial on the loop thread.

#include "engine/engine.hpp"

#include <algorithm>

#include "core/logits_scan.hpp"
#include "engine/slot.hpp"

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
        s->pre.ready = false;
        // a generating slot that samples its one row on the host with a shortcut
        if (!s->task || !s->fed || !s->draft.empty() || s->backend || s->budget) continue;
        if (s->task->params.n_predict == 0 || !(s->task->greedy || s->task->top_k_at >= 0)) continue;
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
    for (int64_t i = 0; i < n; ++i) {
        Slot & s = *work[static_cast<size_t>(i)];
        const TaskState & t = *s.task;
        if (t.greedy) {
            s.pre.pick = biased_argmax(rows[static_cast<size_t>(i)], n_vocab, t.bias);
        } else {
            const int32_t k = t.params.sampling.top_k;
            s.pre.top.resize(static_cast<size_t>(std::max(k, 1)));
            s.pre.top_ok = top_k_candidates(rows[static_cast<size_t>(i)], n_vocab, k, t.bias, s.pre.scratch, s.pre.top.data());
        }
        s.pre.ready = true;
    }
}

}  // namespace pyllama::engine
