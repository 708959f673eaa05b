/* The arithmetic peak probe of qtts-bench (`qtts-bench peak`, and the
 * machine section of every report): how many f32 multiply-adds and int8
 * multiply-adds the CPU retires per second on n threads, with the
 * instructions the engine's kernels use on it (chosen at run time: AVX-512
 * FMA and VNNI vpdpbusd, AVX2 FMA and vpsignb + vpmaddubsw + vpmaddwd, else
 * scalar).
 * Dataflow: n threads released together (bench_run_threads) -> each runs 12
 * independent accumulator chains of one instruction for a fixed count ->
 * operations / time of the slowest thread, best of reps passes.
 *
 * Why: a floor worked out from an assumed peak is only as good as the
 * assumption (a Zen 4 core retires one 512-bit FMA a cycle, a Zen 5 core
 * two: the CPU's name does not tell). Measured, and recorded beside the
 * results, the bounds in docs/BENCH.md can be checked on the machine they
 * were made on.
 *
 * Each loop also returns a checksum of its accumulators, which the tests
 * compare with the value the arithmetic must give (inputs of 1 make every
 * step exact), so a loop that skipped work would fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench.h"

static const char *const f32_names[PK_N_METHODS] = {"scalar mul+add", "avx2 fma ymm", "avx512 fma zmm"};
static const char *const i8_names[PK_N_METHODS] = {"none", "avx2 vpsignb+vpmaddubsw+vpmaddwd ymm",
                                                    "avx512 vnni vpdpbusd zmm"};

const char *peak_method_name(peak_kind k, peak_method m) {
    if (m < 0 || m >= PK_N_METHODS) return "unknown";
    return k == PK_F32 ? f32_names[m] : i8_names[m];
}

int peak_method_supported(peak_kind k, peak_method m) {
    switch (m) {
    case PK_SCALAR: return k == PK_F32; /* the scalar int8 path has no single instruction to time */
#if defined(__x86_64__)
    case PK_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PK_AVX512:
        return __builtin_cpu_supports("avx512f") && (k == PK_F32 || __builtin_cpu_supports("avx512vnni"));
#endif
    default: return 0;
    }
}

peak_method peak_method_best(peak_kind k) {
    for (int m = PK_N_METHODS - 1; m >= PK_SCALAR; m--)
        if (peak_method_supported(k, (peak_method)m)) return (peak_method)m;
    return PK_SCALAR;
}

/* Multiply-adds per instruction of each loop (f32: per FMA; int8: per
 * u8 x s8 product summed). */
static double macs_per_op(peak_kind k, peak_method m) {
    if (k == PK_F32) return m == PK_AVX512 ? 16 : m == PK_AVX2 ? 8 : 1;
    return m == PK_AVX512 ? 64 : m == PK_AVX2 ? 32 : 0;
}

/* ---------------------------------------------------------------- loops
 * iters rounds of 12 independent accumulators; f32: acc = acc * one + one
 * (exact: every acc ends at start + iters); int8: acc += sum of 4 (or 2 x 2)
 * products of ones. The inputs come from memory through volatile reads and
 * an empty asm ties them to a register, so the compiler can neither fold nor
 * hoist the arithmetic. Returns the sum of all lanes of all accumulators. */

static double loop_f32_scalar(long iters, const volatile float *one) {
    float a[12];
    for (int j = 0; j < 12; j++) a[j] = (float)j;
    for (long i = 0; i < iters; i++) {
        const float x = *one; /* one load per 12 multiply-adds, portable */
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = a[j] * x + x; /* the scalar kernels multiply, then add */
    }
    double s = 0;
    for (int j = 0; j < 12; j++) s += a[j];
    return s;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double loop_f32_avx512(long iters, float one) {
    __m512 a[12];
    __m512 x = _mm512_set1_ps(one);
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(x));
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm512_fmadd_ps(a[j], x, x);
    }
    double s = 0;
    for (int j = 0; j < 12; j++) s += _mm512_reduce_add_ps(a[j]);
    return s;
}

__attribute__((target("avx2,fma"))) static double loop_f32_avx2(long iters, float one) {
    __m256 a[12];
    __m256 x = _mm256_set1_ps(one);
    for (int j = 0; j < 12; j++) a[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(x));
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], x, x);
    }
    float lane[8];
    double s = 0;
    for (int j = 0; j < 12; j++) {
        _mm256_storeu_ps(lane, a[j]);
        for (int k = 0; k < 8; k++) s += lane[k];
    }
    return s;
}

__attribute__((target("avx512f,avx512vnni"))) static double loop_i8_avx512(long iters, int one) {
    __m512i a[12];
    __m512i x = _mm512_set1_epi8((char)one);
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_epi32(j);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(x));
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm512_dpbusd_epi32(a[j], x, x);
    }
    double s = 0;
    for (int j = 0; j < 12; j++) s += _mm512_reduce_add_epi32(a[j]); /* < 2^30: no overflow */
    return s;
}

/* The AVX2 int8 product without VNNI, as the int8 kernels do it
 * (matmul_avx2.c): the weight bytes take the activations' signs (vpsignb),
 * u8 x s8 pairs to s16 (vpmaddubsw), s16 pairs to s32 (vpmaddwd against
 * ones), added (vpaddd): four instructions per 32 multiply-adds, counted as
 * one op of 32. In assembly: with intrinsics the compiler computes the
 * product, which no accumulator feeds, once per round for all 12 chains,
 * and the loop times the vpaddd, not the multiplies. */
#define I8_UNIT(acc, t)                                                                                            \
    "vpsignb %%ymm12, %%ymm12, %%ymm" t "\n\t"                                                                     \
    "vpmaddubsw %%ymm" t ", %%ymm12, %%ymm" t "\n\t"                                                               \
    "vpmaddwd %%ymm13, %%ymm" t ", %%ymm" t "\n\t"                                                                 \
    "vpaddd %%ymm" t ", %%ymm" acc ", %%ymm" acc "\n\t"
#define I8_LOAD(acc) "vmovdqu " acc "*32(%[a]), %%ymm" acc "\n\t"
#define I8_STORE(acc) "vmovdqu %%ymm" acc ", " acc "*32(%[a])\n\t"
__attribute__((target("avx2"))) static double loop_i8_avx2(long iters, int one) {
    _Alignas(32) int32_t acc[12][8];
    _Alignas(32) int8_t x[32];
    _Alignas(32) int16_t ones16[16];
    for (int j = 0; j < 12; j++)
        for (int k = 0; k < 8; k++) acc[j][k] = j;
    memset(x, one, sizeof x);
    for (int k = 0; k < 16; k++) ones16[k] = 1;
    if (iters > 0)
        __asm__ volatile(
            /* the 12 accumulators in ymm0-11, the bytes in ymm12, ones in ymm13 */
            I8_LOAD("0") I8_LOAD("1") I8_LOAD("2") I8_LOAD("3") I8_LOAD("4") I8_LOAD("5") I8_LOAD("6") I8_LOAD("7")
            I8_LOAD("8") I8_LOAD("9") I8_LOAD("10") I8_LOAD("11")
            "vmovdqu (%[x]), %%ymm12\n\t"
            "vmovdqu (%[o]), %%ymm13\n\t"
            "1:\n\t"
            I8_UNIT("0", "14") I8_UNIT("1", "15") I8_UNIT("2", "14") I8_UNIT("3", "15") I8_UNIT("4", "14")
            I8_UNIT("5", "15") I8_UNIT("6", "14") I8_UNIT("7", "15") I8_UNIT("8", "14") I8_UNIT("9", "15")
            I8_UNIT("10", "14") I8_UNIT("11", "15")
            "dec %[n]\n\t"
            "jnz 1b\n\t"
            I8_STORE("0") I8_STORE("1") I8_STORE("2") I8_STORE("3") I8_STORE("4") I8_STORE("5") I8_STORE("6")
            I8_STORE("7") I8_STORE("8") I8_STORE("9") I8_STORE("10") I8_STORE("11")
            "vzeroupper\n\t"
            : [n] "+r"(iters)
            : [a] "r"(acc), [x] "r"(x), [o] "r"(ones16)
            : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
              "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    double s = 0;
    for (int j = 0; j < 12; j++)
        for (int k = 0; k < 8; k++) s += acc[j][k];
    return s;
}
#endif

double peak_loop(peak_kind k, peak_method m, long iters) {
    static volatile float one_f = 1.0f;
    static volatile int one_i = 1;
    if (!peak_method_supported(k, m)) return 0;
    if (k == PK_F32) {
#if defined(__x86_64__)
        if (m == PK_AVX512) return loop_f32_avx512(iters, one_f);
        if (m == PK_AVX2) return loop_f32_avx2(iters, one_f);
#endif
        return loop_f32_scalar(iters, &one_f);
    }
#if defined(__x86_64__)
    if (m == PK_AVX512) return loop_i8_avx512(iters, one_i);
    if (m == PK_AVX2) return loop_i8_avx2(iters, one_i);
#endif
    (void)one_i;
    return 0;
}

double peak_loop_expected(peak_kind k, peak_method m, long iters) {
    const double lanes = macs_per_op(PK_F32, m); /* f32 lanes per vector: 16, 8, 1 */
    double start = 0;
    for (int j = 0; j < 12; j++) start += j;
    /* f32: each lane of accumulator j ends at j + iters; int8: each s32 lane
     * gains 4 products of 1 x 1 per instruction */
    return k == PK_F32 ? lanes * (start + 12.0 * (double)iters) : lanes * (start + 12.0 * 4.0 * (double)iters);
}

/* ---------------------------------------------------------------- measurement */

typedef struct pk_job {
    peak_kind kind;
    peak_method method;
    long iters;
    double sum[BENCH_MAX_THREADS];
} pk_job;

static void pk_loop(void *arg, int t) {
    pk_job *j = arg;
    j->sum[t] = peak_loop(j->kind, j->method, j->iters);
}

double measure_peak(peak_kind k, peak_method m, int n_threads, int reps) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > BENCH_MAX_THREADS) n_threads = BENCH_MAX_THREADS;
    if (!peak_method_supported(k, m)) return 0;
    /* about 40 ms a pass on a core that retires two 512-bit ops a cycle */
    pk_job j = {.kind = k, .method = m, .iters = m == PK_SCALAR ? 1L << 22 : 1L << 23};
    double best = 0;
    volatile double sink = 0;
    for (int r = 0; r < reps; r++) {
        const double ms = bench_run_threads(n_threads, pk_loop, &j);
        if (ms < 0) break; /* could not start every thread: no measurement */
        for (int t = 0; t < n_threads; t++) sink += j.sum[t];
        const double ops = 12.0 * (double)j.iters * macs_per_op(k, m) * (double)n_threads;
        const double g = ops / (ms * 1e6);
        if (g > best) best = g;
    }
    (void)sink;
    return best;
}

_Static_assert((int)PK_SCALAR == (int)BW_SCALAR && (int)PK_AVX2 == (int)BW_AVX2 && (int)PK_AVX512 == (int)BW_AVX512 &&
                   (int)PK_N_METHODS == (int)BW_N_METHODS,
               "isa_method_index numbers peak_method as bw_method");

int peak_parse_method(const char *s, int *m) {
    if (strcmp(s, "auto") == 0) {
        *m = -1;
        return 0;
    }
    const int i = isa_method_index(s);
    if (i < 0) return -1;
    *m = i;
    return 0;
}

void measure_peaks(int n_threads, int reps, peak_result *out) { measure_peaks_with(n_threads, reps, -1, out); }

void measure_peaks_with(int n_threads, int reps, int method, peak_result *out) {
    memset(out, 0, sizeof *out);
    out->threads = n_threads;
    const peak_method mf = method < 0 ? peak_method_best(PK_F32) : (peak_method)method;
    const peak_method mi = method < 0 ? peak_method_best(PK_INT8) : (peak_method)method;
    snprintf(out->f32_method, sizeof out->f32_method, "%s", peak_method_name(PK_F32, mf));
    out->f32_gmacs = measure_peak(PK_F32, mf, n_threads, reps);
    if (peak_method_supported(PK_INT8, mi)) {
        snprintf(out->int8_method, sizeof out->int8_method, "%s", peak_method_name(PK_INT8, mi));
        out->int8_gmacs = measure_peak(PK_INT8, mi, n_threads, reps);
    } else {
        snprintf(out->int8_method, sizeof out->int8_method, "none");
    }
}

int cmd_peak(int argc, char **argv) {
    const char *threads = NULL;
    int method = -1;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--threads") == 0) && i + 1 < argc) {
            threads = argv[++i];
        } else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc && peak_parse_method(argv[i + 1], &method) == 0) {
            i++;
        } else {
            fprintf(stderr, "usage: qtts-bench peak [-t LIST] [--method auto|scalar|avx2|avx512]\n");
            return 2;
        }
    }
    if (method >= 0 && !peak_method_supported(PK_F32, (peak_method)method)) {
        fprintf(stderr, "qtts-bench: this CPU or build has no %s f32 loop\n", peak_method_name(PK_F32, method));
        return 2;
    }
    char def[16];
    snprintf(def, sizeof def, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    char *list = strdup(threads ? threads : def);
    if (!list) return 1;
    sys_info s;
    sys_collect(&s);
    printf("CPU: %s (%s; %d online)\n", s.cpu_model, s.cpu_id, s.n_cpus);
    int bad = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        const long n = strtol(t, &end, 10);
        if (*end || n < 1 || n > 256) {
            fprintf(stderr, "qtts-bench: bad thread count '%s' (1..256)\n", t);
            bad = 1;
            continue;
        }
        peak_result p;
        measure_peaks_with((int)n, 3, method, &p);
        printf("arithmetic peak, %ld thread%s (best of 3): f32 %.1f G multiply-adds/s = %.1f GFLOP/s (%s); "
               "int8 %.1f G multiply-adds/s (%s)\n",
               n, n == 1 ? "" : "s", p.f32_gmacs, 2 * p.f32_gmacs, p.f32_method, p.int8_gmacs, p.int8_method);
    }
    free(list);
    return bad ? 2 : 0;
}
