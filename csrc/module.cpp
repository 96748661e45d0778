// pyllama._core: llama.cpp bound with pybind11. Only registration happens here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "core/backends.hpp"
#include "build-info.h"
#include "core/log.hpp"
#include "llama.h"

#include <algorithm>

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "llama.cpp bindings: models, contexts, batches and samplers";
    pyllama::log_init();
    // the backend modules beside _core, before anything can load a model
    pyllama::load_backends(pyllama::module_dir() + "/lib");
    llama_backend_init();

    pyllama::register_backends(m);
    pyllama::register_errors(m);
    pyllama::register_threads(m);
    pyllama::register_model(m);
    pyllama::register_batch(m);
    pyllama::register_context(m);
    pyllama::register_sampler(m);
    pyllama::register_projector(m);
    pyllama::register_engine(m);
    pyllama::register_rpc(m);
    pyllama::register_chat(m);

    m.def("set_log_level", &pyllama::log_set_level, py::arg("level"),
          "Lowest ggml log level echoed to stderr: 1 debug, 2 info, 3 warn, 4 error, 5 none.");
    m.def("get_log_level", &pyllama::log_get_level);
    m.def("set_log_file", &pyllama::log_set_file, py::arg("path"),
          "Also append the echoed llama.cpp lines to this file ('': stop); False if it cannot be opened.");
    m.def("system_info", [] { return std::string(llama_print_system_info()); });
    // llama-server's build string ("b<build number>-<commit>", its system_fingerprint and
    // /props build_info), from llama-common built out of the same tree
    m.def("build_info", [] { return std::string(llama_build_info()); });
    m.def("supports_gpu_offload", &llama_supports_gpu_offload);
    m.def("supports_mmap", &llama_supports_mmap);
    m.def("supports_mlock", &llama_supports_mlock);
    m.def("max_devices", [] { return llama_max_devices(); });
    m.def("time_us", &llama_time_us);
    // llama.cpp's built-in (non-Jinja) chat formats, named as --chat-template accepts them
    m.def("chat_builtin_templates", [] {
        const int32_t n = llama_chat_builtin_templates(nullptr, 0);
        std::vector<const char *> names(static_cast<size_t>(std::max(n, 0)));
        llama_chat_builtin_templates(names.data(), names.size());
        return std::vector<std::string>(names.begin(), names.end());
    });
    m.def(
        "chat_apply_builtin",
        [](const std::string & tmpl, const std::vector<std::pair<std::string, std::string>> & messages,
           bool add_assistant) {
            std::vector<llama_chat_message> chat;
            chat.reserve(messages.size());
            for (const auto & [role, content] : messages) chat.push_back({role.c_str(), content.c_str()});
            std::string buf(1024, '\0');
            for (int attempt = 0; attempt < 2; ++attempt) {
                const int32_t n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(),
                                                            add_assistant, buf.data(), static_cast<int32_t>(buf.size()));
                if (n < 0) throw std::invalid_argument("unsupported chat template: " + tmpl);
                if (static_cast<size_t>(n) <= buf.size()) {
                    buf.resize(static_cast<size_t>(n));
                    return buf;
                }
                buf.resize(static_cast<size_t>(n));
            }
            return buf;
        },
        py::arg("template"), py::arg("messages"), py::arg("add_assistant") = true,
        "Format (role, content) pairs with one of llama.cpp's built-in templates, by name or "
        "detected from a template's text (ValueError when none matches).");
    m.attr("DEFAULT_SEED") = LLAMA_DEFAULT_SEED;
    m.attr("__version__") = PYLLAMA_VERSION;
}
