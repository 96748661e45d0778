// From sampled token bytes to text that is safe to send: holds back an incomplete
// UTF-8 character (a token may end inside one) and any tail that could begin a stop
// string, so streamed pieces concatenate to exactly the final text.
#pragma once

#include <string>
#include <vector>

namespace pyllama::engine {

class TextStream {
public:
    explicit TextStream(std::vector<std::string> stops = {});

    // Add one token's bytes; return the text that can be sent now. After a stop string
    // is seen, stopped() is true and the stop string and all after it are dropped.
    std::string push(const std::string & piece);
    // End of generation: release whatever is held (less an unfinished character).
    std::string flush();

    bool stopped() const { return stopped_; }
    const std::string & stopping_word() const { return stopping_word_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;
    std::string stopping_word_;
    bool stopped_ = false;
};

// Bytes at the end of s that start a UTF-8 character not yet complete (0..3).
size_t incomplete_utf8_tail(const std::string & s);

}  // namespace pyllama::engine
