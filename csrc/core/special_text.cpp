#include "core/special_text.hpp"

#include <algorithm>

namespace pyllama {

void SpecialText::Texts::add(std::string text) {
    if (!text.empty()) texts.push_back(std::move(text));
}

void SpecialText::Texts::index() {
    for (const auto & s : texts) {
        set.insert(s);
        first[static_cast<unsigned char>(s[0])] = true;
        if (std::find(lengths.begin(), lengths.end(), s.size()) == lengths.end()) lengths.push_back(s.size());
    }
}

SpecialText::SpecialText(const llama_vocab * vocab) {
    const llama_token n = llama_vocab_n_tokens(vocab);
    for (llama_token t = 0; t < n; ++t) {
        const auto attr = llama_vocab_get_attr(vocab, t);
        if (!(attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN))) continue;
        const char * text = llama_vocab_get_text(vocab, t);
        if (text == nullptr || *text == '\0') continue;
        all_.add(text);
        if (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN)) parse_only_.add(text);
        if ((attr & LLAMA_TOKEN_ATTR_CONTROL) && !(attr & LLAMA_TOKEN_ATTR_LSTRIP)) cut_.insert(text);
    }
    all_.index();
    parse_only_.index();
    // a text that another token with lstrip also has is no safe cut
    for (llama_token t = 0; t < n; ++t) {
        if (llama_vocab_get_attr(vocab, t) & LLAMA_TOKEN_ATTR_LSTRIP) cut_.erase(llama_vocab_get_text(vocab, t));
    }
}

std::vector<SpecialText::Hit> SpecialText::occurrences(const Texts & t, std::string_view text, bool one) {
    std::vector<Hit> hits;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!t.first[static_cast<unsigned char>(text[i])]) continue;
        for (size_t len : t.lengths) {
            if (len <= text.size() - i && t.set.count(text.substr(i, len)) != 0) {
                hits.push_back({i, len});
                if (one) return hits;
            }
        }
    }
    return hits;
}

std::vector<size_t> SpecialText::cut_points(std::string_view text) const {
    std::vector<size_t> cuts;
    if (cut_.empty()) return cuts;
    const auto hits = occurrences(all_, text, false);
    size_t reach = 0;  // the furthest end of the hits before the current one
    for (size_t k = 0; k < hits.size(); ++k) {
        const Hit & h = hits[k];
        const bool overlapped = (k > 0 && reach > h.at) || (k + 1 < hits.size() && hits[k + 1].at < h.at + h.len);
        reach = std::max(reach, h.at + h.len);
        if (!overlapped && cut_.count(std::string(text.substr(h.at, h.len))) != 0) cuts.push_back(h.at);
    }
    return cuts;
}

}  // namespace pyllama
