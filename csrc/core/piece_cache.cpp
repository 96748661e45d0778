#include "core/piece_cache.hpp"

#include <stdexcept>

namespace pyllama {

PieceCache::PieceCache(const llama_vocab * vocab, const SpecialText & special) : vocab_(vocab), special_(special) {
    usable_ = llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_BPE && !llama_vocab_get_add_eos(vocab) &&
              !llama_vocab_get_add_sep(vocab);
}

std::vector<llama_token> tokenize_text(const llama_vocab * vocab, std::string_view text, bool add_special,
                                       bool parse_special) {
    // upper bound: one token per byte, plus BOS/EOS
    std::vector<llama_token> out(text.size() + 2);
    int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), add_special, parse_special);
    if (n < 0) {  // cannot happen with the bound above, but the API allows it
        out.resize(static_cast<size_t>(-n));
        n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                           static_cast<int32_t>(out.size()), add_special, parse_special);
    }
    if (n < 0) throw std::runtime_error("tokenization failed");
    out.resize(static_cast<size_t>(n));
    return out;
}

void PieceCache::piece(std::string_view text, std::vector<llama_token> & out) {
    if (text.size() >= kMinPiece) {
        std::lock_guard<std::mutex> lk(mu_);
        if (auto it = index_.find(text); it != index_.end()) {
            lru_.splice(lru_.begin(), lru_, it->second);
            ++hits_;
            out.insert(out.end(), it->second->second.begin(), it->second->second.end());
            return;
        }
    }
    // a miss is tokenized outside the lock: other threads keep their hits
    auto toks = tokenize_text(vocab_, text, false, true);
    out.insert(out.end(), toks.begin(), toks.end());
    if (text.size() < kMinPiece || text.size() > kMaxBytes / 4) return;
    std::lock_guard<std::mutex> lk(mu_);
    ++misses_;
    if (index_.count(text) != 0) return;  // another thread got there first
    lru_.emplace_front(std::string(text), std::move(toks));
    index_.emplace(lru_.front().first, lru_.begin());
    bytes_ += text.size();
    while (bytes_ > kMaxBytes) {
        auto & last = lru_.back();
        bytes_ -= last.first.size();
        index_.erase(last.first);
        lru_.pop_back();
    }
}

PieceCache::Info PieceCache::info() {
    std::lock_guard<std::mutex> lk(mu_);
    return {hits_, misses_, lru_.size(), bytes_};
}

std::vector<llama_token> PieceCache::tokenize(std::string_view text, bool add_special) {
    if (!usable_ || text.size() < 2 * kMinPiece) return tokenize_text(vocab_, text, add_special, true);
    std::vector<llama_token> out;
    out.reserve(text.size() / 3);
    if (add_special && llama_vocab_get_add_bos(vocab_)) out.push_back(llama_vocab_bos(vocab_));
    size_t from = 0;
    for (size_t cut : special_.cut_points(text)) {
        if (cut > from) piece(text.substr(from, cut - from), out);
        from = cut;
    }
    if (from < text.size()) piece(text.substr(from), out);
    return out;
}

}  // namespace pyllama
