// Shared libraries and paths, the same on every OS: dlopen/dladdr on Linux and macOS,
// LoadLibraryExW/GetModuleHandleExW on Windows. Paths cross this boundary as UTF-8
// std::strings (what pybind11 makes of a Python str); on Windows they become UTF-16
// here, so a folder with non-ASCII characters (a user name) loads as any other.
#pragma once

#include <filesystem>
#include <string>

namespace pyllama::dynlib {

std::filesystem::path from_utf8(const std::string & path);
std::string to_utf8(const std::filesystem::path & path);

// Open `path` (its own folder is searched for its dependencies first, on Windows too);
// nullptr with *error set when it cannot load.
void * open(const std::filesystem::path & path, std::string * error);
void * symbol(void * handle, const char * name);
void close(void * handle);

// The file of the shared object that holds this code (_core), UTF-8.
std::string self_path();

// File names of ggml's backend modules here: "libggml-" (Linux, macOS, MinGW) or
// "ggml-" (MSVC and clang-cl) before the backend, ".dll" on Windows, else ".so".
bool is_backend_module(const std::string & file, std::string * stem);

}  // namespace pyllama::dynlib
