// When the KV cache runs out: a slot's context shifted (half of what follows n_keep
// discarded), and room made in a shared cache (idle prompts first, then the task
// holding the most).

#include "engine/engine.hpp"

#include <algorithm>

#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

void Engine::context_shift(Slot & s) {
    // llama-server's arithmetic (server-context.cpp, pre_decode), so the same text survives
    const auto & tp = s.task->params;
    const int32_t keep = tp.n_keep == -2 ? params_.n_keep : tp.n_keep;
    const auto n_past = static_cast<int32_t>(s.n_past);
    int32_t n_keep = keep < 0 ? static_cast<int32_t>(s.prompt().size()) : keep;
    if (llama_vocab_get_add_bos(model_->vocab())) n_keep += 1;
    n_keep = std::min({n_ctx_slot_ - 4, n_keep, n_past});
    const int32_t n_left = n_past - n_keep;
    int32_t n_discard = tp.n_discard ? tp.n_discard : n_left / 2;
    n_discard = std::clamp(n_discard, 0, std::max(0, n_left - 1));
    if (n_discard <= 0 || !ctx_->can_shift()) {
        finish(s, StopReason::Context);
        return;
    }
    ctx_->seq_rm(s.id, n_keep, n_keep + n_discard);
    ctx_->seq_add(s.id, n_keep + n_discard, -1, -n_discard);
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_discard);
    s.d_past = std::min(s.d_past, static_cast<size_t>(n_keep));
    s.n_past -= static_cast<size_t>(n_discard);
    s.truncated = true;
}

// A shared (unified) KV cache can fill up before any slot reaches its own context limit.
// First the prompts cached by idle slots go, as llama-server does; if none is left, the
// task holding the most KV fails alone (llama-server fails every busy slot here) and the
// others go on with the room it leaves.
void Engine::make_kv_room() {
    bool freed = false;
    for (auto & s : slots_) {
        if (s->state == Slot::State::Idle && !s->cache.empty()) {
            drop_kv(*s, 0);
            freed = true;
        }
    }
    if (freed) return;
    Slot * largest = nullptr;
    for (auto & s : slots_) {
        if (s->task && (!largest || s->n_past > largest->n_past)) largest = s.get();
    }
    if (largest) {
        fail_slot(*largest, "context_full",
                  "Context size has been exceeded: the shared KV cache is full and this request "
                  "held the most of it (raise --ctx-size or lower --parallel)");
    }
}

}  // namespace pyllama::engine
