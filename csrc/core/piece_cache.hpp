// PieceCache: tokenizes prompts as llama_tokenize(text, add_special, parse_special=true)
// does, from a cache of the pieces between control tokens. Chat apps and agents send the
// same system prompt, tool list and earlier turns with every request; llama-server
// tokenizes all of it again each time (about a millisecond per thousand tokens, on the
// event loop here). Exact by construction, for BPE vocabularies only: their tokenizer
// splits the text at special tokens and tokenizes each stretch of text on its own, so
// cutting where it surely splits (SpecialText::cut_points) changes nothing. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/special_text.hpp"
#include "llama.h"

namespace pyllama {

// llama_tokenize into a vector (Model::tokenize, and PieceCache for each stretch)
std::vector<llama_token> tokenize_text(const llama_vocab * vocab, std::string_view text, bool add_special,
                                       bool parse_special);

class PieceCache {
public:
    PieceCache(const llama_vocab * vocab, const SpecialText & special);

    // false: the vocabulary is not BPE (or adds an EOS); tokenize() then does it whole
    bool usable() const { return usable_; }
    std::vector<llama_token> tokenize(std::string_view text, bool add_special);

    struct Info {
        size_t hits, misses, entries, bytes;
    };
    Info info();

    static constexpr size_t kMinPiece = 256;      // shorter pieces are tokenized each time
    static constexpr size_t kMaxBytes = 8 << 20;  // text held, at most

private:
    void piece(std::string_view text, std::vector<llama_token> & out);

    const llama_vocab * vocab_;
    const SpecialText & special_;
    bool usable_ = false;

    using Lru = std::list<std::pair<std::string, std::vector<llama_token>>>;
    std::mutex mu_;  // guards lru_, index_ and bytes_
    Lru lru_;        // most recently used first
    std::unordered_map<std::string_view, Lru::iterator> index_;  // views into lru_ keys
    size_t bytes_ = 0;
    size_t hits_ = 0, misses_ = 0;  // of pieces long enough to cache
};

}  // namespace pyllama
