// Context checkpoints (-ctxcp / -cms), as llama-server makes and uses them
// (tools/server/server-context.cpp: create_checkpoint, the prompt-reuse block of
// update_slots). A recurrent or hybrid model's memory holds one state per sequence, not one
// entry per token, so a cached prompt's tail cannot be dropped: a new prompt that shares only
// part of it resumes from a checkpoint taken before that point, or starts over. Checkpoints
// are taken before the chunks that end a prompt: prompt evaluation stops 4 + n_ubatch and 4
// tokens before the end so that the state there can be saved. A sliding-window model's
// window-sized cache (without --swa-full) has lost positions older than the window: the same
// rule applies past it. Loop thread only.

#include <algorithm>

#include "engine/engine.hpp"
#include "engine/slot.hpp"

namespace pyllama::engine {

bool Engine::checkpoints_on(const Slot & s) const {
    return (rs_only_ || n_swa_ > 0) && params_.n_ctx_checkpoints > 0 && s.task &&
           s.task->params.kind == TaskKind::Completion && s.task->params.media.empty();
}

size_t Engine::checkpoint_restore(Slot & s, size_t lcp, size_t n_prompt) {
    if (!rs_only_ && n_swa_ == 0) return lcp;
    auto n_past = static_cast<llama_pos>(lcp);
    llama_pos pos_next = n_past;
    const bool has_new_tokens = lcp < n_prompt;
    // the largest pos_min for which the memory still holds what follows n_past
    const llama_pos thold = std::max<llama_pos>(0, pos_next - n_swa_ - (has_new_tokens ? 0 : 1));
    if (n_past > 0 && lcp <= s.cache.size() && ctx_->seq_pos_min(s.id) >= thold) {
        const auto it = std::find_if(s.checkpoints.rbegin(), s.checkpoints.rend(), [&](const Checkpoint & c) {
            return c.pos_max <= pos_next && (c.pos_min < thold || c.pos_min == 0);
        });
        if (it == s.checkpoints.rend()) {
            trace("no context checkpoint: the whole prompt is evaluated again");
            pos_next = n_past = 0;
        } else {
            ctx_->seq_state_set(it->data, s.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            pos_next = std::min(pos_next, std::max(it->pos_min + 1, it->pos_max));
            n_past = std::min<llama_pos>(pos_next, static_cast<llama_pos>(it->n_tokens));
            trace("restored a context checkpoint");
        }
    }
    s.checkpoints.erase(std::remove_if(s.checkpoints.begin(), s.checkpoints.end(),
                                       [&](const Checkpoint & c) { return c.pos_max > pos_next; }),
                        s.checkpoints.end());
    return static_cast<size_t>(n_past);
}

// A prompt chunk stops where llama-server's does: 4 + n_ubatch and 4 tokens before the end.
int32_t Engine::checkpoint_chunk(const Slot & s, int32_t chunk) const {
    if (!checkpoints_on(s)) return chunk;
    const auto n_prompt = static_cast<int64_t>(s.prompt().size());
    const auto n_batch = static_cast<int64_t>(ctx_->n_batch());
    const auto start = static_cast<int64_t>(s.n_past);
    for (const int64_t offset : {4 + static_cast<int64_t>(ctx_->n_ubatch()), int64_t{4}}) {
        const int64_t stop = n_prompt - std::min(n_batch, offset);
        if (start < stop && stop < start + chunk) return static_cast<int32_t>(stop - start);
    }
    return chunk;
}

// Before the chunk [n_past, n_past + chunk) is decoded: the state after n_past tokens.
void Engine::checkpoint_create(Slot & s, int32_t chunk) {
    if (!checkpoints_on(s)) return;
    const auto n_prompt = static_cast<int64_t>(s.prompt().size());
    const auto start = static_cast<int64_t>(s.n_past);
    const bool ends = start + chunk == n_prompt;
    const bool near_end = n_prompt < start + chunk + static_cast<int64_t>(ctx_->n_ubatch());
    if (!ends && !near_end) return;  // mid-prompt: llama-server checkpoints only at user turns
    const llama_pos pos_min = ctx_->seq_pos_min(s.id);
    const llama_pos pos_max = ctx_->seq_pos_max(s.id);
    if (pos_min < 0) return;  // nothing evaluated yet
    auto & cps = s.checkpoints;
    const auto n_max = static_cast<size_t>(params_.n_ctx_checkpoints);
    const uint64_t id_task = s.task->id;
    // with the list full, first drop other tasks' checkpoints within min-step of an earlier one
    int64_t last = -1;
    for (auto it = cps.begin(); cps.size() + 1 >= n_max && it != cps.end();) {
        if (it->id_task != id_task && last >= 0 && it->n_tokens <= last + params_.checkpoint_min_step) {
            it = cps.erase(it);
            continue;
        }
        last = it->n_tokens;
        ++it;
    }
    while (cps.size() >= n_max) cps.erase(cps.begin());
    cps.erase(std::remove_if(cps.begin(), cps.end(), [&](const Checkpoint & c) { return c.n_tokens == start; }),
              cps.end());
    Checkpoint c;
    c.id_task = id_task;
    c.n_tokens = start;
    c.pos_min = pos_min;
    c.pos_max = pos_max;
    c.data = ctx_->seq_state_get(s.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    cps.push_back(std::move(c));
    trace("created a context checkpoint");
}

}  // namespace pyllama::engine
