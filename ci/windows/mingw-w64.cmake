# Cross-compiling pyllama for Windows x86-64 with Debian's MinGW-w64 GCC (POSIX threads),
# run under wine: the Windows test vehicle (ci/windows/check.sh). Not the release toolchain
# (that is clang with MSVC's runtime: cmake/x64-windows-llvm.cmake in llama.cpp, the
# release workflow's Windows job); this one links msvcrt and libstdc++, whose DLLs the
# check ships beside the others.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)  # pybind11's CMake package is the host's
# DLL names as MSVC and llama.cpp's Windows releases have them (ggml-cpu-haswell.dll,
# llama.dll), not MinGW's lib-prefixed ones: ggml's own loader looks for "ggml-*.dll"
set(CMAKE_SHARED_LIBRARY_PREFIX "")
set(CMAKE_SHARED_MODULE_PREFIX "")
set(CMAKE_IMPORT_LIBRARY_PREFIX "")
# MinGW-w64 10 (Debian 12) lacks what ggml-cpu.c uses to stop Windows throttling its threads
set(CMAKE_C_FLAGS_INIT "-include ${CMAKE_CURRENT_LIST_DIR}/mingw_compat.h")
