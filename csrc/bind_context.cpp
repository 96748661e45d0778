#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core/context.hpp"

namespace py = pybind11;

namespace pyllama {

namespace {

// A float32 view of llama.cpp-owned memory with `owner` as its base, so the context
// outlives the array. The data is overwritten by the next decode on this context.
py::array_t<float> view(float * data, py::ssize_t n, py::handle owner) {
    return py::array_t<float>({n}, {static_cast<py::ssize_t>(sizeof(float))}, data, owner);
}

py::dict perf_dict(const llama_perf_context_data & d) {
    py::dict out;
    out["t_start_ms"] = d.t_start_ms;
    out["t_load_ms"] = d.t_load_ms;
    out["t_p_eval_ms"] = d.t_p_eval_ms;
    out["t_eval_ms"] = d.t_eval_ms;
    out["n_p_eval"] = d.n_p_eval;
    out["n_eval"] = d.n_eval;
    out["n_reused"] = d.n_reused;
    return out;
}

}  // namespace

void register_context(py::module_ & m) {
    py::class_<LoraAdapter, std::shared_ptr<LoraAdapter>>(m, "LoraAdapter", "A LoRA adapter loaded for a model.")
        .def(py::init([](std::shared_ptr<Model> model, const std::string & path) {
                 py::gil_scoped_release release;  // file I/O; model is kept alive by the holder
                 return std::make_shared<LoraAdapter>(std::move(model), path);
             }),
             py::arg("model"), py::arg("path"))
        .def_property_readonly("path", &LoraAdapter::path);

    py::class_<Context>(m, "Context", "An inference context (KV cache, outputs) on a Model.")
        .def(py::init([](std::shared_ptr<Model> model, uint32_t n_ctx, uint32_t n_batch, uint32_t n_ubatch,
                         uint32_t n_seq_max, int32_t n_threads, int32_t n_threads_batch, int32_t flash_attn,
                         bool embeddings, int32_t pooling, int32_t attention, const std::string & type_k,
                         const std::string & type_v, bool offload_kqv, bool kv_unified, bool swa_full,
                         bool no_perf, float rope_freq_base, float rope_freq_scale, bool compute_thread) {
                 if (!model) throw std::invalid_argument("model is None");
                 ContextParams p;
                 p.n_ctx = n_ctx;
                 p.n_batch = n_batch;
                 p.n_ubatch = n_ubatch;
                 p.n_seq_max = n_seq_max;
                 p.n_threads = n_threads;
                 p.n_threads_batch = n_threads_batch;
                 p.flash_attn = flash_attn;
                 p.embeddings = embeddings;
                 p.pooling = pooling;
                 p.attention = attention;
                 p.type_k = type_k;
                 p.type_v = type_v;
                 p.offload_kqv = offload_kqv;
                 p.kv_unified = kv_unified;
                 p.swa_full = swa_full;
                 p.no_perf = no_perf;
                 p.rope_freq_base = rope_freq_base;
                 p.rope_freq_scale = rope_freq_scale;
                 p.compute_thread = compute_thread;
                 if (flash_attn < -1 || flash_attn > 1) throw std::invalid_argument("flash_attn must be -1 (auto), 0 or 1");
                 if (n_seq_max == 0) throw std::invalid_argument("n_seq_max must be >= 1");
                 // Allocating the KV cache can take a while: release the GIL (params are C++ now).
                 py::gil_scoped_release release;
                 return std::make_unique<Context>(std::move(model), p);
             }),
             py::arg("model"), py::kw_only(), py::arg("n_ctx") = 0, py::arg("n_batch") = 2048,
             py::arg("n_ubatch") = 512, py::arg("n_seq_max") = 1, py::arg("n_threads") = -1,
             py::arg("n_threads_batch") = -1, py::arg("flash_attn") = -1, py::arg("embeddings") = false,
             py::arg("pooling") = -1, py::arg("attention") = -1, py::arg("type_k") = "f16",
             py::arg("type_v") = "f16", py::arg("offload_kqv") = true, py::arg("kv_unified") = true,
             py::arg("swa_full") = true, py::arg("no_perf") = false, py::arg("rope_freq_base") = 0.0f,
             py::arg("rope_freq_scale") = 0.0f, py::arg("compute_thread") = true,
             "compute_thread: run decode/encode on the context's own thread whichever Python thread\n"
             "calls (ggml's OpenMP pools are per calling thread; see csrc/core/compute_thread.hpp).")
        .def_property_readonly("model", &Context::model)
        .def_property_readonly("n_ctx", &Context::n_ctx)
        .def_property_readonly("n_batch", &Context::n_batch)
        .def_property_readonly("n_ubatch", &Context::n_ubatch)
        .def_property_readonly("n_seq_max", &Context::n_seq_max)
        .def_property_readonly("n_threads", &Context::n_threads)
        .def_property_readonly("pooling", &Context::pooling)
        .def_property_readonly("n_outputs", &Context::n_outputs)
        .def_property_readonly("n_embd_out", &Context::n_embd_out)
        .def("set_n_threads", &Context::set_n_threads, py::arg("n_threads"), py::arg("n_threads_batch") = -1)
        .def("set_embeddings", &Context::set_embeddings, py::arg("embeddings"))
        .def("set_causal_attn", &Context::set_causal_attn, py::arg("causal"))
        // The two compute calls release the GIL: Context and Batch are C++ objects kept
        // alive by the call's arguments, and Context serialises itself with its mutex.
        // The caller must not modify the batch from another thread meanwhile.
        .def("decode", &Context::decode, py::arg("batch"), py::call_guard<py::gil_scoped_release>())
        .def("encode", &Context::encode, py::arg("batch"), py::call_guard<py::gil_scoped_release>())
        .def("logits_ith",
             [](py::object self, int32_t idx) {
                 auto & c = self.cast<Context &>();
                 return view(c.logits_ith(idx), c.model()->n_vocab(), self);
             },
             py::arg("idx") = -1, "Zero-copy float32 view of output idx's logits (valid until the next decode).")
        .def("embeddings_ith",
             [](py::object self, int32_t idx) {
                 auto & c = self.cast<Context &>();
                 return view(c.embeddings_ith(idx), llama_model_n_embd_out(c.model()->get()), self);
             },
             py::arg("idx") = -1, "Zero-copy view of output idx's embedding (pooling none).")
        .def("embeddings_seq",
             [](py::object self, llama_seq_id seq) {
                 auto & c = self.cast<Context &>();
                 return view(c.embeddings_seq(seq), c.n_embd_out(), self);
             },
             py::arg("seq_id"), "Zero-copy view of a sequence's pooled embedding (or rank scores).")
        // memory (KV cache)
        .def("memory_clear", &Context::memory_clear, py::arg("data") = true)
        .def("seq_rm", &Context::seq_rm, py::arg("seq_id"), py::arg("p0") = -1, py::arg("p1") = -1)
        .def("seq_cp", &Context::seq_cp, py::arg("src"), py::arg("dst"), py::arg("p0") = -1, py::arg("p1") = -1)
        .def("seq_keep", &Context::seq_keep, py::arg("seq_id"))
        .def("seq_add", &Context::seq_add, py::arg("seq_id"), py::arg("p0"), py::arg("p1"), py::arg("delta"))
        .def("seq_div", &Context::seq_div, py::arg("seq_id"), py::arg("p0"), py::arg("p1"), py::arg("d"))
        .def("seq_pos_min", &Context::seq_pos_min, py::arg("seq_id"))
        .def("seq_pos_max", &Context::seq_pos_max, py::arg("seq_id"))
        .def_property_readonly("can_shift", &Context::can_shift)
        // per-sequence state
        .def("seq_state_get",
             [](Context & c, llama_seq_id seq) {
                 std::string s;
                 {
                     py::gil_scoped_release release;
                     s = c.seq_state_get(seq);
                 }
                 return py::bytes(s);
             },
             py::arg("seq_id"))
        .def("seq_state_set",
             [](Context & c, py::bytes data, llama_seq_id seq) {
                 std::string s = data;  // copy out of the Python object before releasing the GIL
                 py::gil_scoped_release release;
                 c.seq_state_set(s, seq);
             },
             py::arg("data"), py::arg("seq_id"))
        .def("seq_state_save", &Context::seq_state_save, py::arg("path"), py::arg("seq_id"),
             py::arg("tokens") = std::vector<llama_token>{}, py::call_guard<py::gil_scoped_release>())
        .def("seq_state_load", &Context::seq_state_load, py::arg("path"), py::arg("seq_id"),
             py::arg("max_tokens") = 1 << 20, py::call_guard<py::gil_scoped_release>(),
             "Restore a sequence saved by seq_state_save; returns its tokens.")
        .def("set_lora", &Context::set_lora, py::arg("adapters"),
             "Apply [(adapter, scale), ...] replacing the current set; [] removes all.")
        .def("perf", [](const Context & c) { return perf_dict(c.perf()); })
        .def("perf_reset", &Context::perf_reset);
}

}  // namespace pyllama
