/* The memory read bandwidth probe of qtts-bench (the denominator of the
 * roofline column) and the `bandwidth` command. Dataflow: a buffer larger
 * than the caches, split among n threads released together (threads.c) ->
 * each thread XOR-reduces its share with the widest vector loads the CPU has
 * (chosen at run time: AVX-512, AVX2, else a scalar loop) -> bytes / time of
 * the slowest thread, best of reps passes.
 *
 * Why vector loads: the engine's matrix kernels stream the weights with
 * 32- or 64-byte loads, and the floor they can reach is the bandwidth such
 * loads get. On the project's 2-core Xeon (1 GiB, best of 5, the three loops
 * run back to back) 2 threads read 17.6 GB/s with the scalar 8-byte loop
 * built for baseline x86-64, 18.5 with AVX2 and 26.3 with AVX-512 loads
 * (1 thread: 10.3, 14.0, 15.4), so a roofline against the scalar loop
 * overstated how close a kernel was to the floor. The loops XOR into 4
 * independent accumulators so that no dependency chain limits the loads in
 * flight; `qtts-bench bandwidth --method` runs any one of them. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench.h"

static const char *const method_names[BW_N_METHODS] = {"scalar", "avx2", "avx512"};

const char *bw_method_name(bw_method m) {
    static const char *const loads[BW_N_METHODS] = {"scalar loads", "avx2 loads", "avx512 loads"};
    return m >= 0 && m < BW_N_METHODS ? loads[m] : "unknown";
}

int isa_method_index(const char *s) {
    for (int i = 0; i < BW_N_METHODS; i++)
        if (strcmp(s, method_names[i]) == 0) return i;
    return -1;
}

int bw_parse_method(const char *s, bw_method *m) {
    const int i = strcmp(s, "auto") == 0 ? (int)bw_method_best() : isa_method_index(s);
    if (i < 0) return -1;
    *m = (bw_method)i;
    return 0;
}

int bw_method_supported(bw_method m) {
    switch (m) {
    case BW_SCALAR: return 1;
#if defined(__x86_64__)
    case BW_AVX2: return __builtin_cpu_supports("avx2");
    case BW_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return 0;
    }
}

bw_method bw_method_best(void) {
    for (int m = BW_N_METHODS - 1; m > BW_SCALAR; m--)
        if (bw_method_supported((bw_method)m)) return (bw_method)m;
    return BW_SCALAR;
}

/* ---------------------------------------------------------------- read loops
 * Each returns the XOR of the n words at p, so that a test can check every
 * loop reads every word exactly once. */

static uint64_t read_xor_scalar(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 ^= p[i], a1 ^= p[i + 1], a2 ^= p[i + 2], a3 ^= p[i + 3];
        a4 ^= p[i + 4], a5 ^= p[i + 5], a6 ^= p[i + 6], a7 ^= p[i + 7];
    }
    for (; i < n; i++) a0 ^= p[i];
    return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

#if defined(__x86_64__)
/* 4 x 64-byte loads per iteration (256 bytes) */
__attribute__((target("avx512f"))) static uint64_t read_xor_avx512(const uint64_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_xor_si512(a0, _mm512_loadu_si512((const void *)(p + i)));
        a1 = _mm512_xor_si512(a1, _mm512_loadu_si512((const void *)(p + i + 8)));
        a2 = _mm512_xor_si512(a2, _mm512_loadu_si512((const void *)(p + i + 16)));
        a3 = _mm512_xor_si512(a3, _mm512_loadu_si512((const void *)(p + i + 24)));
    }
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    uint64_t lane[8], x = 0;
    _mm512_storeu_si512((void *)lane, a0);
    for (int k = 0; k < 8; k++) x ^= lane[k];
    for (; i < n; i++) x ^= p[i];
    return x;
}

/* 8 x 32-byte loads per iteration (256 bytes) into 4 accumulators */
__attribute__((target("avx2"))) static uint64_t read_xor_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i *v = (const __m256i *)(p + i);
        a0 = _mm256_xor_si256(a0, _mm256_xor_si256(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 4)));
        a1 = _mm256_xor_si256(a1, _mm256_xor_si256(_mm256_loadu_si256(v + 1), _mm256_loadu_si256(v + 5)));
        a2 = _mm256_xor_si256(a2, _mm256_xor_si256(_mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 6)));
        a3 = _mm256_xor_si256(a3, _mm256_xor_si256(_mm256_loadu_si256(v + 3), _mm256_loadu_si256(v + 7)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t lane[4], x = 0;
    _mm256_storeu_si256((__m256i *)lane, a0);
    for (int k = 0; k < 4; k++) x ^= lane[k];
    for (; i < n; i++) x ^= p[i];
    return x;
}
#endif

uint64_t bw_read_xor(bw_method m, const uint64_t *p, size_t n) {
#if defined(__x86_64__)
    if (m == BW_AVX512 && bw_method_supported(m)) return read_xor_avx512(p, n);
    if (m == BW_AVX2 && bw_method_supported(m)) return read_xor_avx2(p, n);
#else
    (void)m;
#endif
    return read_xor_scalar(p, n);
}

/* ---------------------------------------------------------------- measurement */

typedef struct bw_job {
    const uint64_t *buf;
    size_t n, per; /* words in all; words a thread (the last takes the rest) */
    int n_threads;
    bw_method method;
    uint64_t sum[BENCH_MAX_THREADS];
} bw_job;

static void bw_share(void *arg, int t) {
    bw_job *j = arg;
    const size_t off = j->per * (size_t)t, len = t == j->n_threads - 1 ? j->n - off : j->per;
    j->sum[t] = bw_read_xor(j->method, j->buf + off, len);
}

double measure_read_bandwidth(size_t buf_bytes, int n_threads, int reps, bw_method method) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > BENCH_MAX_THREADS) n_threads = BENCH_MAX_THREADS;
    if (!bw_method_supported(method)) return 0;
    const size_t n = buf_bytes / 8;
    void *mem = NULL;
    if (n == 0 || posix_memalign(&mem, 4096, n * 8)) return 0;
    uint64_t *buf = mem;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull; /* touch every page */
    bw_job *j = malloc(sizeof *j);
    if (!j) {
        free(buf);
        return 0;
    }
    /* each share starts 64-byte aligned */
    *j = (bw_job){.buf = buf, .n = n, .per = n / (size_t)n_threads & ~(size_t)7, .n_threads = n_threads, .method = method};
    double best = 0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        const double ms = bench_run_threads(n_threads, bw_share, j);
        if (ms < 0) break; /* could not start every thread: no measurement */
        for (int t = 0; t < n_threads; t++) sink ^= j->sum[t];
        const double gbps = (double)(n * 8) / (ms * 1e6);
        if (gbps > best) best = gbps;
    }
    (void)sink;
    free(j);
    free(buf);
    return best;
}

int cmd_bandwidth(int argc, char **argv) {
    const char *threads = NULL;
    double mib = 1024;
    bw_method method = bw_method_best();
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--threads") == 0) && i + 1 < argc) threads = argv[++i];
        else if (strcmp(argv[i], "--bw-mib") == 0 && i + 1 < argc) mib = atof(argv[++i]);
        else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc && bw_parse_method(argv[i + 1], &method) == 0) i++;
        else {
            fprintf(stderr, "usage: qtts-bench bandwidth [-t LIST] [--bw-mib N] [--method auto|scalar|avx2|avx512]\n");
            return 2;
        }
    }
    if (!bw_method_supported(method)) {
        fprintf(stderr, "qtts-bench: this CPU cannot run the %s loop (best here: %s)\n", bw_method_name(method),
                bw_method_name(bw_method_best()));
        return 1;
    }
    char def[16];
    snprintf(def, sizeof def, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    char *list = strdup(threads ? threads : def);
    if (!list) return 1;
    sys_info s;
    sys_collect(&s);
    printf("CPU: %s (%d online)\n", s.cpu_model, s.n_cpus);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int n = atoi(t);
        if (n < 1) continue;
        printf("read bandwidth, %d thread%s, %.0f MiB buffer, %s: %.2f GB/s (best of 5)\n", n, n == 1 ? "" : "s", mib,
               bw_method_name(method), measure_read_bandwidth((size_t)(mib * 1048576.0), n, 5, method));
    }
    free(list);
    return 0;
}
