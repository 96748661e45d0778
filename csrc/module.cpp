// pyllama._core: llama.cpp bound with pybind11. Only registration happens here.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "core/log.hpp"
#include "llama.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "llama.cpp bindings: models, contexts, batches and samplers";
    pyllama::log_init();
    llama_backend_init();

    pyllama::register_errors(m);
    pyllama::register_model(m);
    pyllama::register_batch(m);
    pyllama::register_context(m);
    pyllama::register_sampler(m);
    pyllama::register_engine(m);

    m.def("set_log_level", &pyllama::log_set_level, py::arg("level"),
          "Lowest ggml log level echoed to stderr: 1 debug, 2 info, 3 warn, 4 error, 5 none.");
    m.def("get_log_level", &pyllama::log_get_level);
    m.def("system_info", [] { return std::string(llama_print_system_info()); });
    m.def("supports_gpu_offload", &llama_supports_gpu_offload);
    m.def("supports_mmap", &llama_supports_mmap);
    m.def("supports_mlock", &llama_supports_mlock);
    m.def("max_devices", [] { return llama_max_devices(); });
    m.def("time_us", &llama_time_us);
    m.attr("DEFAULT_SEED") = LLAMA_DEFAULT_SEED;
    m.attr("__version__") = PYLLAMA_VERSION;
}
