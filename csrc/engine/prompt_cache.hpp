// Host-memory cache of prompt KV states (llama-server's --cache-ram). A slot about to
// lose most of its cached prompt to a new task saves that prompt's sequence state here,
// and a new task can take back a saved prompt that shares more with it than its slot
// holds. Oldest entries go first past the byte limit or the token limit. Loop thread only.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "llama.h"

namespace pyllama::engine {

class PromptCache {
public:
    // limit_bytes 0: no byte limit; limit_tokens 0: no token limit
    PromptCache(size_t limit_bytes, size_t limit_tokens) : limit_bytes_(limit_bytes), limit_tokens_(limit_tokens) {}

    // Copy sequence `seq`'s state (holding `tokens`) into the cache. False when there is
    // nothing to save, the prompt is already cached, or it alone exceeds the byte limit.
    bool save(Context & ctx, llama_seq_id seq, const std::vector<llama_token> & tokens);

    // When a cached prompt keeps more of itself and covers more of `prompt` than the
    // slot's `current` tokens do, restore it into `seq` and return its tokens (it leaves
    // the cache). Entries sharing less than a quarter of themselves are never taken.
    std::optional<std::vector<llama_token>> take_better(Context & ctx, llama_seq_id seq,
                                                        const std::vector<llama_token> & current,
                                                        const std::vector<llama_token> & prompt);

    size_t size_bytes() const;
    size_t n_entries() const { return entries_.size(); }

private:
    struct Entry {
        std::vector<llama_token> tokens;
        std::string state;
    };
    void trim();
    size_t n_tokens() const;

    std::deque<Entry> entries_;  // oldest first
    size_t limit_bytes_;
    size_t limit_tokens_;
};

}  // namespace pyllama::engine
