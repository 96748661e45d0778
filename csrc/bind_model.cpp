#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "core/fit.hpp"
#include "core/model.hpp"

namespace py = pybind11;

namespace pyllama {

namespace {
llama_split_mode parse_split_mode(const std::string & name) {
    if (name == "none") return LLAMA_SPLIT_MODE_NONE;
    if (name == "layer") return LLAMA_SPLIT_MODE_LAYER;
    if (name == "row") return LLAMA_SPLIT_MODE_ROW;
    if (name == "tensor") return LLAMA_SPLIT_MODE_TENSOR;
    throw std::invalid_argument("split_mode must be none, layer, row or tensor, got '" + name + "'");
}
}  // namespace

namespace {
// What Model() and fit_params() share: where the weights go and what overrides them.
ModelParams placement(int32_t n_gpu_layers, std::vector<std::string> devices, const std::string & split_mode,
                      int32_t main_gpu, std::vector<float> tensor_split,
                      std::vector<std::pair<std::string, std::string>> tensor_overrides,
                      std::vector<std::string> kv_overrides) {
    ModelParams p;
    p.n_gpu_layers = n_gpu_layers;
    p.devices = std::move(devices);
    p.split_mode = parse_split_mode(split_mode);
    p.main_gpu = main_gpu;
    p.tensor_split = std::move(tensor_split);
    p.tensor_overrides = std::move(tensor_overrides);
    p.kv_overrides = std::move(kv_overrides);
    return p;
}

py::dict fit(const std::string & path, int32_t n_gpu_layers, std::vector<std::string> devices,
             const std::string & split_mode, int32_t main_gpu, std::vector<float> tensor_split,
             std::vector<std::pair<std::string, std::string>> tensor_overrides, std::vector<std::string> kv_overrides,
             uint32_t n_ctx, uint32_t n_parallel, uint32_t n_batch, uint32_t n_ubatch, int32_t flash_attn,
             const std::string & type_k, const std::string & type_v, bool kv_unified, bool swa_full, bool offload_kqv,
             std::vector<size_t> margins_mib, uint32_t n_ctx_min, bool embeddings, bool speculative, bool repack,
             bool no_host, std::string load_mode, std::string lazy_mode, bool op_offload) {
    ModelParams mp = placement(n_gpu_layers, std::move(devices), split_mode, main_gpu, std::move(tensor_split),
                               std::move(tensor_overrides), std::move(kv_overrides));
    // the trial load places the weights as the real one will (llama-server's fit gets the
    // same model params): extra buffer types, host buffers and lazy tensors change what
    // each device is projected to hold
    mp.use_extra_bufts = repack;
    mp.no_host = no_host;
    mp.load_mode = std::move(load_mode);
    mp.lazy_mode = std::move(lazy_mode);
    ContextParams cp;
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_parallel;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_ubatch;
    cp.flash_attn = flash_attn;
    cp.type_k = type_k;
    cp.type_v = type_v;
    cp.kv_unified = kv_unified;
    cp.swa_full = swa_full;
    cp.offload_kqv = offload_kqv;
    cp.op_offload = op_offload;
    cp.embeddings = embeddings;
    cp.n_outputs_max = outputs_max(static_cast<int32_t>(n_parallel), n_batch, embeddings, speculative);  // the engine's
    // the engine's per-sequence limit: one row without speculation (llama-server's
    // server_output_limits); with it, llama.cpp's default (the draft length is not known here)
    if (embeddings || !speculative) cp.n_outputs_max_per_seq = 1;
    FitResult r;
    {
        py::gil_scoped_release release;  // it reads the model's metadata, maybe twice
        r = fit_params(path, mp, cp, margins_mib, n_ctx_min);
    }
    py::dict out;
    out["status"] = r.status;
    out["n_gpu_layers"] = r.n_gpu_layers;
    out["n_ctx"] = r.n_ctx;
    out["tensor_split"] = r.tensor_split;
    out["tensor_overrides"] = r.tensor_overrides;
    return out;
}
}  // namespace

void register_model(py::module_ & m) {
    py::class_<Model, std::shared_ptr<Model>>(m, "Model", "A loaded GGUF model (immutable, thread-safe).")
        .def(py::init([](const std::string & path, int32_t n_gpu_layers, bool use_mmap, bool use_mlock,
                         bool vocab_only, bool check_tensors, std::vector<std::string> devices,
                         const std::string & split_mode, int32_t main_gpu, std::vector<float> tensor_split,
                         std::vector<std::string> kv_overrides,
                         std::vector<std::pair<std::string, std::string>> tensor_overrides, bool repack,
                         bool no_host, std::string load_mode, std::string lazy_mode) {
                 ModelParams p = placement(n_gpu_layers, std::move(devices), split_mode, main_gpu,
                                           std::move(tensor_split), std::move(tensor_overrides),
                                           std::move(kv_overrides));
                 p.use_mmap = use_mmap;
                 p.use_mlock = use_mlock;
                 p.vocab_only = vocab_only;
                 p.check_tensors = check_tensors;
                 p.use_extra_bufts = repack;
                 p.no_host = no_host;
                 p.load_mode = std::move(load_mode);
                 p.lazy_mode = std::move(lazy_mode);
                 // Loading reads the whole file: release the GIL. Arguments are plain C++ by now.
                 py::gil_scoped_release release;
                 return std::make_shared<Model>(path, p);
             }),
             py::arg("path"), py::kw_only(), py::arg("n_gpu_layers") = -1, py::arg("use_mmap") = true,
             py::arg("use_mlock") = false, py::arg("vocab_only") = false, py::arg("check_tensors") = false,
             py::arg("devices") = std::vector<std::string>{}, py::arg("split_mode") = "layer",
             py::arg("main_gpu") = 0, py::arg("tensor_split") = std::vector<float>{},
             py::arg("kv_overrides") = std::vector<std::string>{},
             py::arg("tensor_overrides") = std::vector<std::pair<std::string, std::string>>{},
             py::arg("repack") = true, py::arg("no_host") = false, py::arg("load_mode") = "",
             py::arg("lazy_mode") = "auto",
             "Load a GGUF model. ``devices``: ggml device names to offload to (``['none']``: none; "
             "empty: every GPU); ``split_mode``: none, layer, row or tensor (llama-server's "
             "--split-mode); ``tensor_split``: proportions per device; ``kv_overrides``: "
             "metadata overrides, ``KEY=TYPE:VALUE`` (--override-kv); ``tensor_overrides``: "
             "(tensor name regex, buffer type) pairs (--override-tensor, --cpu-moe); ``repack``: "
             "weight repacking (--no-repack); ``load_mode``: auto, none, mmap, mlock, mmap+mlock "
             "or dio ('' follows use_mmap/use_mlock); ``lazy_mode``: on, auto or off.")
        .def_property_readonly("path", &Model::path)
        .def_property_readonly("n_vocab", &Model::n_vocab)
        .def_property_readonly("n_ctx_train", [](const Model & s) { return llama_model_n_ctx_train(s.get()); })
        .def_property_readonly("n_embd", [](const Model & s) { return llama_model_n_embd(s.get()); })
        .def_property_readonly("is_encoder", &Model::is_encoder,
                               "Non-causal attention (BERT and its kin): its inputs keep no KV cache.")
        .def_property_readonly("n_embd_out", [](const Model & s) { return llama_model_n_embd_out(s.get()); })
        .def_property_readonly("n_layer", [](const Model & s) { return llama_model_n_layer(s.get()); })
        .def_property_readonly("offloaded_layers", &Model::offloaded_layers,
                               "Layers llama.cpp put on offload devices (GPU, RPC) at load.")
        .def_property_readonly("offloadable_layers", &Model::offloadable_layers,
                               "Layers it could offload: the repeating ones and the output.")
        .def_property_readonly("n_head", [](const Model & s) { return llama_model_n_head(s.get()); })
        .def_property_readonly("n_head_kv", [](const Model & s) { return llama_model_n_head_kv(s.get()); })
        .def_property_readonly("n_params", [](const Model & s) { return llama_model_n_params(s.get()); })
        .def_property_readonly("size", [](const Model & s) { return llama_model_size(s.get()); })
        .def_property_readonly("n_cls_out", [](const Model & s) { return llama_model_n_cls_out(s.get()); })
        .def_property_readonly("has_encoder", [](const Model & s) { return llama_model_has_encoder(s.get()); })
        .def_property_readonly("has_decoder", [](const Model & s) { return llama_model_has_decoder(s.get()); })
        .def_property_readonly("is_recurrent", [](const Model & s) { return llama_model_is_recurrent(s.get()); })
        .def_property_readonly("is_hybrid", [](const Model & s) { return llama_model_is_hybrid(s.get()); })
        .def_property_readonly("description", &Model::description)
        .def_property_readonly("metadata", &Model::metadata, "All GGUF metadata as strings.")
        .def("meta", &Model::meta, py::arg("key"), "One metadata value as a string ('' when absent).")
        .def("chat_template", &Model::chat_template, py::arg("name") = "",
             "The model's chat template (named variant when name is given); '' when absent.")
        // vocabulary
        .def_property_readonly("vocab_type", [](const Model & s) { return static_cast<int>(llama_vocab_type(s.vocab())); })
        .def_property_readonly("token_bos", [](const Model & s) { return llama_vocab_bos(s.vocab()); })
        .def_property_readonly("token_eos", [](const Model & s) { return llama_vocab_eos(s.vocab()); })
        .def_property_readonly("token_eot", [](const Model & s) { return llama_vocab_eot(s.vocab()); })
        .def_property_readonly("token_sep", [](const Model & s) { return llama_vocab_sep(s.vocab()); })
        .def_property_readonly("token_nl", [](const Model & s) { return llama_vocab_nl(s.vocab()); })
        .def_property_readonly("token_pad", [](const Model & s) { return llama_vocab_pad(s.vocab()); })
        .def_property_readonly("token_fim_pre", [](const Model & s) { return llama_vocab_fim_pre(s.vocab()); })
        .def_property_readonly("token_fim_suf", [](const Model & s) { return llama_vocab_fim_suf(s.vocab()); })
        .def_property_readonly("token_fim_mid", [](const Model & s) { return llama_vocab_fim_mid(s.vocab()); })
        .def_property_readonly("token_fim_pad", [](const Model & s) { return llama_vocab_fim_pad(s.vocab()); })
        .def_property_readonly("token_fim_rep", [](const Model & s) { return llama_vocab_fim_rep(s.vocab()); })
        .def_property_readonly("token_fim_sep", [](const Model & s) { return llama_vocab_fim_sep(s.vocab()); })
        .def_property_readonly("add_bos", [](const Model & s) { return llama_vocab_get_add_bos(s.vocab()); })
        .def_property_readonly("add_eos", [](const Model & s) { return llama_vocab_get_add_eos(s.vocab()); })
        .def_property_readonly("add_sep", [](const Model & s) { return llama_vocab_get_add_sep(s.vocab()); })
        .def("is_eog", [](const Model & s, llama_token t) { s.check_token(t); return llama_vocab_is_eog(s.vocab(), t); }, py::arg("token"))
        .def("is_control", [](const Model & s, llama_token t) { s.check_token(t); return llama_vocab_is_control(s.vocab(), t); }, py::arg("token"))
        .def("has_special_text",
             [](const Model & s, std::string_view text) { return s.has_special_text(text); }, py::arg("text"),
             "Whether ``text`` holds the text of a control or unknown token, the only tokens that "
             "parse_special changes: when it does not, tokenize gives the same with and without.")
        .def("tokenize_prompt",
             [](const Model & s, const std::string & text, bool add_special) {
                 py::gil_scoped_release release;  // text is a C++ copy; the cache has its own lock
                 return s.tokenize_prompt(text, add_special);
             },
             py::arg("text"), py::arg("add_special") = true,
             "``tokenize(text, add_special, parse_special=True)``, the same tokens, with the stretches "
             "between control tokens (a system prompt, earlier turns) from a cache.")
        .def("piece_cache_info",
             [](const Model & s) {
                 const auto i = s.piece_cache_info();
                 py::dict d;
                 d["hits"] = i.hits;
                 d["misses"] = i.misses;
                 d["entries"] = i.entries;
                 d["bytes"] = i.bytes;
                 return d;
             },
             "tokenize_prompt's cache: hits and misses of the stretches long enough to keep, "
             "entries and bytes of text held.")
        .def("token_text", [](const Model & s, llama_token t) { s.check_token(t); return py::bytes(llama_vocab_get_text(s.vocab(), t)); }, py::arg("token"))
        .def("token_score", [](const Model & s, llama_token t) { s.check_token(t); return llama_vocab_get_score(s.vocab(), t); }, py::arg("token"))
        .def("tokenize",
             [](const Model & s, const std::string & text, bool add_special, bool parse_special) {
                 py::gil_scoped_release release;  // text is a C++ copy; the vocab is immutable
                 return s.tokenize(text, add_special, parse_special);
             },
             py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = false)
        .def("token_to_piece",
             [](const Model & s, llama_token t, bool special) { return py::bytes(s.token_to_piece(t, special)); },
             py::arg("token"), py::arg("special") = false, "The token's bytes (may be a partial UTF-8 sequence).")
        .def("detokenize",
             [](const Model & s, const std::vector<llama_token> & toks, bool remove_special, bool unparse_special) {
                 std::string out;
                 {
                     py::gil_scoped_release release;
                     out = s.detokenize(toks, remove_special, unparse_special);
                 }
                 return py::bytes(out);
             },
             py::arg("tokens"), py::arg("remove_special") = false, py::arg("unparse_special") = false);
    m.def("fit_params", &fit, py::arg("path"), py::kw_only(), py::arg("n_gpu_layers") = -1,
          py::arg("devices") = std::vector<std::string>{}, py::arg("split_mode") = "layer", py::arg("main_gpu") = 0,
          py::arg("tensor_split") = std::vector<float>{},
          py::arg("tensor_overrides") = std::vector<std::pair<std::string, std::string>>{},
          py::arg("kv_overrides") = std::vector<std::string>{}, py::arg("n_ctx") = 0u, py::arg("n_parallel") = 1u,
          py::arg("n_batch") = 2048u, py::arg("n_ubatch") = 512u, py::arg("flash_attn") = -1,
          py::arg("type_k") = "f16", py::arg("type_v") = "f16", py::arg("kv_unified") = true,
          py::arg("swa_full") = true, py::arg("offload_kqv") = true,
          py::arg("margins_mib") = std::vector<size_t>{1024}, py::arg("n_ctx_min") = 4096u,
          py::arg("embeddings") = false, py::arg("speculative") = false, py::arg("repack") = true,
          py::arg("no_host") = false, py::arg("load_mode") = "", py::arg("lazy_mode") = "auto",
          py::arg("op_offload") = true,
          "llama-server's --fit: the GPU layers, context size, tensor split and tensor overrides "
          "(only those left at their defaults change) that fit the devices' free memory, leaving "
          "margins_mib free; status 0 fits, 1 nothing projected to fit, 2 error. It sizes the "
          "Engine's context: embeddings and speculative (a draft model or n-gram drafts) as it "
          "will be built.");
}

}  // namespace pyllama
