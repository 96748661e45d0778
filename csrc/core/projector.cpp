#include "core/projector.hpp"

#include <cstring>
#include <utility>

#include "core/log.hpp"
#include "ggml-backend.h"
#include "mtmd-helper.h"
#include "mtmd.h"

// Image headers only (width, height) before anything is decoded: stb_image, private to
// this file (libmtmd has its own copy for the decoding itself).
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_NO_FAILURE_STRINGS
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace pyllama {

namespace {

// A decoded image costs width * height * 3 bytes before the encoder resizes it: a small
// compressed file can claim gigabytes. Larger images are refused before decoding.
constexpr int kMaxImageSide = 16384;
constexpr long long kMaxImagePixels = 64LL * 1024 * 1024;

struct BitmapsFree {
    std::vector<mtmd_bitmap *> v;
    ~BitmapsFree() {
        for (auto * b : v) mtmd_bitmap_free(b);
    }
};

uint64_t hex64(const std::string & id) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a of the whole id: any id string works
    for (unsigned char c : id) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

// Placeholder i of a medium: negative, never a vocabulary id nor LLAMA_TOKEN_NULL, and
// different along the chunk so that two media agree on every placeholder only when
// their hashes are equal.
llama_token placeholder(uint64_t h, size_t i) {
    uint64_t z = h + 0x9e3779b97f4a7c15ULL * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return -2 - static_cast<llama_token>(z & 0x3fffffff);
}

// A MediaChunk owning `ch` (an image or audio chunk of libmtmd's), `start` left 0.
MediaChunk media_chunk(mtmd_input_chunk * ch) {
    MediaChunk m;
    m.chunk = std::shared_ptr<mtmd_input_chunk>(ch, &mtmd_input_chunk_free);
    m.n_tokens = mtmd_input_chunk_get_n_tokens(ch);
    m.n_pos = mtmd_input_chunk_get_n_pos(ch);
    m.audio = mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_AUDIO;
    const char * id = mtmd_input_chunk_get_id(ch);
    m.id = id ? id : "";
    return m;
}

void check_image_size(const std::string & file, size_t index) {
    int w = 0, h = 0, comp = 0;
    const auto * buf = reinterpret_cast<const stbi_uc *>(file.data());
    if (!stbi_info_from_memory(buf, static_cast<int>(file.size()), &w, &h, &comp)) return;  // not an image stb reads
    if (w > kMaxImageSide || h > kMaxImageSide || static_cast<long long>(w) * h > kMaxImagePixels) {
        throw MediaError("image " + std::to_string(index) + " is " + std::to_string(w) + "x" + std::to_string(h) +
                         " pixels: the limit is " + std::to_string(kMaxImageSide) + " on a side and " +
                         std::to_string(kMaxImagePixels / (1024 * 1024)) + " megapixels");
    }
}

}  // namespace

Projector::Projector(std::shared_ptr<Model> model, const std::string & path, const ProjectorParams & p)
    : model_(std::move(model)), path_(path) {
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = p.use_gpu;
    mp.n_threads = p.n_threads;
    mp.print_timings = false;
    mp.warmup = p.warmup;
    mp.image_min_tokens = p.image_min_tokens;
    mp.image_max_tokens = p.image_max_tokens;
    if (p.batch_max_tokens > 0) mp.batch_max_tokens = p.batch_max_tokens;
    if (!p.marker.empty()) mp.media_marker = p.marker.c_str();
    if (!p.device.empty()) {
        mp.device = ggml_backend_dev_by_name(p.device.c_str());
        if (mp.device == nullptr) throw std::invalid_argument("--mmproj-device: unknown device '" + p.device + "'");
    }
    log_clear();
    ctx_ = mtmd_init_from_file(path.c_str(), model_->get(), mp);
    if (ctx_ == nullptr) fail("failed to load the multimodal projector '" + path + "'");
    marker_ = mtmd_get_marker(ctx_);
}

Projector::~Projector() {
    if (ctx_) mtmd_free(ctx_);
}

bool Projector::vision() const { return mtmd_support_vision(ctx_); }
bool Projector::audio() const { return mtmd_support_audio(ctx_); }
bool Projector::mrope() const { return mtmd_decode_use_mrope(ctx_); }
int Projector::audio_sample_rate() const { return mtmd_get_audio_sample_rate(ctx_); }

MediaPrompt Projector::tokenize(const std::string & text, const std::vector<std::string> & files, bool add_special,
                                bool parse_special) const {
    // counted before any file is decoded: a mismatch costs nothing
    size_t n_markers = 0;
    for (size_t at = text.find(marker_); at != std::string::npos; at = text.find(marker_, at + marker_.size())) {
        ++n_markers;
    }
    if (n_markers != files.size()) {
        throw MediaError("the prompt has " + std::to_string(n_markers) + " media marker(s) '" + marker_ + "' for " +
                         std::to_string(files.size()) + " media file(s)");
    }
    BitmapsFree bitmaps;
    std::vector<double> seconds;
    for (size_t i = 0; i < files.size(); ++i) {
        const std::string & f = files[i];
        if (f.empty()) throw MediaError("media " + std::to_string(i) + " is empty");
        check_image_size(f, i);
        auto w = mtmd_helper_bitmap_init_from_buf(ctx_, reinterpret_cast<const unsigned char *>(f.data()), f.size(),
                                                  false, mtmd_helper_init_opt_default());
        if (w.video_ctx) {
            mtmd_helper_video_free(w.video_ctx);
            if (w.bitmap) mtmd_bitmap_free(w.bitmap);
            throw MediaError("media " + std::to_string(i) + ": video input is not supported");
        }
        if (!w.bitmap) {
            throw MediaError("media " + std::to_string(i) +
                             " could not be decoded: not an image (PNG, JPEG, BMP, GIF...) or audio (WAV, MP3, "
                             "FLAC) file, or a damaged one");
        }
        bitmaps.v.push_back(w.bitmap);
        const bool is_audio = mtmd_bitmap_is_audio(w.bitmap);
        const int rate = audio_sample_rate();
        seconds.push_back(is_audio && rate > 0 ? static_cast<double>(mtmd_bitmap_get_n_bytes(w.bitmap)) /
                                                     sizeof(float) / rate
                                               : 0.0);
        if (is_audio && !audio()) {
            throw MediaError("audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj");
        }
        if (!is_audio && !vision()) {
            throw MediaError("image input is not supported - hint: if this is unexpected, you may need to provide the mmproj");
        }
    }
    mtmd_input_text in{text.c_str(), text.size(), add_special, parse_special};
    std::unique_ptr<mtmd_input_chunks, decltype(&mtmd_input_chunks_free)> chunks(mtmd_input_chunks_init(),
                                                                                 &mtmd_input_chunks_free);
    std::vector<const mtmd_bitmap *> bp(bitmaps.v.begin(), bitmaps.v.end());
    const int32_t rc = mtmd_tokenize(ctx_, chunks.get(), &in, bp.data(), bp.size());
    if (rc != 0) throw MediaError("the media could not be preprocessed for this model");
    MediaPrompt out;
    out.seconds = std::move(seconds);
    for (size_t c = 0; c < mtmd_input_chunks_size(chunks.get()); ++c) {
        const mtmd_input_chunk * ch = mtmd_input_chunks_get(chunks.get(), c);
        const auto type = mtmd_input_chunk_get_type(ch);
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token * t = mtmd_input_chunk_get_tokens_text(ch, &n);
            out.tokens.insert(out.tokens.end(), t, t + n);
            continue;
        }
        MediaChunk m = media_chunk(mtmd_input_chunk_copy(ch));
        m.start = out.tokens.size();
        const uint64_t h = hex64(m.id);
        for (size_t i = 0; i < m.n_tokens; ++i) out.tokens.push_back(pyllama::placeholder(h, i));
        out.media.push_back(std::move(m));
    }
    return out;
}

llama_token Projector::placeholder(const std::string & id, size_t i) { return pyllama::placeholder(hex64(id), i); }

MediaChunk Projector::load_chunk(const char * data, size_t size) {
    mtmd_input_chunk * ch = mtmd_input_chunk_load(data, size);
    if (ch == nullptr) throw LlamaError("a medium in the slot file cannot be loaded");
    return media_chunk(ch);
}

void Projector::decode(llama_context * lctx, const MediaChunk & m, float * embd, llama_pos pos, llama_seq_id seq,
                       int32_t n_batch) {
    log_clear();
    llama_pos next = 0;
    const int32_t rc =
        mtmd_helper_decode_image_chunk(ctx_, lctx, m.chunk.get(), embd, pos, seq, n_batch, &next, nullptr, nullptr);
    if (rc != 0) fail(std::string("decoding the ") + (m.audio ? "audio" : "image") + " embeddings failed");
}

}  // namespace pyllama
