#include "engine/text_stream.hpp"

#include <algorithm>

namespace pyllama::engine {

size_t incomplete_utf8_tail(const std::string & s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? back : 0;
    }
    return 0;
}

TextStream::TextStream(std::vector<std::string> stops) {
    for (auto & s : stops) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

std::string TextStream::push(const std::string & piece) {
    if (stopped_) return {};
    pending_ += piece;
    size_t best = std::string::npos;
    for (const auto & s : stops_) {
        const size_t i = pending_.find(s);
        if (i != std::string::npos && i < best) {
            best = i;
            stopping_word_ = s;
        }
    }
    if (best != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, best);
        pending_.clear();
        return out;
    }
    // hold back the longest tail that begins a stop string, and an unfinished character
    size_t keep = incomplete_utf8_tail(pending_);
    for (const auto & s : stops_) {
        for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n) {
            if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
        }
    }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, out.size());
    return out;
}

std::string TextStream::flush() {
    if (stopped_) return {};
    std::string out;
    out.swap(pending_);
    // generation ended inside a character: those bytes can never become valid text
    out.resize(out.size() - incomplete_utf8_tail(out));
    return out;
}

}  // namespace pyllama::engine
