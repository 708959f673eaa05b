/* NEON (AArch64 baseline, no dotprod/bf16 extensions) matmul kernels for
 * every weight format, plus dot/axpy. The int8 and BF16 convolutions:
 * conv_neon.c; the f32 ones use the scalar reference.
 * Dataflow: one W row x one X row -> one 4-lane f32 sum -> Y[i][r].
 * Bit-exactness: each output Y[i][r] is one 4-lane f32 accumulator fed 4
 * columns at a time in column order (tail: zero-padded copies), then a fixed
 * horizontal sum, then + bias; int formats: exact int32 block dots
 * (vmull_s8/vmlal_s8 + vpadalq_s16) converted and FMA'd with d_w * d_x in
 * block order, then the offset/min term. Rows are independent, so any row
 * split or n gives the same bits. Only compiled on aarch64 (Makefile). */
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"

enum { DT32 = 0, DT16 = 1, DTBF = 2 };

static inline float hsum4(float32x4_t v) {
    const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(vpadd_f32(s, s), 0);
}

static inline float32x4_t load_w(int dt, const uint8_t *p, int j) {
    switch (dt) {
    case DT32: return vld1q_f32((const float *)p + j);
    case DT16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + j)));
    default: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + j), 16));
    }
}

static float dot_row(int dt, const uint8_t *w, const float *x, int cols) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 4 <= cols; j += 4) acc = vfmaq_f32(acc, load_w(dt, w, j), vld1q_f32(x + j));
    if (j < cols) {
        const size_t esz = dt == DT32 ? 4 : 2;
        uint8_t wb[16] = {0};
        float xb[4] = {0, 0, 0, 0};
        memcpy(wb, w + (size_t)j * esz, (size_t)(cols - j) * esz);
        memcpy(xb, x + j, sizeof(float) * (size_t)(cols - j));
        acc = vfmaq_f32(acc, load_w(dt, wb, 0), vld1q_f32(xb));
    }
    return hsum4(acc);
}

static void mm_float(int dt, const qt_mat *W, const float *X, int n, const float *bias, float *Y, int r0, int r1) {
    const int cols = W->cols, rows = W->rows;
    const size_t wst = (size_t)cols * (dt == DT32 ? 4 : 2);
    for (int r = r0; r < r1; r++) {
        const uint8_t *w = (const uint8_t *)W->data + (size_t)r * wst;
        const float b = bias ? bias[r] : 0.0f;
        for (int i = 0; i < n; i++) Y[(size_t)i * rows + r] = dot_row(dt, w, X + (size_t)i * cols, cols) + b;
    }
}

static void mm_f32_neon(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y, int r0,
                        int r1) {
    (void)prep;
    mm_float(DT32, W, X, n, bias, Y, r0, r1);
}
static void mm_f16_neon(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y, int r0,
                        int r1) {
    (void)prep;
    mm_float(DT16, W, X, n, bias, Y, r0, r1);
}
static void mm_bf16_neon(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                         int r0, int r1) {
    (void)prep;
    mm_float(DTBF, W, X, n, bias, Y, r0, r1);
}

static inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t *x) {
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
    int16x8_t a = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
    a = vmlal_s8(a, vget_high_s8(w0), vget_high_s8(x0));
    int16x8_t b = vmull_s8(vget_low_s8(w1), vget_low_s8(x1));
    b = vmlal_s8(b, vget_high_s8(w1), vget_high_s8(x1));
    return vpadalq_s16(vpaddlq_s16(a), b);
}

static void mm_quant(const qt_mat *W, const void *prep, int n, const float *bias, float *Y, int r0, int r1) {
    const int cols = W->cols, rows = W->rows, nb = qt_kpad(cols) / QT_BLOCK;
    const size_t rb = qmat_row_bytes(W);
    const int q = W->quant;
    for (int r = r0; r < r1; r++) {
        const uint8_t *wr = (const uint8_t *)W->data + (size_t)r * rb;
        const uint16_t *sc = W->scales + (size_t)r * nb;
        for (int i = 0; i < n; i++) {
            const q8_rows xr = q8_prep_row(prep, cols, i);
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int b = 0; b < nb; b++) {
                int8x16_t w0, w1;
                if (q == QT_Q8_B32) {
                    w0 = vld1q_s8((const int8_t *)wr + b * QT_BLOCK);
                    w1 = vld1q_s8((const int8_t *)wr + b * QT_BLOCK + 16);
                } else {
                    const uint8x16_t v = vld1q_u8(wr + b * 16);
                    w0 = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15)));
                    w1 = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                    if (q == QT_Q4_B32) {
                        w0 = vsubq_s8(w0, vdupq_n_s8(8));
                        w1 = vsubq_s8(w1, vdupq_n_s8(8));
                    }
                }
                const float32x4_t d = vcvtq_f32_s32(dot32(w0, w1, xr.xq + b * QT_BLOCK));
                float s = f16_to_f32(sc[b]) * xr.dx[b];
                acc = vfmaq_n_f32(acc, d, s);
                if (q == QT_Q4M_B32) {
                    const float mf = f16_to_f32(W->mins[(size_t)r * nb + b]) * xr.fsum[b];
                    acc = vsetq_lane_f32(vgetq_lane_f32(acc, 0) + mf, acc, 0);
                }
            }
            Y[(size_t)i * rows + r] = hsum4(acc) + (bias ? bias[r] : 0.0f);
        }
    }
}

static void mm_q_neon(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y, int r0,
                      int r1) {
    (void)X;
    mm_quant(W, prep, n, bias, Y, r0, r1);
}

static float dot_neon(const float *a, const float *b, int n) {
    float32x4_t s = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 4 <= n; j += 4) s = vfmaq_f32(s, vld1q_f32(a + j), vld1q_f32(b + j));
    float t = hsum4(s);
    for (; j < n; j++) t = fmaf(a[j], b[j], t);
    return t;
}

static void axpy_neon(float *y, float a, const float *x, int n) {
    int j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(y + j, vfmaq_n_f32(vld1q_f32(y + j), vld1q_f32(x + j), a));
    for (; j < n; j++) y[j] = fmaf(a, x[j], y[j]);
}

void ops_fill_neon(ops_kernels *k) {
    k->mm[OPS_WF_F32] = mm_f32_neon;
    k->mm[OPS_WF_F16] = mm_f16_neon;
    k->mm[OPS_WF_BF16] = mm_bf16_neon;
    for (int f = OPS_WF_Q8; f <= OPS_WF_Q4M; f++) {
        k->mm[f] = mm_q_neon;
        k->prep_size[f] = q8_prep_size;
        k->prep[f] = q8_prep;
    }
    k->dot = dot_neon;
    k->axpy = axpy_neon;
}
