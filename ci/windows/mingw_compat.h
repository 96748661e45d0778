/* Declarations MinGW-w64 10 (Debian 12's) lacks and llama.cpp's C sources use; version 11
 * has them: SetThreadInformation's thread power throttling state (ggml-cpu.c,
 * ggml_thread_apply_priority).
 * Force-included into C files by mingw-w64.cmake. */
#ifndef PYLLAMA_MINGW_COMPAT_H
#define PYLLAMA_MINGW_COMPAT_H
#if defined(__MINGW32__)
#include <_mingw.h>
#if __MINGW64_VERSION_MAJOR < 11
#include <windows.h>
typedef struct _THREAD_POWER_THROTTLING_STATE {
    ULONG Version;
    ULONG ControlMask;
    ULONG StateMask;
} THREAD_POWER_THROTTLING_STATE;
#define THREAD_POWER_THROTTLING_CURRENT_VERSION 1
#define THREAD_POWER_THROTTLING_EXECUTION_SPEED 0x1
#endif
#endif
#endif
