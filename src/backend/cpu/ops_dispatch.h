/* The one place that picks an ISA: CPU feature detection (cpuid/xgetbv on
 * x86-64, the build target on aarch64), the kernel tables of each ISA built
 * in, and the choice of one (best for the CPU, or QTTS_ISA, or the scalar
 * reference). One binary runs on any x86-64: the per-ISA files are compiled
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

/* Run a conv kernel over output channels [0, a->cout) on the context's pool
 * (ops.c; c may be NULL: calling thread only). macs sizes the split. */
/* Whether a conv (groups 1) should split its output steps over the pool
 * rather than its output channels, given enough steps (two 64-step tiles per
 * thread): a transposed conv always (its kernel's register tile is 64 output
 * channels, which a channel split into tasks cuts into narrow ones); a conv1d
 * when its input is too large to share one core's L2
 * (OPS_CONV_TIME_SPLIT_BYTES), so each core reads only its part of it
 * (docs/BENCH.md, fourth pass, has the codec decoder before and after). */
#define OPS_CONV_TIME_SPLIT_BYTES (1u << 20)
int ops_conv_time_split(const ops_ctx *c, const ops_conv_args *a, int transposed);
/* Run a conv kernel over every output channel, output steps [a->t0, a->t1)
 * split over the pool (conv1d: stride 1 only; transposed: any). Same bits as
 * ops_conv_run. */
void ops_conv_run_time(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                       int transposed);
void ops_conv_run(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                  long long macs);

/* Per-ISA table fillers (each in its ISA's files). */
void ops_fill_avx2(ops_kernels *k);
void ops_fill_avx512(ops_kernels *k, int vnni, int bf16);
void conv_fill_avx2(ops_kernels *k);
void conv_fill_avx512(ops_kernels *k);
void ops_fill_neon(ops_kernels *k);

#endif
