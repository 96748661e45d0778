// Projector (--mmproj): media prompts for the engine.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core/projector.hpp"
#include "mtmd.h"

namespace py = pybind11;

namespace pyllama {

void register_projector(py::module_ & m) {
    py::register_exception<MediaError>(m, "MediaError", PyExc_ValueError);
    m.def("default_media_marker", [] { return std::string(mtmd_default_marker()); },
          "The text that stands for one image or audio file in a prompt: '<__media__>'.");

    m.def(
        "projector_caps",
        [](const std::string & path) {
            const mtmd_caps caps = mtmd_get_cap_from_file(path.c_str());
            return std::make_pair(caps.inp_vision, caps.inp_audio);  // to a tuple once the GIL is back
        },
        py::arg("path"), py::call_guard<py::gil_scoped_release>(),
        "(vision, audio) of a projector file, read from its header without loading it.");

    py::class_<MediaChunk>(m, "MediaChunk", "One image or audio file in a tokenized prompt.")
        .def_readonly("start", &MediaChunk::start, "index of its first placeholder token in the prompt")
        .def_readonly("n_tokens", &MediaChunk::n_tokens)
        .def_readonly("n_pos", &MediaChunk::n_pos, "positions it takes (fewer than n_tokens with M-RoPE)")
        .def_readonly("audio", &MediaChunk::audio)
        .def_readonly("id", &MediaChunk::id, "SHA-256 of the file")
        .def("__repr__", [](const MediaChunk & c) {
            return std::string("<MediaChunk ") + (c.audio ? "audio" : "image") + " start=" + std::to_string(c.start) +
                   " n_tokens=" + std::to_string(c.n_tokens) + ">";
        });

    py::class_<MediaPrompt>(m, "MediaPrompt", "Tokens (media as placeholder tokens < -1) and the media chunks.")
        .def_readonly("tokens", &MediaPrompt::tokens)
        .def_readonly("media", &MediaPrompt::media)
        .def_readonly("seconds", &MediaPrompt::seconds, "per file: an audio file's duration in seconds, 0 for an image")
        .def("__len__", [](const MediaPrompt & p) { return p.tokens.size(); });

    py::class_<Projector, std::shared_ptr<Projector>>(m, "Projector",
                                                      "A multimodal projector (mmproj GGUF) bound to a loaded model.")
        .def(py::init([](std::shared_ptr<Model> model, const std::string & path, bool use_gpu, int32_t n_threads,
                         int32_t image_min_tokens, int32_t image_max_tokens, int32_t batch_max_tokens, bool warmup,
                         const std::string & device, const std::string & marker) {
                 if (!model) throw std::invalid_argument("model is None");
                 ProjectorParams p;
                 p.use_gpu = use_gpu;
                 p.n_threads = n_threads;
                 p.image_min_tokens = image_min_tokens;
                 p.image_max_tokens = image_max_tokens;
                 p.batch_max_tokens = batch_max_tokens;
                 p.warmup = warmup;
                 p.device = device;
                 p.marker = marker;
                 py::gil_scoped_release release;  // loading and the warm-up encode take time
                 return std::make_shared<Projector>(std::move(model), path, p);
             }),
             py::arg("model"), py::arg("path"), py::kw_only(), py::arg("use_gpu") = true, py::arg("n_threads") = 4,
             py::arg("image_min_tokens") = -1, py::arg("image_max_tokens") = -1, py::arg("batch_max_tokens") = -1,
             py::arg("warmup") = true, py::arg("device") = "", py::arg("marker") = "")
        .def_property_readonly("vision", &Projector::vision)
        .def_property_readonly("audio", &Projector::audio)
        .def_property_readonly("mrope", &Projector::mrope)
        .def_property_readonly("audio_sample_rate", &Projector::audio_sample_rate)
        .def_property_readonly("marker", &Projector::marker)
        .def_property_readonly("path", &Projector::path)
        .def(
            "tokenize",
            [](const Projector & p, const std::string & text, const std::vector<py::bytes> & files, bool add_special,
               bool parse_special) {
                std::vector<std::string> raw;
                raw.reserve(files.size());
                for (const auto & f : files) raw.emplace_back(f);
                // decoding and preprocessing the files: no GIL (thread-safe in mtmd)
                py::gil_scoped_release release;
                return p.tokenize(text, raw, add_special, parse_special);
            },
            py::arg("text"), py::arg("files"), py::arg("add_special") = true, py::arg("parse_special") = true,
            "Tokenize text holding one marker per file; MediaError for a file the projector cannot take.");
}

}  // namespace pyllama
