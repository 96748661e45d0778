/* pyconfig.h for python.org's Windows x64 CPython, when a MinGW-w64 GCC builds an
 * extension for it (the Windows test vehicle, ci/windows/). python.org's installers and
 * its embeddable zip carry no headers: the platform-neutral ones come from any CPython of
 * the same minor version, and this file stands in for the MSVC build's own pyconfig.h.
 * It sets only what the public headers read; sizes are those of the LLP64 ABI that MSVC
 * and MinGW-w64 share. */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H

#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define PY_SUPPORT_TIER 1

/* the interpreter is python3XY.dll: its API is imported (__declspec(dllimport)) */
#define Py_ENABLE_SHARED 1
#define HAVE_DECLSPEC_DLL

#define SIZEOF_SHORT 2
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define SIZEOF_LONG_LONG 8
#define SIZEOF_FLOAT 4
#define SIZEOF_DOUBLE 8
#define SIZEOF_VOID_P 8
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_OFF_T 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF__BOOL 1
#define SIZEOF_PID_T SIZEOF_INT
#define SIZEOF_HKEY 8
#define ALIGNOF_SIZE_T 8
#define ALIGNOF_MAX_ALIGN_T 8
#define PY_LONG_LONG long long
#define PY_LLONG_MIN LLONG_MIN
#define PY_LLONG_MAX LLONG_MAX
#define PY_ULLONG_MAX ULLONG_MAX

/* what MSVC's C runtime has, as the MSVC pyconfig.h says */
#define HAVE_WCHAR_H 1
#define HAVE_STDDEF_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_ERRNO_H 1
#define HAVE_FCNTL_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_PROCESS_H 1
#define HAVE_DIRECT_H 1
#define HAVE_IO_H 1
#define HAVE_CONIO_H 1
#define HAVE_STRFTIME 1
#define HAVE_PUTENV 1
#define HAVE_COPYSIGN 1
#define HAVE_ERF 1
#define HAVE_ERFC 1
#define HAVE_LARGEFILE_SUPPORT
#define DONT_HAVE_SIG_ALARM
#define DONT_HAVE_SIG_PAUSE
#define LONG_BIT 32
#define WORD_BIT 32
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1
#define HAVE_PY_SET_53BIT_PRECISION 0

/* no HAVE_SSIZE_T: pyport.h then makes Py_ssize_t an intptr_t, 64 bits as MSVC's __int64 */

#endif /* Py_CONFIG_H */
