/* AVX2 + FMA convolution and SnakeBeta kernels (see conv.h for the contract;
 * the structure is that of conv_avx512.c with 8 lanes; the transposed
 * driver: conv_driver.h; the scalar edges: conv.c).
 * Dataflow: x[cin][t] -> channels x 8-step vectors, an FMA per input channel and tap -> y[cout][t].
 * conv1d: register tiles of CO <= 6 output channels x TV <= 2 vectors of 8
 * output steps; for each input channel (in order) and tap (in order) one
 * broadcast weight FMA'd into each output: acc = fma(w, x, acc), then + bias.
 * A partial last vector uses masked loads/stores (vmaskmovps), and loads are
 * only loads, so a sample's sequence of arithmetic never depends on where a
 * call starts or ends.
 * Inputs too long to stay in L2 (a 4-frame chunk at 768 channels and up)
 * run in blocks of input channels whose partial sums wait in y (K 1: in
 * packed blocks of channels x steps), and where a block's rows are still
 * too long (the 8-24 kHz stages), in time blocks too: the same operations
 * per output, in the same order, so the same bits as one pass. Whole 6 x 16
 * tiles of K 1, 2 (a packed transposed conv) and 7 have their taps unrolled.
 * Transposed conv: vectorised over q for each output phase, scalar fmaf on
 * the edges (same terms, same order, same bits). */
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
#define VL 8
#define TVMAX 2
/* output channels of a conv1d register tile: 6 x 2 vectors of time = 12
 * accumulators, enough independent sums for two FMA units (the kernel
 * alone: 76-82 GFLOP/s on one Zen 3 core against 65-67 with 4 x 2;
 * tests/bench/kbench.c) */
#define CO_MAX 6
/* conv1d over an input of more than C1_BLOCK_MIN_BYTES: input channels in
 * blocks of C1_BLOCK_TAPS / k (at least 16) */
#define C1_BLOCK_TAPS 168
#define C1_BLOCK_MIN_BYTES (192u * 1024u)
/* input bytes of a conv1d time block (conv1d_avx2), a quarter of a Zen 3 L2 */
#define C1_L2_BYTES (128u * 1024u)
/* K 1 convs over long inputs: floats of a packed block (32 KiB, L1) and its
 * input channels at most (steps: the rest, a multiple of 16) */
#define K1_PACK 8192
#define K1_CBMAX 128

typedef __m256i conv_mask;
AI __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Input channels [i0, i1) of the group's cin_g into the outputs' sums: from
 * zero when i0 == 0, else from the partial sums left in y; the sums go back
 * to y, plus the bias once i1 == cin_g. x row of input channel i: xrow0 + i
 * of xm, from step xt. FULL: TV whole vectors of 8 steps, no masks. KT:
 * the tap count when the caller knows it at compile time (1, 2, 7: the taps
 * unrolled), else 0 (k taps, a loop). */
AI void c1_tile(int CO, int TV, int FULL, int KT, const ops_conv_xmap *xm, int xrow0, int xt, int i0, int i1, int cin_g,
                int k, const float *w, size_t wos, int t, __m256i mlast, const float *bias, int o, float *y, size_t ys) {
    __m256 acc[CO_MAX][TVMAX];
    const int K = KT ? KT : k;
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++) {
        const float *yo = y + (size_t)(o + c) * ys + t;
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++)
            acc[c][v] = i0 == 0                  ? _mm256_setzero_ps()
                        : v == TV - 1 && !FULL ? _mm256_maskload_ps(yo + VL * v, mlast)
                                                : _mm256_loadu_ps(yo + VL * v);
    }
    for (int i = i0; i < i1; i++) {
        const float *xr = xm->base + (size_t)(xrow0 + i) * xm->crs + xt;
        const float *wi = w + (size_t)i * K;
#pragma GCC unroll 7
        for (int tap = 0; tap < K; tap++) {
            const float *xp = xr + xm->toff[tap];
            __m256 xv[TVMAX];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 && !FULL ? _mm256_maskload_ps(xp + VL * v, mlast) : _mm256_loadu_ps(xp + VL * v);
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                const __m256 wv = _mm256_broadcast_ss(wi + c * wos + tap);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = _mm256_fmadd_ps(wv, xv[v], acc[c][v]);
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++) {
        const __m256 b = _mm256_set1_ps(bias ? bias[o + c] : 0.0f);
        float *yo = y + (size_t)(o + c) * ys + t;
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) {
            const __m256 r = i1 == cin_g ? _mm256_add_ps(acc[c][v], b) : acc[c][v];
            if (v == TV - 1 && !FULL) _mm256_maskstore_ps(yo + VL * v, mlast, r);
            else _mm256_storeu_ps(yo + VL * v, r);
        }
    }
}

/* The tile for CO channels at step t of the current range (rem steps), x
 * through XMP from row XR0 + i and step XT; then every CO, 1-6 */
#define C1_CALL(CO, TV, FULL, KT, XMP, XR0, XT)                                                                        \
    c1_tile(CO, TV, FULL, KT, XMP, XR0, XT, i0, i1, cin_g, k, wo, wos, t, m, a->bias, o, a->y, ys)
#define C1_TILE(CO, XMP, XR0, XT)                                                                                      \
    if (rem == TVMAX * VL) C1_CALL(CO, 2, 1, 0, XMP, XR0, XT);                                                         \
    else if (TV == 1) C1_CALL(CO, 1, 0, 0, XMP, XR0, XT);                                                              \
    else C1_CALL(CO, 2, 0, 0, XMP, XR0, XT);
/* the full tile with its tap count known to the compiler (the decoder's K 1,
 * K 2: a packed transposed conv, K 7): the taps unrolled */
#define C1_FULL_K(XMP, XR0, XT)                                                                                        \
    switch (k) {                                                                                                       \
    case 1: C1_CALL(CO_MAX, 2, 1, 1, XMP, XR0, XT); break;                                                             \
    case 2: C1_CALL(CO_MAX, 2, 1, 2, XMP, XR0, XT); break;                                                             \
    case 7: C1_CALL(CO_MAX, 2, 1, 7, XMP, XR0, XT); break;                                                             \
    default: C1_CALL(CO_MAX, 2, 1, 0, XMP, XR0, XT); break;                                                            \
    }
#define C1_SWITCH(XMP, XR0, XT)                                                                                        \
    switch (CO) {                                                                                                      \
    case 1: C1_TILE(1, XMP, XR0, XT) break;                                                                            \
    case 2: C1_TILE(2, XMP, XR0, XT) break;                                                                            \
    case 3: C1_TILE(3, XMP, XR0, XT) break;                                                                            \
    case 4: C1_TILE(4, XMP, XR0, XT) break;                                                                            \
    case 5: C1_TILE(5, XMP, XR0, XT) break;                                                                            \
    default:                                                                                                           \
        if (rem == TVMAX * VL) C1_FULL_K(XMP, XR0, XT)                                                                 \
        else C1_TILE(6, XMP, XR0, XT)                                                                                  \
        break;                                                                                                         \
    }

/* K 1 over a long input: blocks of up to K1_CBMAX input channels x TB1 steps
 * copied together into L1 (the decoder's rows, at strides like 7680 floats,
 * would share a few L1 sets), each passed by every output channel of the
 * range; the sums wait in y between channel blocks, as in conv1d_avx2. Its
 * own function: the block's buffer would otherwise weigh on the main loop's
 * frame (measured: the K 7 tiles ~15 % slower with it inline). */
__attribute__((noinline)) static void conv1d_k1_packed(const ops_conv_args *a, const ops_conv_xmap *xm, int o0, int o1,
                                                       int t_out) {
    const int k = 1, cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const size_t wos = (size_t)cin_g, ys = (size_t)a->y_stride;
    const int CB1 = cin_g < K1_CBMAX ? cin_g : K1_CBMAX, TB1 = K1_PACK / CB1 / 16 * 16;
    _Alignas(32) float pk[K1_PACK];
    ops_conv_xmap pm; /* the packed block: row i - i0, step t - tb */
    pm.base = pk;
    pm.crs = (size_t)TB1;
    pm.toff[0] = 0;
    for (int og = o0; og < o1;) {
        const int g = og / cout_g, gend = (g + 1) * cout_g < o1 ? (g + 1) * cout_g : o1, ci0 = g * cin_g;
        for (int i0 = 0; i0 < cin_g; i0 += CB1) {
            const int i1 = cin_g - i0 < CB1 ? cin_g : i0 + CB1;
            for (int tb = 0; tb < t_out; tb += TB1) {
                const int te = t_out - tb < TB1 ? t_out : tb + TB1;
                for (int i = i0; i < i1; i++)
                    memcpy(pk + (size_t)(i - i0) * TB1, xm->base + (size_t)(ci0 + i) * xm->crs + tb,
                           sizeof(float) * (size_t)(te - tb));
                for (int o = og; o < gend;) {
                    const int CO = gend - o < CO_MAX ? gend - o : CO_MAX;
                    const float *wo = a->w + (size_t)o * wos;
                    for (int t = tb; t < te; t += TVMAX * VL) {
                        const int rem = te - t < TVMAX * VL ? te - t : TVMAX * VL;
                        const int TV = (rem + VL - 1) / VL;
                        const __m256i m = lane_mask(rem - (TV - 1) * VL);
                        C1_SWITCH(&pm, -i0, t - tb)
                    }
                    o += CO;
                }
            }
        }
        og = gend;
    }
}

static void conv1d_avx2(const ops_conv_args *a, int o0, int o1) {
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
    /* Where the input would not stay in L2 across the output channels (a
     * long chunk: 8-24 kHz, or 768 channels over 4 frames), the input channels
     * go in blocks of C1_BLOCK_TAPS / k: a channel tile's weights for a block
     * stay in L1 while its time tiles pass, and the block's input rows in L2;
     * between blocks the sums wait in y. Each output's terms keep their order. */
    const int long_in = (size_t)cin_g * (size_t)a->t_in * sizeof(float) > C1_BLOCK_MIN_BYTES;
    const int cb = !long_in ? cin_g : C1_BLOCK_TAPS / k < 16 ? 16 : C1_BLOCK_TAPS / k;
    /* K 1 over a long input, however few its channels (96 at 24 kHz): the
     * packed blocks (kbench's codec table, one Zen 3 thread: 42-45 against
     * 37 G multiply-adds/s in time blocks at 96 channels) */
    if (k == 1 && long_in) {
        conv1d_k1_packed(a, &xm, o0, o1, t_out);
        return;
    }
    /* Where even a block's rows would not stay in L2 over the whole range
     * (the 8-24 kHz stages: K 7 at 96 channels, a K 2 transposed conv at 192),
     * time blocks too, whose input over every input channel stays in L2
     * while every tile of output channels passes. */
    int tbs = t_out;
    if ((size_t)cb * (size_t)a->t_in * sizeof(float) > C1_L2_BYTES)
        tbs = ops_conv_time_block(cin_g, span, C1_L2_BYTES, TVMAX * VL, 4 * TVMAX * VL);
    for (int tb0 = 0; tb0 < t_out; tb0 += tbs) {
        const int tb1 = t_out - tb0 < tbs ? t_out : tb0 + tbs;
        for (int o = o0; o < o1;) {
            const int g = o / cout_g, gend = (g + 1) * cout_g < o1 ? (g + 1) * cout_g : o1;
            const int CO = gend - o < CO_MAX ? gend - o : CO_MAX, ci0 = g * cin_g;
            const float *wo = a->w + (size_t)o * wos;
            for (int i0 = 0; i0 < cin_g; i0 += cb) {
                const int i1 = cin_g - i0 < cb ? cin_g : i0 + cb;
                for (int t = tb0; t < tb1; t += TVMAX * VL) {
                    const int rem = tb1 - t < TVMAX * VL ? tb1 - t : TVMAX * VL;
                    const int TV = (rem + VL - 1) / VL;
                    const __m256i m = lane_mask(rem - (TV - 1) * VL);
                    C1_SWITCH(&xm, ci0, t)
                }
            }
            o += CO;
        }
    }
}

/* ------------------------------------------------------------ transposed */

AI void tr_tile(int CO, int TV, const ops_conv_args *a, int o, int p, int M, int q, __m256i mlast,
                float tmp[4][TVMAX * VL]) {
    const int s = a->stride, k = a->k, cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const int g = o / cout_g, og = o % cout_g;
    __m256 acc[4][TVMAX];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) acc[c][v] = _mm256_setzero_ps();
    for (int i = 0; i < cin_g; i++) {
        const int ci = g * cin_g + i;
        const float *xi = a->x + (size_t)ci * a->x_stride + q;
        const float *wi = a->w + ((size_t)ci * cout_g + og) * k + p;
        for (int m = M - 1; m >= 0; m--) {
            const float *xp = xi - m;
            __m256 xv[TVMAX];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 ? _mm256_maskload_ps(xp + VL * v, mlast) : _mm256_loadu_ps(xp + VL * v);
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                const __m256 wv = _mm256_broadcast_ss(wi + (size_t)c * k + (size_t)m * s);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = _mm256_fmadd_ps(wv, xv[v], acc[c][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++) {
        const __m256 b = _mm256_set1_ps(a->bias ? a->bias[o + c] : 0.0f);
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) _mm256_storeu_ps(tmp[c] + VL * v, _mm256_add_ps(acc[c][v], b));
    }
}

#define CONV_TR_TILES(CO)                                                                                              \
    if (TV == 1) tr_tile(CO, 1, a, o, p, M, q, m, tmp);                                                                \
    else tr_tile(CO, 2, a, o, p, M, q, m, tmp);
#define CONV_ISA avx2
#include "backend/cpu/conv_driver.h"

/* ------------------------------------------------------------ SnakeBeta */

/* sin(u)^2 for |u| <= 8192. sin^2 has period pi: u is reduced by pi in three
 * exact parts to r in [-pi/2, pi/2], and sin(r) = r + r^3 p(r^2), p of
 * degree 4 (a least-squares fit of the relative error on [0, pi/2]: at most
 * 2.2e-8 before rounding), is squared. */
AI __m256 sin2_256(__m256 u) {
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(u, _mm256_set1_ps(0.318309886183790672f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(3.140625f), u);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(9.67502593994140625e-4f), r);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.509957990978376432e-7f), r);
    const __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_fmadd_ps(z, _mm256_set1_ps(-2.3883249156142483e-08f), _mm256_set1_ps(2.7525022687768796e-06f));
    p = _mm256_fmadd_ps(z, p, _mm256_set1_ps(-1.9840859749820083e-04f));
    p = _mm256_fmadd_ps(z, p, _mm256_set1_ps(8.333330973982811e-03f));
    p = _mm256_fmadd_ps(z, p, _mm256_set1_ps(-1.666666716337204e-01f));
    const __m256 sn = _mm256_fmadd_ps(_mm256_mul_ps(z, r), p, r);
    return _mm256_mul_ps(sn, sn);
}

/* Whole vectors load and store unmasked; lanes with |a x| > 8192 (beyond the
 * reduction's exact range) take sinf. */
static void snake_avx2(float *y, const float *x, int T, float a, float inv_b) {
    const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(inv_b), lim = _mm256_set1_ps(8192.0f);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int t = 0; t < T; t += VL) {
        const int whole = T - t >= VL;
        const __m256i m = lane_mask(T - t);
        const __m256 v = whole ? _mm256_loadu_ps(x + t) : _mm256_maskload_ps(x + t, m);
        const __m256 u = _mm256_mul_ps(v, av);
        __m256 r = _mm256_fmadd_ps(bv, sin2_256(u), v);
        const int big = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(u, absm), lim, _CMP_GT_OQ)) &
                        (whole ? 0xff : _mm256_movemask_ps(_mm256_castsi256_ps(m)));
        if (big) {
            _Alignas(32) float tmp[VL], uu[VL];
            _mm256_store_ps(tmp, r);
            _mm256_store_ps(uu, u);
            for (int l = 0; l < VL; l++)
                if (big >> l & 1) {
                    const float sv = sinf(uu[l]);
                    tmp[l] = fmaf(inv_b, sv * sv, x[t + l]);
                }
            r = _mm256_load_ps(tmp);
        }
        if (whole) _mm256_storeu_ps(y + t, r);
        else _mm256_maskstore_ps(y + t, m, r);
    }
}

void conv_fill_avx2(ops_kernels *k) {
    k->conv1d = conv1d_avx2;
    k->conv_transpose1d = conv_transpose1d_avx2;
    k->snake = snake_avx2;
}

/* ------------------------------------------------------------ tile rows */

/* acc + vpmaddwd(x, w), the sum kept in acc's register (the int8 and int16
 * tiles): with the intrinsics GCC 12 writes each sum to a new register and
 * copies it back, one move per product, and spills a sum of a 4 x 2 tile (a
 * store and a reload per step of the channel loop). */
AI __m256i madd_acc(__m256i acc, __m256i x, __m256i w) {
    __m256i t;
    __asm__("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(w), "x"(x));
    return acc;
}

/* The rows of the int8, int16 and bf16 tiles: TV vectors of 8 steps, the
 * last one masked by mlast unless the tile is whole (FULL). */
AI void load_row(int TV, int FULL, const float *p, __m256 *r, __m256i mlast) {
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++)
        r[v] = v == TV - 1 && !FULL ? _mm256_maskload_ps(p + VL * v, mlast) : _mm256_loadu_ps(p + VL * v);
}

/* After a tap's integer sums s of one output channel: f += float(s) x the
 * steps' scales sv x the tap's weight scale sw (two roundings, no FMA: the
 * scalar reference's order). */
AI void int_tap_row(int TV, __m256 *f, const __m256i *s, const __m256 *sv, float sw) {
    const __m256 w = _mm256_set1_ps(sw);
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++)
        f[v] = _mm256_add_ps(f[v], _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[v]), sv[v]), w));
}

/* y = f + bias over one output channel's row. */
AI void store_row(int TV, int FULL, float *y, const __m256 *f, float bias, __m256i mlast) {
    const __m256 b = _mm256_set1_ps(bias);
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++) {
        const __m256 r = _mm256_add_ps(f[v], b);
        if (v == TV - 1 && !FULL) _mm256_maskstore_ps(y + VL * v, mlast, r);
        else _mm256_storeu_ps(y + VL * v, r);
    }
}

/* ------------------------------------------------------------ int8 */

/* CO output channels x TV vectors of 8 steps from t: per tap, the integer
 * sums over input channels, 4 channels a lane: x's bytes back to signed
 * (^ 0x80), then vpmaddubsw of |x| by w with x's sign (vpsignb) -- each pair
 * at most 2 x 127 x 127, so no 16-bit saturation -- and vpmaddwd by 1 into
 * 32 bits: the exact sums vpdpbusd gives, without VNNI. Then as the AVX-512
 * tile: f += sums x the steps' scales x the tap's weight scale; y = f + bias.
 * A whole tile (FULL) loads and stores unmasked; a partial last vector is
 * masked. 4 instructions per 32 products (VNNI's vpdpbusd does the same in
 * one): on one Zen 3 core, the decoder's K 7 shapes (kbench's codec table)
 * run at 59-64 G multiply-adds/s against 81.7 for `qtts-bench peak`'s loop
 * of the same 4 instructions and 41 for the f32 kernel. */
#define Q8_CO 4
#define Q8_TV 2
AI void q8_tile(int CO, int TV, int FULL, const ops_conv_q8_args *a, int o, int t, __m256i mlast) {
    const int k = a->k, d = a->dilation, G = a->cin4 / 4;
    const size_t xs = (size_t)a->xq_stride * 4, wos = (size_t)k * a->cin4;
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 f[Q8_CO][Q8_TV];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = _mm256_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        __m256i acc[Q8_CO][Q8_TV];
        const int8_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin4;
        const uint8_t *xt = a->xq + (size_t)(t + tap * d) * 4;
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[c][v] = _mm256_setzero_si256();
        for (int g = 0; g < G; g++) {
            const uint8_t *xp = xt + g * xs;
            __m256i xsg[Q8_TV], xab[Q8_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) {
                const __m256i xv = v == TV - 1 && !FULL ? _mm256_maskload_epi32((const int *)(xp + 32 * v), mlast)
                                                        : _mm256_loadu_si256((const __m256i *)(xp + 32 * v));
                xsg[v] = _mm256_xor_si256(xv, flip);
                xab[v] = _mm256_abs_epi8(xsg[v]);
            }
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                int32_t w4;
                memcpy(&w4, wt + c * wos + 4 * g, 4);
                const __m256i wv = _mm256_set1_epi32(w4);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) {
                    const __m256i p = _mm256_maddubs_epi16(xab[v], _mm256_sign_epi8(wv, xsg[v]));
                    acc[c][v] = madd_acc(acc[c][v], p, ones);
                }
            }
        }
        __m256 sv[Q8_TV];
        load_row(TV, FULL, a->sx + t + tap * d, sv, mlast);
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++) int_tap_row(TV, f[c], acc[c], sv, a->sw[(size_t)(o + c) * k + tap]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
        store_row(TV, FULL, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
}

#define Q8_TILES(CO)                                                                                                   \
    if (rem == Q8_TV * VL) q8_tile(CO, 2, 1, a, o, t, m);                                                              \
    else if (TV == 1) q8_tile(CO, 1, 0, a, o, t, m);                                                                   \
    else q8_tile(CO, 2, 0, a, o, t, m);
#define QD_NAME CONV_CAT(conv1d_q8, CONV_ISA)
#define QD_ARGS ops_conv_q8_args
#define QD_STEP_FLOATS(a) ((a)->cin4 / 4)
#define QD_CO Q8_CO
#define QD_TV Q8_TV
#define QD_TILES Q8_TILES
#include "backend/cpu/conv_int_driver.h"

/* Pack 8 steps at a time (the ragged tail by conv_q8_pack_cols, same bits). */
static void conv_q8_pack_avx2(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride, float *sx) {
    const int cin4 = (cin + 3) & ~3, tv = t_in / VL * VL;
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127), off = _mm256_set1_epi32(128);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int t = 0; t < tv; t += VL) {
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < cin; i++) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + (size_t)i * x_stride + t), absm));
        _mm256_storeu_ps(sx + t, _mm256_div_ps(mx, _mm256_set1_ps(127.0f)));
        const __m256 nz = _mm256_cmp_ps(mx, _mm256_setzero_ps(), _CMP_GT_OQ);
        const __m256 inv = _mm256_and_ps(nz, _mm256_div_ps(_mm256_set1_ps(127.0f), mx));
        for (int i = 0; i < cin4; i += 4) {
            __m256i r = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i q = off;
                if (i + j < cin) {
                    q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + (size_t)(i + j) * x_stride + t), inv));
                    q = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(q, lo), hi), off);
                }
                r = _mm256_or_si256(r, _mm256_slli_epi32(q, 8 * j));
            }
            _mm256_storeu_si256((__m256i *)(xq + ((size_t)(i / 4) * xq_stride + t) * 4), r);
        }
    }
    conv_q8_pack_cols(x, cin, x_stride, xq, xq_stride, sx, tv, t_in);
}

void conv_q8_fill_avx2(ops_kernels *k) {
    k->conv1d_q8 = conv1d_q8_avx2;
    k->conv_q8_pack = conv_q8_pack_avx2;
}

/* ------------------------------------------------------------ int16 */

/* CO output channels x TV vectors of 8 steps from t: per tap, the integer
 * sums over input channels, 2 channels a lane: vpmaddwd of x's pairs by the
 * broadcast weight pair (16 products, each pair sum exact in 32 bits) and
 * vpaddd. Then as the int8 tile: f += sums x the steps' scales x the tap's
 * weight scale; y = f + bias. 2 instructions per 16 products, the int8
 * tile's rate per instruction without its xor, abs and vpsignb. 4 x 2 (8
 * sums, 2 x vectors, 1 weight and the products: no sum spilled to memory
 * inside the channel loop; f waits in memory between taps). */
#define I16_CO 4
#define I16_TV 2
AI void i16_tile(int CO, int TV, int FULL, const ops_conv_i16_args *a, int o, int t, __m256i mlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xq_stride * 2, wos = (size_t)k * a->cin2;
    __m256 f[I16_CO][I16_TV];
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = _mm256_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        __m256i acc[I16_CO][I16_TV];
        const int16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const int16_t *xt = a->xq + (size_t)(t + tap * d) * 2;
#pragma GCC unroll 6
        for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[c][v] = _mm256_setzero_si256();
        for (int g = 0; g < G; g++) {
            const int16_t *xp = xt + g * xs;
            __m256i xv[I16_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = v == TV - 1 && !FULL ? _mm256_maskload_epi32((const int *)(xp + 16 * v), mlast)
                                             : _mm256_loadu_si256((const __m256i *)(xp + 16 * v));
#pragma GCC unroll 6
            for (int c = 0; c < CO; c++) {
                int32_t w2;
                memcpy(&w2, wt + c * wos + 2 * g, 4);
                const __m256i wv = _mm256_set1_epi32(w2);
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = madd_acc(acc[c][v], xv[v], wv);
            }
        }
        __m256 sv[I16_TV];
        load_row(TV, FULL, a->sx + t + tap * d, sv, mlast);
#pragma GCC unroll 6
        for (int c = 0; c < CO; c++) int_tap_row(TV, f[c], acc[c], sv, a->sw[(size_t)(o + c) * k + tap]);
    }
#pragma GCC unroll 6
    for (int c = 0; c < CO; c++)
        store_row(TV, FULL, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
}

#define I16_TILES(CO)                                                                                                  \
    if (rem == I16_TV * VL) i16_tile(CO, 2, 1, a, o, t, m);                                                            \
    else if (TV == 1) i16_tile(CO, 1, 0, a, o, t, m);                                                                  \
    else i16_tile(CO, 2, 0, a, o, t, m);
#define QD_NAME CONV_CAT(conv1d_i16, CONV_ISA)
#define QD_ARGS ops_conv_i16_args
#define QD_STEP_FLOATS(a) ((a)->cin2 / 2)
#define QD_CO I16_CO
#define QD_TV I16_TV
#define QD_TILES I16_TILES
#include "backend/cpu/conv_int_driver.h"

/* Pack 8 steps at a time (the ragged tail by conv_i16_pack_cols, same bits:
 * the divisions are IEEE, vcvtps2dq rounds to nearest even as rintf). */
static void conv_i16_pack_avx2(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq, int xq_stride,
                               float *sx) {
    const int tv = t_in / VL * VL;
    const __m256i lo = _mm256_set1_epi32(-qmax), hi = _mm256_set1_epi32(qmax), low16 = _mm256_set1_epi32(0xffff);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), qf = _mm256_set1_ps((float)qmax);
    for (int t = 0; t < tv; t += VL) {
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < cin; i++) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + (size_t)i * x_stride + t), absm));
        _mm256_storeu_ps(sx + t, _mm256_div_ps(mx, qf));
        const __m256 nz = _mm256_cmp_ps(mx, _mm256_setzero_ps(), _CMP_GT_OQ);
        const __m256 inv = _mm256_and_ps(nz, _mm256_div_ps(qf, mx));
        for (int i = 0; i < cin; i += 2) {
            __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + (size_t)i * x_stride + t), inv));
            q0 = _mm256_and_si256(_mm256_min_epi32(_mm256_max_epi32(q0, lo), hi), low16);
            __m256i q1 = _mm256_setzero_si256();
            if (i + 1 < cin) {
                q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + (size_t)(i + 1) * x_stride + t), inv));
                q1 = _mm256_slli_epi32(_mm256_min_epi32(_mm256_max_epi32(q1, lo), hi), 16);
            }
            _mm256_storeu_si256((__m256i *)(xq + ((size_t)(i / 2) * xq_stride + t) * 2), _mm256_or_si256(q0, q1));
        }
    }
    conv_i16_pack_cols(x, cin, x_stride, qmax, xq, xq_stride, sx, tv, t_in);
}

void conv_i16_fill_avx2(ops_kernels *k) {
    k->conv1d_i16 = conv1d_i16_avx2;
    k->conv_i16_pack = conv_i16_pack_avx2;
}

/* ------------------------------------------------------------ bf16 (widened) */

/* CO output channels x TV vectors of 8 steps from t, conv_bf16.h's order
 * without a bf16 dot product: each pair widened to f32 (the high half by a
 * mask, the low half by a shift), then fma by the odd channel's weight and
 * fma by the even one's; a bf16 product is exact in f32, so each fma gives
 * vdpbf16ps's bits. Two FMAs per two channels, as the f32 kernel: the format
 * saves weight bytes here, not arithmetic. 4 x 2 (8 sums, 4 x halves, 2
 * weights: 14 of the 16 registers). */
#define BF_CO 4
#define BF_TV 2
AI void bf_tile(int CO, int TV, const ops_conv_bf16_args *a, int o, int t, __m256i mlast) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2;
    const size_t xs = (size_t)a->xb_stride, wos = (size_t)k * a->cin2;
    const __m256i all = _mm256_set1_epi32(-1), himask = _mm256_set1_epi32((int)0xffff0000u);
    __m256 acc[BF_CO][BF_TV];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) acc[c][v] = _mm256_setzero_ps();
    for (int tap = 0; tap < k; tap++) {
        const uint16_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin2;
        const uint32_t *xt = a->xb + t + tap * d;
        for (int g = 0; g < G; g++) {
            const uint32_t *xp = xt + g * xs;
            __m256 xo[BF_TV], xe[BF_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) {
                const __m256i xv = _mm256_maskload_epi32((const int *)(xp + VL * v), v == TV - 1 ? mlast : all);
                xo[v] = _mm256_castsi256_ps(_mm256_and_si256(xv, himask));
                xe[v] = _mm256_castsi256_ps(_mm256_slli_epi32(xv, 16));
            }
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                const uint16_t *wp = wt + c * wos + 2 * g;
                const __m256 wo = _mm256_castsi256_ps(_mm256_set1_epi32((int)((uint32_t)wp[1] << 16)));
                const __m256 we = _mm256_castsi256_ps(_mm256_set1_epi32((int)((uint32_t)wp[0] << 16)));
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) {
                    acc[c][v] = _mm256_fmadd_ps(xo[v], wo, acc[c][v]);
                    acc[c][v] = _mm256_fmadd_ps(xe[v], we, acc[c][v]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
        store_row(TV, 0, a->y + (size_t)(o + c) * a->y_stride + t, acc[c], a->bias ? a->bias[o + c] : 0.0f, mlast);
}

#define BF_TILES(CO)                                                                                                   \
    switch (TV) {                                                                                                      \
    case 1: bf_tile(CO, 1, a, o, t, m); break;                                                                         \
    default: bf_tile(CO, 2, a, o, t, m); break;                                                                        \
    }
#include "backend/cpu/conv_bf16_driver.h"

/* f32 lanes -> their bf16 in the high 16 bits (conv_bf16_round's bits). */
AI __m256i bf16_hi(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                                 _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)));
    /* signed compares are right here: a is at most 0x7fffffff */
    r = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x23800000), a), r);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
    return _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
}

/* Pack 8 steps at a time (the ragged tail by conv_bf16_pack_cols, same bits). */
static void conv_bf16_pack_avx2(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride) {
    const int tv = t_in / VL * VL;
    for (int g = 0; 2 * g < cin; g++) {
        const float *x0 = x + (size_t)(2 * g) * x_stride;
        for (int t = 0; t < tv; t += VL) {
            const __m256i lo = _mm256_srli_epi32(bf16_hi(_mm256_loadu_ps(x0 + t)), 16);
            const __m256i hi = 2 * g + 1 < cin ? bf16_hi(_mm256_loadu_ps(x0 + x_stride + t)) : _mm256_setzero_si256();
            _mm256_storeu_si256((__m256i *)(xb + (size_t)g * xb_stride + t), _mm256_or_si256(lo, hi));
        }
    }
    conv_bf16_pack_cols(x, cin, x_stride, xb, xb_stride, tv, t_in);
}

void conv_bf16_fill_avx2(ops_kernels *k) {
    k->conv1d_bf16 = conv1d_bf16_avx2;
    k->conv_bf16_pack = conv_bf16_pack_avx2;
}
