// The token list a slot file carries (POST /slots/N?action=save), in llama-server's packed
// form (server_tokens::serialize), so that either server restores the other's files:
//   LLAMA_TOKEN_NULL, version 1, the tokens (LLAMA_TOKEN_NULL for each media token), the
//   start index of each medium, then each medium as libmtmd saves a chunk (a u32 byte
//   count, the bytes); the whole padded to a multiple of 4 bytes.
// A list not starting with LLAMA_TOKEN_NULL is a plain token list (older files).
#pragma once

#include <vector>

#include "core/projector.hpp"
#include "llama.h"

namespace pyllama::engine {

struct SlotTokens {
    std::vector<llama_token> tokens;  // media as pyllama's placeholders
    std::vector<MediaChunk> media;    // `start`: index in `tokens`
};

// `cache` holds each medium of `media` as its placeholders. Throws LlamaError when the
// cache holds placeholders that no medium in `media` accounts for.
std::vector<llama_token> pack_slot_tokens(const std::vector<llama_token> & cache, const std::vector<MediaChunk> & media);

// Throws LlamaError for a malformed list, or media without a projector (llama-server's
// "Cannot restore media tokens without an mmproj").
SlotTokens unpack_slot_tokens(const std::vector<llama_token> & packed, bool have_projector);

}  // namespace pyllama::engine
