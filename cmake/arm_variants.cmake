# ggml's Linux ARM CPU variants (GGML_CPU_ALL_VARIANTS) with a compiler that cannot build
# the last two.
#
# The list ends with two SME variants, armv9.2_1 and armv9.2_2, compiled with
# -march=armv9.2-a+...+sme: GCC learnt that value in version 14, and Debian 12's cross
# compiler (GCC 12, the one the release wheels are built with) stops at armv9-a. ggml adds
# every variant whatever the compiler and makes libggml depend on each module, so a single
# unknown -march fails the whole build (llama.cpp issue 17983). With such a compiler this
# file takes those two out of libggml's dependencies: they are configured but never
# built, the build carries the other six, and a CPU with SME runs armv8.6_2 (SVE2, i8mm).
#
# Included before llama.cpp is added: by the root CMakeLists.txt for the wheel, and through
# CMAKE_PROJECT_INCLUDE for llama.cpp's own tools (ci/build_peer_aarch64.sh), so that both
# carry the same variants. Sets PYLLAMA_CPU_SKIPPED_VARIANTS (target names; empty when the
# compiler builds all of them).
include_guard(GLOBAL)
include(CheckCCompilerFlag)
check_c_compiler_flag("-march=armv9.2-a+sme" PYLLAMA_CC_ARMV9_2_SME)
set(PYLLAMA_CPU_SKIPPED_VARIANTS "")
if(NOT PYLLAMA_CC_ARMV9_2_SME)
  set(PYLLAMA_CPU_SKIPPED_VARIANTS ggml-cpu-armv9.2_1 ggml-cpu-armv9.2_2)
  message(STATUS "pyllama: ${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION} has no "
                 "-march=armv9.2-a+sme: ggml's SME CPU variants are left out")
  # A function named as a CMake command replaces it; the original stays callable as
  # _add_dependencies. Only libggml's dependencies on those two modules are dropped.
  function(add_dependencies target)
    set(_deps ${ARGN})
    if(target STREQUAL "ggml")
      list(REMOVE_ITEM _deps ggml-cpu-armv9.2_1 ggml-cpu-armv9.2_2)
    endif()
    if(_deps)
      _add_dependencies(${target} ${_deps})
    endif()
  endfunction()
endif()
