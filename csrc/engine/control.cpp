// Work a caller hands to the loop thread and waits for: saving, restoring and erasing a
// slot's KV state, and LoRA scales (applied only when no slot is busy).

#include "engine/engine.hpp"

#include <cstdint>
#include <future>
#include <stdexcept>

#include "engine/slot.hpp"
#include "core/log.hpp"
#include "engine/slot_tokens.hpp"
#include "reasoning-budget.h"
#include "engine/util.hpp"

namespace pyllama::engine {

std::vector<float> Engine::lora_scales() {
    std::lock_guard<std::mutex> lk(in_mu_);
    return lora_defaults_;
}

size_t Engine::save_slot(int32_t id, const std::string & path) {
    return run_on_loop<size_t>([this, id, path]() -> size_t {
        if (id < 0 || id >= params_.n_parallel) throw std::out_of_range("slot id out of range");
        Slot & s = *slots_[static_cast<size_t>(id)];
        if (s.state != Slot::State::Idle) throw std::runtime_error("slot " + std::to_string(id) + " is busy");
        ctx_->seq_state_save(path, id, pack_slot_tokens(s.cache, s.media_cached));
        return s.cache.size();
    });
}

size_t Engine::restore_slot(int32_t id, const std::string & path) {
    return run_on_loop<size_t>([this, id, path]() -> size_t {
        if (id < 0 || id >= params_.n_parallel) throw std::out_of_range("slot id out of range");
        Slot & s = *slots_[static_cast<size_t>(id)];
        if (s.state != Slot::State::Idle) throw std::runtime_error("slot " + std::to_string(id) + " is busy");
        drop_kv(s, 0);
        SlotTokens got;
        try {
            // the packed list may outgrow the slot (media bytes): its tokens are checked below
            got = unpack_slot_tokens(ctx_->seq_state_load(path, id, SIZE_MAX), projector_ != nullptr);
            if (got.tokens.size() > static_cast<size_t>(n_ctx_slot_)) {
                throw LlamaError("Restored prompt does not fit in the slot context");
            }
        } catch (...) {
            ctx_->seq_rm(id, -1, -1);  // what was read into the sequence goes with the failure
            throw;
        }
        s.cache = std::move(got.tokens);
        s.media_cached = std::move(got.media);
        for (const auto & m : s.media_cached) s.pos_delta += m.n_pos - static_cast<llama_pos>(m.n_tokens);
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

std::pair<bool, std::string> Engine::control(const std::string & cmpl_id, const std::string & action) {
    using Result = std::pair<bool, std::string>;
    if (action != "reasoning_end") return {false, "unknown control action"};
    return run_on_loop<Result>([this, cmpl_id]() -> Result {
        std::vector<Slot *> running;  // n > 1: every completion of the task
        for (auto & sp : slots_) {
            if (sp->state != Slot::State::Idle && sp->task && !cmpl_id.empty() && sp->task->params.cmpl_id == cmpl_id) {
                running.push_back(sp.get());
            }
        }
        if (running.empty()) return {false, "no active completion for this id"};
        if (!running.front()->task->params.reasoning.control) {
            return {false, "reasoning control not enabled for this completion"};
        }
        // as llama-server: acts on the live slot mid generation; a block that is not
        // counting (not started yet, or ended) is left as it is
        for (Slot * s : running) {
            if (s->budget) common_reasoning_budget_force(s->budget->get());
        }
        return {true, ""};
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

}  // namespace pyllama::engine
