/*
 * keep_thp.so — an EXPERIMENT shim for hugepage studies, preloaded before the allocator.
 *
 * Debian's MariaDB calls prctl(PR_SET_THP_DISABLE, 1) during start-up, after its buffer pool is
 * mapped; from then on no page of the process gets a transparent hugepage, including regions an
 * allocator advised with MADV_HUGEPAGE (the kernel's "except advised" mode is opt-in and MariaDB
 * does not ask for it). So under system THP=always, the allocator's heap never sees hugepages.
 *
 * This shim turns that one prctl call into a no-op so that the system THP mode reaches the heap.
 * It changes the server's behaviour: results made with it are labelled as an experiment in the
 * manifest and the report. Every other prctl call is forwarded unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/prctl.h>

int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long);
    unsigned long a3 = va_arg(ap, unsigned long);
    unsigned long a4 = va_arg(ap, unsigned long);
    unsigned long a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_THP_DISABLE && a2 != 0)
        return 0;
    int (*real)(int, ...) = (int (*)(int, ...))dlsym(RTLD_NEXT, "prctl");
    return real(option, a2, a3, a4, a5);
}
