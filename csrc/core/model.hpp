// Model: an owned llama_model plus its vocabulary. Immutable after load, so every
// const method is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/piece_cache.hpp"
#include "core/special_text.hpp"
#include "llama-cpp.h"

namespace pyllama {

struct ModelParams {
    int32_t n_gpu_layers = -1;  // -1: all layers on the GPU backend when there is one
    // Devices to offload to, by ggml name ("CUDA0", "Vulkan1"); empty: every GPU device;
    // {"none"}: none (llama-server's --device).
    std::vector<std::string> devices;
    llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
    int32_t main_gpu = 0;
    std::vector<float> tensor_split;  // proportions per device; empty: by free memory
    bool use_mmap = true;
    bool use_mlock = false;
    // llama-server's --load-mode (auto, none, mmap, mlock, mmap+mlock, dio); "" follows
    // use_mmap/use_mlock
    std::string load_mode;
    std::string lazy_mode = "auto";  // --lazy-mode: on, auto, off
    bool vocab_only = false;
    bool check_tensors = false;
    bool use_extra_bufts = true;  // weight repacking (--repack / --no-repack)
    bool no_host = false;         // --no-host
    // --override-kv items, KEY=TYPE:VALUE (int, float, bool, str)
    std::vector<std::string> kv_overrides;
    // --override-tensor and --cpu-moe: (tensor name regex, buffer type name) in order
    std::vector<std::pair<std::string, std::string>> tensor_overrides;
};

// llama_model_params for a ModelParams, with the arrays its pointers refer to (not
// copyable: the pointers point into this object). Throws std::invalid_argument naming a
// bad device, override, buffer type or mode.
struct LlamaModelParams {
    explicit LlamaModelParams(const ModelParams & p);
    LlamaModelParams(const LlamaModelParams &) = delete;
    LlamaModelParams & operator=(const LlamaModelParams &) = delete;

    llama_model_params params;
    std::vector<ggml_backend_dev_t> devices;
    std::vector<float> split;
    std::vector<llama_model_kv_override> kv;
    std::vector<std::string> patterns;
    std::vector<llama_model_tensor_buft_override> tensors;
};

// Buffer type names that tensor_overrides may name (each device's default, as llama-server).
std::vector<std::string> buffer_type_names();

// ``names`` as llama_model_params.devices wants them (null-terminated; empty: the default).
// Throws std::invalid_argument naming an unknown or CPU device.
std::vector<ggml_backend_dev_t> offload_devices(const std::vector<std::string> & names);

class Model {
public:
    Model(const std::string & path, const ModelParams & params);

    llama_model * get() const { return model_.get(); }
    const llama_vocab * vocab() const { return vocab_; }
    const std::string & path() const { return path_; }

    std::vector<llama_token> tokenize(const std::string & text, bool add_special, bool parse_special) const;
    std::string token_to_piece(llama_token token, bool special) const;
    std::string detokenize(const std::vector<llama_token> & tokens, bool remove_special, bool unparse_special) const;
    void check_token(llama_token token) const;  // throws std::out_of_range
    // whether parse_special could change how ``text`` tokenizes (see SpecialText)
    bool has_special_text(std::string_view text) const { return special_->found_in(text); }
    // tokenize(text, add_special, true), the stretches between control tokens from a cache
    std::vector<llama_token> tokenize_prompt(std::string_view text, bool add_special) const {
        return pieces_->tokenize(text, add_special);
    }
    PieceCache::Info piece_cache_info() const { return pieces_->info(); }

    std::map<std::string, std::string> metadata() const;
    std::string meta(const std::string & key) const;  // "" when absent
    // an encoder (BERT and its kin): non-causal attention, no KV cache kept between inputs
    bool is_encoder() const { return meta(meta("general.architecture") + ".attention.causal") == "false"; }
    std::string chat_template(const std::string & name) const;  // "" when absent
    std::string description() const;

    int32_t n_vocab() const { return llama_vocab_n_tokens(vocab_); }
    // layers on offload devices, of how many (llama.cpp's count: the layers and the output)
    int offloaded_layers() const { return offloaded_; }
    int offloadable_layers() const { return offloadable_; }

private:
    llama_model_ptr model_;
    const llama_vocab * vocab_ = nullptr;
    std::string path_;
    int offloaded_ = 0;
    int offloadable_ = 0;
    std::unique_ptr<const SpecialText> special_;
    std::unique_ptr<PieceCache> pieces_;  // its own lock: safe from const methods
};

}  // namespace pyllama
