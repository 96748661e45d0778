# PYLLAMA_CPU_VARIANTS: with PYLLAMA_CPU_ALL_VARIANTS, build only the ggml CPU variants named
# (x86: "x64;sse42;sandybridge;haswell"), for test builds that want pyllama's variant choice
# without compiling all fourteen (the Windows test vehicle, ci/windows/), and for a source
# build's portable and own variants (cmake/host_cpu_variant.cmake). Empty: all of them.
#
# ggml adds every variant and makes libggml depend on each module; as in arm_variants.cmake,
# a function named add_dependencies takes the others out of libggml's dependencies, so they
# are configured but never built, and the root CMakeLists leaves them out of the install
# (global property PYLLAMA_CPU_SKIPPED_VARIANTS).
include_guard(GLOBAL)
if(NOT DEFINED PYLLAMA_CPU_VARIANTS)  # the root's choice for this machine is a plain variable
  set(PYLLAMA_CPU_VARIANTS "" CACHE STRING "build only these CPU variants (empty: all)")
endif()
if(PYLLAMA_CPU_VARIANTS)
  function(add_dependencies target)
    set(_deps ${ARGN})
    if(target STREQUAL "ggml")
      foreach(_dep ${ARGN})
        if(_dep MATCHES "^ggml-cpu-(.+)$" AND NOT CMAKE_MATCH_1 IN_LIST PYLLAMA_CPU_VARIANTS)
          list(REMOVE_ITEM _deps ${_dep})
          set_property(GLOBAL APPEND PROPERTY PYLLAMA_CPU_SKIPPED_VARIANTS ${_dep})
        endif()
      endforeach()
    endif()
    if(_deps)
      _add_dependencies(${target} ${_deps})
    endif()
  endfunction()
endif()
