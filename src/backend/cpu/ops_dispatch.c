/* ISA detection and kernel table choice (see ops_dispatch.h).
 * Dataflow: cpuid/xgetbv (x86-64) or getauxval (aarch64 Linux) -> ops_cpu -> each usable ISA's table,
 * filled once -> QTTS_ISA's or the best. */
#include "backend/cpu/ops_dispatch.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QT_X86 1
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#endif

static ops_cpu g_cpu;
static ops_kernels g_avx2, g_avx512, g_neon;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#ifdef QT_X86
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect_x86(ops_cpu *c) {
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    const int fma = (cx >> 12) & 1, osxsave = (cx >> 27) & 1, avx = (cx >> 28) & 1, f16c = (cx >> 29) & 1;
    if (!osxsave || !avx) return;
    const unsigned long long xcr0 = xgetbv0();
    const int ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return;
    const int avx2 = (b >> 5) & 1, f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    const int vnni = (cx >> 11) & 1;
    c->avx2 = ymm_os && avx2 && fma && f16c;
    c->avx512 = c->avx2 && zmm_os && f && dq && bw && vl;
    c->avx512_vnni = c->avx512 && vnni;
    unsigned a1 = 0, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) c->avx512_bf16 = c->avx512 && ((a1 >> 5) & 1);
}
#endif

static void matmul_avx2(const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    ops_matmul_with(&g_avx2, W, X, n, bias, Y);
}
static void matmul_avx512(const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    ops_matmul_with(&g_avx512, W, X, n, bias, Y);
}
static void matmul_neon(const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    ops_matmul_with(&g_neon, W, X, n, bias, Y);
}

static void init_once(void) {
#ifdef QT_X86
    detect_x86(&g_cpu);
    if (g_cpu.avx2) {
        g_avx2 = *ops_kernels_scalar();
        g_avx2.name = "avx2";
        g_avx2.matmul = matmul_avx2;
        ops_fill_avx2(&g_avx2);
        conv_fill_avx2(&g_avx2);
        conv_q8_fill_avx2(&g_avx2);
        conv_i16_fill_avx2(&g_avx2);
        conv_bf16_fill_avx2(&g_avx2);
    }
    if (g_cpu.avx512) {
        /* integer kernels need VNNI: without it the AVX2 ones serve */
        g_avx512 = g_avx2;
        g_avx512.name = "avx512";
        g_avx512.matmul = matmul_avx512;
        ops_fill_avx512(&g_avx512, g_cpu.avx512_vnni, g_cpu.avx512_bf16);
        conv_fill_avx512(&g_avx512);
        if (g_cpu.avx512_vnni) {
            conv_q8_fill_avx512(&g_avx512);
            conv_i16_fill_avx512(&g_avx512);
        }
        if (g_cpu.avx512_bf16) conv_bf16_fill_avx512(&g_avx512);
    }
#endif
#if defined(__aarch64__)
    g_cpu.neon = 1;
#if defined(__linux__)
    g_cpu.neon_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
    g_neon = *ops_kernels_scalar();
    g_neon.name = "neon";
    g_neon.matmul = matmul_neon;
    ops_fill_neon(&g_neon);
    conv_q8_fill_neon(&g_neon, g_cpu.neon_dotprod);
    conv_i16_fill_neon(&g_neon);
    conv_bf16_fill_neon(&g_neon);
    conv_fill_neon(&g_neon);
#endif
    (void)matmul_avx2;
    (void)matmul_avx512;
    (void)matmul_neon;
}

const ops_cpu *ops_cpu_features(void) {
    pthread_once(&g_once, init_once);
    return &g_cpu;
}

const ops_kernels *ops_kernels_by_name(const char *name, const char **why) {
    const ops_cpu *c = ops_cpu_features();
    const char *w = NULL;
    const ops_kernels *k = NULL;
    if (!strcmp(name, "scalar")) {
        k = ops_kernels_scalar();
    } else if (!strcmp(name, "avx2")) {
#ifdef QT_X86
        if (c->avx2) k = &g_avx2;
        else w = "CPU lacks AVX2/FMA/F16C (or the OS does not save YMM state)";
#else
        w = "not an x86-64 build";
#endif
    } else if (!strcmp(name, "avx512")) {
#ifdef QT_X86
        if (c->avx512) k = &g_avx512;
        else w = "CPU lacks AVX-512 F/BW/VL/DQ (or the OS does not save ZMM state)";
#else
        w = "not an x86-64 build";
#endif
    } else if (!strcmp(name, "neon")) {
        if (c->neon) k = &g_neon;
        else w = "not an aarch64 build";
    } else {
        w = "unknown ISA name (scalar, avx2, avx512, neon)";
    }
    if (why) *why = w;
    return k;
}

const ops_kernels *ops_kernels_best(void) {
    const char *env = getenv("QTTS_ISA");
    if (env && *env) {
        const ops_kernels *k = ops_kernels_by_name(env, NULL);
        if (k) return k;
    }
    const ops_cpu *c = ops_cpu_features();
    if (c->avx512) return &g_avx512;
    if (c->avx2) return &g_avx2;
    if (c->neon) return &g_neon;
    return ops_kernels_scalar();
}

void ops_matmul_with(const ops_kernels *k, const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    if (n <= 0 || W->rows <= 0) return;
    const int f = ops_weight_format(W);
    if (f >= 0 && !k->mm[f]) k = ops_kernels_scalar(); /* a layout this table has no kernel for */
    void *buf = NULL;
    if (f >= 0 && k->prep_size[f]) {
        const size_t sz = (k->prep_size[f](W, n) + 63) & ~(size_t)63;
        buf = aligned_alloc(64, sz ? sz : 64);
        if (buf) k->prep[f](W, X, n, buf);
    }
    if (f < 0 || (k->prep_size[f] && !buf)) {
        for (size_t i = 0; i < (size_t)n * W->rows; i++) Y[i] = NAN;
        return;
    }
    k->mm[f](W, X, buf, n, bias, Y, 0, W->rows);
    free(buf);
}
