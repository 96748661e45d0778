// Results to callers: events stamped and queued in the outbox, one wake-up per loop turn,
// a failed or finished slot released, and the slot list and metrics published.

#include "engine/engine.hpp"

#include <algorithm>

#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

void Engine::fail_slot(Slot & s, const std::string & kind, const std::string & msg) {
    auto task = s.task;
    if (!task) return;
    // every slot of this task stops; its KV may be partial, so drop it
    for (auto & o : slots_) {
        if (o->task != task) continue;
        drop_kv(*o, 0);
        release(*o);
    }
    if (task->failed) return;
    task->failed = true;
    Event ev;
    ev.type = Event::Type::Error;
    ev.error_kind = kind;
    ev.message = msg;
    ev.done = true;
    emit(task->id, std::move(ev), true);
}

void Engine::release(Slot & s) {
    const bool prompting = s.state == Slot::State::Prompt;
    s.state = Slot::State::Idle;
    detach_sampler(s);  // before the chain it points to is freed
    s.task.reset();
    s.media_batch.reset();
    s.chain.reset();
    s.grammar.reset();
    s.text.reset();
    s.parent = nullptr;
    s.donor = nullptr;
    s.share_len = 0;
    s.i_batch = -1;
    s.chunk = 0;
    s.fed = false;
    s.has_new_line = false;  // llama-server's slot reset on release
    s.t_last_used = now_us();
    if (prompting) release_waiters(s, true);  // after: it may now serve as an idle donor
}

void Engine::stamp(Event & ev, const Slot & s, int64_t now) {
    ev.n_prompt = static_cast<int32_t>(s.prompt().size());
    ev.n_cached = s.n_cached;
    ev.n_shared = s.n_shared;
    ev.n_predicted = s.n_decoded;
    ev.t_prompt_ms = static_cast<double>(s.t_prompt_done - s.t_start) / 1e3;
    ev.t_predicted_ms = static_cast<double>(now - s.t_prompt_done) / 1e3;
    ev.truncated = s.truncated;
    ev.n_draft = s.n_draft;
    ev.n_draft_accepted = s.n_draft_accepted;
}

void Engine::emit_progress(const Slot & s) {
    if (!s.task->params.return_progress) return;
    Event ev;
    ev.type = Event::Type::Progress;
    ev.n_prompt = static_cast<int32_t>(s.prompt().size());
    ev.n_cached = s.n_cached;
    ev.n_shared = s.n_shared;
    ev.n_processed = static_cast<int32_t>(s.n_past);
    ev.t_prompt_ms = static_cast<double>(now_us() - s.t_start) / 1e3;
    if (ev.n_processed == ev.n_cached) ev.t_prompt_ms = 0.0;  // nothing evaluated yet
    emit(s.task->id, std::move(ev), false);
}

void Engine::emit(uint64_t id, Event && ev, bool last) {
    {
        std::lock_guard<std::mutex> lk(out_mu_);
        auto it = out_.find(id);
        if (it != out_.end()) {  // else cancelled: nobody is listening
            ev.done = last;
            if (it->second.empty()) ready_.push_back(id);
            // a first token, an end, an error or progress is worth a wake-up of its own
            if (ev.type != Event::Type::Token || ev.n_predicted <= 1) urgent_ = true;
            it->second.push_back(std::move(ev));
            unnotified_ = true;
        }
    }
    if (last) forget_live(id);
}

// At most one wake-up per loop turn, and while the engine stays busy at most one per
// kNotifyGapUs: on a machine with as many cores as ggml threads, every wake-up of a
// consumer preempts a ggml thread while its partners spin, and a small model's steps take
// a fraction of a millisecond (measured: waking per step cost 10-15 % of a 0.37 ms step on
// 2 cores). Only tokens after a task's first wait: a turn that emitted a first token, an
// end or an error, or after which the loop goes idle (`force`), always delivers.
void Engine::notify(bool force) {
    {
        std::lock_guard<std::mutex> lk(out_mu_);
        if (!unnotified_) return;
        const int64_t t = now_us();
        if (!force && !urgent_ && t - last_notify_us_ < kNotifyGapUs) return;
        last_notify_us_ = t;
        unnotified_ = false;
        urgent_ = false;
        if (!notified_ && wake_.attached()) {
            notified_ = true;
            wake_.ring();
        }
    }
    out_cv_.notify_all();
}

void Engine::publish() {
    static const char * names[] = {"idle", "waiting", "prompt", "generating"};
    std::vector<SlotInfo> info;
    info.reserve(slots_.size());
    size_t used = 0;
    int32_t processing = 0;
    for (const auto & s : slots_) {
        info.push_back(SlotInfo{s->id, names[static_cast<int>(s->state)], s->task ? s->task->id : 0, n_ctx_slot_,
                                static_cast<int32_t>(s->n_past), s->task ? static_cast<int32_t>(s->prompt().size()) : 0,
                                s->n_decoded, static_cast<int32_t>(s->cache.size()), s->last_task_id,
                                s->task ? static_cast<int32_t>(std::min(s->n_past, s->prompt().size())) - s->n_cached : 0,
                                s->task ? s->n_cached : 0, s->has_next_token, s->has_new_line});
        used += s->cache.size();
        processing += s->state != Slot::State::Idle ? 1 : 0;
    }
    std::lock_guard<std::mutex> lk(pub_mu_);
    pub_slots_ = std::move(info);
    metrics_.n_processing = processing;
    metrics_.kv_usage = static_cast<double>(used) / static_cast<double>(std::max<uint32_t>(1, ctx_->n_ctx()));
}

}  // namespace pyllama::engine
