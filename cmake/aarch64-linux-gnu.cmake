# CMake toolchain: Linux aarch64 with Debian's cross compiler (gcc-aarch64-linux-gnu, the
# same GCC 12 as the x86-64 wheels). Used by ci/build_wheel_aarch64.sh for the wheel and by
# ci/build_peer_aarch64.sh for llama.cpp's own tools. The compiler brings its own libc and
# libstdc++ (/usr/aarch64-linux-gnu); the Python headers come from ci/arm64_root.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# programs (ninja, python) are the build machine's; libraries and headers the target's;
# CMake packages (pybind11's config, header-only) from wherever the build puts them
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
