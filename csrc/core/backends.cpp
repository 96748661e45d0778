#include "core/backends.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include "core/dynlib.hpp"
#include "ggml-backend.h"

namespace fs = std::filesystem;

namespace pyllama {
namespace {

std::vector<LoadedBackend> g_loaded;

struct Candidate {
    std::string variant;
    fs::path path;
    int score;
    std::string error;  // why the OS would not load it (score 0)
};

bool env_on(const char * name) {
    const char * v = std::getenv(name);
    if (v == nullptr) return false;
    const std::string s(v);
    return s == "1" || s == "on" || s == "ON" || s == "true" || s == "yes";
}

bool same_name(const std::string & a, const std::string & b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

bool uses_amx(const std::string & variant) { return variant == "sapphirerapids"; }

// What a module says of this machine: its ggml_backend_score (0: cannot run here), or 1
// for a module without one (an unsuffixed build of one variant). Loading a module runs
// none of its kernels, so this is safe for variants this CPU cannot execute.
int score_of(const fs::path & path, std::string * error) {
    void * handle = dynlib::open(path, error);
    if (handle == nullptr) return 0;
    using score_fn = int (*)();
    auto fn = reinterpret_cast<score_fn>(dynlib::symbol(handle, "ggml_backend_score"));
    const int s = fn ? fn() : 1;
    dynlib::close(handle);
    return s;
}

// ggml's loader, given a module this process can load. On Windows the module is opened
// here first, with its own folder searched for its dependencies (ggml opens with plain
// LoadLibraryW, which does not search it), and ggml is handed the bare file name, which
// Windows resolves to the module already loaded: an ASCII name, whatever the folder's.
ggml_backend_reg_t load_module(const fs::path & path) {
#ifdef _WIN32
    std::string error;
    if (dynlib::open(path, &error) == nullptr) return nullptr;  // kept open for the process
    return ggml_backend_load(dynlib::to_utf8(path.filename()).c_str());
#else
    return ggml_backend_load(path.c_str());
#endif
}

std::string list(const std::vector<Candidate> & cs) {
    std::string out;
    for (const auto & c : cs) out += (out.empty() ? "" : ", ") + (c.variant.empty() ? "(default)" : c.variant);
    return out;
}

const Candidate * pick_cpu(const std::vector<Candidate> & cs) {
    if (const char * want = std::getenv("PYLLAMA_CPU_VARIANT"); want != nullptr && *want) {
        for (const auto & c : cs) {
            if (c.variant == want) {
                if (c.score == 0) {
                    throw std::runtime_error(std::string("PYLLAMA_CPU_VARIANT=") + want +
                                             ": this CPU lacks the instructions that variant needs");
                }
                return &c;
            }
        }
        throw std::runtime_error(std::string("PYLLAMA_CPU_VARIANT=") + want + ": no such CPU variant (built: " +
                                 list(cs) + ")");
    }
    const bool amx = env_on("PYLLAMA_AMX");
    const Candidate * best = nullptr;
    for (const auto & c : cs) {
        if (c.score == 0 || (uses_amx(c.variant) && !amx)) continue;
        if (best == nullptr || c.score > best->score) best = &c;
    }
    return best;
}

// libggml-<backend>[-<variant>].so (ggml-<backend>[-<variant>].dll ...) in `dir`, grouped
// by backend, each with its score (and, for a module that would not load, the OS's reason).
std::map<std::string, std::vector<Candidate>> scan(const std::string & dir) {
    std::map<std::string, std::vector<Candidate>> found;
    std::error_code ec;
    for (const auto & entry : fs::directory_iterator(dynlib::from_utf8(dir), ec)) {
        std::string stem;
        if (!dynlib::is_backend_module(dynlib::to_utf8(entry.path().filename()), &stem)) continue;
        const size_t dash = stem.find('-');
        const std::string backend = stem.substr(0, dash);
        const std::string variant = dash == std::string::npos ? "" : stem.substr(dash + 1);
        Candidate c{variant, entry.path(), 0, ""};
        c.score = score_of(entry.path(), &c.error);
        found[backend].push_back(std::move(c));
    }
    for (auto & [backend, cs] : found) {
        std::sort(cs.begin(), cs.end(), [](const Candidate & a, const Candidate & b) { return a.variant < b.variant; });
    }
    return found;
}

const Candidate * pick_best(const std::vector<Candidate> & cs) {
    const Candidate * best = nullptr;
    for (const auto & c : cs) {
        if (c.score > 0 && (best == nullptr || c.score > best->score)) best = &c;
    }
    return best;
}

}  // namespace

std::string module_dir() {
    const std::string self = dynlib::self_path();
    if (self.empty()) return ".";
    return dynlib::to_utf8(dynlib::from_utf8(self).parent_path());
}

void load_backends(const std::string & dir) {
    static std::once_flag once;
    std::call_once(once, [&] {
#ifndef PYLLAMA_BACKEND_DL
        // A native build (GGML_NATIVE=on): its backends are linked into libggml and
        // registered already; there is nothing to choose.
        (void)dir;
        if (const char * want = std::getenv("PYLLAMA_CPU_VARIANT"); want != nullptr && *want) {
            throw std::runtime_error(std::string("PYLLAMA_CPU_VARIANT=") + want +
                                     ": this build has one CPU backend built for this machine "
                                     "(GGML_NATIVE), no variants");
        }
        for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
            ggml_backend_reg_t reg = ggml_backend_reg_get(i);
            g_loaded.push_back({ggml_backend_reg_name(reg), "", "", 1});
        }
#else
        std::map<std::string, std::vector<Candidate>> found = scan(dir);
        for (auto & [backend, cs] : found) {
            const Candidate * best = backend == "cpu" ? pick_cpu(cs) : pick_best(cs);
            if (best == nullptr) continue;  // a GPU module with no device here, say
            if (ggml_backend_reg_t reg = load_module(best->path)) {
                g_loaded.push_back({ggml_backend_reg_name(reg), best->variant, dynlib::to_utf8(best->path), best->score});
            }
        }
        const bool have_cpu = std::any_of(g_loaded.begin(), g_loaded.end(),
                                          [](const LoadedBackend & b) { return b.name == "CPU"; });
        if (!have_cpu) {
            throw std::runtime_error("no CPU backend could be loaded from " + dir +
                                     (found.count("cpu") ? " (built: " + list(found["cpu"]) + ")" : ""));
        }
#endif
    });
}

std::vector<LoadedBackend> load_plugin(const std::string & dir) {
    std::vector<LoadedBackend> out;
    const auto found = scan(dir);
#ifdef _WIN32
    if (found.empty()) throw std::runtime_error("no ggml-<backend>.dll in " + dir);
#else
    if (found.empty()) throw std::runtime_error("no libggml-<backend>.so in " + dir);
#endif
    for (const auto & [backend, cs] : found) {
        for (const auto & loaded : g_loaded) {
            if (same_name(loaded.name, backend)) {
                throw std::runtime_error("a " + backend + " backend is already loaded from " + loaded.path);
            }
        }
        const Candidate * best = pick_best(cs);
        if (best == nullptr) {
            std::string why;
            for (const auto & c : cs) why += (why.empty() ? "" : "; ") + dynlib::to_utf8(c.path.filename()) + ": " + c.error;
            throw std::runtime_error(why);
        }
        ggml_backend_reg_t reg = load_module(best->path);
        if (reg == nullptr) throw std::runtime_error(dynlib::to_utf8(best->path) + ": ggml could not initialise the backend");
        g_loaded.push_back({ggml_backend_reg_name(reg), best->variant, dynlib::to_utf8(best->path), best->score});
        out.push_back(g_loaded.back());
    }
    return out;
}

const std::vector<LoadedBackend> & loaded_backends() { return g_loaded; }

}  // namespace pyllama
