# A backend plugin (PYLLAMA_PLUGIN=cuda|vulkan): ggml-<backend> alone, installed as
# pyllama_plugins/<backend>/libggml-<backend>.so with plugin.json beside it. The core
# (pyllama/plugins.py) finds the folder at import and loads the module after its own.
#
# The module links libggml-base.so from the core wheel (pyllama/lib, two folders up) and,
# for CUDA, the runtime libraries of the nvidia-* wheels (nvidia/cu13/lib): the layout
# that pip gives site-packages, which RPATHs relative to the module reach.
set(_target "ggml-${PYLLAMA_PLUGIN}")
if(NOT TARGET ${_target})
  message(FATAL_ERROR "pyllama: PYLLAMA_PLUGIN=${PYLLAMA_PLUGIN}: ggml has no ${_target} target")
endif()
if(NOT GGML_BACKEND_DL)
  message(FATAL_ERROR "pyllama: a plugin needs GGML_BACKEND_DL (not GGML_NATIVE=on)")
endif()

set(_rpath "$ORIGIN/../../pyllama/lib")
if(PYLLAMA_PLUGIN STREQUAL "cuda")
  # ggml-cuda finds the toolkit in its own directory scope: its version is not seen here
  # (an empty one made the RUNPATH nvidia/cu/lib, where no wheel puts the runtime)
  find_package(CUDAToolkit REQUIRED)
  string(REGEX MATCH "^[0-9]+" _cuda_major "${CUDAToolkit_VERSION}")
  if(NOT _cuda_major)
    message(FATAL_ERROR "pyllama: the CUDA toolkit's version is unknown (CUDAToolkit_VERSION)")
  endif()
  list(APPEND _rpath "$ORIGIN/../../nvidia/cu${_cuda_major}/lib")
endif()
# Unversioned names, as the core's: the module's NEEDED entry must say libggml-base.so.
foreach(_lib ${_target} ggml-base)
  set_property(TARGET ${_lib} PROPERTY VERSION)
  set_property(TARGET ${_lib} PROPERTY SOVERSION)
endforeach()
set_target_properties(${_target} PROPERTIES INSTALL_RPATH "${_rpath}")
# manylinux_2_34 (CMakeLists.txt): the C++ sources, and the CUDA file whose host code
# waits on a condition variable (nvcc's own pre-include: a host-compiler -include would
# land after nvcc has already expanded the headers)
pyllama_glibcxx_compat(${_target})
if(PYLLAMA_SYMVER AND PYLLAMA_PLUGIN STREQUAL "cuda")
  set_property(SOURCE "${PYLLAMA_VENDOR_DIR}/ggml/src/ggml-cuda/ggml-cuda.cu"
               TARGET_DIRECTORY ${_target} APPEND PROPERTY COMPILE_OPTIONS
               "--pre-include=${PYLLAMA_SYMVER_HEADER}")
endif()

# What the core checks before loading: ggml has no stable ABI, so the plugin must come
# from the same pyllama version (and so the same llama.cpp) as the core.
get_directory_property(_ggml_version DIRECTORY "${PYLLAMA_VENDOR_DIR}/ggml" DEFINITION GGML_VERSION)
string(REPLACE "_" "-" _distribution "${SKBUILD_PROJECT_NAME}")
set(_plugin_json "${CMAKE_CURRENT_BINARY_DIR}/plugin.json")
# "needs": what the module opens at run time rather than links (the CUDA runtime opens the
# driver), checked by the core before loading so that its absence is named
set(_needs "")
if(PYLLAMA_PLUGIN STREQUAL "cuda")
  if(WIN32)
    set(_driver "nvcuda.dll")
  else()
    set(_driver "libcuda.so.1")
  endif()
  set(_needs ", \"needs\": {\"${_driver}\": \"the NVIDIA driver, 580 or newer\"}")
endif()
file(WRITE "${_plugin_json}" "{\"name\": \"${PYLLAMA_PLUGIN}\", \"distribution\": \"${_distribution}\", \"version\": \"${SKBUILD_PROJECT_VERSION}\", \"ggml\": \"${_ggml_version}\"${_needs}}\n")

set(_dest "pyllama_plugins/${PYLLAMA_PLUGIN}")
install(TARGETS ${_target} LIBRARY DESTINATION ${_dest} COMPONENT pyllama-plugin)
install(FILES "${_plugin_json}" DESTINATION ${_dest} COMPONENT pyllama-plugin)
install(FILES "${PYLLAMA_VENDOR_DIR}/LICENSE" DESTINATION ${_dest} RENAME llama.cpp.LICENSE
        COMPONENT pyllama-plugin)
