// Batch: an owned llama_batch with bounds-checked appends.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama.h"

namespace pyllama {

class Batch {
public:
    Batch(int32_t capacity, int32_t n_seq_max) : cap_(capacity), n_seq_max_(n_seq_max) {
        if (capacity <= 0 || n_seq_max <= 0) {
            throw std::invalid_argument("Batch capacity and n_seq_max must be positive");
        }
        b_ = llama_batch_init(capacity, 0, n_seq_max);
    }
    ~Batch() { llama_batch_free(b_); }
    Batch(const Batch &) = delete;
    Batch & operator=(const Batch &) = delete;

    void add(llama_token token, llama_pos pos, const std::vector<llama_seq_id> & seq_ids, bool logits) {
        if (b_.n_tokens >= cap_) {
            throw std::out_of_range("batch is full (capacity " + std::to_string(cap_) + ")");
        }
        if (seq_ids.empty() || static_cast<int32_t>(seq_ids.size()) > n_seq_max_) {
            throw std::invalid_argument("a token needs 1 to n_seq_max=" + std::to_string(n_seq_max_) + " sequence ids");
        }
        const int32_t i = b_.n_tokens;
        b_.token[i] = token;
        b_.pos[i] = pos;
        b_.n_seq_id[i] = static_cast<int32_t>(seq_ids.size());
        for (size_t s = 0; s < seq_ids.size(); ++s) b_.seq_id[i][s] = seq_ids[s];
        b_.logits[i] = logits;
        b_.n_tokens++;
    }

    // Append a run of tokens of one sequence at positions pos0, pos0+1, ...
    void add_sequence(const std::vector<llama_token> & tokens, llama_pos pos0, llama_seq_id seq, bool logits_last) {
        if (b_.n_tokens + static_cast<int32_t>(tokens.size()) > cap_) {
            throw std::out_of_range("batch cannot hold " + std::to_string(tokens.size()) + " more tokens (capacity " +
                                    std::to_string(cap_) + ", used " + std::to_string(b_.n_tokens) + ")");
        }
        const std::vector<llama_seq_id> ids{seq};
        for (size_t k = 0; k < tokens.size(); ++k) {
            add(tokens[k], pos0 + static_cast<llama_pos>(k), ids, logits_last && k + 1 == tokens.size());
        }
    }

    void set_logits(int32_t i, bool on) {
        if (i < 0 || i >= b_.n_tokens) throw std::out_of_range("batch index out of range");
        b_.logits[i] = on;
    }
    bool logits_at(int32_t i) const {
        if (i < 0 || i >= b_.n_tokens) throw std::out_of_range("batch index out of range");
        return b_.logits[i] != 0;
    }
    llama_token token_at(int32_t i) const {
        if (i < 0 || i >= b_.n_tokens) throw std::out_of_range("batch index out of range");
        return b_.token[i];
    }

    void clear() { b_.n_tokens = 0; }
    int32_t size() const { return b_.n_tokens; }
    int32_t capacity() const { return cap_; }
    int32_t n_seq_max() const { return n_seq_max_; }
    const llama_batch & raw() const { return b_; }

private:
    llama_batch b_{};
    int32_t cap_;
    int32_t n_seq_max_;
};

}  // namespace pyllama
