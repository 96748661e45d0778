#include "core/media_batch.hpp"

#include <string>

#include "core/log.hpp"
#include "mtmd.h"

namespace pyllama {

MediaBatch::MediaBatch(const Projector & projector) : batch_(mtmd_batch_init(projector.ctx_)) {
    if (batch_ == nullptr) throw LlamaError("mtmd_batch_init failed");
}

MediaBatch::~MediaBatch() { mtmd_batch_free(batch_); }

int32_t MediaBatch::add(const MediaChunk & m) {
    if (encoded_) return 2;  // an encoded batch is closed: mtmd would not encode the newcomer
    const int32_t rc = mtmd_batch_add_chunk(batch_, m.chunk.get());
    if (rc == 0) {
        if (chunks_.empty()) audio_ = m.audio;
        chunks_.push_back(m.chunk);
    }
    return rc;
}

void MediaBatch::encode() {
    log_clear();
    if (mtmd_batch_encode(batch_) != 0) fail(std::string("encoding the ") + (audio_ ? "audio" : "image") + " failed");
    encoded_ = true;
}

float * MediaBatch::embd(const MediaChunk & m) {
    if (!encoded_) return nullptr;  // mtmd would log an error for asking
    for (const auto & c : chunks_) {
        // the same chunk object, as llama-server looks it up: equal media of another
        // prompt are other chunks
        if (c.get() == m.chunk.get()) return mtmd_batch_get_output_embd(batch_, c.get());
    }
    return nullptr;
}

}  // namespace pyllama
