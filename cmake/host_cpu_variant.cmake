# The build machine's best ggml CPU variant, for a source build (x86-64 Linux, not cross).
#
# A source build's portable module is x86-64-v3 (ggml's "haswell" variant: AVX2 FMA F16C
# BMI2). Where the build machine has more (AVX-512, AVX-VNNI) that module leaves its best
# kernels unused, and where it has less (no AVX2) it cannot run at all. So the source build
# reads the machine's CPU flags and builds, as the release wheel does, variant modules
# loaded at run time: "haswell" plus the machine's own variant, or the machine's alone
# below AVX2 (the run-time score picks: a build moved to an older machine falls back).
# Never an AMX variant: some hosts report AMX yet die with SIGILL in its kernels
# (PYLLAMA_AMX=ON allows it). The score is ggml's (ggml-cpu/arch/x86/cpu-feats.cpp).
#
#   pyllama_host_cpu_variant(<flags> <out>): <flags> as /proc/cpuinfo names them
#   (space-separated), <out> the variant's name, "" when none fits.
include_guard(GLOBAL)

# ggml's x86 variants and their features (ggml/src/CMakeLists.txt), low to high
set(_PYLLAMA_X86_VARIANTS
    "sse42:SSE42"
    "sandybridge:SSE42,AVX"
    "ivybridge:SSE42,AVX,F16C"
    "piledriver:SSE42,AVX,F16C,FMA"
    "haswell:SSE42,AVX,F16C,FMA,AVX2,BMI2"
    "skylakex:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512"
    "cannonlake:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VBMI"
    "cascadelake:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VNNI"
    "icelake:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VBMI,AVX512_VNNI"
    "cooperlake:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VNNI,AVX512_BF16"
    "zen4:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VBMI,AVX512_VNNI,AVX512_BF16"
    "alderlake:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX_VNNI"
    "sapphirerapids:SSE42,AVX,F16C,FMA,AVX2,BMI2,AVX512,AVX512_VBMI,AVX512_VNNI,AVX512_BF16,AMX_TILE,AMX_INT8")

# a ggml feature: the /proc/cpuinfo flags it needs, and its weight in ggml's score
set(_PYLLAMA_FEAT_FMA "fma;1")
set(_PYLLAMA_FEAT_F16C "f16c;2")
set(_PYLLAMA_FEAT_SSE42 "sse4_2;4")
set(_PYLLAMA_FEAT_BMI2 "bmi2;8")
set(_PYLLAMA_FEAT_AVX "avx;16")
set(_PYLLAMA_FEAT_AVX2 "avx2;32")
set(_PYLLAMA_FEAT_AVX_VNNI "avx_vnni;64")
set(_PYLLAMA_FEAT_AVX512 "avx512f,avx512cd,avx512vl,avx512dq,avx512bw;128")
set(_PYLLAMA_FEAT_AVX512_VBMI "avx512vbmi;256")
set(_PYLLAMA_FEAT_AVX512_BF16 "avx512_bf16;512")
set(_PYLLAMA_FEAT_AVX512_VNNI "avx512_vnni;1024")
set(_PYLLAMA_FEAT_AMX_INT8 "amx_int8;2048")
set(_PYLLAMA_FEAT_AMX_TILE "amx_tile;0")

function(pyllama_host_cpu_variant flags out)
  string(REPLACE " " ";" _have "${flags}")
  set(_best "")
  set(_best_score 0)
  foreach(_entry IN LISTS _PYLLAMA_X86_VARIANTS)
    string(REPLACE ":" ";" _parts "${_entry}")
    list(GET _parts 0 _name)
    list(GET _parts 1 _feats)
    string(REPLACE "," ";" _feats "${_feats}")
    if("AMX_INT8" IN_LIST _feats AND NOT PYLLAMA_AMX)
      continue()
    endif()
    set(_score 1)
    foreach(_feat IN LISTS _feats)
      list(GET _PYLLAMA_FEAT_${_feat} 0 _needs)
      list(GET _PYLLAMA_FEAT_${_feat} 1 _weight)
      string(REPLACE "," ";" _needs "${_needs}")
      foreach(_flag IN LISTS _needs)
        if(NOT _flag IN_LIST _have)
          set(_score 0)
        endif()
      endforeach()
      if(_score EQUAL 0)
        break()
      endif()
      math(EXPR _score "${_score} + ${_weight}")
    endforeach()
    if(_score GREATER _best_score)
      set(_best "${_name}")
      set(_best_score ${_score})
    endif()
  endforeach()
  set(${out} "${_best}" PARENT_SCOPE)
endfunction()

# The variants a source build makes for the machine whose flags are <flags>: "" for the
# single portable module (the machine's best is haswell), else a list for
# PYLLAMA_CPU_VARIANTS.
function(pyllama_host_cpu_variants flags out)
  pyllama_host_cpu_variant("${flags}" _host)
  if(_host STREQUAL "haswell" OR _host STREQUAL "")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE " " ";" _have "${flags}")
  if("avx2" IN_LIST _have AND "fma" IN_LIST _have AND "bmi2" IN_LIST _have)
    set(${out} "haswell;${_host}" PARENT_SCOPE)  # the portable module runs here too
  else()
    set(${out} "${_host}" PARENT_SCOPE)  # below x86-64-v3: the portable module cannot run
  endif()
endfunction()

# `cmake -DFLAGS="..." -P cmake/host_cpu_variant.cmake`: print the choice (tests)
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  pyllama_host_cpu_variants("${FLAGS}" _variants)
  message("${_variants}")
endif()
