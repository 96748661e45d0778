// llama.cpp's RPC backend (ggml-rpc): devices of other machines' rpc-servers added to this
// process (--rpc), and this machine's devices served to others (pyllama-rpc-server). Both
// go through the RPC registry's proc addresses, as llama-server and rpc-server do, since
// the backend is a module loaded at run time.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "ggml-backend.h"

namespace py = pybind11;

namespace pyllama {
namespace {

ggml_backend_reg_t rpc_registry() {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    if (reg == nullptr) throw std::runtime_error("this build has no RPC backend (GGML_RPC=ON)");
    return reg;
}

template <typename Fn> Fn rpc_function(const char * name) {
    auto fn = reinterpret_cast<Fn>(ggml_backend_reg_get_proc_address(rpc_registry(), name));
    if (fn == nullptr) throw std::runtime_error(std::string("the RPC backend has no ") + name);
    return fn;
}

// Each endpoint's registry, registered once: ggml hands back the same registry for an
// endpoint it knows, and registering it again would list its devices twice.
std::mutex g_mutex;
std::set<std::string> g_added;

}  // namespace

void register_rpc(py::module_ & m) {
    m.def(
        "rpc_add_server",
        [](const std::string & endpoint) {
            using add_fn = ggml_backend_reg_t (*)(const char *);
            auto add = rpc_function<add_fn>("ggml_backend_rpc_add_server");
            std::lock_guard<std::mutex> lock(g_mutex);
            ggml_backend_reg_t reg = nullptr;
            {
                // a round trip to the server; ggml aborts the process when it cannot
                // connect, so callers check the endpoint answers first (pyllama.rpc)
                py::gil_scoped_release release;
                reg = add(endpoint.c_str());
            }
            if (reg == nullptr) throw std::runtime_error("RPC server " + endpoint + " has no devices");
            if (g_added.insert(endpoint).second) ggml_backend_register(reg);
            std::vector<std::string> names;
            for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
                names.emplace_back(ggml_backend_dev_name(ggml_backend_reg_dev_get(reg, i)));
            }
            return names;
        },
        py::arg("endpoint"), "Add the devices of the rpc-server at host:port; returns their names.");
    m.def(
        "rpc_serve",
        [](const std::string & endpoint, std::optional<std::string> cache_dir, size_t n_threads,
           const std::vector<std::string> & device_names) {
            using serve_fn = void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *);
            auto serve = rpc_function<serve_fn>("ggml_backend_rpc_start_server");
            std::vector<ggml_backend_dev_t> devices;
            for (const auto & name : device_names) {
                ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
                if (dev == nullptr) throw std::invalid_argument("unknown device: " + name);
                devices.push_back(dev);
            }
            if (devices.empty()) throw std::invalid_argument("no devices to serve");
            // serves clients one after another until the process ends; the caller restores
            // the default SIGINT/SIGTERM handlers, since Python's run only between bytecodes
            py::gil_scoped_release release;
            serve(endpoint.c_str(), cache_dir ? cache_dir->c_str() : nullptr, n_threads, devices.size(),
                  devices.data());
        },
        py::arg("endpoint"), py::arg("cache_dir"), py::arg("n_threads"), py::arg("devices"),
        "Serve these devices to RPC clients at host:port (blocks; llama.cpp's rpc-server).");
}

}  // namespace pyllama
