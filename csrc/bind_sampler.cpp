#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core/context.hpp"
#include "core/logits_scan.hpp"
#include "core/sampler.hpp"
#include "core/sampling.hpp"

namespace py = pybind11;

namespace pyllama {

void register_sampler(py::module_ & m) {
    namespace s = samplers;
    py::class_<Sampler>(m, "Sampler",
                        "One llama.cpp sampler or a chain of them. Sampler.chain() makes a chain; "
                        "chain.add(stage) moves stage into it.")
        .def_static("chain", &Sampler::chain, py::kw_only(), py::arg("no_perf") = true)
        .def("add", &Sampler::add, py::arg("stage"), "Move stage into this chain; returns nothing.")
        .def("__len__", &Sampler::chain_size)
        .def_property_readonly("is_chain", &Sampler::is_chain)
        .def_property_readonly("empty", &Sampler::empty)
        .def_property_readonly("name", &Sampler::name)
        .def_property_readonly("seed", &Sampler::seed)
        .def("accept", &Sampler::accept, py::arg("token"))
        .def("reset", &Sampler::reset)
        .def("clone", &Sampler::clone)
        .def(
            "sample",
            [](Sampler & smpl, Context & ctx, int32_t idx) {
                llama_sampler * raw = smpl.get();
                // Sorting and grammar matching over the vocabulary can take a millisecond:
                // release the GIL; the context serialises itself with its mutex.
                py::gil_scoped_release release;
                return ctx.sample(raw, idx);
            },
            py::arg("ctx"), py::arg("idx") = -1,
            "Sample from output idx of ctx's last decode and accept the token.")
        .def(
            "sample_logits",
            [](Sampler & smpl, py::array_t<float, py::array::c_style | py::array::forcecast> logits) {
                if (logits.ndim() != 1) throw std::invalid_argument("logits must be one-dimensional");
                const float * data = logits.data();
                const size_t n = static_cast<size_t>(logits.size());
                smpl.get();
                // the array is kept alive by the caller's reference; sorting needs no GIL
                py::gil_scoped_release release;
                return smpl.sample_logits(data, n);
            },
            py::arg("logits"),
            "Apply the stages to these logits (one per vocabulary entry), accept and return "
            "the selected token.")
        // stages
        .def_static("greedy", &s::greedy)
        .def_static("dist", &s::dist, py::arg("seed") = LLAMA_DEFAULT_SEED)
        .def_static("top_k", &s::top_k, py::arg("k"))
        .def_static("top_p", &s::top_p, py::arg("p"), py::arg("min_keep") = 1)
        .def_static("min_p", &s::min_p, py::arg("p"), py::arg("min_keep") = 1)
        .def_static("typical", &s::typical, py::arg("p"), py::arg("min_keep") = 1)
        .def_static("temp", &s::temp, py::arg("t"))
        .def_static("temp_ext", &s::temp_ext, py::arg("t"), py::arg("delta"), py::arg("exponent"),
                    "Dynamic temperature (dynatemp range and exponent).")
        .def_static("xtc", &s::xtc, py::arg("p"), py::arg("t"), py::arg("min_keep") = 1,
                    py::arg("seed") = LLAMA_DEFAULT_SEED)
        .def_static("top_n_sigma", &s::top_n_sigma, py::arg("n"))
        .def_static("mirostat", &s::mirostat, py::arg("n_vocab"), py::arg("seed"), py::arg("tau"), py::arg("eta"),
                    py::arg("m") = 100)
        .def_static("mirostat_v2", &s::mirostat_v2, py::arg("seed"), py::arg("tau"), py::arg("eta"))
        .def_static(
            "grammar",
            [](const Model & model, const std::string & gbnf, const std::string & root) {
                py::gil_scoped_release release;  // parsing a large grammar is not free
                return s::grammar(model, gbnf, root);
            },
            py::arg("model"), py::arg("grammar"), py::arg("root") = "root")
        .def_static("grammar_lazy", &s::grammar_lazy, py::arg("model"), py::arg("grammar"), py::arg("root") = "root",
                    py::arg("trigger_patterns") = std::vector<std::string>{},
                    py::arg("trigger_tokens") = std::vector<llama_token>{})
        .def_static("penalties", &s::penalties, py::arg("last_n") = 64, py::arg("repeat") = 1.0f,
                    py::arg("freq") = 0.0f, py::arg("present") = 0.0f)
        .def_static("dry", &s::dry, py::arg("model"), py::arg("multiplier"), py::arg("base") = 1.75f,
                    py::arg("allowed_length") = 2, py::arg("last_n") = -1,
                    py::arg("seq_breakers") = std::vector<std::string>{"\n", ":", "\"", "*"})
        .def_static("adaptive_p", &s::adaptive_p, py::arg("target"), py::arg("decay") = 0.9f,
                    py::arg("seed") = LLAMA_DEFAULT_SEED)
        .def_static("logit_bias", &s::logit_bias, py::arg("n_vocab"), py::arg("biases"))
        .def_static("infill", &s::infill, py::arg("model"));


    py::class_<SamplingParams> sp(m, "SamplingParams",
                                  "Every llama-server sampling option; defaults are llama-server's.");
    sp.def(py::init<>());
    sp.def("validate", &SamplingParams::validate, "Raise ValueError naming the first invalid field.");
    sp.def_readwrite("seed", &SamplingParams::seed);
    sp.def_readwrite("min_keep", &SamplingParams::min_keep);
    sp.def_readwrite("top_k", &SamplingParams::top_k);
    sp.def_readwrite("top_p", &SamplingParams::top_p);
    sp.def_readwrite("min_p", &SamplingParams::min_p);
    sp.def_readwrite("xtc_probability", &SamplingParams::xtc_probability);
    sp.def_readwrite("xtc_threshold", &SamplingParams::xtc_threshold);
    sp.def_readwrite("typical_p", &SamplingParams::typical_p);
    sp.def_readwrite("temperature", &SamplingParams::temperature);
    sp.def_readwrite("dynatemp_range", &SamplingParams::dynatemp_range);
    sp.def_readwrite("dynatemp_exponent", &SamplingParams::dynatemp_exponent);
    sp.def_readwrite("repeat_last_n", &SamplingParams::repeat_last_n);
    sp.def_readwrite("repeat_penalty", &SamplingParams::repeat_penalty);
    sp.def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty);
    sp.def_readwrite("presence_penalty", &SamplingParams::presence_penalty);
    sp.def_readwrite("dry_multiplier", &SamplingParams::dry_multiplier);
    sp.def_readwrite("dry_base", &SamplingParams::dry_base);
    sp.def_readwrite("dry_allowed_length", &SamplingParams::dry_allowed_length);
    sp.def_readwrite("dry_penalty_last_n", &SamplingParams::dry_penalty_last_n);
    sp.def_readwrite("dry_sequence_breakers", &SamplingParams::dry_sequence_breakers);
    sp.def_readwrite("mirostat", &SamplingParams::mirostat);
    sp.def_readwrite("mirostat_tau", &SamplingParams::mirostat_tau);
    sp.def_readwrite("mirostat_eta", &SamplingParams::mirostat_eta);
    sp.def_readwrite("top_n_sigma", &SamplingParams::top_n_sigma);
    sp.def_readwrite("adaptive_target", &SamplingParams::adaptive_target);
    sp.def_readwrite("adaptive_decay", &SamplingParams::adaptive_decay);
    sp.def_readwrite("ignore_eos", &SamplingParams::ignore_eos);
    sp.def_readwrite("logit_bias", &SamplingParams::logit_bias);
    sp.def_readwrite("grammar", &SamplingParams::grammar);
    sp.def_readwrite("grammar_lazy", &SamplingParams::grammar_lazy);
    sp.def_readwrite("grammar_trigger_patterns", &SamplingParams::grammar_trigger_patterns);
    sp.def_readwrite("grammar_trigger_tokens", &SamplingParams::grammar_trigger_tokens);
    sp.def_readwrite("grammar_prefill", &SamplingParams::grammar_prefill,
                     "tokens a non-lazy grammar accepts first (a chat's generation prompt)");
    sp.def_readwrite("samplers", &SamplingParams::samplers);
    sp.def_readwrite("backend_sampling", &SamplingParams::backend_sampling,
                     "run the chain inside the decode graph where its stages allow (an engine task)");
    m.def(
        "build_sampler_chain",
        [](const Model & model, const SamplingParams & params, int32_t n_ctx) {
            return build_sampler_chain(model, params, n_ctx);
        },
        py::arg("model"), py::arg("params"), py::arg("n_ctx"),
        "The chain llama-server would build for params (grammar first, then its stage order).");

    m.def(
        "_argmax",
        [](py::array_t<float, py::array::c_style | py::array::forcecast> row, const std::string & kernel) {
            static const std::pair<const char *, ScanIsa> kKernels[] = {
                {"scalar", ScanIsa::Scalar}, {"sse2", ScanIsa::Sse2}, {"avx2", ScanIsa::Avx2},
                {"avx512", ScanIsa::Avx512}, {"neon", ScanIsa::Neon}};
            if (kernel == "best") return argmax(row.data(), static_cast<int32_t>(row.size()));
            for (const auto & [name, isa] : kKernels) {
                if (kernel == name) {
                    if (!scan_isa_available(isa)) throw py::value_error("argmax kernel " + kernel + ": not on this CPU or build");
                    return argmax_with(isa, row.data(), static_cast<int32_t>(row.size()));
                }
            }
            throw py::value_error("argmax kernel " + kernel + ": unknown (best, scalar, sse2, avx2, avx512, neon)");
        },
        py::arg("row"), py::arg("kernel") = "best",
        "The engine's greedy argmax of a float32 row with one kernel (first maximum, NaN never "
        "wins, -1 when all are -inf); for tests.");
    m.def("json_schema_to_grammar", &json_schema_to_grammar, py::arg("schema"),
          "Convert a JSON schema (JSON text) to GBNF with llama.cpp's converter.");
}

}  // namespace pyllama
