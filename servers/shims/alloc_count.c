/*
 * alloc_count.so — counts the server's calls into its allocator (the allocator's "exposure"),
 * per thread and without locks, and forwards every call to the NEXT definition in lookup order:
 * the allocator under test (a preload after this one) or libc. It is preloaded FIRST, so that it
 * wins the binding of the malloc family and of C++'s operator new/delete, and it never serves a
 * call itself (except the few ld.so makes while this library resolves its next definitions, which
 * come from a small static buffer: dlsym may itself call calloc).
 *
 * Counted (one per call, whatever it returns):
 *   allocation calls: malloc, calloc, realloc, memalign, posix_memalign, aligned_alloc, valloc,
 *                     pvalloc, and operator new / new[] (every overload interposed below);
 *   free calls:       free and operator delete / delete[] (free(NULL) included: it is a call);
 *   bytes asked:      the size argument of each allocation call (calloc: n * size; realloc: the
 *                     new size).
 * An operator new that reaches malloc (libstdc++'s does, through its own GOT, into this library
 * again) is one call, not two: calls made while an operator new/delete of ours is in progress on
 * the same thread are forwarded uncounted.
 *
 * Per thread, without locks: each thread's first call enrols a block of counters (a static pool;
 * a block whose thread exited is adopted by a new thread, so the counts never go backwards and
 * the pool is not exhausted by thread churn); only its thread writes it (relaxed atomic stores, a
 * plain add on x86-64 and AArch64). A reader sums every block (mallocsweep_alloc_counts), so
 * threads that exited before the read still count. Calls made while a thread is exiting, or when
 * the pool is full, go to one shared block with atomic adds.
 *
 * The binding proof (servers/binding.py) follows the calls through this library: the address
 * each interposed symbol forwards to is in mallocsweep_next[], named in mallocsweep_next_names,
 * both read from the running process.
 *
 * Only symbols present in glibc 2.34 and older are linked (as alloc_stats.c), so the host's build
 * loads in a server root of a newer release. Without MALLOCSWEEP_ALLOC_COUNT=1 in the environment
 * nothing is counted (forwarding only), so a stray preload cannot skew a figure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define LIKELY(x) __builtin_expect(!!(x), 1)

/* kinds of call counted; the reader's names follow this order */
enum { K_MALLOC, K_CALLOC, K_REALLOC, K_MEMALIGN, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC, K_VALLOC,
       K_PVALLOC, K_NEW, K_FREE, K_DELETE, NKINDS };
EXPORT const char mallocsweep_count_kinds[] =
    "malloc,calloc,realloc,memalign,posix_memalign,aligned_alloc,valloc,pvalloc,new,free,delete";

struct block {
    uint64_t calls[NKINDS];
    uint64_t bytes;
    struct block *next; /* the list of every block ever enrolled (never unlinked) */
    int owned;          /* 1 while a live thread writes it; 0: free for adoption */
} __attribute__((aligned(64))); /* one cache line set per thread: no false sharing */

#define POOL 4096
static struct block pool[POOL];
static unsigned pool_used;
static struct block *head;
static struct block shared; /* exiting threads, a full pool, calls before set-up */
static TLS struct block *mine;
static TLS int depth;     /* > 0: inside one of our calls (operator new -> malloc), or enrolling */
static pthread_key_t exit_key;
static int key_ready, counting;

/* --- the next definitions: resolved once, before which ld.so's calls use a static buffer ----- */
enum { N_MALLOC, N_CALLOC, N_REALLOC, N_FREE, N_MEMALIGN, N_POSIX_MEMALIGN, N_ALIGNED_ALLOC,
       N_VALLOC, N_PVALLOC, N_NEW, N_NEWA, N_NEW_NT, N_NEWA_NT, N_NEW_AL, N_NEWA_AL, N_NEW_AL_NT,
       N_NEWA_AL_NT, N_DEL, N_DELA, N_DEL_SZ, N_DELA_SZ, N_DEL_NT, N_DELA_NT, N_DEL_AL, N_DELA_AL,
       N_DEL_SZ_AL, N_DELA_SZ_AL, NNEXT };
EXPORT const char mallocsweep_next_names[] =
    "malloc,calloc,realloc,free,memalign,posix_memalign,aligned_alloc,valloc,pvalloc,"
    "_Znwm,_Znam,_ZnwmRKSt9nothrow_t,_ZnamRKSt9nothrow_t,_ZnwmSt11align_val_t,"
    "_ZnamSt11align_val_t,_ZnwmSt11align_val_tRKSt9nothrow_t,_ZnamSt11align_val_tRKSt9nothrow_t,"
    "_ZdlPv,_ZdaPv,_ZdlPvm,_ZdaPvm,_ZdlPvRKSt9nothrow_t,_ZdaPvRKSt9nothrow_t,"
    "_ZdlPvSt11align_val_t,_ZdaPvSt11align_val_t,_ZdlPvmSt11align_val_t,_ZdaPvmSt11align_val_t";
EXPORT void *mallocsweep_next[NNEXT];
static int resolved; /* 0: not yet, 1: resolving (this thread is in dlsym), 2: done */

static char boot[64 * 1024] __attribute__((aligned(64)));
static size_t boot_used;

static int in_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof(boot);
}

static void *boot_alloc(size_t n, size_t align)
{
    /* 16 bytes of header hold the size (a later realloc copies it out) */
    if (align < 16)
        align = 16;
    size_t at = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
    for (;;) {
        size_t start = (at + 16 + align - 1) & ~(align - 1);
        if (start + n > sizeof(boot))
            return NULL;
        if (__atomic_compare_exchange_n(&boot_used, &at, start + n, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            *(size_t *)(boot + start - 16) = n;
            return boot + start;
        }
    }
}

static void resolve(void)
{
    int expect = 0;
    if (!__atomic_compare_exchange_n(&resolved, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    const char *p = mallocsweep_next_names;
    char name[64];
    for (int i = 0; i < NNEXT; i++) {
        size_t len = strcspn(p, ",");
        memcpy(name, p, len);
        name[len] = '\0';
        mallocsweep_next[i] = dlsym(RTLD_NEXT, name);
        p += len + (p[len] == ',');
    }
    __atomic_store_n(&resolved, 2, __ATOMIC_RELEASE);
}

/* The next definition of slot i, or NULL while this library resolves (the caller uses boot). */
static void *next(int i)
{
    int r = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (LIKELY(r == 2))
        return mallocsweep_next[i];
    if (r == 0)
        resolve();
    return __atomic_load_n(&resolved, __ATOMIC_ACQUIRE) == 2 ? mallocsweep_next[i] : NULL;
}

static void missing(const char *what)
{
    static const char msg[] = "alloc_count: no next definition of an interposed function\n";
    (void)what;
    (void)!write(2, msg, sizeof(msg) - 1);
    abort();
}

/* --- counters ------------------------------------------------------------------------------ */
static void on_thread_exit(void *arg)
{
    struct block *b = arg;
    mine = &shared; /* what this thread still frees goes to the shared block */
    __atomic_store_n(&b->owned, 0, __ATOMIC_RELEASE);
}

static struct block *enrol(void)
{
    if (!key_ready)
        return &shared; /* before our constructor: count now, enrol at a later call */
    depth++;
    struct block *b = NULL;
    for (struct block *q = __atomic_load_n(&head, __ATOMIC_ACQUIRE); q; q = q->next) {
        int free_ = 0;
        if (__atomic_load_n(&q->owned, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&q->owned, &free_, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            b = q;
            break;
        }
    }
    if (b == NULL) {
        unsigned i = __atomic_fetch_add(&pool_used, 1, __ATOMIC_RELAXED);
        if (i < POOL) {
            b = &pool[i];
            b->owned = 1;
            struct block *h = __atomic_load_n(&head, __ATOMIC_RELAXED);
            do
                b->next = h;
            while (!__atomic_compare_exchange_n(&head, &h, b, 1, __ATOMIC_RELEASE,
                                                __ATOMIC_RELAXED));
        }
    }
    if (b == NULL || pthread_setspecific(exit_key, b) != 0) {
        if (b != NULL)
            __atomic_store_n(&b->owned, 0, __ATOMIC_RELEASE);
        b = &shared;
    }
    mine = b;
    depth--;
    return b;
}

static inline void count(int kind, uint64_t bytes)
{
    if (!LIKELY(counting) || depth > 0)
        return;
    struct block *b = mine;
    if (!LIKELY(b != NULL))
        b = enrol();
    if (LIKELY(b != &shared)) {
        __atomic_store_n(&b->calls[kind], b->calls[kind] + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&b->bytes, b->bytes + bytes, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&b->calls[kind], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&b->bytes, bytes, __ATOMIC_RELAXED);
    }
}

/* The sums over every block: calls[NKINDS] and bytes; returns the number of blocks enrolled. */
EXPORT int mallocsweep_alloc_counts(uint64_t *calls, int ncalls, uint64_t *bytes)
{
    uint64_t sum[NKINDS] = {0}, by = 0;
    int n = 0;
    for (struct block *q = __atomic_load_n(&head, __ATOMIC_ACQUIRE); q; q = q->next, n++) {
        for (int k = 0; k < NKINDS; k++)
            sum[k] += __atomic_load_n(&q->calls[k], __ATOMIC_RELAXED);
        by += __atomic_load_n(&q->bytes, __ATOMIC_RELAXED);
    }
    for (int k = 0; k < NKINDS; k++)
        sum[k] += __atomic_load_n(&shared.calls[k], __ATOMIC_RELAXED);
    by += __atomic_load_n(&shared.bytes, __ATOMIC_RELAXED);
    for (int k = 0; k < NKINDS && k < ncalls; k++)
        calls[k] = sum[k];
    *bytes = by;
    return n;
}

__attribute__((constructor)) static void start(void)
{
    const char *on = getenv("MALLOCSWEEP_ALLOC_COUNT");
    next(N_MALLOC); /* resolve now, while the process is single-threaded */
    if (pthread_key_create(&exit_key, on_thread_exit) == 0)
        key_ready = 1;
    counting = on != NULL && strcmp(on, "1") == 0;
}

/* --- the C family: counted and passed on (a tail call: no guard, as the allocators' C entry
 * points do not call each other through the global scope) ------------------------------------ */
typedef void *(*malloc_t)(size_t);
typedef void *(*calloc_t)(size_t, size_t);
typedef void *(*realloc_t)(void *, size_t);
typedef void (*free_t)(void *);
typedef void *(*memalign_t)(size_t, size_t);
typedef int (*posix_memalign_t)(void **, size_t, size_t);
typedef void (*delete_t)(void *);
typedef void (*delete_sz_t)(void *, size_t);
typedef void *(*new_al_t)(size_t, size_t);
typedef void (*delete_al_t)(void *, size_t);
typedef void (*delete_sz_al_t)(void *, size_t, size_t);
typedef void *(*new_nt_t)(size_t, const void *);
typedef void *(*new_al_nt_t)(size_t, size_t, const void *);
typedef void (*delete_nt_t)(void *, const void *);

EXPORT void *malloc(size_t n)
{
    malloc_t f = next(N_MALLOC);
    if (!LIKELY(f != NULL))
        return boot_alloc(n, 16);
    count(K_MALLOC, n);
    return f(n);
}

EXPORT void *calloc(size_t n, size_t size)
{
    calloc_t f = next(N_CALLOC);
    if (!LIKELY(f != NULL))
        return boot_alloc(n * size, 16); /* static storage: already zero */
    count(K_CALLOC, (uint64_t)n * size);
    return f(n, size);
}

EXPORT void *realloc(void *old, size_t n)
{
    realloc_t f = next(N_REALLOC);
    if (!LIKELY(f != NULL) || in_boot(old)) {
        void *p = f ? malloc(n) : boot_alloc(n, 16);
        if (p != NULL && old != NULL) {
            size_t had = *(size_t *)((char *)old - 16);
            memcpy(p, old, had < n ? had : n);
        }
        return p;
    }
    count(K_REALLOC, n);
    return f(old, n);
}

EXPORT void free(void *p)
{
    if (in_boot(p))
        return; /* ld.so's few early blocks live for the whole process anyway */
    free_t f = next(N_FREE);
    if (f == NULL)
        return;
    count(K_FREE, 0);
    f(p);
}

EXPORT void *memalign(size_t align, size_t n)
{
    memalign_t f = next(N_MEMALIGN);
    if (f == NULL)
        return boot_alloc(n, align);
    count(K_MEMALIGN, n);
    return f(align, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    posix_memalign_t f = next(N_POSIX_MEMALIGN);
    if (f == NULL) {
        *out = boot_alloc(n, align);
        return *out ? 0 : 12; /* ENOMEM */
    }
    count(K_POSIX_MEMALIGN, n);
    return f(out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    memalign_t f = next(N_ALIGNED_ALLOC);
    if (f == NULL)
        return boot_alloc(n, align);
    count(K_ALIGNED_ALLOC, n);
    return f(align, n);
}

EXPORT void *valloc(size_t n)
{
    malloc_t f = next(N_VALLOC);
    if (f == NULL)
        return boot_alloc(n, 4096);
    count(K_VALLOC, n);
    return f(n);
}

EXPORT void *pvalloc(size_t n)
{
    malloc_t f = next(N_PVALLOC);
    if (f == NULL)
        return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    count(K_PVALLOC, n);
    return f(n);
}

/* --- C++ operator new / delete: the allocators under test define their own, so the server's
 * C++ allocations reach them without passing malloc; counted here as calls too. ---------------- */
#define NEW1(sym, slot)                                                                           \
    EXPORT void *sym(size_t n)                                                                    \
    {                                                                                             \
        malloc_t f = next(slot);                                                                  \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_NEW, n);                                                                          \
        depth++;                                                                                  \
        void *p = f(n);                                                                           \
        depth--;                                                                                  \
        return p;                                                                                 \
    }
#define NEW_NT(sym, slot)                                                                         \
    EXPORT void *sym(size_t n, const void *nt)                                                    \
    {                                                                                             \
        new_nt_t f = next(slot);                                                                  \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_NEW, n);                                                                          \
        depth++;                                                                                  \
        void *p = f(n, nt);                                                                       \
        depth--;                                                                                  \
        return p;                                                                                 \
    }
#define NEW_AL(sym, slot)                                                                         \
    EXPORT void *sym(size_t n, size_t al)                                                         \
    {                                                                                             \
        new_al_t f = next(slot);                                                                  \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_NEW, n);                                                                          \
        depth++;                                                                                  \
        void *p = f(n, al);                                                                       \
        depth--;                                                                                  \
        return p;                                                                                 \
    }
#define NEW_AL_NT(sym, slot)                                                                      \
    EXPORT void *sym(size_t n, size_t al, const void *nt)                                         \
    {                                                                                             \
        new_al_nt_t f = next(slot);                                                               \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_NEW, n);                                                                          \
        depth++;                                                                                  \
        void *p = f(n, al, nt);                                                                   \
        depth--;                                                                                  \
        return p;                                                                                 \
    }
#define DEL1(sym, slot)                                                                           \
    EXPORT void sym(void *p)                                                                      \
    {                                                                                             \
        delete_t f = next(slot);                                                                  \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_DELETE, 0);                                                                       \
        depth++;                                                                                  \
        f(p);                                                                                     \
        depth--;                                                                                  \
    }
#define DEL2(sym, slot, T2, fn_t)                                                                 \
    EXPORT void sym(void *p, T2 a)                                                                \
    {                                                                                             \
        fn_t f = next(slot);                                                                      \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_DELETE, 0);                                                                       \
        depth++;                                                                                  \
        f(p, a);                                                                                  \
        depth--;                                                                                  \
    }
#define DEL3(sym, slot)                                                                           \
    EXPORT void sym(void *p, size_t n, size_t al)                                                 \
    {                                                                                             \
        delete_sz_al_t f = next(slot);                                                            \
        if (f == NULL)                                                                            \
            missing(#sym);                                                                        \
        count(K_DELETE, 0);                                                                       \
        depth++;                                                                                  \
        f(p, n, al);                                                                              \
        depth--;                                                                                  \
    }

NEW1(_Znwm, N_NEW)
NEW1(_Znam, N_NEWA)
NEW_NT(_ZnwmRKSt9nothrow_t, N_NEW_NT)
NEW_NT(_ZnamRKSt9nothrow_t, N_NEWA_NT)
NEW_AL(_ZnwmSt11align_val_t, N_NEW_AL)
NEW_AL(_ZnamSt11align_val_t, N_NEWA_AL)
NEW_AL_NT(_ZnwmSt11align_val_tRKSt9nothrow_t, N_NEW_AL_NT)
NEW_AL_NT(_ZnamSt11align_val_tRKSt9nothrow_t, N_NEWA_AL_NT)
DEL1(_ZdlPv, N_DEL)
DEL1(_ZdaPv, N_DELA)
DEL2(_ZdlPvm, N_DEL_SZ, size_t, delete_sz_t)
DEL2(_ZdaPvm, N_DELA_SZ, size_t, delete_sz_t)
DEL2(_ZdlPvRKSt9nothrow_t, N_DEL_NT, const void *, delete_nt_t)
DEL2(_ZdaPvRKSt9nothrow_t, N_DELA_NT, const void *, delete_nt_t)
DEL2(_ZdlPvSt11align_val_t, N_DEL_AL, size_t, delete_al_t)
DEL2(_ZdaPvSt11align_val_t, N_DELA_AL, size_t, delete_al_t)
DEL3(_ZdlPvmSt11align_val_t, N_DEL_SZ_AL)
DEL3(_ZdaPvmSt11align_val_t, N_DELA_SZ_AL)
