// Tokens out of a decoded batch row: sampling (or greedy picking) per slot, stop
// conditions, embeddings pooled and normalized, and a finished task's final event.

#include "engine/engine.hpp"

#include <algorithm>
#include <cmath>

#include "core/logits_scan.hpp"
#include "engine/graph_greedy.hpp"
#include "engine/slot.hpp"
#include "engine/util.hpp"
#include "reasoning-budget.h"

namespace pyllama::engine {

// Called for every slot a task is given. Attaching or detaching a chain makes llama.cpp
// reserve its scheduler again at the next decode (2-5 ms a time with the demo model on 2
// cores), so a greedy stage stays on its sequence when the task ends, parked (no rows, so
// nothing picks), for the slot's next task to take with its own bias.
void Engine::attach_sampler(Slot & s) {
    const TaskParams & tp = s.task->params;
    // llama-server's rules: no backend sampling with a grammar or a reasoning budget
    // (common_sampler_init), nor when the logits before sampling are wanted (n_probs without
    // post_sampling_probs). pyllama's own: n > 1 completions each sample the shared prompt's
    // last row on the host (llama-server's children would read the parent's backend token).
    const bool eligible = s.chain && !s.grammar && !s.budget && !(tp.n_probs > 0 && !tp.post_sampling_probs) &&
                          tp.n_cmpl == 1;
    const bool want = eligible && tp.sampling.backend_sampling;
    // a plain greedy chain keeps only the argmax: one stage picks it in the graph instead of
    // the chain's every stage (engine/graph_greedy.hpp); with probabilities wanted the
    // chain's own stages must leave candidates. Without backend_sampling a greedy task
    // still picks there where the pick is the CPU node's (graph_greedy: the host's token)
    const bool plain = eligible && s.task->greedy && tp.n_probs == 0;
    const bool by_default = params_.graph_greedy && params_.n_parallel >= EngineParams::kGraphGreedySlots;
    const bool greedy = plain && (want || (by_default && greedy_on_cpu_ != 0));
    auto usable = [&](const Sampler & g) { return want || GraphGreedy::on_cpu(g); };
    if (s.graph_chain) {  // parked by the slot's last task
        if (greedy && usable(*s.graph_chain) && GraphGreedy::rebias(*s.graph_chain, s.task->bias)) {
            s.backend = true;
            return;
        }
        ctx_->set_sampler(s.id, nullptr);
        s.graph_chain.reset();  // after the context let go of it
    }
    if (!greedy && !want) return;
    std::optional<Sampler> g;
    if (greedy) {
        g = graph_greedy_->chain(s.task->bias);
        const bool attached = ctx_->set_sampler(s.id, g->get()) && GraphGreedy::attached(*g);
        if (attached) greedy_on_cpu_ = GraphGreedy::on_cpu(*g) ? 1 : 0;
        if (attached && usable(*g)) {
            s.graph_chain = std::move(g);
            s.backend = true;
            return;
        }
        if (!want) {  // the stage runs off the CPU: the host picks, as asked
            ctx_->set_sampler(s.id, nullptr);
            return;
        }
    }
    // a declined stage (a bias where ggml_argmax runs) is replaced here, before `g` is freed
    s.backend = ctx_->set_sampler(s.id, s.chain->get());
}

void Engine::detach_sampler(Slot & s) {
    if (!s.backend) return;
    s.backend = false;
    if (s.graph_chain) return;  // parked: see attach_sampler
    ctx_->set_sampler(s.id, nullptr);
}

// `forced` >= 0: take that token instead of sampling (synthetic draft acceptance); it
// advances the chain's history but not the grammar, as llama-server.
void Engine::sample_slot(Slot & s, int32_t row, llama_token forced) {
    const TaskParams & tp = s.task->params;
    if (tp.n_predict == 0) {
        finish(s, StopReason::Limit);
        return;
    }
    // backend sampling: the chain's backend stages ran in the graph; without raw logits
    // for this row (llama.cpp copies none when every output's sequence samples there)
    const Context::Sampled be = s.backend ? ctx_->sampled_ith(row) : Context::Sampled{};
    const float * logits = nullptr;  // raw logits, read when the host needs them
    auto raw = [&] {
        if (!logits) logits = ctx_->logits_ith(row);
        return logits;
    };
    const auto n_vocab = static_cast<int32_t>(cur_.size());
    llama_token_data_array arr{cur_.data(), cur_.size(), -1, false};
    auto fill = [&] {
        if (s.backend && be.n > 0) {
            // the candidates the backend stages left (common_sampler's set_logits)
            for (uint32_t i = 0; i < be.n; ++i) {
                cur_[i] = llama_token_data{be.ids[i], be.logits ? be.logits[i] : 0.0f, be.probs ? be.probs[i] : 0.0f};
            }
            arr = llama_token_data_array{cur_.data(), be.n, -1, false};
            return;
        }
        const float * l = raw();
        for (int32_t i = 0; i < n_vocab; ++i) cur_[static_cast<size_t>(i)] = llama_token_data{i, l[i], 0.0f};
        arr = llama_token_data_array{cur_.data(), cur_.size(), -1, false};
    };
    auto run_chain = [&]() -> llama_token {
        llama_sampler_apply(s.chain->get(), &arr);
        return arr.selected >= 0 && static_cast<size_t>(arr.selected) < arr.size ? arr.data[arr.selected].id : -1;
    };
    // llama-server's common_sampler_sample: the reasoning budget first (it leaves only the
    // forced token while forcing), the grammar only outside a thinking block when it is lazy
    llama_sampler * budget = s.budget ? s.budget->get() : nullptr;
    const auto budget_state = common_reasoning_budget_get_state(budget);
    const bool grammar_on = s.grammar && (!budget || !tp.sampling.grammar_lazy ||
                                          budget_state == REASONING_BUDGET_IDLE || budget_state == REASONING_BUDGET_DONE);
    llama_token tok = forced;
    uint64_t * where = nullptr;  // the counter this token adds to
    if (forced >= 0) {
        // nothing to sample; a backend slot's probabilities come from its candidates
        if (s.backend && tp.n_probs > 0) {
            fill();
            for (size_t i = 0; i < arr.size; ++i) {
                if (arr.data[i].id == tok) arr.selected = static_cast<int64_t>(i);
            }
        }
    } else if (s.backend && be.token >= 0) {
        // the chain picked it in the graph; the candidates serve post-sampling probabilities
        tok = be.token;
        where = &metrics_.n_sampled_backend;
        if (tp.n_probs > 0) {
            fill();
            for (size_t i = 0; i < arr.size; ++i) {
                if (arr.data[i].id == tok) arr.selected = static_cast<int64_t>(i);
            }
        }
    } else if (s.backend) {
        // the chain's backend prefix ran in the graph (its apply skips those stages now)
        fill();
        tok = run_chain();
        where = &metrics_.n_sampled_split;
    } else if (s.task->greedy && budget_state != REASONING_BUDGET_FORCING) {
        // the chain would keep only this token; skip filling and sorting 1e4-1e5 candidates
        tok = s.pre.ready ? s.pre.pick : biased_argmax(raw(), n_vocab, s.task->bias);
        where = &metrics_.n_sampled_host;
    } else if (s.task->top_k_at >= 0 && !budget &&
               (s.pre.ready ? s.pre.top_ok
                            : top_k_candidates(raw(), n_vocab, tp.sampling.top_k, s.task->bias, topk_scratch_, cur_.data()))) {
        // the top k straight from the logits, then the stages after top_k: what the chain
        // would do with the whole vocabulary's candidates, without building them
        llama_token_data * top = s.pre.ready ? s.pre.top.data() : cur_.data();
        arr = llama_token_data_array{top, static_cast<size_t>(tp.sampling.top_k), -1, true};
        llama_sampler * chain = s.chain->get();
        const int32_t n_stages = llama_sampler_chain_n(chain);
        for (int32_t i = s.task->top_k_at + 1; i < n_stages; ++i) llama_sampler_apply(llama_sampler_chain_get(chain, i), &arr);
        tok = arr.selected >= 0 && static_cast<size_t>(arr.selected) < arr.size ? arr.data[arr.selected].id : -1;
        where = &metrics_.n_sampled_host;
    } else {
        fill();
        if (budget) llama_sampler_apply(budget, &arr);
        tok = run_chain();
        where = &metrics_.n_sampled_host;
    }
    s.pre.ready = false;
    if (where) {
        std::lock_guard<std::mutex> lk(pub_mu_);
        ++*where;
    }
    if (forced < 0 && tok >= 0 && grammar_on) {
        // As llama-server: check the sampled token alone against the grammar (cheap); only
        // when it does not fit, constrain every candidate (expensive) and sample again.
        llama_token_data one{tok, 1.0f, 0.0f};
        llama_token_data_array single{&one, 1, -1, false};
        llama_sampler_apply(s.grammar->get(), &single);
        if (std::isinf(one.logit) && one.logit < 0.0f) {
            fill();
            if (budget) llama_sampler_apply(budget, &arr);
            llama_sampler_apply(s.grammar->get(), &arr);
            tok = run_chain();
        }
    }
    if (tok < 0) {
        fail_slot(s, "sampling", "the sampler chain selected no token");
        return;
    }
    if (budget) {
        llama_sampler_accept(budget, tok);
        // a lazy grammar skipped the block: replay the end tag that closed it, which may
        // hold its trigger (common_sampler_accept)
        if (s.grammar && !grammar_on && common_reasoning_budget_get_state(budget) == REASONING_BUDGET_DONE) {
            if (const llama_tokens * end = common_reasoning_budget_get_end_match(budget)) {
                for (llama_token t : *end) llama_sampler_accept(s.grammar->get(), t);
            }
        }
    }
    if (grammar_on && forced < 0) llama_sampler_accept(s.grammar->get(), tok);
    llama_sampler_accept(s.chain->get(), tok);
    s.n_decoded++;

    Event ev;
    ev.type = Event::Type::Token;
    ev.index = s.index;
    ev.token = tok;
    if (tp.n_probs > 0) {
        const auto n = static_cast<size_t>(tp.n_probs);
        if (s.backend || (tp.post_sampling_probs && forced < 0)) {
            // probabilities of the candidates the chain left (p is set by its final stage)
            std::vector<llama_token_data> c(arr.data, arr.data + arr.size);
            const size_t k = std::min(n, c.size());
            std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(),
                              [](const auto & a, const auto & b) { return a.p > b.p; });
            // a candidate the chain ruled out (p 0: the backend's stages mask, the CPU's
            // drop) is not listed, so both paths list the same ones, as llama-server
            for (size_t i = 0; i < k && c[i].p > 0.0f; ++i) ev.top.push_back({c[i].id, std::log(c[i].p)});
            const float p_tok = arr.selected >= 0 ? arr.data[arr.selected].p : 0.0f;
            ev.logprob = std::log(std::max(p_tok, 1e-30f));
        } else {
            logits = raw();
            const size_t k = std::min(n, static_cast<size_t>(n_vocab));
            float lse = 0.0f;
            const std::vector<llama_token_data> * top = &top_;
            if (s.pre.probs_ok) {  // Engine::prescan did it
                top = &s.pre.probs;
                lse = s.pre.lse;
            } else if (!raw_probs(logits, n_vocab, k, topk_scratch_, top_, lse)) {
                for (size_t i = 0; i < static_cast<size_t>(n_vocab); ++i) cur_[i] = llama_token_data{static_cast<llama_token>(i), logits[i], 0.0f};
                std::partial_sort(cur_.begin(), cur_.begin() + static_cast<std::ptrdiff_t>(k), cur_.end(),
                                  [](const auto & a, const auto & b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
                top_.assign(cur_.begin(), cur_.begin() + static_cast<std::ptrdiff_t>(k));
                lse = log_sum_exp(logits, n_vocab);
            }
            for (size_t i = 0; i < k; ++i) ev.top.push_back({(*top)[i].id, (*top)[i].logit - lse});
            s.pre.probs_ok = false;
            ev.logprob = logits[tok] - lse;
        }
    }
    if (llama_vocab_is_eog(model_->vocab(), tok) && !tp.sampling.ignore_eos) {
        if (tp.n_probs > 0) emit(s.task->id, std::move(ev), false);  // its probabilities, no text
        finish(s, StopReason::Eos);
        return;
    }
    const auto & keep = tp.preserved_tokens;
    const bool special = tp.special || (!keep.empty() && std::find(keep.begin(), keep.end(), tok) != keep.end());
    ev.text = s.text->push(model_->token_to_piece(tok, special));
    if (ev.text.find('\n') != std::string::npos) s.has_new_line = true;  // as llama-server: text sent
    stamp(ev, s, now_us());  // counts and times so far (timings_per_token)
    emit(s.task->id, std::move(ev), false);

    const double elapsed_ms = static_cast<double>(now_us() - s.t_prompt_done) / 1e3;
    if (s.text->stopped()) {
        finish(s, StopReason::Word);
    } else if (tp.n_predict > 0 && s.n_decoded >= tp.n_predict) {
        finish(s, StopReason::Limit);
    } else if (tp.t_max_predict_ms > 0 && elapsed_ms > static_cast<double>(tp.t_max_predict_ms)) {
        finish(s, StopReason::Timeout);
    } else if (static_cast<int32_t>(s.n_past) + 1 >= n_ctx_slot_) {  // as llama-server: room for this token
        if (params_.context_shift) {
            context_shift(s);
            if (s.task) s.sampled = tok;
        } else {
            s.truncated = true;  // as llama-server: a reply cut by the full context is truncated
            finish(s, StopReason::Context);
        }
    } else {
        s.sampled = tok;
    }
}

void Engine::finish_embedding(Slot & s) {
    Event ev;
    ev.type = Event::Type::Final;
    ev.done = true;
    ev.id_slot = s.id;
    ev.n_prompt = static_cast<int32_t>(s.prompt().size());
    ev.t_prompt_ms = static_cast<double>(s.t_prompt_done - s.t_start) / 1e3;
    const int32_t norm = s.task->params.embd_normalize;
    if (ctx_->pooling() == LLAMA_POOLING_TYPE_NONE) {
        const int32_t n_embd = llama_model_n_embd_out(model_->get());
        for (int32_t r = 0; r < s.chunk; ++r) {
            const float * row = ctx_->embeddings_ith(s.first_row + r);
            const size_t at = ev.embedding.size();
            ev.embedding.insert(ev.embedding.end(), row, row + n_embd);
            normalize(ev.embedding.data() + at, n_embd, norm);
        }
        ev.n_embd_rows = s.chunk;
    } else {
        const int32_t n = ctx_->n_embd_out();
        const float * v = ctx_->embeddings_seq(s.id);
        ev.embedding.assign(v, v + n);
        if (ctx_->pooling() != LLAMA_POOLING_TYPE_RANK) normalize(ev.embedding.data(), n, norm);
        ev.n_embd_rows = 1;
    }
    const uint64_t id = s.task->id;
    // embedding KV is not worth caching: clear it so the slot starts clean
    drop_kv(s, 0);
    release(s);
    {
        std::lock_guard<std::mutex> lk(pub_mu_);
        metrics_.n_tasks_done++;
    }
    emit(id, std::move(ev), true);
}

void Engine::finish(Slot & s, StopReason reason) {
    const uint64_t id = s.task->id;
    std::string tail = s.text->flush();
    if (!tail.empty()) {
        Event t;
        t.type = Event::Type::Token;
        t.index = s.index;
        t.text = std::move(tail);
        emit(id, std::move(t), false);
    }
    const int64_t t_end = now_us();
    Event ev;
    ev.type = Event::Type::Final;
    ev.index = s.index;
    ev.id_slot = s.id;
    ev.stop = reason;
    s.has_next_token = false;
    ev.stopping_word = s.text->stopping_word();
    stamp(ev, s, t_end);
    {
        std::lock_guard<std::mutex> lk(pub_mu_);
        metrics_.n_predicted_total += static_cast<uint64_t>(s.n_decoded);
        metrics_.t_predicted_ms_total += ev.t_predicted_ms;
        metrics_.n_tasks_done++;
        metrics_.n_tokens_max = std::max(metrics_.n_tokens_max, static_cast<int32_t>(s.n_past));
    }
    const bool last = --s.task->finals_left == 0;
    ev.done = last;
    release(s);
    emit(id, std::move(ev), last);
}

}  // namespace pyllama::engine
