// Projector: an mmproj file (llama.cpp's libmtmd) bound to a text model: the image and
// audio encoders that turn media into embeddings the model reads as prompt tokens.
//
// Threads: tokenize() (decode the file, preprocess, split the prompt into chunks) is
// thread-safe and runs on request threads; eval() encodes and decodes into a context and
// belongs to the engine's loop thread alone, like the context itself.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "llama.h"

struct mtmd_context;
struct mtmd_input_chunk;

namespace pyllama {

// Bad media in a request (not an image or audio file, undecodable, too large): a 4xx.
class MediaError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

struct ProjectorParams {
    bool use_gpu = true;          // llama-server's --mmproj-offload (default on)
    int32_t n_threads = 4;
    int32_t image_min_tokens = -1;  // -1: the file's; dynamic-resolution models only
    int32_t image_max_tokens = -1;
    int32_t batch_max_tokens = -1;  // -1: mtmd's default (--mtmd-batch-max-tokens)
    bool warmup = true;
    std::string device;           // ggml device name ("CUDA0"); "": the default GPU
    std::string marker;           // "" : mtmd's default "<__media__>"
};

// One image or audio clip in a tokenized prompt: it stands at tokens [start, start +
// n_tokens) of the prompt as placeholder tokens (negative ids derived from the media's
// SHA-256, so that two prompts share a prefix through a medium only when they hold the
// same file there). n_pos: positions it takes (n_tokens, except with M-RoPE).
struct MediaChunk {
    size_t start = 0;
    size_t n_tokens = 0;
    int32_t n_pos = 0;
    bool audio = false;
    std::string id;  // SHA-256 of the file, hex
    std::shared_ptr<mtmd_input_chunk> chunk;
};

struct MediaPrompt {
    std::vector<llama_token> tokens;
    std::vector<MediaChunk> media;
    std::vector<double> seconds;  // per file: an audio file's duration, 0 for an image
};

class Projector {
public:
    Projector(std::shared_ptr<Model> model, const std::string & path, const ProjectorParams & params);
    ~Projector();
    Projector(const Projector &) = delete;
    Projector & operator=(const Projector &) = delete;

    bool vision() const;
    bool audio() const;
    bool mrope() const;
    int audio_sample_rate() const;  // -1 without audio
    const std::string & marker() const { return marker_; }
    const std::string & path() const { return path_; }
    const std::shared_ptr<Model> & model() const { return model_; }

    // `text` holds one marker per file, in order. Throws MediaError for a file that is not
    // an image or audio this projector takes, or a marker count that does not match.
    MediaPrompt tokenize(const std::string & text, const std::vector<std::string> & files, bool add_special,
                         bool parse_special) const;

    // Decode the chunk's embeddings `embd`, encoded by a MediaBatch (core/media_batch.hpp),
    // into `seq` from position `pos` (loop thread only). Throws LlamaError on failure.
    void decode(llama_context * ctx, const MediaChunk & m, float * embd, llama_pos pos, llama_seq_id seq,
                int32_t n_batch);

    static bool is_placeholder(llama_token t) { return t < -1; }
    // Token i of the placeholders a medium with this id (its file's hash) stands as in a
    // prompt: equal ids give equal runs, so prompts sharing a file share a prefix.
    static llama_token placeholder(const std::string & id, size_t i);
    // A medium of a slot file (libmtmd's saved chunk): its MediaChunk, `start` left 0.
    // Throws LlamaError when the bytes are not a chunk libmtmd can load.
    static MediaChunk load_chunk(const char * data, size_t size);

private:
    friend class MediaBatch;  // its mtmd_batch belongs to ctx_
    std::shared_ptr<Model> model_;
    std::string path_;
    std::string marker_;
    mtmd_context * ctx_ = nullptr;
};

}  // namespace pyllama
