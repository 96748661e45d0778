#include "engine/slot_tokens.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "core/log.hpp"
#include "mtmd.h"

namespace pyllama::engine {

namespace {

constexpr uint32_t kVersion = 1;  // llama-server's SERVER_TOKENS_STATE_VERSION

class Writer {
public:
    void u32(uint32_t v) { bytes(&v, sizeof(v)); }
    void bytes(const void * p, size_t n) {
        const auto * c = static_cast<const char *>(p);
        data_.insert(data_.end(), c, c + n);
    }
    std::vector<llama_token> take() {
        data_.resize((data_.size() + 3) / 4 * 4, 0);
        std::vector<llama_token> out(data_.size() / 4);
        if (!data_.empty()) std::memcpy(out.data(), data_.data(), data_.size());
        return out;
    }

private:
    std::vector<char> data_;
};

class Reader {
public:
    Reader(const char * p, size_t n) : p_(p), n_(n) {}
    uint32_t u32() {
        uint32_t v = 0;
        std::memcpy(&v, take(sizeof(v)), sizeof(v));
        return v;
    }
    const char * take(size_t n) {
        if (n_ - at_ < n) throw LlamaError("not a usable slot state file: its token list is cut short");
        const char * out = p_ + at_;
        at_ += n;
        return out;
    }
    size_t left() const { return n_ - at_; }

private:
    const char * p_;
    size_t n_;
    size_t at_ = 0;
};

uint32_t u32_of(size_t n) {
    if (n > UINT32_MAX) throw LlamaError("the slot state is too large to save");
    return static_cast<uint32_t>(n);
}

}  // namespace

std::vector<llama_token> pack_slot_tokens(const std::vector<llama_token> & cache, const std::vector<MediaChunk> & media) {
    std::vector<llama_token> tokens = cache;
    std::vector<const MediaChunk *> kept;
    for (const auto & m : media) {
        if (m.start + m.n_tokens > cache.size() || !m.chunk) continue;
        bool whole = true;
        for (size_t i = 0; i < m.n_tokens && whole; ++i) whole = cache[m.start + i] == Projector::placeholder(m.id, i);
        if (!whole) continue;
        for (size_t i = 0; i < m.n_tokens; ++i) tokens[m.start + i] = LLAMA_TOKEN_NULL;
        kept.push_back(&m);
    }
    for (llama_token t : tokens) {
        if (Projector::is_placeholder(t)) {
            throw LlamaError("the slot holds a medium whose data is no longer at hand (restored from the host prompt "
                             "cache?): run the prompt again, then save");
        }
    }
    Writer w;
    const llama_token marker = LLAMA_TOKEN_NULL;
    w.bytes(&marker, sizeof(marker));
    w.u32(kVersion);
    w.u32(u32_of(tokens.size()));
    w.bytes(tokens.data(), tokens.size() * sizeof(llama_token));
    w.u32(u32_of(kept.size()));
    for (const MediaChunk * m : kept) w.u32(u32_of(m->start));
    for (const MediaChunk * m : kept) {
        size_t n = 0;
        if (mtmd_input_chunk_save(m->chunk.get(), nullptr, 0, &n) != 0 || n == 0) {
            throw LlamaError("a medium of the slot cannot be saved");
        }
        std::vector<char> buf(n);
        if (mtmd_input_chunk_save(m->chunk.get(), buf.data(), buf.size(), nullptr) != 0) {
            throw LlamaError("a medium of the slot cannot be saved");
        }
        w.u32(u32_of(n));
        w.bytes(buf.data(), buf.size());
    }
    return w.take();
}

SlotTokens unpack_slot_tokens(const std::vector<llama_token> & packed, bool have_projector) {
    SlotTokens out;
    if (packed.empty() || packed[0] != LLAMA_TOKEN_NULL) {  // a plain list
        out.tokens = packed;
        return out;
    }
    Reader r(reinterpret_cast<const char *>(packed.data()), packed.size() * sizeof(llama_token));
    r.take(sizeof(llama_token));
    if (r.u32() != kVersion) throw LlamaError("not a usable slot state file: unknown token list version");
    const uint32_t n = r.u32();
    out.tokens.resize(n);
    if (n) std::memcpy(out.tokens.data(), r.take(static_cast<size_t>(n) * sizeof(llama_token)), n * sizeof(llama_token));
    const uint32_t n_media = r.u32();
    if (n_media && !have_projector) throw LlamaError("Cannot restore media tokens without an mmproj");
    std::vector<size_t> starts(n_media);
    for (auto & s : starts) s = r.u32();
    for (size_t k = 0; k < n_media; ++k) {
        const uint32_t size = r.u32();
        MediaChunk m = Projector::load_chunk(r.take(size), size);
        m.start = starts[k];
        const size_t prev_end = out.media.empty() ? 0 : out.media.back().start + out.media.back().n_tokens;
        if (m.start < prev_end || m.start + m.n_tokens > out.tokens.size()) {
            throw LlamaError("not a usable slot state file: a medium lies outside its token list");
        }
        for (size_t i = 0; i < m.n_tokens; ++i) {
            if (out.tokens[m.start + i] != LLAMA_TOKEN_NULL) {
                throw LlamaError("not a usable slot state file: a medium's tokens are not media tokens");
            }
            out.tokens[m.start + i] = Projector::placeholder(m.id, i);
        }
        out.media.push_back(std::move(m));
    }
    if (r.left() >= sizeof(llama_token)) throw LlamaError("not a usable slot state file: trailing data in its token list");
    for (llama_token t : out.tokens) {
        if (t == LLAMA_TOKEN_NULL) throw LlamaError("not a usable slot state file: a media token without its medium");
    }
    return out;
}

}  // namespace pyllama::engine
