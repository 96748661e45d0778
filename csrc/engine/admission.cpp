// Tasks into slots, on the loop thread: which slot takes a task (the longest cached
// prefix, else the least recently used), what of its KV cache is kept or reused, and
// the host-memory prompt cache swapped in and out.

#include "engine/engine.hpp"

#include <algorithm>
#include <cstdio>

#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

size_t Engine::drop_kv(Slot & s, size_t keep) {
    if (!ctx_->seq_rm(s.id, s.pos(keep), -1)) {  // a recurrent state: all or nothing
        ctx_->seq_rm(s.id, -1, -1);
        keep = 0;
    }
    if (keep == 0) s.pos_delta = 0;
    if (s.cache.size() > keep) s.cache.resize(keep);
    while (!s.media_cached.empty() && s.media_cached.back().start + s.media_cached.back().n_tokens > keep) {
        s.media_cached.pop_back();
    }
    s.d_past = std::min(s.d_past, keep);
    return keep;
}

// --cache-reuse, as llama-server: past the common prefix, chunks of at least `min_chunk`
// tokens that the cache holds further on are shifted into place instead of recomputed.
// Returns how many leading prompt tokens the slot's KV now holds.
size_t Engine::reuse_chunks(Slot & s, const std::vector<llama_token> & prompt, size_t n_past, size_t min_chunk) {
    auto & cache = s.cache;
    size_t head_c = n_past, head_p = n_past;
    while (head_c < cache.size() && head_p < prompt.size()) {
        size_t n = 0;
        while (head_c + n < cache.size() && head_p + n < prompt.size() && cache[head_c + n] == prompt[head_p + n]) ++n;
        if (n < min_chunk) {
            ++head_c;
            continue;
        }
        const auto shift = static_cast<llama_pos>(head_p) - static_cast<llama_pos>(head_c);
        ctx_->seq_rm(s.id, static_cast<llama_pos>(head_p), static_cast<llama_pos>(head_c));
        ctx_->seq_add(s.id, static_cast<llama_pos>(head_c), static_cast<llama_pos>(head_c + n), shift);
        for (size_t i = 0; i < n; ++i) cache[head_p + i] = cache[head_c + i];
        n_past += n;
        head_c += n;
        head_p += n;
    }
    return n_past;
}

void Engine::admit() {
    while (!queue_.empty()) {
        auto task = queue_.front();
        std::vector<Slot *> idle;
        bool any_busy = false;
        for (auto & s : slots_) {
            if (s->state == Slot::State::Idle) idle.push_back(s.get());
            else any_busy = true;
        }
        const auto need = static_cast<size_t>(task->params.n_cmpl);
        if (idle.size() < need) return;
        // LoRA: only tasks with the same adapter scales share a batch; switch when idle.
        if (task->lora != lora_scales_now_) {
            if (any_busy) return;
            apply_lora(task->lora);
        }
        // Without a prefix match, pack busy slots together (then least recently used): with
        // per-sequence KV streams, llama.cpp's attention runs over the whole range of streams
        // from the lowest to the highest sequence in a ubatch, idle ones in between included,
        // so 8 busy slots spread over 16 streams cost up to twice the attention of 8 adjacent.
        auto by_span = [this](std::vector<Slot *> & v) {
            int32_t lo = std::numeric_limits<int32_t>::max(), hi = -1;
            for (auto & s : slots_) {
                if (s->state == Slot::State::Idle) continue;
                lo = std::min(lo, s->id);
                hi = std::max(hi, s->id);
            }
            auto growth = [&](const Slot * s) -> int32_t {
                return hi < 0 ? 0 : std::max(hi, s->id) - std::min(lo, s->id) - (hi - lo);
            };
            std::sort(v.begin(), v.end(), [&](Slot * a, Slot * b) {
                const int32_t ga = growth(a), gb = growth(b);
                return ga != gb ? ga < gb : a->t_last_used < b->t_last_used;
            });
        };
        by_span(idle);
        Slot * primary = nullptr;
        const auto & prompt = task->params.prompt;
        const bool completion = task->params.kind == TaskKind::Completion;
        if (task->params.id_slot >= 0) {
            Slot * want = slots_[static_cast<size_t>(task->params.id_slot)].get();
            if (want->state != Slot::State::Idle) return;
            primary = want;
        } else if (completion && task->params.cache_prompt) {
            float best = params_.slot_prompt_similarity;
            for (Slot * s : idle) {
                const float sim = static_cast<float>(common_prefix(s->cache, prompt)) / static_cast<float>(prompt.size());
                if (sim > best) {
                    best = sim;
                    primary = s;
                }
            }
        }
        const bool by_lru = primary == nullptr;
        if (by_lru) primary = idle.front();  // least recently used
        queue_.pop_front();
        n_waiting_--;

        const int64_t t = now_us();
        uint32_t index = 0;
        auto assign = [&](Slot & s) {
            s.task = task;
            s.index = index;
            s.chain.reset();
            s.grammar.reset();
            s.budget.reset();
            if (completion) {
                s.chain.emplace(std::move(task->chains[index]));
                if (task->grammars[index]) s.grammar.emplace(std::move(*task->grammars[index]));
                if (task->budgets[index]) s.budget.emplace(std::move(*task->budgets[index]));
            }
            s.text.emplace(task->params.stop);
            s.n_decoded = 0;
            s.last_task_id = task->id;
            s.has_next_token = true;
            s.has_new_line = false;
            s.n_draft = s.n_draft_accepted = 0;
            s.n_shared = 0;
            s.truncated = false;
            if (!params_.spec_synth_probs.empty()) {  // as llama-server: the request's seed, else random
                const uint32_t seed = task->params.sampling.seed;
                s.synth_rng.seed(seed == LLAMA_DEFAULT_SEED ? std::random_device{}() : seed);
            }
            s.t_start = t;
            s.t_prompt_done = 0;
            ++index;
        };
        const bool cache = completion && task->params.cache_prompt;
        if (cache && prompt_cache_) swap_prompt(*primary, prompt, by_lru);
        size_t lcp = cache ? common_prefix(primary->cache, prompt) : 0;
        primary->d_past = std::min(primary->d_past, lcp);
        if (cache && task->params.n_cache_reuse > 0 && ctx_->can_shift() && !projector_) {
            lcp = reuse_chunks(*primary, prompt, lcp, static_cast<size_t>(task->params.n_cache_reuse));
        }
        if (cache) lcp = checkpoint_restore(*primary, lcp, prompt.size());
        lcp = std::min(lcp, prompt.size() - 1);  // re-evaluate at least one token for its logits
        // a kept prefix never ends inside an image: its KV is whole or gone
        const MediaPrefix kept = cut_media(task->params.media, lcp);
        lcp = kept.len;
        primary->media_next = kept.n_media;
        primary->pos_delta = kept.delta;  // the kept prefix is the same media in both
        if (drop_kv(*primary, lcp) < lcp) {  // the memory kept nothing (recurrent)
            lcp = 0;
            primary->media_next = 0;
        }
        primary->n_past = lcp;
        primary->n_cached = static_cast<int32_t>(lcp);
        primary->state = Slot::State::Prompt;
        primary->parent = nullptr;
        assign(*primary);
        attach_sampler(*primary);
        {
            std::lock_guard<std::mutex> lk(pub_mu_);
            metrics_.n_prompt_cached_total += lcp;
        }
        // a recurrent state cannot be cut to a prefix, nor a window-sized SWA cache copied whole
        if (cache && !rs_only_ && n_swa_ == 0) share_prefix(*primary);
        emit_progress(*primary);  // before any prompt token is evaluated
        while (index < need) {
            idle.erase(std::remove_if(idle.begin(), idle.end(), [](Slot * s) { return s->state != Slot::State::Idle; }),
                       idle.end());
            by_span(idle);
            Slot * s = idle.front();
            drop_kv(*s, 0);
            s->n_past = 0;
            s->n_cached = 0;
            s->media_next = 0;
            s->state = Slot::State::Waiting;
            s->parent = primary;
            assign(*s);
            attach_sampler(*s);  // n > 1 samples on the host: only lets a parked stage go
        }
        if (prompt_cache_ && params_.cache_idle_slots) cache_idle_slots();
    }
}

// As llama-server: a slot taken by least-recently-used, or about to keep less than half
// of its cached prompt, first saves that prompt to the host cache; then a cached prompt
// that serves the new one better is restored into it.
void Engine::swap_prompt(Slot & s, const std::vector<llama_token> & prompt, bool by_lru) {
    const size_t keep = common_prefix(s.cache, prompt);
    if (!by_lru && 2 * keep >= s.cache.size()) return;
    trace("updating prompt cache");
    prompt_cache_->save(*ctx_, s.id, s.cache);
    try {
        if (auto got = prompt_cache_->take_better(*ctx_, s.id, s.cache, prompt)) {
            s.cache = std::move(*got);
            s.checkpoints.clear();  // they were the old prompt's
            s.d_past = 0;  // the draft context catches up from the start
            trace("restored a prompt from the prompt cache");
        }
    } catch (const std::exception & e) {
        trace(e.what());
        drop_kv(s, 0);
    }
}

void Engine::cache_idle_slots() {
    for (auto & s : slots_) {
        if (s->state != Slot::State::Idle || s->cache.empty()) continue;
        if (prompt_cache_->save(*ctx_, s->id, s->cache)) trace("__TEST_TAG_CACHE_IDLE_SLOT__");
        // only a shared KV buffer gets room back from clearing; separate streams keep theirs
        if (params_.ctx.kv_unified) drop_kv(*s, 0);
    }
}

void Engine::trace(const char * what) const {
    if (params_.verbose) std::fprintf(stderr, "engine: %s\n", what);
}

}  // namespace pyllama::engine
