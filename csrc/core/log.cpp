#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ggml.h"
#include "llama.h"
#include "log.h"
#include "mtmd-helper.h"

namespace pyllama {
namespace {

std::atomic<int> g_level{GGML_LOG_LEVEL_ERROR};
// --log-file: llama.cpp's lines are appended there too (set before the model loads)
std::mutex g_file_mu;
std::FILE * g_file = nullptr;
// Per thread: the callback runs on the thread that called into llama.cpp, which is
// the thread that will raise. Bounded so a chatty failure cannot grow it unbounded.
thread_local std::string t_captured;
thread_local int t_last_level = GGML_LOG_LEVEL_NONE;
constexpr size_t kMaxCaptured = 4096;
// llama.cpp says how many layers a model load put on devices only in its log (INFO)
thread_local int t_offloaded = -1;
thread_local int t_offload_total = -1;

void callback(ggml_log_level level, const char * text, void * /*user*/) {
    const int lv = level == GGML_LOG_LEVEL_CONT ? t_last_level : static_cast<int>(level);
    t_last_level = lv;
    if (const char * at = std::strstr(text, "offloaded "); at != nullptr && std::strstr(text, "layers to GPU")) {
        int n = 0, total = 0;
        if (std::sscanf(at, "offloaded %d/%d layers", &n, &total) == 2) {
            t_offloaded = n;
            t_offload_total = total;
        }
    }
    if (lv >= GGML_LOG_LEVEL_WARN && t_captured.size() < kMaxCaptured) {
        t_captured.append(text, strnlen(text, kMaxCaptured - t_captured.size()));
    }
    if (lv >= g_level.load(std::memory_order_relaxed)) {
        std::fputs(text, stderr);
        std::lock_guard<std::mutex> lk(g_file_mu);
        if (g_file) std::fputs(text, g_file);
    }
}

}  // namespace

void log_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (const char * env = std::getenv("PYLLAMA_LOG_LEVEL")) {
            g_level = std::atoi(env);
        }
        llama_log_set(callback, nullptr);
        mtmd_helper_log_set(callback, nullptr);  // libmtmd and clip log on their own
    });
}

void log_set_level(int level) {
    g_level = level;
    // llama.cpp's common code (fit, control vectors, overrides) logs on its own: same bar
    int thold = LOG_LEVEL_DEBUG;
    if (level > GGML_LOG_LEVEL_ERROR) {  // pyllama's 5: silent
        thold = -1;
    } else if (level >= GGML_LOG_LEVEL_ERROR) {
        thold = LOG_LEVEL_ERROR;
    } else if (level >= GGML_LOG_LEVEL_WARN) {
        thold = LOG_LEVEL_WARN;
    } else if (level >= GGML_LOG_LEVEL_INFO) {
        thold = LOG_LEVEL_INFO;
    }
    common_log_set_verbosity_thold(thold);
}

bool log_set_file(const std::string & path) {
    std::lock_guard<std::mutex> lk(g_file_mu);
    if (g_file) std::fclose(g_file);
    g_file = path.empty() ? nullptr : ggml_fopen(path.c_str(), "a");
    if (g_file) std::setvbuf(g_file, nullptr, _IOLBF, 0);
    return path.empty() || g_file != nullptr;
}
int log_get_level() { return g_level; }
void log_clear() {
    t_captured.clear();
    t_offloaded = t_offload_total = -1;
}

bool log_offload(int & on_devices, int & total) {
    if (t_offloaded < 0) return false;
    on_devices = t_offloaded;
    total = t_offload_total;
    return true;
}

std::string log_take() {
    std::string out;
    out.swap(t_captured);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

void log_append(const std::string & text) {
    if (text.empty()) return;
    t_captured += text;
    t_captured += '\n';
}

void fail(const std::string & what) {
    std::string detail = log_take();
    throw LlamaError(detail.empty() ? what : what + ": " + detail);
}

}  // namespace pyllama
