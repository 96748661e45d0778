#include "core/model.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "common.h"
#include "core/log.hpp"

namespace pyllama {

std::vector<ggml_backend_dev_t> offload_devices(const std::vector<std::string> & names) {
    std::vector<ggml_backend_dev_t> out;
    if (names.empty()) {
        return out;  // llama.cpp's default: every GPU device
    }
    if (names.size() == 1 && names[0] == "none") {
        return {nullptr};  // an empty, terminated list: offload nothing
    }
    for (const std::string & name : names) {
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
        if (dev == nullptr || ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) {
            throw std::invalid_argument("invalid device: " + name);  // llama-server's words
        }
        out.push_back(dev);
    }
    out.push_back(nullptr);
    return out;
}

namespace {
std::map<std::string, ggml_backend_buffer_type_t> buffer_types() {
    std::map<std::string, ggml_backend_buffer_type_t> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        if (ggml_backend_buffer_type_t b = ggml_backend_dev_buffer_type(ggml_backend_dev_get(i))) {
            out[ggml_backend_buft_name(b)] = b;
        }
    }
    return out;
}

llama_load_mode load_mode(const ModelParams & p) {
    const std::string & m = p.load_mode;
    if (m.empty()) {
        if (p.use_mmap) return p.use_mlock ? LLAMA_LOAD_MODE_MMAP_MLOCK : LLAMA_LOAD_MODE_MMAP;
        return p.use_mlock ? LLAMA_LOAD_MODE_MLOCK : LLAMA_LOAD_MODE_NONE;
    }
    if (m == "auto") return LLAMA_LOAD_MODE_AUTO;
    if (m == "none") return LLAMA_LOAD_MODE_NONE;
    if (m == "mmap") return LLAMA_LOAD_MODE_MMAP;
    if (m == "mlock") return LLAMA_LOAD_MODE_MLOCK;
    if (m == "mmap+mlock") return LLAMA_LOAD_MODE_MMAP_MLOCK;
    if (m == "dio") return LLAMA_LOAD_MODE_DIRECT_IO;
    throw std::invalid_argument("load_mode must be auto, none, mmap, mlock, mmap+mlock or dio, got '" + m + "'");
}

llama_lazy_mode lazy_mode(const std::string & m) {
    if (m == "on") return LLAMA_LAZY_MODE_ON;
    if (m == "auto") return LLAMA_LAZY_MODE_AUTO;
    if (m == "off") return LLAMA_LAZY_MODE_OFF;
    throw std::invalid_argument("lazy_mode must be on, auto or off, got '" + m + "'");
}
}  // namespace

std::vector<std::string> buffer_type_names() {
    std::vector<std::string> out;
    for (const auto & [name, buft] : buffer_types()) out.push_back(name);
    return out;
}

LlamaModelParams::LlamaModelParams(const ModelParams & p) : params(llama_model_default_params()) {
    llama_model_params & mp = params;
    mp.n_gpu_layers = p.n_gpu_layers;
    mp.split_mode = p.split_mode;
    mp.main_gpu = p.main_gpu;
    devices = offload_devices(p.devices);
    if (!devices.empty()) {
        mp.devices = devices.data();
    }
    split.assign(llama_max_devices(), 0.0f);
    if (!p.tensor_split.empty()) {
        if (p.tensor_split.size() > split.size()) {
            throw std::invalid_argument("tensor_split has " + std::to_string(p.tensor_split.size()) +
                                        " proportions, but llama.cpp supports at most " + std::to_string(split.size()) +
                                        " devices");
        }
        std::copy(p.tensor_split.begin(), p.tensor_split.end(), split.begin());
        mp.tensor_split = split.data();
    }
    mp.vocab_only = p.vocab_only;
    mp.check_tensors = p.check_tensors;
    mp.use_extra_bufts = p.use_extra_bufts;
    mp.no_host = p.no_host;
    mp.load_mode = load_mode(p);
    mp.lazy_mode = lazy_mode(p.lazy_mode);
    for (const std::string & item : p.kv_overrides) {
        if (!string_parse_kv_override(item.c_str(), kv)) {
            throw std::invalid_argument("invalid metadata override '" + item +
                                        "' (KEY=TYPE:VALUE with TYPE int, float, bool or str)");
        }
    }
    if (!kv.empty()) {
        kv.emplace_back();
        kv.back().key[0] = 0;
        mp.kv_overrides = kv.data();
    }
    // room for what --fit may add (llama.cpp's bound), terminated
    tensors.assign(llama_max_tensor_buft_overrides(), {nullptr, nullptr});
    if (!p.tensor_overrides.empty()) {
        if (p.tensor_overrides.size() >= tensors.size()) {
            throw std::invalid_argument("too many tensor overrides (llama.cpp takes " +
                                        std::to_string(tensors.size() - 1) + ")");
        }
        const auto types = buffer_types();
        size_t i = 0;
        for (const auto & [pattern, type] : p.tensor_overrides) {
            auto it = types.find(type);
            if (it == types.end()) {
                std::string known;
                for (const auto & [name, buft] : types) known += (known.empty() ? "" : ", ") + name;
                throw std::invalid_argument("unknown buffer type '" + type + "' (available: " + known + ")");
            }
            patterns.push_back(pattern);
            tensors[i++] = {nullptr, it->second};
        }
        for (size_t j = 0; j < patterns.size(); ++j) tensors[j].pattern = patterns[j].c_str();
        mp.tensor_buft_overrides = tensors.data();
    }
}

Model::Model(const std::string & path, const ModelParams & p) : path_(path) {
    if (std::FILE * f = ggml_fopen(path.c_str(), "rb")) {  // UTF-8 on Windows too
        std::fclose(f);
    } else {
        throw std::system_error(errno, std::generic_category(), "cannot open model file '" + path + "'");
    }
    LlamaModelParams lp(p);  // its lists are read during the load only
    const llama_model_params & mp = lp.params;
    const std::vector<ggml_backend_dev_t> & devices = lp.devices;
    log_clear();
    model_.reset(llama_model_load_from_file(path.c_str(), mp));
    if (!model_) {
        fail("failed to load model '" + path + "'");
    }
    vocab_ = llama_model_get_vocab(model_.get());
    special_ = std::make_unique<const SpecialText>(vocab_);
    pieces_ = std::make_unique<PieceCache>(vocab_, *special_);
    // llama.cpp logs the count whenever it could offload (an RPC-capable build too), with
    // `--device none` or no GPU at all: then nothing went anywhere but the CPU
    bool no_devices = devices.size() == 1 && devices[0] == nullptr;
    if (devices.empty()) {  // llama.cpp's default: every GPU it finds
        no_devices = true;
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            const auto type = ggml_backend_dev_type(ggml_backend_dev_get(i));
            if (type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU) no_devices = false;
        }
    }
    if (!log_offload(offloaded_, offloadable_) || no_devices) {
        offloaded_ = 0;
        offloadable_ = llama_model_n_layer(model_.get()) + 1;
    }
}

std::vector<llama_token> Model::tokenize(const std::string & text, bool add_special, bool parse_special) const {
    return tokenize_text(vocab_, text, add_special, parse_special);
}

void Model::check_token(llama_token token) const {
    if (token < 0 || token >= n_vocab()) {
        throw std::out_of_range("token id " + std::to_string(token) + " outside the vocabulary [0, " +
                                std::to_string(n_vocab()) + ")");
    }
}

std::string Model::token_to_piece(llama_token token, bool special) const {
    check_token(token);
    char buf[128];
    int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof(buf), 0, special);
    if (n >= 0) {
        return std::string(buf, static_cast<size_t>(n));
    }
    std::string big(static_cast<size_t>(-n), '\0');
    n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, special);
    big.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return big;
}

std::string Model::detokenize(const std::vector<llama_token> & tokens, bool remove_special, bool unparse_special) const {
    for (llama_token t : tokens) check_token(t);
    std::string out(tokens.size() * 8 + 16, '\0');
    int32_t n = llama_detokenize(vocab_, tokens.data(), static_cast<int32_t>(tokens.size()), out.data(),
                                 static_cast<int32_t>(out.size()), remove_special, unparse_special);
    if (n < 0) {
        out.resize(static_cast<size_t>(-n));
        n = llama_detokenize(vocab_, tokens.data(), static_cast<int32_t>(tokens.size()), out.data(),
                             static_cast<int32_t>(out.size()), remove_special, unparse_special);
    }
    out.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return out;
}

namespace {
template <typename F>
std::string read_str(F && f) {
    std::string s(256, '\0');
    int32_t n = f(s.data(), s.size());
    if (n < 0) return {};
    if (static_cast<size_t>(n) >= s.size()) {
        s.resize(static_cast<size_t>(n) + 1);
        n = f(s.data(), s.size());
    }
    s.resize(static_cast<size_t>(n));
    return s;
}
}  // namespace

std::map<std::string, std::string> Model::metadata() const {
    std::map<std::string, std::string> out;
    const int32_t n = llama_model_meta_count(model_.get());
    for (int32_t i = 0; i < n; ++i) {
        auto key = read_str([&](char * b, size_t s) { return llama_model_meta_key_by_index(model_.get(), i, b, s); });
        out[key] = read_str([&](char * b, size_t s) { return llama_model_meta_val_str_by_index(model_.get(), i, b, s); });
    }
    return out;
}

std::string Model::meta(const std::string & key) const {
    return read_str([&](char * b, size_t s) { return llama_model_meta_val_str(model_.get(), key.c_str(), b, s); });
}

std::string Model::chat_template(const std::string & name) const {
    const char * t = llama_model_chat_template(model_.get(), name.empty() ? nullptr : name.c_str());
    return t ? std::string(t) : std::string();
}

std::string Model::description() const {
    return read_str([&](char * b, size_t s) { return llama_model_desc(model_.get(), b, s); });
}

}  // namespace pyllama
