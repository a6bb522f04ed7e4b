/* slowmalloc: glibc's malloc made slower by a known amount -- make bench's positive control.
 *
 * Why: a benchmark that has never been shown to see a known difference has not shown it can see
 * any. This library is a custom allocator arm (the suite's [[allocators.custom]], preloaded like
 * any user's .so): every malloc-family call burns a fixed number of spin iterations, then
 * forwards to the next definition (glibc's, found with dlsym(RTLD_NEXT)). Its true cost at a level
 * is then known from a paired measurement (bench/positive_control.py calibrates the spins so that
 * OLTP_RO@8 loses ~5% and ~10%), and the design under test must call it "slower".
 *
 * The wait is a count of loop iterations, not a time: a slower allocator costs CPU cycles, and on
 * a loaded machine a cycle count keeps its cost in CPU the same while a timed wait would shrink
 * with preemption. SLOWMALLOC_SPINS (environment, read once at load) sets the count; 0 or unset
 * makes the library a pure forwarder (its own overhead: one indirect call).
 *
 * The binding proof sees malloc and free bound to this library (it defines them); the memory is
 * glibc's, so malloc_usable_size and the allocator's statistics stay glibc's.
 *
 * dlsym may itself allocate (glibc's dlerror buffer): calls made while the real functions are
 * being looked up are served from a small static arena that free() recognises and ignores.
 *
 * The growth control. SLOWMALLOC_LEAK_MB_PER_H (environment, a number) makes the process's
 * resident memory grow at a known rate: on a malloc call, the chunks of 64 KiB due since the
 * library was loaded (rate x elapsed time) are mapped and written to, and never given back. They
 * are mapped with mmap, not taken from the heap, so that they cannot land in memory the heap
 * already holds resident (which would hide them from RSS); the allocator's in-use does not count
 * them, so the "held" part (resident heap minus in use) grows at the same rate. A server that is
 * idle makes no calls and catches up at its next call: over a cycle or an hour the growth is the
 * rate. The soak's growth verdicts must call this arm "grows more" by the rate.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

static unsigned long spins;
static int resolving;

#define LEAK_CHUNK (64 * 1024)
static double leak_chunks_per_s; /* 0: no leak */
static struct timespec leak_t0;
static unsigned long leak_done; /* chunks mapped so far (claimed atomically) */

/* The bootstrap arena: only for allocations made inside dlsym while resolving. */
static char boot[8192] __attribute__((aligned(16)));
static size_t boot_used;

static void *boot_alloc(size_t n) {
    size_t at = (boot_used + 15) & ~(size_t)15;
    if (at + n > sizeof boot)
        return NULL;
    boot_used = at + n;
    return boot + at;
}

static int in_boot(const void *p) {
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void resolve(void) {
    if (real_malloc || resolving)
        return;
    resolving = 1;
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    const char *s = getenv("SLOWMALLOC_SPINS");
    spins = s ? strtoul(s, NULL, 10) : 0;
    const char *leak = getenv("SLOWMALLOC_LEAK_MB_PER_H");
    double mb_per_h = leak ? strtod(leak, NULL) : 0.0;
    if (mb_per_h > 0) {
        leak_chunks_per_s = mb_per_h * 1024.0 * 1024.0 / LEAK_CHUNK / 3600.0;
        clock_gettime(CLOCK_MONOTONIC, &leak_t0);
    }
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}

__attribute__((constructor)) static void init(void) { resolve(); }

/* The busy wait: a loop the compiler cannot remove (the asm makes i observable). */
static inline void burn(void) {
    for (unsigned long i = 0; i < spins; i++)
        __asm__ __volatile__("" : "+r"(i));
}

/* The chunks due by now, each claimed by one caller (compare-and-swap), mapped and written. */
static void leak_due(void) {
    if (leak_chunks_per_s <= 0)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    double elapsed = (double)(now.tv_sec - leak_t0.tv_sec) + (now.tv_nsec - leak_t0.tv_nsec) / 1e9;
    unsigned long due = (unsigned long)(elapsed * leak_chunks_per_s);
    int saved = errno; /* a failed mmap must not change what the caller sees */
    unsigned long done = __atomic_load_n(&leak_done, __ATOMIC_RELAXED);
    while (done < due) {
        if (!__atomic_compare_exchange_n(&leak_done, &done, done + 1, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue; /* another thread took chunk `done`; `done` now holds the new count */
        void *p = mmap(NULL, LEAK_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED)
            memset(p, 0x5a, LEAK_CHUNK); /* resident, and not the shared zero page */
        done++;
    }
    errno = saved;
}

void *malloc(size_t n) {
    if (!real_malloc) {
        resolve();
        if (!real_malloc)
            return boot_alloc(n);
    }
    burn();
    leak_due();
    return real_malloc(n);
}

void *calloc(size_t n, size_t size) {
    if (!real_calloc) {
        resolve();
        if (!real_calloc) {
            if (size && n > SIZE_MAX / size)
                return NULL;
            return boot_alloc(n * size); /* static storage: already zero */
        }
    }
    burn();
    return real_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    if (in_boot(p)) { /* never expected: move a bootstrap block to real memory */
        void *q = malloc(n);
        if (q)
            memcpy(q, p, n < sizeof boot ? n : sizeof boot);
        return q;
    }
    if (!real_realloc)
        resolve();
    burn();
    return real_realloc(p, n);
}

void free(void *p) {
    if (!p || in_boot(p))
        return;
    if (!real_free)
        resolve();
    burn();
    real_free(p);
}

void *memalign(size_t align, size_t n) {
    if (!real_memalign)
        resolve();
    burn();
    return real_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
    if (!real_posix_memalign)
        resolve();
    burn();
    return real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n) {
    if (!real_aligned_alloc)
        resolve();
    burn();
    return real_aligned_alloc(align, n);
}
