/* NEON (AArch64 baseline, ARMv8.0) leaves of the f32, int8, int16 and BF16
 * convolutions (conv.h, conv_q8.h, conv_i16.h, conv_bf16.h have the
 * contracts), and SnakeBeta; the channel and time loops of the transposed, int8, int16 and bf16
 * convs are the shared drivers conv_driver.h, conv_int_driver.h and
 * conv_bf16_driver.h, the f32 conv1d's its own (as on x86).
 * Dataflow: x [cin][t] (f32) or packed x [cin/4 or cin/2][t] -> CO output
 * channels x TV vectors of 4 steps -> y[cout][t].
 * A partial last vector (1-3 steps) is loaded from a zero-padded copy and
 * stored through one, so nothing outside the valid steps is read or written
 * and a sample's arithmetic never depends on where a call starts or ends.
 * Bits: the f32 convs fuse each multiply-add in the scalar order of conv.c's
 * FMA code (the x86 tables' bits); the int8 and int16 sums are exact integers, then the same f32 multiplies and
 * adds in the same order as the scalar kernel (no FMA); the bf16 products
 * are exact in f32, so vfmaq in the header's order (odd channel, then even,
 * per pair) gives the scalar kernel's bits. The packs compute the scalar
 * packs' values lane by lane. Where the CPU has the dot product extension
 * (ops_dispatch: HWCAP_ASIMDDP) the int8 sums are sdot's, the same exact
 * integers; that path is built by GCC, or by any compiler targeting
 * dotprod. Only compiled on aarch64 (Makefile); the f32 convs, both int8
 * paths, the int16 and bf16 ones and SnakeBeta are tested against the scalar table
 * under qemu-aarch64 (test_kernels), never timed on ARM hardware. */
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_bf16.h"
#include "backend/cpu/conv_i16.h"
#include "backend/cpu/conv_q8.h"
#include "backend/cpu/ops_dispatch.h"

#define AI static inline __attribute__((always_inline))
#define VL 4
#define CONV_ISA neon

/* The sdot path: compiled where the compiler can target the extension for
 * one region of the file (GCC's target pragma; clang 14's arm_neon.h hides
 * vdotq_s32 unless the whole build targets dotprod). */
#if defined(__ARM_FEATURE_DOTPROD) || (defined(__GNUC__) && !defined(__clang__))
#define HAVE_SDOT 1
#else
#define HAVE_SDOT 0
#endif

/* The drivers' mask of a tile's last vector: here its number of valid lanes (1..4). */
typedef int conv_mask;
AI int lane_mask(int n) { return n; }

/* 16 bytes from p, or the first 4 n of them and zeros. */
AI uint8x16_t load_u8_n(const uint8_t *p, int n) {
    if (n == VL) return vld1q_u8(p);
    uint8_t b[16] = {0};
    memcpy(b, p, (size_t)4 * n);
    return vld1q_u8(b);
}

AI uint32x4_t load_u32_n(const uint32_t *p, int n) {
    if (n == VL) return vld1q_u32(p);
    uint32_t b[VL] = {0, 0, 0, 0};
    memcpy(b, p, sizeof(uint32_t) * n);
    return vld1q_u32(b);
}

AI float32x4_t load_f32_n(const float *p, int n) {
    if (n == VL) return vld1q_f32(p);
    float b[VL] = {0, 0, 0, 0};
    memcpy(b, p, sizeof(float) * n);
    return vld1q_f32(b);
}

AI void store_f32_n(float *p, float32x4_t v, int n) {
    if (n == VL) {
        vst1q_f32(p, v);
    } else {
        float b[VL];
        vst1q_f32(b, v);
        memcpy(p, b, sizeof(float) * n);
    }
}

/* ------------------------------------------------------------ tile rows */

/* The rows of the int8, int16 and bf16 tiles: TV vectors of 4 steps, nlast
 * of them valid in the last. */
AI void load_row(int TV, const float *p, float32x4_t *r, int nlast) {
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++) r[v] = load_f32_n(p + VL * v, v == TV - 1 ? nlast : VL);
}

/* After a tap's integer sums s of one output channel: f += float(s) x the
 * steps' scales sv x the tap's weight scale sw (two roundings, no FMA: the
 * scalar reference's order). */
AI void int_tap_row(int TV, float32x4_t *f, const int32x4_t *s, const float32x4_t *sv, float sw) {
    const float32x4_t w = vdupq_n_f32(sw);
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++) f[v] = vaddq_f32(f[v], vmulq_f32(vmulq_f32(vcvtq_f32_s32(s[v]), sv[v]), w));
}

/* y = f + bias over one output channel's row. */
AI void store_row(int TV, float *y, const float32x4_t *f, float bias, int nlast) {
    const float32x4_t b = vdupq_n_f32(bias);
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++) store_f32_n(y + VL * v, vaddq_f32(f[v], b), v == TV - 1 ? nlast : VL);
}

/* ------------------------------------------------------------ int8 */

/* The int8 tile (conv_q8_neon_tile.h), 4 output channels x 2 vectors of 4
 * steps: 8 int32 and 8 f32 accumulators of the 32 registers. A vector holds
 * 4 steps x 4 input channels. Baseline sums: smull by the 4 weights repeated
 * per step (16-bit products, |p| <= 128 x 127), addp of neighbouring
 * products (two of them fit 16 bits) and sadalp into one int32 per step. */
#define Q8_CO 4
#define Q8_TV 2
AI int32x4_t q8_sum_mull(int32x4_t acc, int8x16_t x, int8x16_t w) {
    const int16x8_t pl = vmull_s8(vget_low_s8(x), vget_low_s8(w)), ph = vmull_high_s8(x, w);
    return vpadalq_s16(acc, vpaddq_s16(pl, ph));
}
#define Q8_TILE q8_tile
#define Q8_SUM q8_sum_mull
#include "backend/cpu/conv_q8_neon_tile.h"

#define Q8_TILES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: Q8_TILE(CO, 1, a, o, t, m); break;                                                                         \
    default: Q8_TILE(CO, 2, a, o, t, m); break;                                                                        \
    }
#define QD_NAME CONV_CAT(conv1d_q8, CONV_ISA)
#define QD_ARGS ops_conv_q8_args
#define QD_STEP_FLOATS(a) ((a)->cin4 / 4)
#define QD_CO Q8_CO
#define QD_TV Q8_TV
#define QD_TILES Q8_TILES
#include "backend/cpu/conv_int_driver.h"

/* The same tile and driver with sdot's sums (one instruction for the 16
 * products of a vector), compiled for the dot product extension; called
 * only where the CPU has it (conv_q8_fill_neon). */
#if HAVE_SDOT
#if !defined(__ARM_FEATURE_DOTPROD)
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
AI int32x4_t q8_sum_sdot(int32x4_t acc, int8x16_t x, int8x16_t w) { return vdotq_s32(acc, x, w); }
#undef Q8_TILE
#undef Q8_SUM
#undef CONV_ISA
#define Q8_TILE q8_tile_sdot
#define Q8_SUM q8_sum_sdot
#define CONV_ISA neon_sdot
#include "backend/cpu/conv_q8_neon_tile.h"
#define QD_NAME CONV_CAT(conv1d_q8, CONV_ISA)
#define QD_ARGS ops_conv_q8_args
#define QD_STEP_FLOATS(a) ((a)->cin4 / 4)
#define QD_CO Q8_CO
#define QD_TV Q8_TV
#define QD_TILES Q8_TILES
#include "backend/cpu/conv_int_driver.h"
#if !defined(__ARM_FEATURE_DOTPROD)
#pragma GCC pop_options
#endif
#undef CONV_ISA
#define CONV_ISA neon
#endif

/* Pack 4 steps at a time (the ragged tail by conv_q8_pack_cols, same bits):
 * maxnm keeps fmaxf's answer, the divisions are IEEE, and vcvtnq rounds to
 * nearest even as rintf does. */
static void conv_q8_pack_neon(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride, float *sx) {
    const int cin4 = (cin + 3) & ~3, tv = t_in / VL * VL;
    const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127), off = vdupq_n_s32(128);
    const float32x4_t c127 = vdupq_n_f32(127.0f);
    for (int t = 0; t < tv; t += VL) {
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int i = 0; i < cin; i++) mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(x + (size_t)i * x_stride + t)));
        vst1q_f32(sx + t, vdivq_f32(mx, c127));
        const uint32x4_t nz = vcgtq_f32(mx, vdupq_n_f32(0.0f));
        const float32x4_t inv = vreinterpretq_f32_u32(vandq_u32(nz, vreinterpretq_u32_f32(vdivq_f32(c127, mx))));
        for (int i = 0; i < cin4; i += 4) {
            uint32x4_t r = vdupq_n_u32(0);
            for (int j = 0; j < 4; j++) {
                int32x4_t q = off;
                if (i + j < cin) {
                    q = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + (size_t)(i + j) * x_stride + t), inv));
                    q = vaddq_s32(vminq_s32(vmaxq_s32(q, lo), hi), off);
                }
                r = vorrq_u32(r, vshlq_u32(vreinterpretq_u32_s32(q), vdupq_n_s32(8 * j)));
            }
            vst1q_u8(xq + ((size_t)(i / 4) * xq_stride + t) * 4, vreinterpretq_u8_u32(r));
        }
    }
    conv_q8_pack_cols(x, cin, x_stride, xq, xq_stride, sx, tv, t_in);
}

void conv_q8_fill_neon(ops_kernels *k, int dotprod) {
    k->conv1d_q8 = conv1d_q8_neon;
#if HAVE_SDOT
    if (dotprod) k->conv1d_q8 = conv1d_q8_neon_sdot;
#else
    (void)dotprod;
#endif
    k->conv_q8_pack = conv_q8_pack_neon;
}

/* ------------------------------------------------------------ int16 */

/* CO output channels x TV vectors of 4 steps from t. A vector holds 4 steps
 * x 2 input channels; per pair, smlal and smlal2 by the weight pair repeated
 * per step add each product to its own lane (steps 0-1 and 2-3, one lane per
 * step and channel: 4 products per instruction, the f32 fmla's rate), and
 * addp of the two halves gives the 4 steps' sums after the last pair. Every
 * lane's partial sum is part of one output's sum of |products|, which
 * conv_i16_qmax keeps within int32: exact. Then as the x86 tiles. 4 x 2: 16
 * int32 and 8 f32 accumulators, 2 x vectors, 1 weight (27 of 32). */
#define I16_CO 4
#define I16_TV 2
AI void i16_tile(int CO, int TV, const ops_conv_i16_args *a, int o, int t, int nlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xq_stride * 2, wos = (size_t)k * a->cin2;
    float32x4_t f[I16_CO][I16_TV];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = vdupq_n_f32(0.0f);
    for (int tap = 0; tap < k; tap++) {
        int32x4_t lo[I16_CO][I16_TV], hi[I16_CO][I16_TV];
        const int16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const int16_t *xt = a->xq + (size_t)(t + tap * d) * 2;
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) lo[c][v] = hi[c][v] = vdupq_n_s32(0);
        for (int g = 0; g < G; g++) {
            const int16_t *xp = xt + g * xs;
            int16x8_t xv[I16_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) {
                const uint32_t *xw = (const uint32_t *)(const void *)(xp + 8 * v);
                xv[v] = vreinterpretq_s16_u32(load_u32_n(xw, v == TV - 1 ? nlast : VL));
            }
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                int32_t w2;
                memcpy(&w2, wt + c * wos + 2 * g, 4);
                const int16x8_t wv = vreinterpretq_s16_s32(vdupq_n_s32(w2));
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) {
                    lo[c][v] = vmlal_s16(lo[c][v], vget_low_s16(xv[v]), vget_low_s16(wv));
                    hi[c][v] = vmlal_high_s16(hi[c][v], xv[v], wv);
                }
            }
        }
        float32x4_t sv[I16_TV];
        load_row(TV, a->sx + t + tap * d, sv, nlast);
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++) {
            int32x4_t sum[I16_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) sum[v] = vpaddq_s32(lo[c][v], hi[c][v]);
            int_tap_row(TV, f[c], sum, sv, a->sw[(size_t)(o + c) * k + tap]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, nlast);
}

#define I16_TILES(CO)                                                                                                  \
    switch (TV) {                                                                                                      \
    case 1: i16_tile(CO, 1, a, o, t, m); break;                                                                        \
    default: i16_tile(CO, 2, a, o, t, m); break;                                                                       \
    }
#define QD_NAME CONV_CAT(conv1d_i16, CONV_ISA)
#define QD_ARGS ops_conv_i16_args
#define QD_STEP_FLOATS(a) ((a)->cin2 / 2)
#define QD_CO I16_CO
#define QD_TV I16_TV
#define QD_TILES I16_TILES
#include "backend/cpu/conv_int_driver.h"

/* Pack 4 steps at a time (the ragged tail by conv_i16_pack_cols, same bits,
 * as conv_q8_pack_neon). */
static void conv_i16_pack_neon(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq, int xq_stride,
                               float *sx) {
    const int tv = t_in / VL * VL;
    const int32x4_t lo = vdupq_n_s32(-qmax), hi = vdupq_n_s32(qmax);
    const uint32x4_t low16 = vdupq_n_u32(0xffffu);
    const float32x4_t qf = vdupq_n_f32((float)qmax);
    for (int t = 0; t < tv; t += VL) {
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int i = 0; i < cin; i++) mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(x + (size_t)i * x_stride + t)));
        vst1q_f32(sx + t, vdivq_f32(mx, qf));
        const uint32x4_t nz = vcgtq_f32(mx, vdupq_n_f32(0.0f));
        const float32x4_t inv = vreinterpretq_f32_u32(vandq_u32(nz, vreinterpretq_u32_f32(vdivq_f32(qf, mx))));
        for (int i = 0; i < cin; i += 2) {
            const float32x4_t x0 = vld1q_f32(x + (size_t)i * x_stride + t);
            const int32x4_t q0 = vminq_s32(vmaxq_s32(vcvtnq_s32_f32(vmulq_f32(x0, inv)), lo), hi);
            uint32x4_t r = vandq_u32(vreinterpretq_u32_s32(q0), low16);
            if (i + 1 < cin) {
                const float32x4_t x1 = vld1q_f32(x + (size_t)(i + 1) * x_stride + t);
                const int32x4_t q1 = vminq_s32(vmaxq_s32(vcvtnq_s32_f32(vmulq_f32(x1, inv)), lo), hi);
                r = vorrq_u32(r, vshlq_n_u32(vreinterpretq_u32_s32(q1), 16));
            }
            vst1q_u32((uint32_t *)(void *)(xq + ((size_t)(i / 2) * xq_stride + t) * 2), r);
        }
    }
    conv_i16_pack_cols(x, cin, x_stride, qmax, xq, xq_stride, sx, tv, t_in);
}

void conv_i16_fill_neon(ops_kernels *k) {
    k->conv1d_i16 = conv1d_i16_neon;
    k->conv_i16_pack = conv_i16_pack_neon;
}

/* ------------------------------------------------------------ bf16 (widened) */

/* CO output channels x TV vectors of 4 steps from t, conv_bf16.h's order:
 * each pair widened to f32 (the odd channel by a mask of the high half, the
 * even one by a shift), then fma by the odd channel's weight and fma by the
 * even one's. 6 x 2: 12 accumulators, 4 widened inputs, 2 weights. */
#define BF_CO 6
#define BF_TV 2
AI void bf_tile(int CO, int TV, const ops_conv_bf16_args *a, int o, int t, int nlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xb_stride, wos = (size_t)k * a->cin2;
    const uint32x4_t himask = vdupq_n_u32(0xffff0000u);
    float32x4_t acc[BF_CO][BF_TV];
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) acc[c][v] = vdupq_n_f32(0.0f);
    for (int tap = 0; tap < k; tap++) {
        const uint16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const uint32_t *xt = a->xb + t + tap * d;
        for (int g = 0; g < G; g++) {
            const uint32_t *xp = xt + g * xs;
            float32x4_t xo[BF_TV], xe[BF_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) {
                const uint32x4_t xv = load_u32_n(xp + VL * v, v == TV - 1 ? nlast : VL);
                xo[v] = vreinterpretq_f32_u32(vandq_u32(xv, himask));
                xe[v] = vreinterpretq_f32_u32(vshlq_n_u32(xv, 16));
            }
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                const uint16_t *wp = wt + c * wos + 2 * g;
                const float32x4_t wo = vreinterpretq_f32_u32(vdupq_n_u32((uint32_t)wp[1] << 16));
                const float32x4_t we = vreinterpretq_f32_u32(vdupq_n_u32((uint32_t)wp[0] << 16));
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) {
                    acc[c][v] = vfmaq_f32(acc[c][v], xo[v], wo);
                    acc[c][v] = vfmaq_f32(acc[c][v], xe[v], we);
                }
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, acc[c], a->bias ? a->bias[o + c] : 0.0f, nlast);
}

#define BF_TILES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: bf_tile(CO, 1, a, o, t, m); break;                                                                         \
    default: bf_tile(CO, 2, a, o, t, m); break;                                                                        \
    }
#include "backend/cpu/conv_bf16_driver.h"

/* f32 lanes -> their bf16 in the high 16 bits (conv_bf16_round's bits). */
AI uint32x4_t bf16_hi(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t a = vandq_u32(u, vdupq_n_u32(0x7fffffffu));
    uint32x4_t r = vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fffu)), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1)));
    r = vbicq_u32(r, vcltq_u32(a, vdupq_n_u32(0x23800000u)));
    r = vbslq_u32(vcgtq_u32(a, vdupq_n_u32(0x7f800000u)), vdupq_n_u32(0x7fc00000u), r);
    return vandq_u32(r, vdupq_n_u32(0xffff0000u));
}

/* Pack 4 steps at a time (the ragged tail by conv_bf16_pack_cols, same bits). */
static void conv_bf16_pack_neon(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride) {
    const int tv = t_in / VL * VL;
    for (int g = 0; 2 * g < cin; g++) {
        const float *x0 = x + (size_t)(2 * g) * x_stride;
        for (int t = 0; t < tv; t += VL) {
            const uint32x4_t lo = vshrq_n_u32(bf16_hi(vld1q_f32(x0 + t)), 16);
            const uint32x4_t hi = 2 * g + 1 < cin ? bf16_hi(vld1q_f32(x0 + x_stride + t)) : vdupq_n_u32(0);
            vst1q_u32(xb + (size_t)g * xb_stride + t, vorrq_u32(lo, hi));
        }
    }
    conv_bf16_pack_cols(x, cin, x_stride, xb, xb_stride, tv, t_in);
}

void conv_bf16_fill_neon(ops_kernels *k) {
    k->conv1d_bf16 = conv1d_bf16_neon;
    k->conv_bf16_pack = conv_bf16_pack_neon;
}

/* ------------------------------------------------------------ f32 */

/* conv1d: register tiles of C1_CO output channels x C1_TV vectors of 4 steps
 * (24 of the 32 registers accumulate); for each input channel (in order)
 * and tap (in order) one broadcast weight multiply-added into each output,
 * fused (vfmaq: fmaf's bits), then + bias: conv1d_fma_generic's operations
 * (conv.c), so the same bits as the x86 tables' scalar code. Time blocks
 * whose input over the group's channels stays in C1_L2_BYTES while every
 * tile of output channels passes over it (the 8-24 kHz stages of the
 * decoder); whole tiles of K 1, 2 and 7 have their taps unrolled. */
#define C1_CO 6
#define C1_TV 4
#define C1_L2_BYTES (128u * 1024u)

/* CO output channels x TV vectors from step t; the last vector has nlast
 * valid steps (1..4). KT: the tap count when known at compile time, else 0. */
AI void c1_tile(int CO, int TV, int KT, const ops_conv_xmap *xm, int ci0, int cin_g, int k, const float *w, size_t wos, int t,
                int nlast, const float *bias, int o, float *y, size_t ys) {
    float32x4_t acc[C1_CO][C1_TV];
    const int K = KT ? KT : k;
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) acc[c][v] = vdupq_n_f32(0.0f);
    for (int i = 0; i < cin_g; i++) {
        const float *xr = xm->base + (size_t)(ci0 + i) * xm->crs + t;
        const float *wi = w + (size_t)i * K;
#pragma GCC unroll 7
        for (int tap = 0; tap < K; tap++) {
            const float *xp = xr + xm->toff[tap];
            float32x4_t xv[C1_TV];
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) xv[v] = v == TV - 1 ? load_f32_n(xp + VL * v, nlast) : vld1q_f32(xp + VL * v);
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                const float32x4_t wv = vld1q_dup_f32(wi + c * wos + tap);
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[c][v] = vfmaq_f32(acc[c][v], wv, xv[v]);
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++) {
        const float32x4_t b = vdupq_n_f32(bias ? bias[o + c] : 0.0f);
        float *yo = y + (size_t)(o + c) * ys + t;
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) {
            const float32x4_t r = vaddq_f32(acc[c][v], b);
            if (v == TV - 1) store_f32_n(yo + VL * v, r, nlast);
            else vst1q_f32(yo + VL * v, r);
        }
    }
}

#define C1_CALL(CO, TV, KT) c1_tile(CO, TV, KT, &xm, ci0, cin_g, k, wo, wos, t, nlast, a->bias, o, a->y, ys)
#define C1_TVS(CO)                                                                                                     \
    switch (TV) {                                                                                                      \
    case 1: C1_CALL(CO, 1, 0); break;                                                                                  \
    case 2: C1_CALL(CO, 2, 0); break;                                                                                  \
    case 3: C1_CALL(CO, 3, 0); break;                                                                                  \
    default: C1_CALL(CO, 4, 0); break;                                                                                 \
    }

static void conv1d_neon(const ops_conv_args *a, int o0, int o1) {
    const int k = a->k, s = a->stride, d = a->dilation;
    const int span = d * (k - 1) + 1;
    if (a->t_in < span) return;
    ops_conv_xmap xm;
    if (!ops_conv_xmap_of(a, &xm)) {
        conv1d_fma_generic(a, o0, o1);
        return;
    }
    const int t_out = (a->t_in - span) / s + 1;
    const int cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const size_t wos = (size_t)cin_g * k, ys = (size_t)a->y_stride;
    const int tw = C1_TV * VL;
    const int tb = ops_conv_time_block(cin_g, span, C1_L2_BYTES, tw, 4 * tw);
    for (int tb0 = 0; tb0 < t_out; tb0 += tb) {
        const int tb1 = t_out - tb0 < tb ? t_out : tb0 + tb;
        for (int o = o0; o < o1;) {
            const int g = o / cout_g, gend = (g + 1) * cout_g < o1 ? (g + 1) * cout_g : o1;
            const int CO = gend - o < C1_CO ? gend - o : C1_CO, ci0 = g * cin_g;
            const float *wo = a->w + (size_t)o * wos;
            for (int t = tb0; t < tb1; t += tw) {
                const int rem = tb1 - t < tw ? tb1 - t : tw;
                const int TV = (rem + VL - 1) / VL, nlast = rem - (TV - 1) * VL;
                switch (CO) {
                case 1: C1_TVS(1) break;
                case 2: C1_TVS(2) break;
                case 3: C1_TVS(3) break;
                case 4: C1_TVS(4) break;
                case 5: C1_TVS(5) break;
                default:
                    if (rem == tw) {
                        switch (k) {
                        case 1: C1_CALL(C1_CO, C1_TV, 1); break;
                        case 2: C1_CALL(C1_CO, C1_TV, 2); break;
                        case 7: C1_CALL(C1_CO, C1_TV, 7); break;
                        default: C1_CALL(C1_CO, C1_TV, 0); break;
                        }
                    } else {
                        C1_TVS(C1_CO)
                    }
                    break;
                }
            }
            o += CO;
        }
    }
}

/* Transposed conv, interior outputs of phase p, q in [q, q + 4 TV): every m
 * in [0, M) present; terms in the scalar kernel's order (input channel, then
 * input step ascending), fused, + bias. The edges: conv_tr_edges_fma (conv.c). */
#define TVMAX 4
AI void tr_tile(int CO, int TV, const ops_conv_args *a, int o, int p, int M, int q, int nlast,
                float tmp[4][TVMAX * VL]) {
    const int s = a->stride, k = a->k, cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const int g = o / cout_g, og = o % cout_g;
    float32x4_t acc[4][TVMAX];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) acc[c][v] = vdupq_n_f32(0.0f);
    for (int i = 0; i < cin_g; i++) {
        const int ci = g * cin_g + i;
        const float *xi = a->x + (size_t)ci * a->x_stride + q;
        const float *wi = a->w + ((size_t)ci * cout_g + og) * k + p;
        for (int m = M - 1; m >= 0; m--) {
            const float *xp = xi - m;
            float32x4_t xv[TVMAX];
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++) xv[v] = v == TV - 1 ? load_f32_n(xp + VL * v, nlast) : vld1q_f32(xp + VL * v);
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                const float32x4_t wv = vld1q_dup_f32(wi + (size_t)c * k + (size_t)m * s);
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[c][v] = vfmaq_f32(acc[c][v], wv, xv[v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++) {
        const float32x4_t b = vdupq_n_f32(a->bias ? a->bias[o + c] : 0.0f);
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) vst1q_f32(tmp[c] + VL * v, vaddq_f32(acc[c][v], b));
    }
}

#define CONV_TR_TILES(CO)                                                                                              \
    switch (TV) {                                                                                                      \
    case 1: tr_tile(CO, 1, a, o, p, M, q, m, tmp); break;                                                              \
    case 2: tr_tile(CO, 2, a, o, p, M, q, m, tmp); break;                                                              \
    case 3: tr_tile(CO, 3, a, o, p, M, q, m, tmp); break;                                                              \
    default: tr_tile(CO, 4, a, o, p, M, q, m, tmp); break;                                                             \
    }
#include "backend/cpu/conv_driver.h"

/* ------------------------------------------------------------ SnakeBeta */

/* sin(u)^2 for |u| <= 8192: the reduction by pi and the sine polynomial of
 * conv_avx2.c's sin2_256, the same operations. */
AI float32x4_t sin2_neon(float32x4_t u) {
    const float32x4_t k = vrndnq_f32(vmulq_n_f32(u, 0.318309886183790672f));
    float32x4_t r = vfmsq_f32(u, k, vdupq_n_f32(3.140625f));
    r = vfmsq_f32(r, k, vdupq_n_f32(9.67502593994140625e-4f));
    r = vfmsq_f32(r, k, vdupq_n_f32(1.509957990978376432e-7f));
    const float32x4_t z = vmulq_f32(r, r);
    float32x4_t p = vfmaq_f32(vdupq_n_f32(2.7525022687768796e-06f), z, vdupq_n_f32(-2.3883249156142483e-08f));
    p = vfmaq_f32(vdupq_n_f32(-1.9840859749820083e-04f), z, p);
    p = vfmaq_f32(vdupq_n_f32(8.333330973982811e-03f), z, p);
    p = vfmaq_f32(vdupq_n_f32(-1.666666716337204e-01f), z, p);
    const float32x4_t sn = vfmaq_f32(r, vmulq_f32(z, r), p);
    return vmulq_f32(sn, sn);
}

/* y = x + inv_b sin(a x)^2 for 4 values; lanes with |a x| > 8192 (beyond the
 * reduction's exact range) take sinf. */
AI float32x4_t snake4(const float *x, float32x4_t v, float a, float inv_b) {
    const float32x4_t u = vmulq_n_f32(v, a);
    float32x4_t r = vfmaq_f32(v, vdupq_n_f32(inv_b), sin2_neon(u));
    const uint32x4_t big = vcagtq_f32(u, vdupq_n_f32(8192.0f));
    if (vmaxvq_u32(big)) {
        float tmp[VL], uu[VL];
        uint32_t b[VL];
        vst1q_f32(tmp, r);
        vst1q_f32(uu, u);
        vst1q_u32(b, big);
        for (int l = 0; l < VL; l++)
            if (b[l]) {
                const float sv = sinf(uu[l]);
                tmp[l] = fmaf(inv_b, sv * sv, x[l]);
            }
        r = vld1q_f32(tmp);
    }
    return r;
}

/* Whole vectors in place; the last 1-3 values through a zero-padded copy, so
 * every value takes the same vector arithmetic wherever a call splits. */
static void snake_neon(float *y, const float *x, int T, float a, float inv_b) {
    const int tv = T / VL * VL;
    for (int t = 0; t < tv; t += VL) vst1q_f32(y + t, snake4(x + t, vld1q_f32(x + t), a, inv_b));
    if (tv < T) {
        float xp[VL] = {0}, yp[VL];
        memcpy(xp, x + tv, sizeof(float) * (size_t)(T - tv));
        vst1q_f32(yp, snake4(xp, vld1q_f32(xp), a, inv_b));
        memcpy(y + tv, yp, sizeof(float) * (size_t)(T - tv));
    }
}

void conv_fill_neon(ops_kernels *k) {
    k->conv1d = conv1d_neon;
    k->conv_transpose1d = conv_transpose1d_neon;
    k->snake = snake_neon;
}
