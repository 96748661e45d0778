#include "core/dynlib.hpp"

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace fs = std::filesystem;

namespace pyllama::dynlib {

fs::path from_utf8(const std::string & path) { return fs::u8path(path); }

std::string to_utf8(const fs::path & path) {
#if defined(__cpp_lib_char8_t)
    const auto s = path.u8string();
    return std::string(reinterpret_cast<const char *>(s.data()), s.size());
#else
    return path.u8string();
#endif
}

#ifdef _WIN32
namespace {
std::string last_error() {
    const DWORD code = GetLastError();
    wchar_t * buf = nullptr;
    const DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                       FORMAT_MESSAGE_IGNORE_INSERTS,
                                   nullptr, code, 0, reinterpret_cast<wchar_t *>(&buf), 0, nullptr);
    std::wstring msg = n ? std::wstring(buf, n) : std::wstring();
    if (buf) LocalFree(buf);
    while (!msg.empty() && (msg.back() == L'\n' || msg.back() == L'\r' || msg.back() == L' ')) msg.pop_back();
    return "error " + std::to_string(code) + (msg.empty() ? "" : ": " + to_utf8(fs::path(msg)));
}
}  // namespace

void * open(const fs::path & path, std::string * error) {
    // LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR: a module's dependencies beside it (ggml-base,
    // a plugin's runtime), then the application's folder, System32 and the folders
    // Python's os.add_dll_directory added. The path must be absolute, with backslashes.
    const fs::path full = fs::absolute(path).make_preferred();
    const UINT old_mode = SetErrorMode(SEM_FAILCRITICALERRORS);  // no dialog for a missing DLL
    HMODULE h = LoadLibraryExW(full.c_str(), nullptr,
                               LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (h == nullptr && error != nullptr) *error = last_error();
    SetErrorMode(old_mode);
    return reinterpret_cast<void *>(h);
}

void * symbol(void * handle, const char * name) {
    return reinterpret_cast<void *>(GetProcAddress(static_cast<HMODULE>(handle), name));
}

void close(void * handle) { FreeLibrary(static_cast<HMODULE>(handle)); }

std::string self_path() {
    HMODULE h = nullptr;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            reinterpret_cast<LPCWSTR>(&self_path), &h)) {
        return "";
    }
    std::wstring buf(MAX_PATH, L'\0');
    while (true) {  // a long path: grow until it fits
        const DWORD n = GetModuleFileNameW(h, buf.data(), static_cast<DWORD>(buf.size()));
        if (n == 0) return "";
        if (n < buf.size()) {
            buf.resize(n);
            return to_utf8(fs::path(buf));
        }
        buf.resize(buf.size() * 2);
    }
}
#else
void * open(const fs::path & path, std::string * error) {
    void * h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr && error != nullptr) {
        const char * e = dlerror();
        *error = e ? e : "dlopen failed";
    }
    return h;
}

void * symbol(void * handle, const char * name) { return dlsym(handle, name); }

void close(void * handle) { dlclose(handle); }

std::string self_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&self_path), &info) != 0 && info.dli_fname != nullptr) {
        return info.dli_fname;
    }
    return "";
}
#endif

bool is_backend_module(const std::string & file, std::string * stem) {
#ifdef _WIN32
    const std::string ext = ".dll";
    const char * prefixes[] = {"libggml-", "ggml-"};
#else
    const std::string ext = ".so";
    const char * prefixes[] = {"libggml-"};
#endif
    if (file.size() <= ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0) return false;
    for (const std::string prefix : prefixes) {
        if (file.rfind(prefix, 0) == 0 && file.size() > prefix.size() + ext.size()) {
            *stem = file.substr(prefix.size(), file.size() - prefix.size() - ext.size());
            return *stem != "base";
        }
    }
    return false;
}

}  // namespace pyllama::dynlib
