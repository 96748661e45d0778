#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "core/model.hpp"
#include "core/threads.hpp"

namespace py = pybind11;

namespace pyllama {

void register_threads(py::module_ & m) {
    py::class_<CpuParams>(m, "CpuParams",
                          "CPU placement of ggml's compute threads (llama-server's --cpu-mask, --cpu-range, "
                          "--cpu-strict, --prio, --poll).")
        .def(py::init([](std::string mask, std::string range, int strict, int priority, int poll) {
                 CpuParams p{std::move(mask), std::move(range), strict, priority, poll};
                 p.to_ggml(1);  // a bad mask, range, priority or poll level fails here
                 return p;
             }),
             py::kw_only(), py::arg("mask") = "", py::arg("range") = "", py::arg("strict") = 0,
             py::arg("priority") = 0, py::arg("poll") = 50)
        .def_readonly("mask", &CpuParams::mask)
        .def_readonly("range", &CpuParams::range)
        .def_readonly("strict", &CpuParams::strict)
        .def_readonly("priority", &CpuParams::priority)
        .def_readonly("poll", &CpuParams::poll)
        .def_property_readonly("is_default", &CpuParams::is_default)
        .def("__repr__", [](const CpuParams & p) {
            return "CpuParams(mask='" + p.mask + "', range='" + p.range + "', strict=" + std::to_string(p.strict) +
                   ", priority=" + std::to_string(p.priority) + ", poll=" + std::to_string(p.poll) + ")";
        });
    m.def("set_process_priority", &set_process_priority, py::arg("priority"),
          "The process's scheduling priority (-1 low, 0 normal, 1 medium, 2 high, 3 realtime); False "
          "when the system refuses.");
    m.def("numa_init", &numa_init, py::arg("strategy"),
          "ggml's NUMA strategy (distribute, isolate, numactl), once, before a model loads.");
    m.def("buffer_type_names", &buffer_type_names,
          "Buffer types a tensor override may name: each loaded device's own (CPU, CUDA0 ...).");
}

}  // namespace pyllama
