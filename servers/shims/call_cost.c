/*
 * call_cost — the per-call cost of the allocator that serves malloc in this process (preload it),
 * for the exposure bound (servers/callcost.py): how much a malloc or free can cost more under one
 * allocator than under another, on this machine.
 *
 * Each of THREADS threads keeps a ring of blocks and, ITER times, frees the oldest and allocates
 * a new one, writing its first byte as a server would. So every iteration is one malloc and one
 * free and each thread reuses what it freed. Two classes of size, as a server asks:
 *   small: 16 bytes to 8 kB, small ones most often (a parser's node, a result row, a MEM_ROOT
 *          block), a ring of 256;
 *   large: 32 kB to 1 MB (sort, join and read buffers, a query's big MEM_ROOT blocks), a ring of
 *          16: where allocators differ most (glibc maps and unmaps above its mmap threshold, and
 *          each fresh mapping faults its first page in). The cost is the threads' own CPU time (CLOCK_THREAD_CPUTIME_ID: time a
 * busy machine takes the CPU away is not counted) over the calls made; the best of REPEATS runs
 * is printed, as "ns_per_call THREADS VALUE". Links nothing newer than glibc 2.34.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING_MAX 256
static const size_t small[] = {16, 24, 32, 48, 64, 16, 32, 96, 128, 24, 200, 256, 40, 512,
                               64, 1024, 32, 2048, 16, 4096, 48, 8192, 80, 160};
static const size_t large[] = {32768, 65536, 131072, 262144, 524288, 1048576, 196608, 98304};
static const size_t *sizes = small;
static size_t nsizes = sizeof(small) / sizeof(small[0]);
static unsigned ring_len = 256;

static long iters;

static double thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *run(void *arg)
{
    double *out = arg;
    void *ring[RING_MAX] = {0};
    for (unsigned i = 0; i < ring_len; i++) /* warm: the ring's blocks exist before timing */
        ring[i] = malloc(sizes[i % nsizes]);
    double t0 = thread_cpu_ns();
    for (long i = 0; i < iters; i++) {
        unsigned slot = (unsigned)i & (ring_len - 1);
        free(ring[slot]);
        char *p = malloc(sizes[(i * 7) % nsizes]);
        p[0] = (char)i; /* a server writes what it allocated */
        ring[slot] = p;
    }
    double t1 = thread_cpu_ns();
    for (unsigned i = 0; i < ring_len; i++)
        free(ring[i]);
    *out = (t1 - t0) / (2.0 * (double)iters); /* two calls per iteration */
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    iters = argc > 2 ? atol(argv[2]) : 200000;
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    int is_large = argc > 4 && strcmp(argv[4], "large") == 0;
    if (threads < 1 || threads > 256 || iters < 1 || repeats < 1) {
        fprintf(stderr, "usage: call_cost THREADS [ITER] [REPEATS] [small|large]\n");
        return 2;
    }
    if (is_large) {
        sizes = large;
        nsizes = sizeof(large) / sizeof(large[0]);
        ring_len = 16;
    }
    double best = -1;
    for (int r = 0; r < repeats; r++) {
        pthread_t t[256];
        double ns[256];
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, run, &ns[i]);
        double sum = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += ns[i];
        }
        double mean = sum / threads;
        if (best < 0 || mean < best)
            best = mean;
    }
    printf("ns_per_call %d %.3f\n", threads, best);
    return 0;
}
