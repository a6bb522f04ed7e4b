/*
 * alloc_stats.so — asks the allocator that serves malloc in this process for its own accounting,
 * on request, and writes one JSON line. Preloaded after the allocator; it defines no allocator
 * symbol and interposes nothing.
 *
 * Why a thread on a FIFO: the figures must come from inside the process (only the allocator knows
 * what it caches), a signal handler may not call allocator APIs (they take locks and malloc), and
 * between requests the thread sits blocked in open(2), costing the server nothing. A request is
 * one line "SEQ OUTPUT_PATH" written to the FIFO named by MALLOCSWEEP_ALLOC_FIFO; the answer is
 * written to OUTPUT_PATH.tmp and renamed to OUTPUT_PATH (the reader never sees half a file).
 * Without that variable the library does nothing at all.
 *
 * Which allocator: the library that `malloc` resolves to in the global scope (dladdr of the
 * address ld.so binds), and that library's own API, looked up in that library only (dlsym on its
 * handle): a server that links tcmalloc and runs with jemalloc preloaded has both APIs mapped, and
 * only the one serving malloc may answer.
 *
 * When alloc_count.so (the exposure counter, preloaded first) is loaded, its sums go into the same
 * answer ("calls", "bytes_asked"), and the allocator asked is the one it forwards malloc to.
 *
 * Only symbols present in glibc 2.34 and older are used, so a build on the host loads in a server
 * root of a newer release; mallinfo2 (2.33) and malloc_info are looked up at run time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX 4096
#define PATH_MAX_LEN 1024

static const char *fifo_path;
static char out[OUT_MAX];
static size_t out_len;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
    va_list ap;
    if (out_len >= sizeof(out))
        return;
    va_start(ap, fmt);
    int n = vsnprintf(out + out_len, sizeof(out) - out_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        out_len += (size_t)n;
}

static void put_num(const char *key, int ok, unsigned long long v)
{
    if (ok)
        put(",\"%s\":%llu", key, v);
    else
        put(",\"%s\":null", key);
}

/* --- jemalloc: mallctl("epoch") refreshes the merged statistics, then the stats.* gauges ---- */
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static int je_size(mallctl_fn ctl, const char *name, unsigned long long *v)
{
    size_t x = 0, sz = sizeof(x);
    if (ctl(name, &x, &sz, NULL, 0) != 0)
        return 0;
    *v = x;
    return 1;
}

/* The settings jemalloc runs with, as it parsed them (opt.*): `mallocsweep tune` reads its
 * MALLOC_CONF back from the live server through these, beside /proc/PID/environ (a knob jemalloc
 * ignores or overrides, e.g. narenas under percpu_arena, shows here and nowhere else). */
static void put_je_str(mallctl_fn ctl, const char *key)
{
    char name[64];
    const char *v = NULL;
    size_t sz = sizeof(v);
    snprintf(name, sizeof(name), "opt.%s", key);
    if (ctl(name, &v, &sz, NULL, 0) == 0 && v != NULL && strpbrk(v, "\"\\") == NULL)
        put(",\"%s\":\"%s\"", key, v);
}

static void put_je_opts(mallctl_fn ctl)
{
    unsigned narenas = 0;
    ssize_t dirty = 0, muzzy = 0;
    _Bool bg = 0;
    size_t tcache_max = 0, sz;
    put(",\"opt\":{\"read\":true");
    sz = sizeof(narenas);
    if (ctl("opt.narenas", &narenas, &sz, NULL, 0) == 0)
        put(",\"narenas\":\"%u\"", narenas);
    sz = sizeof(dirty);
    if (ctl("opt.dirty_decay_ms", &dirty, &sz, NULL, 0) == 0)
        put(",\"dirty_decay_ms\":\"%zd\"", dirty);
    sz = sizeof(muzzy);
    if (ctl("opt.muzzy_decay_ms", &muzzy, &sz, NULL, 0) == 0)
        put(",\"muzzy_decay_ms\":\"%zd\"", muzzy);
    sz = sizeof(bg);
    if (ctl("opt.background_thread", &bg, &sz, NULL, 0) == 0)
        put(",\"background_thread\":\"%s\"", bg ? "true" : "false");
    sz = sizeof(tcache_max);
    if (ctl("opt.tcache_max", &tcache_max, &sz, NULL, 0) == 0)
        put(",\"tcache_max\":\"%zu\"", tcache_max);
    put_je_str(ctl, "percpu_arena");
    put_je_str(ctl, "thp");
    put_je_str(ctl, "metadata_thp");
    put("}");
}

static void read_jemalloc(mallctl_fn ctl)
{
    uint64_t epoch = 1;
    size_t esz = sizeof(epoch);
    ctl("epoch", &epoch, &esz, &epoch, esz);
    unsigned long long alloc = 0, active = 0, resident = 0, mapped = 0, meta = 0, retained = 0;
    unsigned long long pdirty = 0, pmuzzy = 0, page = 4096, tcache = 0;
    int ok_a = je_size(ctl, "stats.allocated", &alloc);
    int ok_r = je_size(ctl, "stats.resident", &resident);
    int ok_m = je_size(ctl, "stats.mapped", &mapped);
    int ok_act = je_size(ctl, "stats.active", &active);
    int ok_meta = je_size(ctl, "stats.metadata", &meta);
    int ok_ret = je_size(ctl, "stats.retained", &retained);
    /* 4096 = MALLCTL_ARENAS_ALL: dirty/muzzy pages over every arena, what decay will purge */
    int ok_d = je_size(ctl, "stats.arenas.4096.pdirty", &pdirty);
    int ok_mu = je_size(ctl, "stats.arenas.4096.pmuzzy", &pmuzzy);
    /* objects parked in thread caches count as allocated to jemalloc's arenas; they are the
     * allocator's cache, not the application's memory (measured: 130 MB of 214 MB "allocated" in
     * a MariaDB after 256 clients) */
    int ok_tc = je_size(ctl, "stats.arenas.4096.tcache_bytes", &tcache);
    je_size(ctl, "arenas.page", &page);
    unsigned narenas = 0;
    size_t nsz = sizeof(narenas);
    int ok_n = ctl("arenas.narenas", &narenas, &nsz, NULL, 0) == 0;
    unsigned long long in_use = ok_tc && tcache <= alloc ? alloc - tcache : alloc;
    put(",\"api\":\"jemalloc mallctl\"");
    put_num("in_use", ok_a, in_use);
    put_num("cached", ok_a && ok_r && resident >= in_use, resident - in_use);
    put_num("mapped", ok_m, mapped);
    put_num("committed", ok_r, resident);
    put(",\"detail\":{\"stats\":%s", ok_a ? "true" : "false");
    put_num("allocated", ok_a, alloc);
    put_num("thread_caches", ok_tc, tcache);
    put_num("active", ok_act, active);
    put_num("metadata", ok_meta, meta);
    put_num("retained", ok_ret, retained);
    put_num("dirty", ok_d, pdirty * page);
    put_num("muzzy", ok_mu, pmuzzy * page);
    put_num("arenas", ok_n, narenas);
    put_je_opts(ctl);
    put("}");
}

/* --- gperftools tcmalloc (full and minimal): MallocExtension's C binding --------------------- */
typedef int (*tc_prop_fn)(const char *, size_t *);

static int tc_get(tc_prop_fn get, const char *name, unsigned long long *v)
{
    size_t x = 0;
    if (!get(name, &x))
        return 0;
    *v = x;
    return 1;
}

static void read_tcmalloc(tc_prop_fn get)
{
    unsigned long long alloc = 0, heap = 0, phys = 0, pfree = 0, unmapped = 0, tcache = 0;
    unsigned long long central = 0, transfer = 0;
    int ok_a = tc_get(get, "generic.current_allocated_bytes", &alloc);
    int ok_h = tc_get(get, "generic.heap_size", &heap);
    int ok_p = tc_get(get, "generic.total_physical_bytes", &phys);
    int ok_f = tc_get(get, "tcmalloc.pageheap_free_bytes", &pfree);
    int ok_u = tc_get(get, "tcmalloc.pageheap_unmapped_bytes", &unmapped);
    int ok_t = tc_get(get, "tcmalloc.current_total_thread_cache_bytes", &tcache);
    int ok_c = tc_get(get, "tcmalloc.central_cache_free_bytes", &central);
    int ok_x = tc_get(get, "tcmalloc.transfer_cache_free_bytes", &transfer);
    /* heap_size = allocated + page heap free + unmapped + central/transfer/thread caches (+ slack);
     * cached = committed - in use, as for every allocator: its free spans, caches and metadata. */
    int ok_cached = ok_a && ok_p && phys >= alloc;
    put(",\"api\":\"gperftools MallocExtension\"");
    put_num("in_use", ok_a, alloc);
    put_num("cached", ok_cached, phys - alloc);
    /* address space: the heap (unmapped spans included) and tcmalloc's metadata */
    put_num("mapped", ok_h && ok_p && ok_u, phys + unmapped);
    /* total_physical_bytes: heap_size - unmapped + metadata: what tcmalloc has not released.
     * Not all of it is resident: pages the server never touched were never backed. */
    put_num("committed", ok_p, phys);
    put(",\"detail\":{\"properties\":%s", ok_a && ok_h ? "true" : "false");
    put_num("pageheap_free", ok_f, pfree);
    put_num("pageheap_unmapped", ok_u, unmapped);
    put_num("thread_caches", ok_t, tcache);
    put_num("central_cache_free", ok_c, central);
    put_num("transfer_cache_free", ok_x, transfer);
    put("}");
}

/* --- mimalloc: mi_process_info. A release build keeps no in-use counts (MI_STAT=0) and merges a
 * thread's commit counts into the process totals only when the thread exits: no in-use, and the
 * commit figure is recorded as detail, never as the resident column. ------------------------- */
typedef void (*mi_info_fn)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
                           size_t *);

static void read_mimalloc(mi_info_fn info)
{
    size_t el = 0, us = 0, sy = 0, rss = 0, prss = 0, commit = 0, pcommit = 0, faults = 0;
    info(&el, &us, &sy, &rss, &prss, &commit, &pcommit, &faults);
    put(",\"api\":\"mimalloc mi_process_info\"");
    put(",\"in_use\":null,\"cached\":null,\"mapped\":null,\"committed\":null");
    put(",\"detail\":{\"commit_merged_threads\":%zu,\"peak_commit_merged_threads\":%zu,"
        "\"rss\":%zu}",
        commit, pcommit, rss);
}

/* --- glibc: mallinfo2 (every arena, locked in turn) and malloc_info for the arena count ------- */
struct mi2 {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
typedef struct mi2 (*mallinfo2_fn)(void);
typedef int (*malloc_info_fn)(int, FILE *);

static long count_heaps(malloc_info_fn mi)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return -1;
    int rc = mi(0, f);
    fclose(f);
    long n = -1;
    if (rc == 0 && buf != NULL) {
        n = 0;
        for (const char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++)
            n++;
    }
    free(buf);
    return n;
}

static void read_glibc(mallinfo2_fn m2, malloc_info_fn mi)
{
    struct mi2 m = m2();
    long heaps = mi ? count_heaps(mi) : -1;
    put(",\"api\":\"glibc mallinfo2\"");
    /* uordblks counts chunks parked in the per-thread tcache as in use (they are, to the arena) */
    put_num("in_use", 1, (unsigned long long)(m.uordblks + m.hblkhd));
    put_num("cached", 1, (unsigned long long)m.fordblks);
    put_num("mapped", 1, (unsigned long long)(m.arena + m.hblkhd));
    /* glibc's arenas are committed whole (arena + mmapped): the same as mapped */
    put_num("committed", 1, (unsigned long long)(m.arena + m.hblkhd));
    put(",\"detail\":{\"arena_bytes\":%zu,\"mmapped_bytes\":%zu,\"mmapped_chunks\":%zu,"
        "\"free_chunks\":%zu,\"fastbin_free\":%zu,\"top_releasable\":%zu",
        m.arena, m.hblkhd, m.hblks, m.ordblks, m.fsmblks, m.keepcost);
    if (heaps >= 0)
        put(",\"arenas\":%ld}", heaps);
    else
        put(",\"arenas\":null}");
}

/* `name` defined by the library `lib` itself: dlsym on a handle also searches the library's
 * dependencies, and TBB's proxy would otherwise answer with libc's mallinfo2. */
static void *own_symbol(void *h, const char *lib, const char *name)
{
    Dl_info di;
    void *f = dlsym(h, name);
    if (f == NULL || !dladdr(f, &di) || di.dli_fname == NULL || strcmp(di.dli_fname, lib) != 0)
        return NULL;
    return f;
}

/* The calls counted by alloc_count.so when it is preloaded too (servers/shims/alloc_count.c):
 * its kinds' names and sums, found in the global scope; absent: no "calls" key at all. */
typedef int (*counts_fn)(uint64_t *, int, uint64_t *);

static void read_counts(void)
{
    counts_fn f = (counts_fn)dlsym(RTLD_DEFAULT, "mallocsweep_alloc_counts");
    const char *kinds = (const char *)dlsym(RTLD_DEFAULT, "mallocsweep_count_kinds");
    if (f == NULL || kinds == NULL)
        return;
    uint64_t calls[32] = {0}, bytes = 0;
    int threads = f(calls, 32, &bytes);
    put(",\"calls\":{");
    const char *p = kinds;
    for (int k = 0; *p && k < 32; k++) {
        size_t len = strcspn(p, ",");
        put("%s\"%.*s\":%llu", k ? "," : "", (int)len, p, (unsigned long long)calls[k]);
        p += len + (p[len] == ',');
    }
    put("},\"bytes_asked\":%llu,\"count_blocks\":%d", (unsigned long long)bytes, threads);
}

static void read_stats(long long seq)
{
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    out_len = 0;
    put("{\"seq\":%lld", seq);
    Dl_info di;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    /* alloc_count.so wins the binding of malloc and forwards to the allocator: ask that one */
    void **fwd = (void **)dlsym(RTLD_DEFAULT, "mallocsweep_next");
    if (fwd != NULL && fwd[0] != NULL)
        m = fwd[0];
    const char *lib = (m && dladdr(m, &di) && di.dli_fname) ? di.dli_fname : "";
    put(",\"library\":\"%s\"", lib);
    read_counts(); /* first: the allocator's own reading below allocates (malloc_info) */
    void *h = lib[0] ? dlopen(lib, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    void *f;
    if (h && (f = own_symbol(h, lib, "mallctl")) != NULL)
        read_jemalloc((mallctl_fn)f);
    else if (h && (f = own_symbol(h, lib, "MallocExtension_GetNumericProperty")) != NULL)
        read_tcmalloc((tc_prop_fn)f);
    else if (h && (f = own_symbol(h, lib, "mi_process_info")) != NULL)
        read_mimalloc((mi_info_fn)f);
    else if (h && (f = own_symbol(h, lib, "mallinfo2")) != NULL)
        read_glibc((mallinfo2_fn)f, (malloc_info_fn)dlsym(h, "malloc_info"));
    else
        /* TBB's proxy (and its libtbbmalloc) offers no statistics at all */
        put(",\"api\":null,\"in_use\":null,\"cached\":null,\"mapped\":null,\"committed\":null");
    if (h)
        dlclose(h);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* wall time includes waiting for arena locks and for a CPU; CPU time is the reading's own */
    long long us = (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000;
    long long cpu = (c1.tv_sec - c0.tv_sec) * 1000000LL + (c1.tv_nsec - c0.tv_nsec) / 1000;
    put(",\"read_us\":%lld,\"read_cpu_us\":%lld}\n", us, cpu);
}

static void answer(const char *req)
{
    char path[PATH_MAX_LEN];
    long long seq = 0;
    /* "SEQ PATH": the path is the rest of the line (an --out of the user's may hold spaces) */
    if (sscanf(req, "%lld %1023[^\n]", &seq, path) != 2)
        return;
    read_stats(seq);
    char tmp[PATH_MAX_LEN + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < out_len) {
        ssize_t n = write(fd, out + done, out_len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    rename(tmp, path);
}

static void *serve(void *arg)
{
    (void)arg;
    char req[PATH_MAX_LEN + 32];
    for (;;) {
        /* blocks until mallocsweep opens the FIFO to write a request */
        int fd = open(fifo_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return NULL; /* the FIFO is gone: the cell is over */
        }
        size_t len = 0;
        ssize_t n;
        while (len < sizeof(req) - 1 && (n = read(fd, req + len, sizeof(req) - 1 - len)) > 0)
            len += (size_t)n;
        close(fd);
        req[len] = '\0';
        if (len > 0)
            answer(req);
    }
}

__attribute__((constructor)) static void start(void)
{
    fifo_path = getenv("MALLOCSWEEP_ALLOC_FIFO");
    if (fifo_path == NULL || fifo_path[0] == '\0')
        return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 * 1024);
    /* the server's signals (SIGTERM, SIGHUP...) must never be delivered to this thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, &a, serve, NULL) == 0)
        pthread_setname_np(t, "ms-allocstats");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}
