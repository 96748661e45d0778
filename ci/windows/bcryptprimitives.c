/* bcryptprimitives.dll for wine 8, which lacks it: Rust programs since Rust 1.78 take
 * their random bytes from its ProcessPrng (pydantic-core and jiter, which the server and
 * the OpenAI client import, among them). Windows 10 and later have the real DLL; wine 9
 * added it. check.sh puts this one beside the vehicle's python.exe, nowhere else. */
#include <windows.h>
#include <ntsecapi.h> /* RtlGenRandom (advapi32's SystemFunction036) */

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        const ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
