/*
 * call_cost — the per-call cost of the allocator that serves malloc in this process (preload it),
 * for the exposure bound (servers/callcost.py): how much a malloc or free can cost more under one
 * allocator than under another, on this machine.
 *
 * Each of THREADS threads keeps a ring of 256 blocks and, ITER times, frees the oldest and
 * allocates a new one of a server-typical size (16 bytes to 8 kB, small ones most often: what a
 * parser, a result row and a MEM_ROOT block ask for), writing its first bytes as a server would.
 * So every iteration is one malloc and one free, blocks live for 256 calls, and each thread
 * reuses what it freed. The cost is the threads' own CPU time (CLOCK_THREAD_CPUTIME_ID: time a
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

#define RING 256
static const size_t sizes[] = {16, 24, 32, 48, 64, 16, 32, 96, 128, 24, 200, 256, 40, 512,
                               64, 1024, 32, 2048, 16, 4096, 48, 8192, 80, 160};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

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
    void *ring[RING] = {0};
    for (int i = 0; i < RING; i++) /* warm: the ring's blocks exist before timing */
        ring[i] = malloc(sizes[i % NSIZES]);
    double t0 = thread_cpu_ns();
    for (long i = 0; i < iters; i++) {
        unsigned slot = (unsigned)i & (RING - 1);
        free(ring[slot]);
        char *p = malloc(sizes[(i * 7) % NSIZES]);
        p[0] = (char)i; /* a server writes what it allocated */
        ring[slot] = p;
    }
    double t1 = thread_cpu_ns();
    for (int i = 0; i < RING; i++)
        free(ring[i]);
    *out = (t1 - t0) / (2.0 * (double)iters); /* two calls per iteration */
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    iters = argc > 2 ? atol(argv[2]) : 200000;
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    if (threads < 1 || threads > 256 || iters < 1 || repeats < 1) {
        fprintf(stderr, "usage: call_cost THREADS [ITER] [REPEATS]\n");
        return 2;
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
