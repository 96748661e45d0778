// Shared prompt prefixes across tasks, on the loop thread. Chat apps and agents send the
// same long system prompt with every conversation: when a new task's prompt starts with
// tokens another slot holds (a slot generating, idle with its cache, or evaluating its own
// prompt), its slot copies that KV instead of evaluating it again. A prefix still being
// evaluated is waited for (the slot stays Waiting with `donor` set) rather than computed a
// second time. llama-server computes such a prefix once per slot.
//
// A prefix may hold images and audio: their placeholder tokens follow the file's hash, so a
// common prefix holds the same media at the same places in both prompts, and so the same
// positions. It never ends inside one (a medium's KV is whole or absent).
//
// The copy: in a unified KV cache the destination's cells just join the source's for
// [0, len) (no data moves); with a KV stream per slot llama.cpp copies the whole stream
// buffer at the next decode, and the destination then forgets everything past len.

#include <algorithm>

#include "engine/engine.hpp"
#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

void Engine::share_prefix(Slot & s) {
    const auto & prompt = s.prompt();
    if (!params_.share_prefix || prompt.size() < 2) return;
    const auto & media = s.task->params.media;
    Slot * best = nullptr;
    size_t best_len = 0;
    for (auto & o : slots_) {
        if (o.get() == &s || o->state == Slot::State::Waiting) continue;
        // what o's sequence holds, or will once its prompt evaluation is done
        const bool prompting = o->state == Slot::State::Prompt;
        if (prompting && o->task->params.kind != TaskKind::Completion) continue;
        const auto & known = prompting ? o->prompt() : o->cache;
        const size_t len = cut_media(media, std::min(common_prefix(known, prompt), prompt.size() - 1)).len;
        // a stream copy from an idle slot runs at the next decode: the host prompt cache
        // must not restore another prompt into that stream before it
        if (o->state == Slot::State::Idle && !params_.ctx.kv_unified && prompt_cache_) continue;
        if (len > best_len) {
            best_len = len;
            best = o.get();
        }
    }
    if (best == nullptr || best_len < s.n_past + static_cast<size_t>(std::max(1, params_.share_min))) return;
    if (best->state != Slot::State::Prompt || best->n_past >= best_len) {
        copy_prefix(*best, s, best_len);
        return;
    }
    s.state = Slot::State::Waiting;
    s.donor = best;
    s.share_len = best_len;
}

void Engine::copy_prefix(Slot & from, Slot & to, size_t len) {
    const auto & prompt = to.prompt();
    const size_t own = to.n_past;  // what the slot kept of its own cache
    const MediaPrefix mp = cut_media(to.task->params.media, len);  // len ends outside media
    const llama_pos end = static_cast<llama_pos>(len) + mp.delta;   // the position after it
    if (params_.ctx.kv_unified) {
        ctx_->seq_rm(to.id, -1, -1);
        ctx_->seq_cp(from.id, to.id, 0, end);
    } else {
        ctx_->seq_cp(from.id, to.id, -1, -1);
        ctx_->seq_rm(to.id, end, -1);
    }
    to.cache.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(len));
    to.media_cached.clear();
    for (const auto & m : to.task->params.media) {
        if (m.start + m.n_tokens <= len) to.media_cached.push_back(m);
    }
    to.n_past = len;
    to.pos_delta = mp.delta;
    to.media_next = mp.n_media;
    to.d_past = std::min(to.d_past, own);  // the draft context holds only the slot's own part
    to.n_cached = static_cast<int32_t>(len);
    to.n_shared = static_cast<int32_t>(len - own);
    to.donor = nullptr;
    to.share_len = 0;
    to.state = Slot::State::Prompt;
    std::lock_guard<std::mutex> lk(pub_mu_);
    metrics_.n_prompt_cached_total += len - own;
    metrics_.n_prompt_shared_total += len - own;
}

void Engine::release_waiters(Slot & donor, bool failed) {
    for (auto & w : slots_) {
        if (w->state != Slot::State::Waiting || w->donor != &donor) continue;
        if (!failed && donor.n_past >= w->share_len) {
            copy_prefix(donor, *w, w->share_len);
        } else if (failed || donor.state != Slot::State::Prompt) {
            // the donor will not get there: another slot may (the first waiter set free
            // becomes the donor of the others), else the slot evaluates its prompt itself
            w->donor = nullptr;
            w->share_len = 0;
            w->state = Slot::State::Prompt;
            share_prefix(*w);
        }
    }
}

}  // namespace pyllama::engine
