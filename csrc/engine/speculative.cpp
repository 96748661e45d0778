// Speculative decoding with a draft model (llama-server's draft-simple), and the
// verification of any draft (a draft model's or the n-gram drafters', ngram.cpp).
//
// The draft context has one sequence per slot, at the same positions as the target's.
// Before each step, every generating slot that may draft feeds the draft what it has not
// seen yet (cache tail + the sampled token), then all such slots draft greedily together,
// one draft decode per position. The target verifies the drafts in the same batch as the
// other slots' tokens; verify_draft accepts the longest run the slot's own sampler agrees
// with, so the output is what plain decoding with that sampler would produce.
#include <algorithm>
#include <cmath>
#include <random>

#include "engine/engine.hpp"
#include "engine/slot.hpp"

namespace pyllama::engine {

namespace {

// Greedy pick with the confidence llama-server's draft sampler reports: the top token's
// probability among the 10 most likely (a top-k 10 softmax).
llama_token pick(const float * logits, int32_t n_vocab, float & p_top) {
    constexpr int32_t k = 10;
    float top[k];
    int32_t n = 0;
    llama_token best = 0;
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        if (n < k) {
            top[n++] = l;
            std::push_heap(top, top + n, std::greater<float>());
        } else if (l > top[0]) {
            std::pop_heap(top, top + n, std::greater<float>());
            top[n - 1] = l;
            std::push_heap(top, top + n, std::greater<float>());
        }
        if (l > logits[best]) best = i;
    }
    const float mx = logits[best];
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(top[i] - mx));
    p_top = static_cast<float>(1.0 / sum);
    return best;
}

// The same pick among candidates a backend top-k stage left (ids[i] has logits[i]).
llama_token pick_among(const llama_token * ids, const float * logits, uint32_t n, float & p_top) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; ++i) {
        if (logits[i] > logits[best] || (logits[i] == logits[best] && ids[i] < ids[best])) best = i;
    }
    double sum = 0.0;
    for (uint32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - logits[best]));
    p_top = static_cast<float>(1.0 / sum);
    return ids[best];
}

}  // namespace

// Room: sampled + drafts must stay inside the slot's context (one cell spare, as
// llama-server), drafting past n_predict is wasted work, the request may cap it
// (speculative.n_max) and synthetic acceptance has a rate per position.
int32_t Engine::draft_room(const Slot & s) const {
    const TaskParams & tp = s.task->params;
    int32_t n = n_ctx_slot_ - static_cast<int32_t>(s.n_past) - 2;
    if (tp.n_predict > 0) n = std::min(n, tp.n_predict - s.n_decoded - 1);
    if (tp.spec_n_max >= 0) n = std::min(n, tp.spec_n_max);
    if (!params_.spec_synth_probs.empty()) n = std::min(n, static_cast<int32_t>(params_.spec_synth_probs.size()));
    return n;
}

void Engine::draft_all() {
    const auto n_vocab = static_cast<int32_t>(cur_.size());
    const auto n_batch = static_cast<int32_t>(dctx_->n_batch());
    std::vector<Slot *> drafting;
    std::vector<int32_t> cap, n_min;
    std::vector<float> p_min;
    for (auto & s : slots_) {
        // a slot the n-gram drafters served this step is left alone
        if (s->state != Slot::State::Generating || !s->draft.empty()) continue;
        const TaskParams & tp = s->task->params;
        const int32_t n = std::min(draft_room(*s), tp.spec_n_max >= 0 ? tp.spec_n_max : params_.spec_n_max);
        const int32_t lo = tp.spec_n_min >= 0 ? tp.spec_n_min : params_.spec_n_min;
        if (n <= 0 || n < lo) continue;
        drafting.push_back(s.get());
        cap.push_back(n);
        n_min.push_back(lo);
        p_min.push_back(tp.spec_p_min >= 0.0f ? tp.spec_p_min : params_.spec_p_min);
    }
    if (drafting.empty()) return;

    // 1. catch up: cache[d_past:] + sampled; the sampled token's row gives the first draft
    std::vector<size_t> fed(drafting.size());
    std::vector<bool> live(drafting.size(), true);
    for (size_t i = 0; i < drafting.size(); ++i) {
        Slot & s = *drafting[i];
        dctx_->seq_rm(s.id, static_cast<llama_pos>(s.d_past), -1);
        fed[i] = s.d_past;
    }
    auto take = [&](size_t i, int32_t row) {
        Slot & s = *drafting[i];
        float p = 0.0f;
        llama_token t = -1;
        if (!draft_chains_.empty()) {
            // --spec-draft-backend-sampling: the top 10 came out of the draft's graph
            const Context::Sampled be = dctx_->sampled_ith(row);
            if (be.n > 0 && be.logits) {
                t = pick_among(be.ids, be.logits, be.n, p);
                std::lock_guard<std::mutex> lk(pub_mu_);
                metrics_.n_draft_sampled_backend++;
            }
        }
        if (t < 0) t = pick(dctx_->logits_ith(row), n_vocab, p);
        if (p < p_min[i]) {
            live[i] = false;
            return;
        }
        s.draft.push_back(t);
        if (static_cast<int32_t>(s.draft.size()) >= cap[i]) live[i] = false;
    };
    bool pending = true;
    while (pending) {
        pending = false;
        dbatch_->clear();
        std::vector<std::pair<size_t, int32_t>> rows;
        for (size_t i = 0; i < drafting.size(); ++i) {
            Slot & s = *drafting[i];
            const size_t total = s.cache.size() + 1;
            while (fed[i] < total && dbatch_->size() < n_batch) {
                const llama_token t = fed[i] < s.cache.size() ? s.cache[fed[i]] : s.sampled;
                const bool last = fed[i] + 1 == total;
                dbatch_->add(t, static_cast<llama_pos>(fed[i]), {s.id}, last);
                if (last) rows.emplace_back(i, dbatch_->size() - 1);
                ++fed[i];
            }
            pending = pending || fed[i] < total;
        }
        dctx_->decode(*dbatch_);
        for (auto [i, row] : rows) take(i, row);
    }
    for (size_t i = 0; i < drafting.size(); ++i) drafting[i]->d_end = drafting[i]->cache.size() + 1;

    // 2. one draft decode per further position, all drafting slots together
    while (true) {
        dbatch_->clear();
        std::vector<std::pair<size_t, int32_t>> rows;
        for (size_t i = 0; i < drafting.size(); ++i) {
            if (!live[i]) continue;
            Slot & s = *drafting[i];
            dbatch_->add(s.draft.back(), static_cast<llama_pos>(s.d_end), {s.id}, true);
            ++s.d_end;
            rows.emplace_back(i, dbatch_->size() - 1);
        }
        if (rows.empty()) break;
        dctx_->decode(*dbatch_);
        for (auto [i, row] : rows) take(i, row);
    }
    for (size_t i = 0; i < drafting.size(); ++i) {
        if (static_cast<int32_t>(drafting[i]->draft.size()) < n_min[i]) drafting[i]->draft.clear();
    }
}

// Called instead of sampling the slot's first row (the token after `sampled`). Each row
// whose sample reproduces the draft token there accepts it, and the next row is sampled.
// With synthetic acceptance (benchmarking) a draft token is taken at random instead.
void Engine::verify_draft(Slot & s) {
    const std::vector<llama_token> draft = std::move(s.draft);
    s.draft.clear();
    const auto & synth = params_.spec_synth_probs;
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    int32_t row = s.i_batch;
    size_t accepted = 0;
    // counted as they happen: the sample that ends the task sends its timings
    s.n_draft += static_cast<int32_t>(draft.size());
    while (true) {
        llama_token forced = -1;
        bool last = accepted >= draft.size();
        if (!last && !synth.empty()) {
            // a drafted end of generation is never forced: it would end the output early
            const llama_token t = draft[accepted];
            if (coin(s.synth_rng) < synth[accepted] && !llama_vocab_is_eog(model_->vocab(), t)) {
                forced = t;
            } else {
                last = true;
            }
        }
        sample_slot(s, row, forced);
        if (last || !s.task || s.sampled != draft[accepted]) break;
        s.cache.push_back(draft[accepted]);
        s.n_past++;
        ++accepted;
        ++s.n_draft_accepted;
        ++row;
    }
    // the target's KV beyond what was accepted holds rejected drafts
    ctx_->seq_rm(s.id, s.pos(s.cache.size()), -1);
    if (s.draft_ngram) {
        // the draft model's context did not see this step: it catches up next time
        ngram_accept(s, accepted);
    } else {
        s.d_past = std::min(s.d_end, s.cache.size());
    }
    std::lock_guard<std::mutex> lk(pub_mu_);
    metrics_.n_draft_tokens += draft.size();
    metrics_.n_draft_accepted += accepted;
    metrics_.n_draft_steps++;
}

}  // namespace pyllama::engine
