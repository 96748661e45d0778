// The callers' side: tasks checked and admitted into the inbox (bounded: past n_parallel +
// max_queue of live load, OverloadedError), cancelled, and their events taken from the
// outbox; the published slot list and metrics. Runs on callers' threads, under in_mu_,
// out_mu_ and pub_mu_; never touches a slot, which only the loop thread owns.

#include "engine/engine.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/slot.hpp"
#include "engine/util.hpp"

namespace pyllama::engine {

// Every prompt token is a vocabulary id, except the placeholders of the prompt's media,
// which stand in order, inside the prompt, with text after the last one (its logits).
void Engine::check_media(const TaskParams & p, bool completion) const {
    if (!p.media.empty()) {
        if (!projector_) throw std::invalid_argument("multimodal data is not supported by this model (no --mmproj)");
        // embeddings of a prompt with media: a generative model's (llama-server's rows of
        // the prompt's last batch); a reranker takes none
        if (!completion && (p.kind != TaskKind::Embedding || !mixed_)) {
            throw std::invalid_argument("images and audio are for completions and a generative model's embeddings");
        }
    }
    size_t i = 0;
    for (const auto & m : p.media) {
        if (!m.chunk || m.n_tokens == 0 || m.start < i || m.start + m.n_tokens >= p.prompt.size()) {
            throw std::invalid_argument(m.start + m.n_tokens == p.prompt.size()
                                            ? "the prompt must end with text after its last image or audio"
                                            : "media chunks must lie in order inside the prompt");
        }
        for (; i < m.start; ++i) model_->check_token(p.prompt[i]);
        for (; i < m.start + m.n_tokens; ++i) {
            if (!Projector::is_placeholder(p.prompt[i])) throw std::invalid_argument("a media chunk's tokens must be its placeholders");
        }
    }
    for (; i < p.prompt.size(); ++i) model_->check_token(p.prompt[i]);
}

std::shared_ptr<Engine::TaskState> Engine::prepare(TaskParams p) {
    const bool completion = p.kind == TaskKind::Completion;
    if (p.prompt.empty()) throw std::invalid_argument("the prompt is empty");
    check_media(p, completion);
    if (!completion && !embeddings_) throw std::invalid_argument("this engine was not started with embeddings on");
    if (completion && embeddings_ && !mixed_) {
        // a pooled embedding model without a KV cache (BERT ...): llama-server's words
        throw std::runtime_error("the current context does not support logits computation. skipping");
    }
    if (p.n_cmpl < 1 || p.n_cmpl > params_.n_parallel) {
        throw std::invalid_argument("n must be between 1 and the number of slots (" + std::to_string(params_.n_parallel) + ")");
    }
    if (!completion && p.n_cmpl != 1) throw std::invalid_argument("n > 1 is for completions");
    if (p.n_predict < -1) throw std::invalid_argument("n_predict must be >= -1");
    if (p.n_probs < 0 || p.n_probs > 100) throw std::invalid_argument("n_probs must be between 0 and 100");
    if (p.id_slot < -1 || p.id_slot >= params_.n_parallel) throw std::invalid_argument("id_slot out of range");
    if (p.t_max_predict_ms < 0) throw std::invalid_argument("t_max_predict_ms must be >= 0");
    if (p.spec_p_min > 1.0f) throw std::invalid_argument("speculative.p_min must be at most 1");
    if (!p.lora_scales.empty() && p.lora_scales.size() != lora_.size()) {
        throw std::invalid_argument("lora scales: expected " + std::to_string(lora_.size()) + " values");
    }
    const auto n_prompt = static_cast<int32_t>(p.prompt.size());
    if (completion && n_prompt >= n_ctx_slot_) {
        throw ContextSizeError("the request exceeds the available context size, try increasing it", n_prompt, n_ctx_slot_);
    }
    if (!completion && (n_prompt > static_cast<int32_t>(ctx_->n_ubatch()) || n_prompt > n_ctx_slot_)) {
        const int32_t limit = std::min<int32_t>(static_cast<int32_t>(ctx_->n_ubatch()), n_ctx_slot_);
        // llama-server's words for an input that cannot be split across ubatches
        throw ContextSizeError("input (" + std::to_string(n_prompt) +
                                   " tokens) is too large to process. increase the physical batch size "
                                   "(current batch size: " + std::to_string(limit) + ")",
                               n_prompt, limit);
    }
    auto t = std::make_shared<TaskState>();
    t->params = std::move(p);
    t->finals_left = t->params.n_cmpl;
    if (t->params.lora_scales.empty()) {
        std::lock_guard<std::mutex> lk(in_mu_);
        t->lora = lora_defaults_;
    } else {
        t->lora = t->params.lora_scales;
    }
    if (completion) {
        // Built here, on the caller's thread: an invalid grammar fails the submit itself.
        for (int32_t i = 0; i < t->params.n_cmpl; ++i) {
            SamplingParams sp = t->params.sampling;
            if (i > 0 && sp.seed != LLAMA_DEFAULT_SEED) sp.seed += static_cast<uint32_t>(i);
            t->chains.push_back(build_sampler_chain(*model_, sp, n_ctx_slot_, false));
            t->grammars.push_back(build_grammar_sampler(*model_, sp));
            t->budgets.push_back(build_reasoning_budget(*model_, t->params.reasoning, sp.grammar_lazy));
        }
        const auto & tp = t->params;
        if (tp.reasoning.control && !t->budgets.front()) {
            throw std::invalid_argument("reasoning_control needs the template's thinking tags");
        }
        t->greedy = is_plain_greedy(tp.sampling) && !(tp.n_probs > 0 && tp.post_sampling_probs);
        t->bias = sparse_logit_bias(*model_, tp.sampling);
        t->top_k_at = fused_top_k_stage(tp.sampling);
        if (t->top_k_at >= 0) {
            // the stage build_sampler_chain put there, or no shortcut
            llama_sampler * st = llama_sampler_chain_get(t->chains.front().get(), t->top_k_at);
            if (!st || std::string(llama_sampler_name(st)) != "top-k") t->top_k_at = -1;
        }
    }
    return t;
}

uint64_t Engine::submit(TaskParams p) {
    std::vector<TaskParams> one;
    one.push_back(std::move(p));
    return submit_many(std::move(one)).front();
}

// All or nothing, under one lock: the loop thread admits them in the same turn, so
// their prompts share a batch (as llama-server posts a multi-prompt request's tasks).
std::vector<uint64_t> Engine::submit_many(std::vector<TaskParams> ps) {
    if (ps.empty()) throw std::invalid_argument("no tasks");
    std::vector<std::shared_ptr<TaskState>> tasks;
    // max_queue bounds requests: a completion counts its n_cmpl sequences, an embedding or
    // rerank request one whatever its inputs (a batch of 256 texts is one request, which
    // llama-server takes as well; its inputs still wait for slots one by one)
    size_t n_inputs = 0;
    for (auto & p : ps) {
        tasks.push_back(prepare(std::move(p)));
        if (tasks.back()->params.kind != TaskKind::Completion) ++n_inputs;
    }
    auto weight = [&](const TaskState & t) {
        return t.params.kind == TaskKind::Completion ? static_cast<double>(t.params.n_cmpl) : 1.0 / static_cast<double>(n_inputs);
    };
    double load = 0;
    for (auto & t : tasks) load += weight(*t);
    std::vector<uint64_t> ids;
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        if (stopping_) throw std::runtime_error("the engine is stopped");
        if (live_load_ + load > params_.max_queue + params_.n_parallel + 1e-6) {
            throw OverloadedError("the server is busy: " + std::to_string(live_.size()) + " requests in flight");
        }
        {
            std::lock_guard<std::mutex> lk2(out_mu_);
            for (auto & t : tasks) {
                t->id = next_id_++;
                out_[t->id];  // wait() knows the task from now on
            }
        }
        for (auto & t : tasks) {
            live_[t->id] = weight(*t);
            live_load_ += live_[t->id];
            n_waiting_++;
            ids.push_back(t->id);
            inbox_.push_back(std::move(t));
        }
    }
    in_cv_.notify_one();
    return ids;
}

void Engine::forget_live(uint64_t id) {
    std::lock_guard<std::mutex> lk(in_mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    live_load_ -= it->second;
    live_.erase(it);
    if (live_.empty()) live_load_ = 0;  // no drift from the shares' rounding
}

void Engine::cancel(uint64_t id) {
    forget_live(id);  // its capacity is free for the next submit right away
    {
        std::lock_guard<std::mutex> lk(out_mu_);
        out_.erase(id);  // its events are dropped from now on (emit finds no entry)
        ready_.erase(std::remove(ready_.begin(), ready_.end(), id), ready_.end());
    }
    out_cv_.notify_all();
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        cancels_.push_back(id);
    }
    in_cv_.notify_one();
}

std::vector<std::pair<uint64_t, std::vector<Event>>> Engine::take_ready() {
    std::vector<std::pair<uint64_t, std::vector<Event>>> out;
    std::lock_guard<std::mutex> lk(out_mu_);
    notified_ = false;  // the reader emptied the socket before calling: the next event rings
    out.reserve(ready_.size());
    for (uint64_t id : ready_) {
        auto it = out_.find(id);
        if (it == out_.end() || it->second.empty()) continue;
        const bool done = it->second.back().done;
        out.emplace_back(id, std::move(it->second));
        if (done) out_.erase(it);
        else it->second.clear();
    }
    ready_.clear();
    return out;
}

void Engine::set_notify_socket(int64_t handle) {
    std::lock_guard<std::mutex> lk(out_mu_);
    wake_.attach(handle);
    notified_ = false;
    // events that arrived before the socket: ring at once, so the new reader takes them
    if (!ready_.empty() && wake_.attached()) {
        notified_ = true;
        wake_.ring();
    }
}

std::vector<Event> Engine::wait(uint64_t id, int timeout_ms) {
    std::unique_lock<std::mutex> lk(out_mu_);
    auto has = [&] {
        auto it = out_.find(id);
        return it == out_.end() || !it->second.empty();
    };
    if (timeout_ms < 0) out_cv_.wait(lk, has);
    else out_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), has);
    std::vector<Event> evs;
    auto it = out_.find(id);
    if (it == out_.end()) return evs;
    evs = std::move(it->second);
    it->second.clear();
    if (!evs.empty() && evs.back().done) out_.erase(it);
    ready_.erase(std::remove(ready_.begin(), ready_.end(), id), ready_.end());
    return evs;
}

std::vector<SlotInfo> Engine::slots() const {
    std::lock_guard<std::mutex> lk(pub_mu_);
    return pub_slots_;
}

Metrics Engine::metrics() const {
    std::lock_guard<std::mutex> lk(pub_mu_);
    Metrics m = metrics_;
    m.n_deferred = n_waiting_.load();
    m.n_graph_greedy_rows = graph_greedy_->rows_picked();
    return m;
}

}  // namespace pyllama::engine
