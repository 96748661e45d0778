// SpecialText: where the text of special tokens occurs in a string, as llama.cpp's
// tokenizer sees it. Immutable after construction: thread-safe.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "llama.h"

namespace pyllama {

class SpecialText {
public:
    explicit SpecialText(const llama_vocab * vocab);

    // Whether ``text`` holds the text of a token that the tokenizer reads as that token
    // only with parse_special (control and unknown tokens; user-defined ones are read as
    // themselves either way). When it does not, tokenizing with and without parse_special
    // gives the same tokens, so a chat message needs no second tokenization to learn
    // whether a user typed '<|im_end|>'.
    bool found_in(std::string_view text) const { return !occurrences(parse_only_, text, true).empty(); }

    // Offsets where llama.cpp's tokenizer (parse_special) surely splits ``text``: the start
    // of each control token's text that overlaps no other special text (the tokenizer
    // matches the longest special texts first, so an overlapped one may lose) and strips
    // no whitespace to its left (that would reach into the text before it).
    std::vector<size_t> cut_points(std::string_view text) const;

private:
    struct Texts {
        std::vector<std::string> texts;
        std::unordered_set<std::string_view> set;  // views into texts
        std::vector<size_t> lengths;               // the distinct lengths in texts
        std::array<bool, 256> first{};             // bytes some text starts with
        void add(std::string text);
        void index();  // after the last add: texts no longer moves
    };
    struct Hit {
        size_t at, len;
    };
    // Every occurrence of ``t`` in ``text`` by start (only the first when ``one``): a hash
    // probe per distinct length at each byte that can start a special text, a few
    // microseconds for a long message where a tokenization takes about a millisecond.
    static std::vector<Hit> occurrences(const Texts & t, std::string_view text, bool one);

    Texts parse_only_;  // control and unknown
    Texts all_;         // control, unknown and user-defined: what the tokenizer splits at
    std::unordered_set<std::string> cut_;  // control, no lstrip
};

}  // namespace pyllama
