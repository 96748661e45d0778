// The loaded ggml backends and their devices (see core/backends.hpp for how they load).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "core/backends.hpp"
#include "ggml-backend.h"

namespace py = pybind11;

namespace pyllama {
namespace {

const char * device_type(ggml_backend_dev_t dev) {
    switch (ggml_backend_dev_type(dev)) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accel";
    }
    return "unknown";
}

}  // namespace

void register_backends(py::module_ & m) {
    m.def(
        "backends",
        [] {
            py::list out;
            for (const auto & b : loaded_backends()) {
                py::dict d;
                d["name"] = b.name;
                d["variant"] = b.variant;
                d["path"] = b.path;
                d["score"] = b.score;
                out.append(d);
            }
            return out;
        },
        "The backend modules loaded at import: name, CPU variant, file and score.");
    m.def(
        "devices",
        [] {
            py::list out;
            for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
                ggml_backend_dev_t dev = ggml_backend_dev_get(i);
                size_t free = 0, total = 0;
                {
                    py::gil_scoped_release release;  // a GPU driver may take a while to answer
                    ggml_backend_dev_memory(dev, &free, &total);
                }
                py::dict d;
                d["name"] = ggml_backend_dev_name(dev);
                d["description"] = ggml_backend_dev_description(dev);
                d["type"] = device_type(dev);
                d["backend"] = ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev));
                d["memory_free"] = free;
                d["memory_total"] = total;
                out.append(d);
            }
            return out;
        },
        "Every device of the loaded backends: name, description, type, backend, memory.");
    m.def(
        "load_plugin",
        [](const std::string & dir) {
            py::list out;
            for (const auto & b : load_plugin(dir)) out.append(b.name);
            return out;
        },
        py::arg("dir"),
        "Load a backend plugin's module from its folder; returns the backends it added. "
        "RuntimeError with the reason when it cannot load.");
    m.def("module_dir", &module_dir, "The folder _core was loaded from.");
}

}  // namespace pyllama
