// A prompt's images and audio, evaluated when the slot's prompt reaches them (loop thread):
// encoded in batches, as llama-server's process_mtmd_chunk, and decoded one by one.

#include <cstdio>
#include <functional>

#include "core/log.hpp"
#include "engine/engine.hpp"
#include "engine/slot.hpp"

namespace pyllama::engine {

namespace {

// A new batch from media[first] and the media after it in the same prompt (not only the
// adjacent ones: text between them is no bar), until mtmd refuses one: full at
// --mtmd-batch-max-tokens, another kind or size, or a projector that cannot batch.
std::unique_ptr<MediaBatch> encode_from(const Projector & projector, const std::vector<MediaChunk> & media,
                                        size_t first, const std::function<void(const char *)> & trace) {
    auto batch = std::make_unique<MediaBatch>(projector);
    batch->add(media[first]);  // the first is always taken
    char line[160];
    for (size_t i = first + 1; i < media.size(); ++i) {
        const int32_t rc = batch->add(media[i]);
        std::snprintf(line, sizeof(line), "try adding media chunk idx = %zu to batch, res = %d", media[i].start, rc);
        trace(line);
        if (rc != 0) break;
    }
    std::snprintf(line, sizeof(line), "encoding mtmd batch from idx = %zu, n_chunks = %zu", media[first].start,
                  batch->size());
    trace(line);
    batch->encode();
    return batch;
}

}  // namespace

// The embeddings cannot share the step's token batch: each medium is decoded on its own,
// before it (as llama-server does). False when there is no medium at n_past, or it failed
// (the slot's task then ended).
bool Engine::eval_media(Slot & s) {
    const auto & media = s.task->params.media;
    if (s.media_next >= media.size() || media[s.media_next].start != s.n_past) return false;
    const MediaChunk & m = media[s.media_next];
    try {
        float * embd = s.media_batch ? s.media_batch->embd(m) : nullptr;
        if (embd == nullptr) {  // no batch yet, or it is used up
            s.media_batch.reset();  // its output first: two batches' embeddings never coexist
            const auto tr = [this, &s](const char * what) {
                if (!params_.verbose) return;
                char line[224];
                std::snprintf(line, sizeof(line), "slot %d | task %llu | %s", s.id,
                              static_cast<unsigned long long>(s.task->id), what);
                trace(line);
            };
            s.media_batch = encode_from(*projector_, media, s.media_next, tr);
            embd = s.media_batch->embd(m);
            if (embd == nullptr) throw LlamaError("the encoded media batch lacks the medium it began with");
        }
        projector_->decode(ctx_->get(), m, embd, s.pos(s.n_past), s.id, static_cast<int32_t>(ctx_->n_batch()));
    } catch (const std::exception & e) {
        s.media_batch.reset();
        fail_slot(s, "decode", e.what());
        return false;
    }
    const auto & prompt = s.prompt();
    const auto at = prompt.begin() + static_cast<std::ptrdiff_t>(m.start);
    s.cache.insert(s.cache.end(), at, at + static_cast<std::ptrdiff_t>(m.n_tokens));
    s.media_cached.push_back(m);
    s.n_past += m.n_tokens;
    s.pos_delta += m.n_pos - static_cast<llama_pos>(m.n_tokens);
    ++s.media_next;
    {
        std::lock_guard<std::mutex> lk(pub_mu_);
        metrics_.n_prompt_tokens_total += m.n_tokens;
    }
    emit_progress(s);
    return true;
}

}  // namespace pyllama::engine
