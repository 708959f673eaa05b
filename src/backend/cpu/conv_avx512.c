/* AVX-512 convolution and SnakeBeta kernels (see conv.h for the contract;
 * the transposed driver: conv_driver.h; the scalar edges: conv.c).
 * Dataflow: x[cin][t] -> channels x 16-step vectors, an FMA per input channel and tap -> y[cout][t].
 * conv1d: register tiles of CO <= 6 output channels x TV <= 4 vectors of 16
 * output steps, in time blocks whose input stays in L2; for each input
 * channel (in order) and tap (in order) one
 * broadcast weight FMA'd into each output: acc = fma(w, x, acc), then + bias.
 * The last partial vector uses masked loads/stores, so a sample's sequence of
 * operations never depends on where a call starts or ends (chunked == whole).
 * stride > 1 reads x deinterleaved by phase (conv.c), so loads stay contiguous.
 * Transposed conv: per output phase p = t mod stride, outputs t = q stride + p
 * are vectorised over q; interior q (every tap present) run the tile, edges
 * (fewer input steps) a scalar fmaf loop over the same terms in the same
 * order, which gives the same bits as the vector FMA.
 * Where time goes (codec decoder): the K 7 and K 1 convs of the residual
 * units at 2-24 kHz; the tile does 24 FMAs per 4 loads + 6 broadcasts. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_bf16.h"
#include "backend/cpu/conv_i16.h"
#include "backend/cpu/conv_q8.h"
#include "backend/cpu/ops_dispatch.h"

#define AI static inline __attribute__((always_inline))
#define VL 16
#define TVMAX 4
/* Output channels of a conv1d register tile: 6 x 4 vectors of time (24
 * accumulators) where the range has 64 steps or more; where a call has only
 * one or two vectors of time (the 1-2 kHz stages of a short chunk), 12 x 1
 * and 12 x 2, so the FMA units still have enough independent sums. */
#define C1_CO 6
#define C1_CO_MAX 12
/* input bytes of one conv1d time block (conv1d_avx512) */
#define OPS_CONV_L2_BYTES (512u * 1024u)

typedef __mmask16 conv_mask;
AI __mmask16 lane_mask(int n) { return (__mmask16)((1u << n) - 1u); }

/* CO output channels x TV vectors; KT = the tap count when the caller knows
 * it at compile time (1, 2, 7: unrolled), else 0 (k taps, a loop). */
AI void c1_tile(int CO, int TV, int KT, const ops_conv_xmap *xm, int ci0, int cin_g, int k, const float *w, size_t wos, int t,
                __mmask16 mlast, const float *bias, int o, float *y, size_t ys) {
    __m512 acc[C1_CO_MAX][4];
    const int K = KT ? KT : k;
#pragma GCC unroll 16
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) acc[c][v] = _mm512_setzero_ps();
    for (int i = 0; i < cin_g; i++) {
        const float *xr = xm->base + (size_t)(ci0 + i) * xm->crs + t;
        const float *wi = w + (size_t)i * K;
#pragma GCC unroll 7
        for (int tap = 0; tap < K; tap++) {
            const float *xp = xr + xm->toff[tap];
            __m512 xv[4];
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm512_maskz_loadu_ps(mlast, xp + VL * v) : _mm512_loadu_ps(xp + VL * v);
#pragma GCC unroll 16
            for (int c = 0; c < CO; c++) {
                const __m512 wv = _mm512_set1_ps(wi[c * wos + tap]);
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[c][v] = _mm512_fmadd_ps(wv, xv[v], acc[c][v]);
            }
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < CO; c++) {
        const __m512 b = _mm512_set1_ps(bias ? bias[o + c] : 0.0f);
        float *yo = y + (size_t)(o + c) * ys + t;
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) {
            const __m512 r = _mm512_add_ps(acc[c][v], b);
            if (v == TV - 1) _mm512_mask_storeu_ps(yo + VL * v, mlast, r);
            else _mm512_storeu_ps(yo + VL * v, r);
        }
    }
}

#define C1_CALL(CO, TV, KT) c1_tile(CO, TV, KT, &xm, ci0, cin_g, k, wo, wos, t, m, a->bias, o, a->y, ys)
#define C1_K(CO, TV)                                                                                                   \
    switch (k) {                                                                                                       \
    case 1: C1_CALL(CO, TV, 1); break;                                                                                 \
    case 2: C1_CALL(CO, TV, 2); break;                                                                                 \
    case 7: C1_CALL(CO, TV, 7); break;                                                                                 \
    default: C1_CALL(CO, TV, 0); break;                                                                                \
    }
#define C1_CASES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: C1_CALL(CO, 1, 0); break;                                                                                  \
    case 2: C1_CALL(CO, 2, 0); break;                                                                                  \
    case 3: C1_CALL(CO, 3, 0); break;                                                                                  \
    default: C1_CALL(CO, 4, 0); break;                                                                                 \
    }
#define C1_CASES_K(CO)                                                                                                 \
    switch (TV) {                                                                                                      \
    case 1: C1_K(CO, 1) break;                                                                                         \
    case 2: C1_K(CO, 2) break;                                                                                         \
    case 3: C1_K(CO, 3) break;                                                                                         \
    default: C1_K(CO, 4) break;                                                                                        \
    }

static void conv1d_avx512(const ops_conv_args *a, int o0, int o1) {
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
    /* Time blocks whose input (cin_g rows of tb + span steps) stays in L2
     * while every output channel of the range passes over it, so a long
     * chunk (the 8-24 kHz blocks) reads x from L3 once, not once per tile of
     * channels. The order of each output's terms is the same in any block. */
    const int tb = ops_conv_time_block(cin_g, span + 1, OPS_CONV_L2_BYTES, 4 * VL, 4 * VL);
    for (int tb0 = 0; tb0 < t_out; tb0 += tb) {
        const int tb1 = t_out - tb0 < tb ? t_out : tb0 + tb;
        /* 12-channel tiles of one or two vectors where the whole block is that
         * short, and for K 1 (whose x rows, read once per tap, would
         * otherwise stream from L2 at twice the rate) */
        const int wide = tb1 - tb0 <= 2 * VL || k == 1, tw = wide ? 2 * VL : 4 * VL;
        for (int o = o0; o < o1;) {
            const int g = o / cout_g, gend = (g + 1) * cout_g < o1 ? (g + 1) * cout_g : o1;
            const int CO = wide && gend - o >= C1_CO_MAX ? C1_CO_MAX : gend - o < C1_CO ? gend - o : C1_CO;
            const int ci0 = g * cin_g;
            const float *wo = a->w + (size_t)o * wos;
            for (int t = tb0; t < tb1; t += tw) {
                const int rem = tb1 - t < tw ? tb1 - t : tw;
                const int TV = (rem + VL - 1) / VL, last = rem - (TV - 1) * VL;
                const __mmask16 m = (__mmask16)((1u << last) - 1u);
                switch (CO) {
                case 1: C1_CASES(1) break;
                case 2: C1_CASES(2) break;
                case 3: C1_CASES(3) break;
                case 4: C1_CASES(4) break;
                case 5: C1_CASES(5) break;
                case C1_CO: C1_CASES_K(C1_CO) break;
                default:
                    if (TV == 1) C1_K(C1_CO_MAX, 1)
                    else C1_K(C1_CO_MAX, 2)
                    break;
                }
            }
            o += CO;
        }
    }
}

/* ------------------------------------------------------------ transposed */

/* Interior outputs of phase p, q in [q, q + 16 TV): every m in [0, M) present. */
AI void tr_tile(int CO, int TV, const ops_conv_args *a, int o, int p, int M, int q, __mmask16 mlast,
                float tmp[4][TVMAX * VL]) {
    const int s = a->stride, k = a->k, cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const int g = o / cout_g, og = o % cout_g;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) acc[c][v] = _mm512_setzero_ps();
    for (int i = 0; i < cin_g; i++) {
        const int ci = g * cin_g + i;
        const float *xi = a->x + (size_t)ci * a->x_stride + q;
        const float *wi = a->w + ((size_t)ci * cout_g + og) * k + p;
        for (int m = M - 1; m >= 0; m--) {
            const float *xp = xi - m;
            __m512 xv[4];
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm512_maskz_loadu_ps(mlast, xp + VL * v) : _mm512_loadu_ps(xp + VL * v);
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                const __m512 wv = _mm512_set1_ps(wi[(size_t)c * k + (size_t)m * s]);
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[c][v] = _mm512_fmadd_ps(wv, xv[v], acc[c][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++) {
        const __m512 b = _mm512_set1_ps(a->bias ? a->bias[o + c] : 0.0f);
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) _mm512_storeu_ps(tmp[c] + VL * v, _mm512_add_ps(acc[c][v], b));
    }
}

#define CONV_TR_TILES(CO)                                                                                              \
    switch (TV) {                                                                                                      \
    case 1: tr_tile(CO, 1, a, o, p, M, q, m, tmp); break;                                                              \
    case 2: tr_tile(CO, 2, a, o, p, M, q, m, tmp); break;                                                              \
    case 3: tr_tile(CO, 3, a, o, p, M, q, m, tmp); break;                                                              \
    default: tr_tile(CO, 4, a, o, p, M, q, m, tmp); break;                                                             \
    }
#define CONV_ISA avx512
#include "backend/cpu/conv_driver.h"

/* ------------------------------------------------------------ SnakeBeta */

/* sin(u)^2 for |u| <= 8192, as conv_avx2.c's sin2_256 (same constants and
 * operations, so the same bits per lane): sin^2 has period pi, so u is
 * reduced by pi in three exact parts to r in [-pi/2, pi/2], and sin(r) =
 * r + r^3 p(r^2), p of degree 4, is squared. */
AI __m512 sin2_512(__m512 u) {
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(u, _mm512_set1_ps(0.318309886183790672f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(3.140625f), u);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(9.67502593994140625e-4f), r);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.509957990978376432e-7f), r);
    const __m512 z = _mm512_mul_ps(r, r);
    __m512 p = _mm512_fmadd_ps(z, _mm512_set1_ps(-2.3883249156142483e-08f), _mm512_set1_ps(2.7525022687768796e-06f));
    p = _mm512_fmadd_ps(z, p, _mm512_set1_ps(-1.9840859749820083e-04f));
    p = _mm512_fmadd_ps(z, p, _mm512_set1_ps(8.333330973982811e-03f));
    p = _mm512_fmadd_ps(z, p, _mm512_set1_ps(-1.666666716337204e-01f));
    const __m512 sn = _mm512_fmadd_ps(_mm512_mul_ps(z, r), p, r);
    return _mm512_mul_ps(sn, sn);
}

static void snake_avx512(float *y, const float *x, int T, float a, float inv_b) {
    const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(inv_b), lim = _mm512_set1_ps(8192.0f);
    for (int t = 0; t < T; t += VL) {
        const __mmask16 m = T - t >= VL ? (__mmask16)0xffff : (__mmask16)((1u << (T - t)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + t);
        const __m512 u = _mm512_mul_ps(v, av);
        __m512 r = _mm512_fmadd_ps(bv, sin2_512(u), v);
        const __mmask16 big = _mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(u), lim, _CMP_GT_OQ);
        if (big) {
            _Alignas(64) float tmp[VL], uu[VL];
            _mm512_store_ps(tmp, r);
            _mm512_store_ps(uu, u);
            for (int l = 0; l < VL; l++)
                if (big >> l & 1) {
                    const float sv = sinf(uu[l]);
                    tmp[l] = fmaf(inv_b, sv * sv, x[t + l]);
                }
            r = _mm512_load_ps(tmp);
        }
        _mm512_mask_storeu_ps(y + t, m, r);
    }
}

void conv_fill_avx512(ops_kernels *k) {
    k->conv1d = conv1d_avx512;
    k->conv_transpose1d = conv_transpose1d_avx512;
    k->snake = snake_avx512;
}

/* ------------------------------------------------------------ tile rows */

/* The rows of the int8, int16 and bf16 tiles: TV vectors of 16 steps, the
 * last one masked by mlast. */
AI __mmask16 row_mask(int v, int TV, __mmask16 mlast) { return v == TV - 1 ? mlast : (__mmask16)0xffff; }

AI void load_row(int TV, const float *p, __m512 *r, __mmask16 mlast) {
#pragma GCC unroll 4
    for (int v = 0; v < TV; v++) r[v] = _mm512_maskz_loadu_ps(row_mask(v, TV, mlast), p + VL * v);
}

/* After a tap's integer sums s of one output channel: f += float(s) x the
 * steps' scales sv x the tap's weight scale sw (two roundings, no FMA: the
 * scalar reference's order). */
AI void int_tap_row(int TV, __m512 *f, const __m512i *s, const __m512 *sv, float sw) {
    const __m512 w = _mm512_set1_ps(sw);
#pragma GCC unroll 4
    for (int v = 0; v < TV; v++)
        f[v] = _mm512_add_ps(f[v], _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s[v]), sv[v]), w));
}

/* y = f + bias over one output channel's row. */
AI void store_row(int TV, float *y, const __m512 *f, float bias, __mmask16 mlast) {
    const __m512 b = _mm512_set1_ps(bias);
#pragma GCC unroll 4
    for (int v = 0; v < TV; v++) _mm512_mask_storeu_ps(y + VL * v, row_mask(v, TV, mlast), _mm512_add_ps(f[v], b));
}

/* ------------------------------------------------------------ int8 (VNNI) */

/* CO output channels x TV vectors of 16 steps from t: per tap, the integer
 * sums over input channels by vpdpbusd (u8 x + 128 times s8 w, 4 channels a
 * lane; started at -128 sum w, which undoes the + 128), then f += sums x the
 * steps' scales x the tap's weight scale; y = f + bias (conv_q8.h: the
 * scalar reference's order). */
/* 4 x 2 with the f32 tap sums f in registers (8 integer sums, 8 f32 sums, 2
 * x vectors, the broadcast weight). One Zen 4 core, input packing apart, the
 * codec decoder's K 7 shapes (those of build/kbench's codec table), the two
 * tiles alternated in one process: 209-222 G multiply-adds/s at 192-768 channels and 186-199 at 96,
 * against 196-210 and 167-177 for a 4 x 4 tile that keeps f in y between
 * taps (more reuse per load, but a load and a store of y per tap). */
#define Q8_CO 4
#define Q8_TV 2
AI void q8_tile(int CO, int TV, const ops_conv_q8_args *a, int o, int t, __mmask16 mlast) {
    const int k = a->k, d = a->dilation, G = a->cin4 / 4;
    const size_t xs = (size_t)a->xq_stride * 4, wos = (size_t)k * a->cin4;
    __m512 f[Q8_CO][Q8_TV];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = _mm512_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        __m512i acc[Q8_CO][Q8_TV];
        const int8_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin4;
        const uint8_t *xt = a->xq + (size_t)(t + tap * d) * 4;
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++) {
            const __m512i init = _mm512_set1_epi32(-a->wsum[(size_t)(o + c) * k + tap]);
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[c][v] = init;
        }
        for (int g = 0; g < G; g++) {
            const uint8_t *xp = xt + g * xs;
            __m512i xv[Q8_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm512_maskz_loadu_epi32(mlast, xp + 64 * v) : _mm512_loadu_si512(xp + 64 * v);
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                int32_t w4;
                memcpy(&w4, wt + c * wos + 4 * g, 4);
                const __m512i wv = _mm512_set1_epi32(w4);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = _mm512_dpbusd_epi32(acc[c][v], xv[v], wv);
            }
        }
        __m512 sv[Q8_TV];
        load_row(TV, a->sx + t + tap * d, sv, mlast);
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++) int_tap_row(TV, f[c], acc[c], sv, a->sw[(size_t)(o + c) * k + tap]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
}

#define Q8_TILES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: q8_tile(CO, 1, a, o, t, m); break;                                                                         \
    default: q8_tile(CO, 2, a, o, t, m); break;                                                                        \
    }
#define QD_NAME CONV_CAT(conv1d_q8, CONV_ISA)
#define QD_ARGS ops_conv_q8_args
#define QD_STEP_FLOATS(a) ((a)->cin4 / 4)
#define QD_CO Q8_CO
#define QD_TV Q8_TV
#define QD_TILES Q8_TILES
#include "backend/cpu/conv_int_driver.h"

/* Pack 16 steps at a time: max |x| over the channels, then per 4 channels
 * the rounded q + 128 as the 4 bytes of each step's lane (conv_q8.h; the
 * same bits as conv_q8_pack_cols: one multiply, round to nearest even). */
static void conv_q8_pack_avx512(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride,
                                float *sx) {
    const int cin4 = (cin + 3) & ~3;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127), off = _mm512_set1_epi32(128);
    for (int t = 0; t < t_in; t += VL) {
        const __mmask16 m = t_in - t >= VL ? (__mmask16)0xffff : lane_mask(t_in - t);
        __m512 mx = _mm512_setzero_ps();
        for (int i = 0; i < cin; i++)
            mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + (size_t)i * x_stride + t)));
        _mm512_mask_storeu_ps(sx + t, m, _mm512_div_ps(mx, _mm512_set1_ps(127.0f)));
        const __mmask16 nz = _mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 inv = _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.0f), mx);
        for (int i = 0; i < cin4; i += 4) {
            __m512i r = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                __m512i q = off;
                if (i + j < cin) {
                    const __m512 v = _mm512_maskz_loadu_ps(m, x + (size_t)(i + j) * x_stride + t);
                    q = _mm512_cvtps_epi32(_mm512_mul_ps(v, inv));
                    q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), off);
                }
                r = _mm512_or_si512(r, _mm512_slli_epi32(q, 8 * j));
            }
            _mm512_mask_storeu_epi32(xq + ((size_t)(i / 4) * xq_stride + t) * 4, m, r);
        }
    }
}

void conv_q8_fill_avx512(ops_kernels *k) {
    k->conv1d_q8 = conv1d_q8_avx512;
    k->conv_q8_pack = conv_q8_pack_avx512;
}

/* ------------------------------------------------------------ int16 (VNNI) */

/* CO output channels x TV vectors of 16 steps from t: per tap, per pair of
 * input channels, one vpdpwssd of the steps' pairs by the broadcast weight
 * pair (32 products into 16 exact int32 sums); then as the int8 tile. 6 x 2
 * with f in registers (12 integer sums, 12 f32 sums, 2 x vectors, 1 weight:
 * 27 of the 32 registers). */
#define I16_CO 6
#define I16_TV 2
AI void i16_tile(int CO, int TV, const ops_conv_i16_args *a, int o, int t, __mmask16 mlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xq_stride * 2, wos = (size_t)k * a->cin2;
    __m512 f[I16_CO][I16_TV];
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = _mm512_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        __m512i acc[I16_CO][I16_TV];
        const int16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const int16_t *xt = a->xq + (size_t)(t + tap * d) * 2;
#pragma GCC unroll 6
        for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[c][v] = _mm512_setzero_si512();
        for (int g = 0; g < G; g++) {
            const int16_t *xp = xt + g * xs;
            __m512i xv[I16_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm512_maskz_loadu_epi32(mlast, xp + 32 * v) : _mm512_loadu_si512(xp + 32 * v);
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                int32_t w2;
                memcpy(&w2, wt + c * wos + 2 * g, 4);
                const __m512i wv = _mm512_set1_epi32(w2);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = _mm512_dpwssd_epi32(acc[c][v], xv[v], wv);
            }
        }
        __m512 sv[I16_TV];
        load_row(TV, a->sx + t + tap * d, sv, mlast);
#pragma GCC unroll 6
        for (int c = 0; c < CO; c++) int_tap_row(TV, f[c], acc[c], sv, a->sw[(size_t)(o + c) * k + tap]);
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
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

/* Pack 16 steps at a time: max |x| over the channels, then per 2 channels
 * the rounded q as the two halves of each step's lane (conv_i16.h; the same
 * bits as conv_i16_pack_cols: one multiply, round to nearest even). */
static void conv_i16_pack_avx512(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq,
                                 int xq_stride, float *sx) {
    const __m512i lo = _mm512_set1_epi32(-qmax), hi = _mm512_set1_epi32(qmax), low16 = _mm512_set1_epi32(0xffff);
    const __m512 qf = _mm512_set1_ps((float)qmax);
    for (int t = 0; t < t_in; t += VL) {
        const __mmask16 m = t_in - t >= VL ? (__mmask16)0xffff : lane_mask(t_in - t);
        __m512 mx = _mm512_setzero_ps();
        for (int i = 0; i < cin; i++)
            mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + (size_t)i * x_stride + t)));
        _mm512_mask_storeu_ps(sx + t, m, _mm512_div_ps(mx, qf));
        const __mmask16 nz = _mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 inv = _mm512_maskz_div_ps(nz, qf, mx);
        for (int i = 0; i < cin; i += 2) {
            __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + (size_t)i * x_stride + t), inv));
            q0 = _mm512_and_si512(_mm512_min_epi32(_mm512_max_epi32(q0, lo), hi), low16);
            __m512i q1 = _mm512_setzero_si512();
            if (i + 1 < cin) {
                q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + (size_t)(i + 1) * x_stride + t), inv));
                q1 = _mm512_slli_epi32(_mm512_min_epi32(_mm512_max_epi32(q1, lo), hi), 16);
            }
            _mm512_mask_storeu_epi32(xq + ((size_t)(i / 2) * xq_stride + t) * 2, m, _mm512_or_si512(q0, q1));
        }
    }
}

void conv_i16_fill_avx512(ops_kernels *k) {
    k->conv1d_i16 = conv1d_i16_avx512;
    k->conv_i16_pack = conv_i16_pack_avx512;
}

/* ------------------------------------------------------------ bf16 (AVX512-BF16) */

/* CO output channels x TV vectors of 16 steps from t, all taps and input
 * pairs in the registers: per tap, per pair g, one vdpbf16ps of the steps'
 * bf16 pairs by the broadcast weight pair (32 multiply-adds), which adds
 * x[2g+1] w[2g+1] then x[2g] w[2g], each rounded: conv_bf16.h's order.
 * 6 x 4 (24 sums, 4 x vectors, 1 weight: 29 of the 32 registers), as the
 * f32 tile. */
#define BF_CO 6
#define BF_TV 4
AI void bf_tile(int CO, int TV, const ops_conv_bf16_args *a, int o, int t, __mmask16 mlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xb_stride, wos = (size_t)k * a->cin2;
    __m512 acc[BF_CO][BF_TV];
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 4
        for (int v = 0; v < TV; v++) acc[c][v] = _mm512_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        const uint16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const uint32_t *xt = a->xb + t + tap * d;
        for (int g = 0; g < G; g++) {
            const uint32_t *xp = xt + g * xs;
            __m512i xv[BF_TV];
#pragma GCC unroll 4
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm512_maskz_loadu_epi32(mlast, xp + VL * v) : _mm512_loadu_si512(xp + VL * v);
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                int32_t w2;
                memcpy(&w2, wt + c * wos + 2 * g, 4);
                const __m512i wv = _mm512_set1_epi32(w2);
#pragma GCC unroll 4
                for (int v = 0; v < TV; v++) acc[c][v] = _mm512_dpbf16_ps(acc[c][v], (__m512bh)xv[v], (__m512bh)wv);
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, acc[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
}

#define BF_TILES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: bf_tile(CO, 1, a, o, t, m); break;                                                                         \
    case 2: bf_tile(CO, 2, a, o, t, m); break;                                                                         \
    case 3: bf_tile(CO, 3, a, o, t, m); break;                                                                         \
    default: bf_tile(CO, 4, a, o, t, m); break;                                                                        \
    }
#include "backend/cpu/conv_bf16_driver.h"

/* f32 lanes -> their bf16 in the high 16 bits (conv_bf16_round: nearest
 * even, |v| < 2^-56 -> 0, NaN -> quiet NaN; the same bits). */
AI __m512i bf16_hi(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                                 _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x23800000)), _mm512_setzero_si512());
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000)),
                              _mm512_set1_epi32(0x7fc00000));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* Pack 16 steps at a time, the last ones masked. */
static void conv_bf16_pack_avx512(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride) {
    for (int t = 0; t < t_in; t += VL) {
        const __mmask16 m = t_in - t >= VL ? (__mmask16)0xffff : lane_mask(t_in - t);
        for (int g = 0; 2 * g < cin; g++) {
            const float *x0 = x + (size_t)(2 * g) * x_stride + t;
            const __m512i lo = _mm512_srli_epi32(bf16_hi(_mm512_maskz_loadu_ps(m, x0)), 16);
            const __m512i hi = 2 * g + 1 < cin ? bf16_hi(_mm512_maskz_loadu_ps(m, x0 + x_stride)) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(xb + (size_t)g * xb_stride + t, m, _mm512_or_si512(lo, hi));
        }
    }
}

void conv_bf16_fill_avx512(ops_kernels *k) {
    k->conv1d_bf16 = conv1d_bf16_avx512;
    k->conv_bf16_pack = conv_bf16_pack_avx512;
}
