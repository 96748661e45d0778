#include "core/seq_state_file.hpp"
#include "core/dynlib.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/log.hpp"

namespace pyllama {

namespace {

// llama_state_seq_get_data's header (llama-context.cpp's io_magic, then the sequence id);
// a different pinned llama.cpp with another value fails every restore, which the slot
// tests catch
constexpr uint32_t kIoMagic = 0xaf143cd8;

[[noreturn]] void bad(const std::string & why) { throw LlamaError("not a usable slot state file: " + why); }

}  // namespace

SeqStateFile read_seq_state_file(const std::string & path, llama_seq_id seq, size_t max_tokens) {
    std::ifstream in(dynlib::from_utf8(path), std::ios::binary | std::ios::ate);
    if (!in) throw LlamaError(std::string("cannot open the slot state file: ") + std::strerror(errno));
    const auto size = static_cast<size_t>(in.tellg());
    in.seekg(0);
    uint32_t head[3] = {0, 0, 0};  // magic, version, token count
    if (size < sizeof(head) || !in.read(reinterpret_cast<char *>(head), sizeof(head))) bad("cut short");
    if (head[0] != LLAMA_STATE_SEQ_MAGIC || head[1] != LLAMA_STATE_SEQ_VERSION) {
        bad("unknown magic or version (saved by another llama.cpp?)");
    }
    const size_t n_tokens = head[2];
    if (n_tokens > max_tokens) {
        bad("it holds " + std::to_string(n_tokens) + " tokens, more than the slot's " + std::to_string(max_tokens));
    }
    if (n_tokens * sizeof(llama_token) > size - sizeof(head)) bad("cut short");
    SeqStateFile out;
    out.tokens.resize(n_tokens);
    const size_t rest = size - sizeof(head) - n_tokens * sizeof(llama_token);
    out.blob.resize(2 * sizeof(uint32_t) + rest);
    std::memcpy(out.blob.data(), &kIoMagic, sizeof(kIoMagic));
    std::memcpy(out.blob.data() + sizeof(kIoMagic), &seq, sizeof(seq));
    if (!in.read(reinterpret_cast<char *>(out.tokens.data()), static_cast<std::streamsize>(n_tokens * sizeof(llama_token))) ||
        !in.read(reinterpret_cast<char *>(out.blob.data() + 2 * sizeof(uint32_t)), static_cast<std::streamsize>(rest))) {
        bad("cut short");
    }
    return out;
}

}  // namespace pyllama
