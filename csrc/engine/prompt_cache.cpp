#include "engine/prompt_cache.hpp"

#include <algorithm>

namespace pyllama::engine {

namespace {

size_t lcp(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    const auto [ia, ib] = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin());
    (void)ib;
    return static_cast<size_t>(ia - a.begin());
}

}  // namespace

size_t PromptCache::size_bytes() const {
    size_t n = 0;
    for (const auto & e : entries_) n += e.state.size();
    return n;
}

size_t PromptCache::n_tokens() const {
    size_t n = 0;
    for (const auto & e : entries_) n += e.tokens.size();
    return n;
}

bool PromptCache::save(Context & ctx, llama_seq_id seq, const std::vector<llama_token> & tokens) {
    if (tokens.empty()) return false;
    for (const auto & e : entries_) {
        if (lcp(e.tokens, tokens) == tokens.size()) return false;  // already held whole
    }
    std::string state = ctx.seq_state_get(seq);
    if (state.empty() || (limit_bytes_ > 0 && state.size() > limit_bytes_)) return false;
    // entries this prompt extends are superseded by it
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry & e) { return lcp(e.tokens, tokens) == e.tokens.size(); }),
                   entries_.end());
    entries_.push_back(Entry{tokens, std::move(state)});
    trim();
    return true;
}

std::optional<std::vector<llama_token>> PromptCache::take_better(Context & ctx, llama_seq_id seq,
                                                                 const std::vector<llama_token> & current,
                                                                 const std::vector<llama_token> & prompt) {
    if (prompt.empty()) return std::nullopt;
    const auto n_prompt = static_cast<float>(prompt.size());
    const size_t base = lcp(current, prompt);
    // an empty slot loses nothing: any entry that keeps a quarter of itself wins
    float keep_best = current.empty() ? -1.0f : static_cast<float>(base) / static_cast<float>(current.size());
    float sim_best = static_cast<float>(base) / n_prompt;
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const size_t n = lcp(it->tokens, prompt);
        const float keep = static_cast<float>(n) / static_cast<float>(it->tokens.size());
        const float sim = static_cast<float>(n) / n_prompt;
        if (keep < 0.25f) continue;  // restoring it would throw most of it away
        if (keep > keep_best && sim > sim_best) {
            keep_best = keep;
            sim_best = sim;
            best = it;
        }
    }
    if (best == entries_.end()) return std::nullopt;
    ctx.seq_state_set(best->state, seq);  // throws on failure; the entry stays
    std::vector<llama_token> tokens = std::move(best->tokens);
    entries_.erase(best);
    return tokens;
}

void PromptCache::trim() {
    if (limit_bytes_ > 0) {
        size_t total = size_bytes();
        while (!entries_.empty() && total > limit_bytes_) {
            total -= entries_.front().state.size();
            entries_.pop_front();
        }
    }
    if (limit_tokens_ > 0) {
        // as llama-server: the token limit grows to what the byte limit could hold
        size_t limit = limit_tokens_;
        const size_t toks = std::max<size_t>(1, n_tokens());
        if (limit_bytes_ > 0) limit = std::max(limit, limit_bytes_ / std::max<size_t>(1, size_bytes() / toks));
        size_t total = n_tokens();
        while (!entries_.empty() && total > limit) {
            total -= entries_.front().tokens.size();
            entries_.pop_front();
        }
    }
}

}  // namespace pyllama::engine
