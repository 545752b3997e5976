/* bcryptprimitives.dll for Wine 8, which lacks it: Rust's standard library
 * (1.78+) imports ProcessPrng from it and exits 53 before main without it.
 * ProcessPrng forwards to advapi32's RtlGenRandom (SystemFunction036).
 * Built by scripts/test/windows.sh and put beside kopiru.exe; never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
