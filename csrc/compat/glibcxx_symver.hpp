// Force-included (-include) into the C++ targets that the wheel ships and that call
// std::condition_variable::wait (CMakeLists.txt): bind it to its GLIBCXX_3.4.11 version.
//
// GCC 12's libstdc++ added a GLIBCXX_3.4.30 version of that function (one that lets a
// thread-cancellation unwind pass through; pyllama never cancels threads) and links new
// code to it. manylinux_2_34 (RHEL 9, GCC 11) allows libstdc++ symbols up to 3.4.29, so a
// wheel built with GCC 12 would need manylinux_2_35. The old version is the same function
// every GCC 11 build calls, present in every libstdc++ since GCC 4.4. For CUDA sources
// nvcc pre-includes it (--pre-include); the device passes skip it.
#pragma once

#include <cstddef>  // defines __GLIBCXX__ when the library is libstdc++

#if defined(__GLIBCXX__) && defined(__linux__) && defined(__ELF__) && !defined(__CUDA_ARCH__)
__asm__(".symver _ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE,"
        "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@GLIBCXX_3.4.11");
#endif
