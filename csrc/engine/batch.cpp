// One loop turn's decode: a llama_batch with every generating slot's sampled token first,
// then prompt chunks in arrival order, decoded once; a failed decode fails its tasks.

#include "engine/engine.hpp"

#include <algorithm>

#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

bool Engine::step() {
    if (projector_) {
        for (auto & s : slots_) {
            while (s->state == Slot::State::Prompt && eval_media(*s)) {}
        }
    }
    const int64_t t_step0 = now_us();
    batch_->clear();
    const auto n_batch = static_cast<int32_t>(ctx_->n_batch());
    // mixed engine: a step decodes embedding inputs or completions, never both
    bool embd_step = embeddings_;
    if (mixed_) {
        bool want_embd = false, want_gen = false;
        for (auto & s : slots_) {
            if (s->state == Slot::State::Generating) want_gen = true;
            if (s->state != Slot::State::Prompt) continue;
            (s->task->params.kind == TaskKind::Completion ? want_gen : want_embd) = true;
        }
        embd_step = want_embd && (!want_gen || embd_turn_);
        if (want_embd && want_gen) embd_turn_ = !embd_turn_;
    }
    int32_t busy = 0;
    for (auto & s : slots_) {
        s->i_batch = -1;
        s->chunk = 0;
        s->fed = false;
        s->draft.clear();
        s->draft_ngram = false;
    }
    // drafts for the generating slots, unless this step is an embedding one: n-gram first,
    // then the draft model for slots still without one (llama.cpp's order)
    if (!(mixed_ && embd_step)) {
        if (ngram_) ngram_draft_all();
        if (dctx_) draft_all();
    }
    // 1. one sampled token per generating slot: decoding never waits behind prompts
    //    (with its draft tokens, if any, each with logits for verification)
    for (auto & s : slots_) {
        if (s->state != Slot::State::Generating || (mixed_ && embd_step)) continue;
        batch_->add(s->sampled, s->pos(s->n_past), {s->id}, true);
        s->i_batch = batch_->size() - 1;
        s->fed = true;
        auto room = static_cast<size_t>(std::max(0, n_batch - batch_->size()));
        // a backend-sampled sequence has at most outputs_per_seq_ rows in a batch
        if (s->backend) room = std::min(room, static_cast<size_t>(outputs_per_seq_ - 1));
        if (s->draft.size() > room) s->draft.resize(room);
        for (size_t i = 0; i < s->draft.size(); ++i) {
            batch_->add(s->draft[i], s->pos(s->n_past + 1 + i), {s->id}, true);
        }
        ++busy;
    }
    // 2. prompt chunks in arrival order, as much as the batch holds (without continuous
    //    batching, as llama-server: only in a step no slot generates in)
    std::vector<Slot *> prompting;
    for (auto & s : slots_) {
        if (s->state == Slot::State::Prompt && (params_.cont_batching || busy == 0)) prompting.push_back(s.get());
    }
    std::sort(prompting.begin(), prompting.end(), [](Slot * a, Slot * b) { return a->t_start < b->t_start; });
    for (Slot * s : prompting) {
        const auto & prompt = s->prompt();
        // text up to the prompt's next medium, which the next step evaluates
        const auto & media = s->task->params.media;
        const size_t end = s->media_next < media.size() ? media[s->media_next].start : prompt.size();
        const auto remaining = static_cast<int32_t>(end - s->n_past);
        const bool completion = s->task->params.kind == TaskKind::Completion;
        int32_t room = n_batch - batch_->size();
        if (!completion && params_.embd_step_tokens > 0 && batch_->size() > 0) {
            room = std::min(room, params_.embd_step_tokens - batch_->size());
        }
        if (mixed_ && completion == embd_step) continue;  // the other kind's step
        if (!completion && remaining > room) continue;  // an embedding input goes in whole
        const int32_t chunk = checkpoint_chunk(*s, std::min(remaining, room));
        if (chunk <= 0) continue;
        checkpoint_create(*s, chunk);  // the state before this chunk, before it is decoded
        s->first_row = batch_->size();
        for (int32_t k = 0; k < chunk; ++k) {
            const size_t pos = s->n_past + static_cast<size_t>(k);
            const bool last = pos + 1 == prompt.size();
            batch_->add(prompt[pos], s->pos(pos), {s->id}, completion ? last : true);
        }
        s->chunk = chunk;
        if (s->n_past + static_cast<size_t>(chunk) == prompt.size()) s->i_batch = batch_->size() - 1;
        ++busy;
    }
    if (batch_->size() == 0) return false;
    if (mixed_ && embd_on_ != embd_step) {
        ctx_->set_embeddings(embd_step);
        embd_on_ = embd_step;
    }

    const int64_t t_dec0 = now_us();
    try {
        if (!ctx_->try_decode(*batch_)) {
            make_kv_room();
            return true;  // nothing was decoded: the next step rebuilds the batch
        }
    } catch (const std::exception & e) {
        for (auto & s : slots_) {
            if (s->task && (s->fed || s->chunk > 0)) fail_slot(*s, "decode", e.what());
        }
        return true;
    }
    const int64_t t_dec1 = now_us();
    {
        std::lock_guard<std::mutex> lk(pub_mu_);
        metrics_.n_decode_total++;
        metrics_.n_busy_slots_total += static_cast<uint64_t>(busy);
        metrics_.t_decode_ms_total += static_cast<double>(t_dec1 - t_dec0) / 1e3;
        metrics_.t_batch_ms_total += static_cast<double>(t_dec0 - t_step0) / 1e3;
    }
    // 3. bookkeeping and sampling, in batch order
    prescan();
    for (auto & s : slots_) {
        if (!s->task) continue;
        if (s->chunk > 0) {
            const auto & prompt = s->prompt();
            s->cache.insert(s->cache.end(), prompt.begin() + static_cast<std::ptrdiff_t>(s->n_past),
                            prompt.begin() + static_cast<std::ptrdiff_t>(s->n_past + static_cast<size_t>(s->chunk)));
            s->n_past += static_cast<size_t>(s->chunk);
            {
                std::lock_guard<std::mutex> lk(pub_mu_);
                metrics_.n_prompt_tokens_total += static_cast<uint64_t>(s->chunk);
            }
            emit_progress(*s);
            release_waiters(*s, false);
            if (s->n_past < prompt.size()) continue;
            s->t_prompt_done = now_us();
            {
                std::lock_guard<std::mutex> lk(pub_mu_);
                metrics_.t_prompt_ms_total += static_cast<double>(s->t_prompt_done - s->t_start) / 1e3;
            }
            if (s->task->params.kind != TaskKind::Completion) {
                finish_embedding(*s);
                continue;
            }
            s->state = Slot::State::Generating;
            feed_prompt(*s);
            // n > 1: the others copy the prompt's KV and sample from the same logits
            for (auto & c : slots_) {
                if (c->state != Slot::State::Waiting || c->parent != s.get()) continue;
                ctx_->seq_cp(s->id, c->id, -1, -1);
                c->cache = s->cache;
                c->media_cached = s->media_cached;
                c->n_past = s->n_past;
                c->n_cached = s->n_cached;
                c->pos_delta = s->pos_delta;
                c->media_next = s->media_next;
                c->t_prompt_done = s->t_prompt_done;
                c->parent = nullptr;
                c->state = Slot::State::Generating;
                feed_prompt(*c);
                ngram_begin(*c);
                sample_slot(*c, s->i_batch);
            }
            ngram_begin(*s);
            sample_slot(*s, s->i_batch);
        } else if (s->fed) {
            s->cache.push_back(s->sampled);
            s->n_past++;
            if (s->draft.empty()) sample_slot(*s, s->i_batch);
            else verify_draft(*s);
        }
    }
    std::lock_guard<std::mutex> lk(pub_mu_);
    metrics_.t_sample_ms_total += static_cast<double>(now_us() - t_dec1) / 1e3;
    return true;
}

// As llama-server's init_sampler: the sampler chain (not the grammar or the reasoning
// budget) sees every prompt token but media placeholders before the first sample, so
// penalties and DRY count the prompt's repeats.
void Engine::feed_prompt(Slot & s) {
    if (!s.chain) return;
    const auto & prompt = s.prompt();
    const auto & media = s.task->params.media;
    size_t m = 0;
    for (size_t i = 0; i < prompt.size(); ++i) {
        while (m < media.size() && media[m].start + media[m].n_tokens <= i) ++m;
        if (m < media.size() && i >= media[m].start) continue;  // inside a medium
        s.chain->accept(prompt[i]);
    }
}

}  // namespace pyllama::engine
