// ggml's backends are shared modules (GGML_BACKEND_DL) in pyllama/lib, beside _core: CPU
// variants (libggml-cpu-<variant>.so in a release wheel, one libggml-cpu.so in a source
// build) and GPU plugins (libggml-cuda.so ...). They are loaded from there once, when _core
// is imported, before any model: ggml's own default would search python's folder.
// A native build (GGML_NATIVE=on) cannot load modules (ggml refuses the pair on x86): its
// backends are linked into libggml, and loading only lists them.
#pragma once

#include <string>
#include <vector>

namespace pyllama {

// One backend module that was loaded.
struct LoadedBackend {
    std::string name;     // the registry's name: "CPU", "CUDA" ...
    std::string variant;  // the CPU variant ("haswell"), "" for an unsuffixed module
    std::string path;
    int score;            // what the module said of this machine (higher is better)
};

// The folder of the shared object that holds this code (_core).
std::string module_dir();

// Load the best module of each backend found in `dir`, once. The CPU variant is the
// best-scoring one unless PYLLAMA_CPU_VARIANT names another; variants that use AMX
// (sapphirerapids) are never picked on their own: some hosts report AMX and then kill
// its kernels with SIGILL, so they need PYLLAMA_CPU_VARIANT (or PYLLAMA_AMX=1).
// Throws std::runtime_error when no CPU backend can be loaded or the named variant
// is missing or unsupported here.
void load_backends(const std::string & dir);

// Load the best module of each backend in a plugin's folder (pyllama_plugins/<name>/, a
// separately installed distribution), after load_backends. Throws std::runtime_error with
// the reason (dlopen's message: no driver, a missing library) when none can load, or when
// that backend is loaded already; the caller reports it and goes on with what it has.
std::vector<LoadedBackend> load_plugin(const std::string & dir);

const std::vector<LoadedBackend> & loaded_backends();

}  // namespace pyllama
