// MediaBatch: media of one prompt encoded together (libmtmd's mtmd_batch), as llama-server
// encodes them: one encoder run for several images of the same size, up to the projector's
// --mtmd-batch-max-tokens; each medium's embeddings are then decoded from the batch's output
// when the prompt reaches it (Projector::decode).
//
// Threads: like Projector::decode, the loop thread alone builds, encodes and reads a batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/projector.hpp"

struct mtmd_batch;

namespace pyllama {

class MediaBatch {
public:
    explicit MediaBatch(const Projector & projector);
    ~MediaBatch();
    MediaBatch(const MediaBatch &) = delete;
    MediaBatch & operator=(const MediaBatch &) = delete;

    // mtmd_batch_add_chunk's answer: 0 added, 2 full (past batch_max_tokens, or a projector
    // that encodes one medium at a time), 3 cannot batch with the first (another kind or
    // size), 1 not a medium this projector takes. The first medium is always taken.
    int32_t add(const MediaChunk & m);
    // One encoder run over every medium added (loop thread). Throws LlamaError.
    void encode();
    // The embeddings of `m` in the encoded batch; nullptr when the batch does not hold that
    // very chunk (another prompt's, or one past the batch) or is not encoded.
    float * embd(const MediaChunk & m);
    size_t size() const { return chunks_.size(); }

private:
    mtmd_batch * batch_ = nullptr;
    // mtmd_batch points into the chunks without owning them: kept alive here, so a batch
    // never outlives what it reads, whoever drops the task first
    std::vector<std::shared_ptr<mtmd_input_chunk>> chunks_;
    bool audio_ = false;
    bool encoded_ = false;
};

}  // namespace pyllama
