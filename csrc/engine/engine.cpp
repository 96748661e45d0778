#include "engine/engine.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "core/log.hpp"
#include "engine/slot.hpp"

namespace pyllama::engine {

const char * stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::None: return "none";
        case StopReason::Eos: return "eos";
        case StopReason::Limit: return "limit";
        case StopReason::Word: return "word";
        case StopReason::Context: return "context";
        case StopReason::Timeout: return "timeout";
        case StopReason::Cancelled: return "cancelled";
    }
    return "none";
}

namespace {

int64_t now_us() { return llama_time_us(); }

size_t common_prefix(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    size_t n = 0;
    const size_t m = std::min(a.size(), b.size());
    while (n < m && a[n] == b[n]) ++n;
    return n;
}

// As llama-server's common_embd_normalize.
void normalize(float * v, int32_t n, int32_t norm) {
    if (norm < 0) return;
    double sum = 0.0;
    if (norm == 0) {  // max absolute, scaled to int16 range
        for (int32_t i = 0; i < n; ++i) sum = std::max(sum, static_cast<double>(std::fabs(v[i])));
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
        sum = std::sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; ++i) sum += std::pow(std::fabs(v[i]), norm);
        sum = std::pow(sum, 1.0 / norm);
    }
    const float k = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; ++i) v[i] *= k;
}

// argmax of logits + bias; the first of equal maxima. -1 when every token is -inf.
llama_token greedy_pick(const float * logits, int32_t n_vocab, const std::vector<float> & bias) {
    llama_token best = -1;
    float best_v = -std::numeric_limits<float>::infinity();
    if (bias.empty()) {
        for (int32_t i = 0; i < n_vocab; ++i) {
            if (logits[i] > best_v) best_v = logits[i], best = i;
        }
    } else {
        for (int32_t i = 0; i < n_vocab; ++i) {
            const float v = logits[i] + bias[static_cast<size_t>(i)];
            if (v > best_v) best_v = v, best = i;
        }
    }
    return best;
}

}  // namespace

Engine::Engine(std::shared_ptr<Model> model, const EngineParams & p) : model_(std::move(model)), params_(p) {
    if (p.n_parallel < 1) throw std::invalid_argument("n_parallel must be >= 1");
    if (p.max_queue < 0) throw std::invalid_argument("max_queue must be >= 0");
    if (p.n_keep < 0) throw std::invalid_argument("n_keep must be >= 0");
    ContextParams cp = p.ctx;
    cp.n_seq_max = static_cast<uint32_t>(p.n_parallel);
    embeddings_ = cp.embeddings;
    // Pooled embeddings need each sequence whole in one ubatch. Separate KV streams make
    // llama.cpp split a batch into equal-length ubatches, cutting sequences apart, so an
    // embedding engine always uses the unified cache (its KV is never reused anyway).
    if (embeddings_) cp.kv_unified = true;
    ctx_ = std::make_unique<Context>(model_, cp);
    n_ctx_slot_ = static_cast<int32_t>(llama_n_ctx_seq(ctx_->get()));
    if (p.cache_ram_mib != 0 && !embeddings_) {
        const size_t bytes = p.cache_ram_mib < 0 ? 0 : static_cast<size_t>(p.cache_ram_mib) << 20;
        prompt_cache_ = std::make_unique<PromptCache>(bytes, ctx_->n_ctx());
        if (p.cache_idle_slots) trace("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__");
    }
    if (!p.draft && !p.spec_synth_probs.empty()) {
        throw std::invalid_argument("synthetic acceptance needs a draft model");
    }
    if (p.draft) {
        if (embeddings_) throw std::invalid_argument("a draft model is for completions, not embeddings");
        if (p.spec_n_max < 0 || p.spec_n_min < 0 || p.spec_p_min < 0.0f || p.spec_p_min > 1.0f) {
            throw std::invalid_argument("speculative: n_max and n_min must be >= 0, p_min in [0, 1]");
        }
        if (llama_vocab_type(p.draft->vocab()) != llama_vocab_type(model_->vocab()) ||
            p.draft->n_vocab() != model_->n_vocab()) {
            throw std::invalid_argument("the draft model's vocabulary does not match the model's");
        }
        if (!p.spec_synth_probs.empty() && p.spec_synth_probs.size() != static_cast<size_t>(p.spec_n_max)) {
            throw std::invalid_argument("speculative: one synthetic acceptance rate per drafted token");
        }
        ContextParams dp = cp;
        dctx_ = std::make_unique<Context>(p.draft, dp);
        dbatch_ = std::make_unique<Batch>(static_cast<int32_t>(dctx_->n_batch()), 1);
    }
    for (const auto & [path, scale] : p.lora) {
        lora_.push_back(std::make_shared<LoraAdapter>(model_, path));
        lora_paths_.push_back(path);
        lora_defaults_.push_back(scale);
    }
    lora_scales_now_.assign(lora_.size(), 0.0f);
    if (!lora_.empty()) apply_lora(lora_defaults_);
    for (int32_t i = 0; i < p.n_parallel; ++i) {
        auto s = std::make_unique<Slot>();
        s->id = i;
        slots_.push_back(std::move(s));
    }
    batch_ = std::make_unique<Batch>(static_cast<int32_t>(ctx_->n_batch()), 1);
    cur_.resize(static_cast<size_t>(model_->n_vocab()));
    if (::pipe(pipe_) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    for (int fd : pipe_) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    publish();
    thread_ = std::thread(&Engine::loop, this);
}

Engine::~Engine() {
    stop();
    for (int fd : pipe_) {
        if (fd >= 0) ::close(fd);
    }
}

void Engine::stop() {
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        stopping_ = true;
    }
    in_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------- callers' side

std::shared_ptr<Engine::TaskState> Engine::prepare(TaskParams p) {
    const bool completion = p.kind == TaskKind::Completion;
    if (p.prompt.empty()) throw std::invalid_argument("the prompt is empty");
    for (llama_token t : p.prompt) model_->check_token(t);
    if (completion == embeddings_) {
        throw std::invalid_argument(embeddings_ ? "this engine serves embeddings only (started with embeddings on)"
                                                : "this engine was not started with embeddings on");
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
        throw ContextSizeError("input is too large to process; increase the physical batch size", n_prompt,
                               std::min<int32_t>(static_cast<int32_t>(ctx_->n_ubatch()), n_ctx_slot_));
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
        }
        const auto & tp = t->params;
        t->greedy = is_plain_greedy(tp.sampling) && !(tp.n_probs > 0 && tp.post_sampling_probs);
        if (t->greedy) t->bias = dense_logit_bias(*model_, tp.sampling);
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
    int32_t load = 0;
    for (auto & p : ps) {
        tasks.push_back(prepare(std::move(p)));
        load += tasks.back()->params.n_cmpl;
    }
    std::vector<uint64_t> ids;
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        if (stopping_) throw std::runtime_error("the engine is stopped");
        if (live_load_ + load > params_.max_queue + params_.n_parallel) {
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
            live_[t->id] = t->params.n_cmpl;
            live_load_ += t->params.n_cmpl;
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
    char buf[64];
    while (::read(pipe_[0], buf, sizeof(buf)) > 0) {
    }
    notified_ = false;
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
    return m;
}

std::vector<float> Engine::lora_scales() {
    std::lock_guard<std::mutex> lk(in_mu_);
    return lora_defaults_;
}

template <typename R>
R Engine::run_on_loop(std::function<R()> fn) {
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto fut = task->get_future();
    {
        std::lock_guard<std::mutex> lk(in_mu_);
        if (stopping_) throw std::runtime_error("the engine is stopped");
        commands_.emplace_back([task] { (*task)(); });
    }
    in_cv_.notify_one();
    return fut.get();
}

size_t Engine::save_slot(int32_t id, const std::string & path) {
    return run_on_loop<size_t>([this, id, path]() -> size_t {
        if (id < 0 || id >= params_.n_parallel) throw std::out_of_range("slot id out of range");
        Slot & s = *slots_[static_cast<size_t>(id)];
        if (s.state != Slot::State::Idle) throw std::runtime_error("slot " + std::to_string(id) + " is busy");
        ctx_->seq_state_save(path, id, s.cache);
        return s.cache.size();
    });
}

size_t Engine::restore_slot(int32_t id, const std::string & path) {
    return run_on_loop<size_t>([this, id, path]() -> size_t {
        if (id < 0 || id >= params_.n_parallel) throw std::out_of_range("slot id out of range");
        Slot & s = *slots_[static_cast<size_t>(id)];
        if (s.state != Slot::State::Idle) throw std::runtime_error("slot " + std::to_string(id) + " is busy");
        drop_kv(s, 0);
        s.cache = ctx_->seq_state_load(path, id, static_cast<size_t>(n_ctx_slot_));
        publish();  // callers see the new state as soon as the call returns
        return s.cache.size();
    });
}

void Engine::erase_slot(int32_t id) {
    run_on_loop<int>([this, id] {
        if (id < 0 || id >= params_.n_parallel) throw std::out_of_range("slot id out of range");
        Slot & s = *slots_[static_cast<size_t>(id)];
        if (s.state != Slot::State::Idle) throw std::runtime_error("slot " + std::to_string(id) + " is busy");
        drop_kv(s, 0);
        publish();
        return 0;
    });
}

void Engine::set_lora_scales(const std::vector<float> & scales) {
    if (scales.size() != lora_.size()) {
        throw std::invalid_argument("lora scales: expected " + std::to_string(lora_.size()) + " values");
    }
    // Only the defaults change: running tasks keep the scales they started with, and the
    // loop switches the context's adapters when it admits a task that needs other scales.
    std::lock_guard<std::mutex> lk(in_mu_);
    lora_defaults_ = scales;
}

void Engine::apply_lora(const std::vector<float> & scales) {
    std::vector<std::pair<std::shared_ptr<LoraAdapter>, float>> set;
    for (size_t i = 0; i < lora_.size(); ++i) {
        if (scales[i] != 0.0f) set.emplace_back(lora_[i], scales[i]);
    }
    ctx_->set_lora(set);
    if (scales != lora_scales_now_) {
        // cached KV was computed with other adapter weights: it no longer matches
        for (auto & sl : slots_) {
            if (sl->state != Slot::State::Idle) continue;
            drop_kv(*sl, 0);
        }
    }
    lora_scales_now_ = scales;
}

// ------------------------------------------------------------------- loop thread

void Engine::loop() {
    while (true) {
        bool busy = !queue_.empty();
        for (const auto & s : slots_) busy = busy || s->state != Slot::State::Idle;
        std::vector<uint64_t> cancels;
        std::deque<std::function<void()>> commands;
        {
            std::unique_lock<std::mutex> lk(in_mu_);
            if (!busy) {
                in_cv_.wait(lk, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || !commands_.empty(); });
            }
            if (stopping_) break;
            while (!inbox_.empty()) {
                queue_.push_back(std::move(inbox_.front()));
                inbox_.pop_front();
            }
            cancels.swap(cancels_);
            commands.swap(commands_);
        }
        for (auto & c : commands) c();
        for (uint64_t id : cancels) {
            auto qit = std::find_if(queue_.begin(), queue_.end(), [id](const auto & t) { return t->id == id; });
            if (qit != queue_.end()) {
                queue_.erase(qit);
                n_waiting_--;
            }
            for (auto & s : slots_) {
                if (s->task && s->task->id == id) release(*s);
            }
        }
        admit();
        step();
        publish();
        notify();
    }
    // shutdown: whatever is queued or running ends with an error event
    for (auto & s : slots_) {
        if (s->task) fail_slot(*s, "unavailable", "the engine is shutting down");
    }
    for (auto & t : queue_) {
        Event ev;
        ev.type = Event::Type::Error;
        ev.error_kind = "unavailable";
        ev.message = "the engine is shutting down";
        ev.done = true;
        emit(t->id, std::move(ev), true);
    }
    queue_.clear();
    notify();
    std::lock_guard<std::mutex> lk(in_mu_);
    for (auto & c : commands_) c();  // their futures complete (with the "stopped" state they observe)
    commands_.clear();
}

void Engine::drop_kv(Slot & s, size_t keep) {
    ctx_->seq_rm(s.id, static_cast<llama_pos>(keep), -1);
    if (s.cache.size() > keep) s.cache.resize(keep);
    s.d_past = std::min(s.d_past, keep);
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
            if (completion) {
                s.chain.emplace(std::move(task->chains[index]));
                if (task->grammars[index]) s.grammar.emplace(std::move(*task->grammars[index]));
            }
            s.text.emplace(task->params.stop);
            s.n_decoded = 0;
            s.n_draft = s.n_draft_accepted = 0;
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
        if (cache && task->params.n_cache_reuse > 0 && ctx_->can_shift()) {
            lcp = reuse_chunks(*primary, prompt, lcp, static_cast<size_t>(task->params.n_cache_reuse));
        }
        lcp = std::min(lcp, prompt.size() - 1);  // re-evaluate at least one token for its logits
        drop_kv(*primary, lcp);
        primary->n_past = lcp;
        primary->n_cached = static_cast<int32_t>(lcp);
        primary->state = Slot::State::Prompt;
        primary->parent = nullptr;
        assign(*primary);
        {
            std::lock_guard<std::mutex> lk(pub_mu_);
            metrics_.n_prompt_cached_total += lcp;
        }
        emit_progress(*primary);  // before any prompt token is evaluated
        while (index < need) {
            idle.erase(std::remove_if(idle.begin(), idle.end(), [](Slot * s) { return s->state != Slot::State::Idle; }),
                       idle.end());
            by_span(idle);
            Slot * s = idle.front();
            drop_kv(*s, 0);
            s->n_past = 0;
            s->n_cached = 0;
            s->state = Slot::State::Waiting;
            s->parent = primary;
            assign(*s);
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

bool Engine::step() {
    if (dctx_) draft_all();
    batch_->clear();
    const auto n_batch = static_cast<int32_t>(ctx_->n_batch());
    int32_t busy = 0;
    for (auto & s : slots_) {
        s->i_batch = -1;
        s->chunk = 0;
        s->fed = false;
    }
    // 1. one sampled token per generating slot: decoding never waits behind prompts
    //    (with its draft tokens, if any, each with logits for verification)
    for (auto & s : slots_) {
        if (s->state != Slot::State::Generating) continue;
        batch_->add(s->sampled, static_cast<llama_pos>(s->n_past), {s->id}, true);
        s->i_batch = batch_->size() - 1;
        s->fed = true;
        const auto room = static_cast<size_t>(std::max(0, n_batch - batch_->size()));
        if (s->draft.size() > room) s->draft.resize(room);
        for (size_t i = 0; i < s->draft.size(); ++i) {
            batch_->add(s->draft[i], static_cast<llama_pos>(s->n_past + 1 + i), {s->id}, true);
        }
        ++busy;
    }
    // 2. prompt chunks in arrival order, as much as the batch holds
    std::vector<Slot *> prompting;
    for (auto & s : slots_) {
        if (s->state == Slot::State::Prompt) prompting.push_back(s.get());
    }
    std::sort(prompting.begin(), prompting.end(), [](Slot * a, Slot * b) { return a->t_start < b->t_start; });
    for (Slot * s : prompting) {
        const auto & prompt = s->prompt();
        const auto remaining = static_cast<int32_t>(prompt.size() - s->n_past);
        const int32_t room = n_batch - batch_->size();
        const bool completion = s->task->params.kind == TaskKind::Completion;
        if (!completion && remaining > room) continue;  // an embedding input goes in whole
        const int32_t chunk = std::min(remaining, room);
        if (chunk <= 0) continue;
        s->first_row = batch_->size();
        for (int32_t k = 0; k < chunk; ++k) {
            const size_t pos = s->n_past + static_cast<size_t>(k);
            const bool last = pos + 1 == prompt.size();
            batch_->add(prompt[pos], static_cast<llama_pos>(pos), {s->id}, completion ? last : true);
        }
        s->chunk = chunk;
        if (s->n_past + static_cast<size_t>(chunk) == prompt.size()) s->i_batch = batch_->size() - 1;
        ++busy;
    }
    if (batch_->size() == 0) return false;

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
    }
    // 3. bookkeeping and sampling, in batch order
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
            // n > 1: the others copy the prompt's KV and sample from the same logits
            for (auto & c : slots_) {
                if (c->state != Slot::State::Waiting || c->parent != s.get()) continue;
                ctx_->seq_cp(s->id, c->id, -1, -1);
                c->cache = s->cache;
                c->n_past = s->n_past;
                c->n_cached = s->n_cached;
                c->t_prompt_done = s->t_prompt_done;
                c->parent = nullptr;
                c->state = Slot::State::Generating;
                sample_slot(*c, s->i_batch);
            }
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

// `forced` >= 0: take that token instead of sampling (synthetic draft acceptance); it
// advances the chain's history but not the grammar, as llama-server.
void Engine::sample_slot(Slot & s, int32_t row, llama_token forced) {
    const TaskParams & tp = s.task->params;
    if (tp.n_predict == 0) {
        finish(s, StopReason::Limit);
        return;
    }
    const float * logits = ctx_->logits_ith(row);
    const auto n_vocab = static_cast<int32_t>(cur_.size());
    llama_token_data_array arr{cur_.data(), cur_.size(), -1, false};
    auto fill = [&] {
        for (int32_t i = 0; i < n_vocab; ++i) cur_[static_cast<size_t>(i)] = llama_token_data{i, logits[i], 0.0f};
        arr = llama_token_data_array{cur_.data(), cur_.size(), -1, false};
    };
    auto run_chain = [&]() -> llama_token {
        llama_sampler_apply(s.chain->get(), &arr);
        return arr.selected >= 0 && static_cast<size_t>(arr.selected) < arr.size ? arr.data[arr.selected].id : -1;
    };
    llama_token tok = forced;
    if (forced >= 0) {
        // nothing to sample
    } else if (s.task->greedy) {
        // the chain would keep only this token; skip filling and sorting 1e4-1e5 candidates
        tok = greedy_pick(logits, n_vocab, s.task->bias);
    } else {
        fill();
        tok = run_chain();
    }
    if (forced < 0 && tok >= 0 && s.grammar) {
        // As llama-server: check the sampled token alone against the grammar (cheap); only
        // when it does not fit, constrain every candidate (expensive) and sample again.
        llama_token_data one{tok, 1.0f, 0.0f};
        llama_token_data_array single{&one, 1, -1, false};
        llama_sampler_apply(s.grammar->get(), &single);
        if (std::isinf(one.logit) && one.logit < 0.0f) {
            fill();
            llama_sampler_apply(s.grammar->get(), &arr);
            tok = run_chain();
        }
    }
    if (tok < 0) {
        fail_slot(s, "sampling", "the sampler chain selected no token");
        return;
    }
    if (s.grammar && forced < 0) llama_sampler_accept(s.grammar->get(), tok);
    llama_sampler_accept(s.chain->get(), tok);
    s.n_decoded++;

    Event ev;
    ev.type = Event::Type::Token;
    ev.index = s.index;
    ev.token = tok;
    if (tp.n_probs > 0) {
        const auto n = static_cast<size_t>(tp.n_probs);
        if (tp.post_sampling_probs && forced < 0) {
            // probabilities of the candidates the chain left (p is set by its final stage)
            std::vector<llama_token_data> c(arr.data, arr.data + arr.size);
            const size_t k = std::min(n, c.size());
            std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(),
                              [](const auto & a, const auto & b) { return a.p > b.p; });
            for (size_t i = 0; i < k; ++i) ev.top.push_back({c[i].id, std::log(std::max(c[i].p, 1e-30f))});
            ev.logprob = std::log(std::max(arr.data[arr.selected].p, 1e-30f));
        } else {
            float mx = logits[0];
            for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
            double sum = 0.0;
            for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
            const float lse = mx + static_cast<float>(std::log(sum));
            std::vector<llama_token> idx(static_cast<size_t>(n_vocab));
            std::iota(idx.begin(), idx.end(), 0);
            const size_t k = std::min(n, idx.size());
            std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                              [logits](llama_token a, llama_token b) { return logits[a] > logits[b]; });
            for (size_t i = 0; i < k; ++i) ev.top.push_back({idx[i], logits[idx[i]] - lse});
            ev.logprob = logits[tok] - lse;
        }
    }
    if (llama_vocab_is_eog(model_->vocab(), tok) && !tp.sampling.ignore_eos) {
        if (tp.n_probs > 0) emit(s.task->id, std::move(ev), false);  // its probabilities, no text
        finish(s, StopReason::Eos);
        return;
    }
    const auto & keep = tp.preserved_tokens;
    const bool special = !keep.empty() && std::find(keep.begin(), keep.end(), tok) != keep.end();
    ev.text = s.text->push(model_->token_to_piece(tok, special));
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
            finish(s, StopReason::Context);
        }
    } else {
        s.sampled = tok;
    }
}

void Engine::context_shift(Slot & s) {
    const auto n_past = static_cast<int32_t>(s.n_past);
    const int32_t n_keep = std::min(params_.n_keep, n_past);
    const int32_t n_discard = (n_past - n_keep) / 2;
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

void Engine::finish_embedding(Slot & s) {
    Event ev;
    ev.type = Event::Type::Final;
    ev.done = true;
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
    ev.stop = reason;
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
    s.state = Slot::State::Idle;
    s.task.reset();
    s.chain.reset();
    s.grammar.reset();
    s.text.reset();
    s.parent = nullptr;
    s.i_batch = -1;
    s.chunk = 0;
    s.fed = false;
    s.t_last_used = now_us();
}

void Engine::stamp(Event & ev, const Slot & s, int64_t now) {
    ev.n_prompt = static_cast<int32_t>(s.prompt().size());
    ev.n_cached = s.n_cached;
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
            it->second.push_back(std::move(ev));
            unnotified_ = true;
        }
    }
    if (last) forget_live(id);
}

// One wake-up per loop turn, not per event: on a machine with as many cores as ggml
// threads, every wake-up of a consumer preempts a ggml thread while its partners spin.
void Engine::notify() {
    {
        std::lock_guard<std::mutex> lk(out_mu_);
        if (!unnotified_) return;
        unnotified_ = false;
        if (!notified_) {
            notified_ = true;
            const char one = 1;
            [[maybe_unused]] ssize_t w = ::write(pipe_[1], &one, 1);
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
                                s->n_decoded, static_cast<int32_t>(s->cache.size())});
        used += s->cache.size();
        processing += s->state != Slot::State::Idle ? 1 : 0;
    }
    std::lock_guard<std::mutex> lk(pub_mu_);
    pub_slots_ = std::move(info);
    metrics_.n_processing = processing;
    metrics_.kv_usage = static_cast<double>(used) / static_cast<double>(std::max<uint32_t>(1, ctx_->n_ctx()));
}

}  // namespace pyllama::engine
