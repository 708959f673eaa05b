/* The one place that picks an ISA: CPU feature detection (cpuid/xgetbv on
 * x86-64; on aarch64 the build target, and the dot product by getauxval),
 * the kernel tables of each ISA built in, and the choice of one (best for
 * the CPU, or QTTS_ISA, or the scalar reference). One binary runs on any x86-64: the per-ISA files are compiled
 * with their instruction-set flags and only called after the checks here. */
#ifndef QTTS_BACKEND_CPU_OPS_DISPATCH_H
#define QTTS_BACKEND_CPU_OPS_DISPATCH_H

#include "backend/cpu/ops.h"

typedef struct ops_cpu {
    int avx2;        /* AVX2 + FMA + F16C with the OS saving YMM state */
    int avx512;      /* AVX-512 F/BW/VL/DQ with the OS saving ZMM state */
    int avx512_vnni; /* vpdpbusd */
    int avx512_bf16; /* vdpbf16ps */
    int neon;        /* aarch64 build */
    int neon_dotprod; /* sdot/udot (Linux: HWCAP_ASIMDDP) */
} ops_cpu;

/* Features of this CPU (detected once). */
const ops_cpu *ops_cpu_features(void);

/* The kernel table called name ("scalar", "avx2", "avx512", "neon"), or NULL
 * if it is not built in or this CPU lacks it; *why (if why != NULL) then says
 * which, e.g. "CPU lacks AVX-512 (F/BW/VL/DQ)". */
const ops_kernels *ops_kernels_by_name(const char *name, const char **why);

/* The best table for this CPU, or the one QTTS_ISA names (if usable). */
const ops_kernels *ops_kernels_best(void);

/* Full matmul on the calling thread with table k (the ops_kernels.matmul
 * entries): prepares X in a temporary buffer where the format needs it. */
void ops_matmul_with(const ops_kernels *k, const qt_mat *W, const float *X, int n, const float *bias, float *Y);

/* Per-ISA table fillers (each in its ISA's files). */
void ops_fill_avx2(ops_kernels *k);
void ops_fill_avx512(ops_kernels *k, int vnni, int bf16);
void conv_fill_avx2(ops_kernels *k);
void conv_fill_avx512(ops_kernels *k);
/* the int8 convolutions (conv_q8.h); AVX-512 only with VNNI */
void conv_q8_fill_avx2(ops_kernels *k);
void conv_q8_fill_avx512(ops_kernels *k);
/* the int16 convolutions (conv_i16.h); AVX-512 only with VNNI */
void conv_i16_fill_avx2(ops_kernels *k);
void conv_i16_fill_avx512(ops_kernels *k);
void conv_bf16_fill_avx2(ops_kernels *k);
void conv_bf16_fill_avx512(ops_kernels *k); /* needs AVX512-BF16 */
void ops_fill_neon(ops_kernels *k);
/* the int8 and BF16 convolutions and SnakeBeta on NEON (conv_neon.c);
 * dotprod: the int8 sums by sdot (where the build has that path) */
void conv_q8_fill_neon(ops_kernels *k, int dotprod);
void conv_i16_fill_neon(ops_kernels *k);
void conv_bf16_fill_neon(ops_kernels *k);
void conv_fill_neon(ops_kernels *k);

#endif
