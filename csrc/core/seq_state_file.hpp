// A slot state file (llama_state_seq_save_file's format) read and checked before any of it
// reaches llama.cpp: llama_state_seq_load_file aborts the process (GGML_ASSERT) on a file
// cut short, so restores go through llama_state_seq_set_data, whose reader throws instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llama.h"

namespace pyllama {

struct SeqStateFile {
    std::vector<llama_token> tokens;  // the prompt the state holds
    // llama_state_seq_set_data's input: its 8-byte header, then the file's state bytes
    std::vector<uint8_t> blob;
};

// Throws LlamaError naming what is wrong (unreadable, not a slot file of this llama.cpp,
// more tokens than max_tokens, cut short); the message does not name the path.
SeqStateFile read_seq_state_file(const std::string & path, llama_seq_id seq, size_t max_tokens);

}  // namespace pyllama
