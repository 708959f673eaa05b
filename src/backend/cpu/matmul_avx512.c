/* AVX-512 leaf kernels of the matmul table (F/BW/VL/DQ; VNNI for the
 * int8/int4 formats, AVX512_BF16 for the opt-in bf16 dot product; the row
 * drivers: matmul_driver.h), plus dot/axpy, attention and SwiGLU.
 * Dataflow: W, X rows -> tiles of R in {1, 4, 16, 32} x N <= 6 rows -> a 16-lane f32 sum per output -> Y.
 *
 * Bit-exactness: every output Y[i][r] is one accumulator that sees the same
 * sequence of operations whatever the tile, n or row range: f32 formats FMA 16
 * columns at a time in column order, the last cols % 16 with a masked load
 * (zero lanes), then a fixed horizontal sum, then + bias. Int formats: per
 * group of 4 blocks (128 columns), exact int32 block dots (vpdpbusd) converted
 * to f32 and FMA'd with d_w * d_x (the int8 sign flip and the int4 offset
 * are cancelled exactly by the accumulators' start values; int4 with min
 * adds m * d_x * isum in f32), same horizontal sum.
 *
 * Where time goes: at n = 1 (decode) the kernels are bound by reading W. With
 * the next row tile prefetched into L2, BF16 and int8 reach the measured read
 * bandwidth (dev machine, 2 threads: 25 GB/s of weights vs 26 GB/s summing a
 * 1 GiB buffer; int4 18-22 GB/s, limited by its unpacking; tests/bench/kbench.c, `make kbench`).
 * At larger n, a block of rows whose weights fit in L2 is swept against
 * groups of 4 rows of X (f32 GEMM ~47 GMAC/s per thread). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/exp_poly.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"

#define AI static inline __attribute__((always_inline))

enum { DT32 = 0, DT16 = 1, DTBF = 2 };

AI float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

AI __m512 load_w(int dt, const uint8_t *p, int j) {
    switch (dt) {
    case DT32: return _mm512_loadu_ps((const float *)p + j);
    case DT16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + j)));
    default:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + j))), 16));
    }
}

AI __m512 load_w_mask(int dt, const uint8_t *p, int j, __mmask16 m) {
    switch (dt) {
    case DT32: return _mm512_maskz_loadu_ps(m, (const float *)p + j);
    case DT16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + j));
    default:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + j)), 16));
    }
}

/* out[r][i] = W row r . X row i for R rows of W (stride wst bytes) and N rows of X. */
AI void tile_f(int dt, int R, int N, const uint8_t *w, size_t wst, const float *x, size_t xst, int cols,
               float out[4][4]) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) acc[r][i] = _mm512_setzero_ps();
    const int esz = dt == DT32 ? 4 : 2;
    int j = 0;
    for (; j + 16 <= cols; j += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) xv[i] = _mm512_loadu_ps(x + i * xst + j);
        /* fetch the next 4 rows' line at this column into L2
         * one tile ahead (the hardware prefetcher restarts at every 4 KiB page
         * of each row); measured +10-30% at n = 1, reaching the read bandwidth */
        if (R == 4 && ((j * esz) & 63) == 0)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(w + (R + r) * wst + (size_t)j * esz), _MM_HINT_T1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 wv = load_w(dt, w + r * wst, j);
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
        }
    }
    if (j < cols) {
        const __mmask16 m = (__mmask16)((1u << (cols - j)) - 1u);
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) xv[i] = _mm512_maskz_loadu_ps(m, x + i * xst + j);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 wv = load_w_mask(dt, w + r * wst, j, m);
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) acc[r][i] = _mm512_fmadd_ps(wv, xv[i], acc[r][i]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) out[r][i] = hsum16(acc[r][i]);
}

/* ------------------------------------------------------------ bf16 dot product (opt-in) */

AI void tile_dp(int R, int N, const uint16_t *w, size_t wst,
                                                                 const uint16_t *x, size_t xst, int cols,
                                                                 float out[4][4]) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) acc[r][i] = _mm512_setzero_ps();
    int j = 0;
    for (; j + 32 <= cols; j += 32) {
        __m512i xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) xv[i] = _mm512_loadu_si512(x + i * xst + j);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512i wv = _mm512_loadu_si512(w + r * wst + j);
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], (__m512bh)wv, (__m512bh)xv[i]);
        }
    }
    if (j < cols) {
        const __mmask32 m = (__mmask32)((1ull << (cols - j)) - 1ull);
        __m512i xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) xv[i] = _mm512_loadu_si512(x + i * xst + j); /* zero padded to 32 */
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, w + r * wst + j);
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], (__m512bh)wv, (__m512bh)xv[i]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) out[r][i] = hsum16(acc[r][i]);
}

/* ------------------------------------------------------------ int8 / int4 (VNNI) */

enum { FQ8 = 0, FQ4 = 1, FQ4M = 2 };

/* [s0 x8, s1 x8] (hi = 0) or [s2 x8, s3 x8] (hi = 1) */
AI __m512 bcast_pair(__m128 s4, int hi) {
    const __m512i idx = hi ? _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2)
                           : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s4));
}

/* [s0 x4, s1 x4, s2 x4, s3 x4] */
AI __m512 bcast_quad(__m128 s4) {
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s4));
}

AI void tile_q(int fmt, int R, int N, const qt_mat *W, int r, const void *prep, int i0, float out[4][4]) {
    const int cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK, ng = nb / 4;
    const size_t rb = qmat_row_bytes(W);
    const uint8_t *wbase = (const uint8_t *)W->data + (size_t)r * rb;
    const uint16_t *sbase = W->scales + (size_t)r * nb;
    const uint16_t *mbase = fmt == FQ4M ? W->mins + (size_t)r * nb : NULL;
    /* prefetch distance in rows: whole tiles, at least 4 KiB ahead */
    const size_t pfd = (4096 + 4 * rb - 1) / (4 * rb) * 4;
    q8_rows xr[4];
    for (int i = 0; i < N; i++) xr[i] = q8_prep_row(prep, cols, i0 + i);
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) acc[rr][i] = _mm512_setzero_ps();
    const __m512i lo4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    for (int g = 0; g < ng; g++) {
#pragma GCC unroll 4
        for (int rr = 0; rr < R; rr++) {
            const __m128 dw4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(sbase + (size_t)rr * nb + 4 * g)));
            __m512i wa, wb;
            if (R == 4) { /* next tile, as in tile_f */
                const char *pf = (const char *)(wbase + (pfd + rr) * rb + (size_t)(fmt == FQ8 ? 128 : 64) * g);
                _mm_prefetch(pf, _MM_HINT_T1);
                if (fmt == FQ8) _mm_prefetch(pf + 64, _MM_HINT_T1);
            }
            if (fmt == FQ8) {
                const uint8_t *p = wbase + rr * rb + (size_t)128 * g;
                wa = _mm512_xor_si512(_mm512_loadu_si512(p), flip);
                wb = _mm512_xor_si512(_mm512_loadu_si512(p + 64), flip);
            } else {
                const __m512i v = _mm512_loadu_si512(wbase + rr * rb + (size_t)64 * g);
                wa = _mm512_and_si512(v, lo4);
                wb = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
            }
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) {
                const int8_t *xq = xr[i].xq + (size_t)128 * g;
                const int32_t *off = xr[i].off + (size_t)32 * g;
                const __m512i xa = _mm512_loadu_si512(xq), xb = _mm512_loadu_si512(xq + 64);
                const __m128 s4 = _mm_mul_ps(dw4, _mm_loadu_ps(xr[i].dx + 4 * g));
                __m512 a = acc[rr][i];
                if (fmt == FQ8) {
                    /* off: -128 isum in lanes 0 and 8, so each block's lanes sum to q . xq */
                    const __m512i d0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(off), wa, xa);
                    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), bcast_pair(s4, 0), a);
                    const __m512i d1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(off + 16), wb, xb);
                    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), bcast_pair(s4, 1), a);
                } else {
                    /* Q4: off = -8 isum in lane 4b; Q4M: no offset, the min term below */
                    const __m512i z = fmt == FQ4 ? _mm512_loadu_si512(off) : _mm512_setzero_si512();
                    const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, wa, xa), wb, xb);
                    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), bcast_quad(s4), a);
                    if (fmt == FQ4M) {
                        const __m128 m4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(mbase + (size_t)rr * nb + 4 * g)));
                        const __m128 fs4 = _mm_loadu_ps(xr[i].fsum + 4 * g);
                        a = _mm512_fmadd_ps(_mm512_zextps128_ps512(m4), _mm512_zextps128_ps512(fs4), a);
                    }
                }
                acc[rr][i] = a;
            }
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) out[rr][i] = hsum16(acc[rr][i]);
}

/* the row drivers and the table entries mm_f32_avx512 ... mm_q4m_avx512,
 * (mm_bf16dp_avx512 below) */
#define MM_ISA avx512
#define MM_F_ROWS 4
#define MM_OUT_N 4
#include "backend/cpu/matmul_driver.h"

/* The bf16 dot-product tiles over rows [r0, r1), X as bf16 rows from the
 * preparation (zero padded to 32 columns), the blocking of mm_float. */
static void mm_bf16dp_avx512(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                             int r0, int r1) {
    (void)X;
    const int cols = W->cols, rows = W->rows;
    const size_t xst = ((size_t)cols + 31) / 32 * 32;
    const uint16_t *base = W->data;
    const int rb = n <= 4 ? r1 - r0 : row_block((size_t)cols * 2);
    for (int b0 = r0; b0 < r1; b0 += rb) {
        const int b1 = b0 + rb < r1 ? b0 + rb : r1;
        for (int i0 = 0; i0 < n; i0 += 4) {
            const int N = n - i0 < 4 ? n - i0 : 4;
            const uint16_t *x = bf16_prep_row(prep, cols, i0);
            for (int r = b0; r < b1;) {
                const int R = b1 - r >= 4 ? 4 : 1;
                float out[4][4];
#define CALL_DP(RR, NN) tile_dp(RR, NN, base + (size_t)r * cols, (size_t)cols, x, xst, cols, out)
                MM_TILES_4(CALL_DP)
#undef CALL_DP
                store_tile(Y, rows, r, i0, R, N, bias, out);
                r += R;
            }
        }
    }
}

/* q8_prep_ex for column order (group 1), vectorised: the same float
 * operations per value (|x| max, x * (127 / max), round to nearest even,
 * clamp), so the same bytes; a row holding Inf or NaN goes to q8_prep_ex. */
#define QT_RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) /* an immediate for clang */

static void prep_q8_rows_avx512(const qt_mat *W, const float *X, int n, void *buf, int off_mode) {
    const int cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK;
    const size_t rbytes = q8_prep_row_bytes(cols);
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f);
    for (int i = 0; i < n; i++) {
        const float *x = X + (size_t)i * cols;
        __mmask16 bad = 0;
        for (int j = 0; j < cols; j += 16) {
            const __mmask16 m = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1u);
            bad |= _mm512_fpclass_ps_mask(_mm512_maskz_loadu_ps(m, x + j), 0x99); /* NaN, +-Inf */
        }
        if (bad) {
            q8_prep_ex(W, x, 1, (unsigned char *)buf + rbytes * (size_t)i, 1, off_mode);
            continue;
        }
        q8_rows r = q8_prep_row(buf, cols, i);
        if (off_mode != Q8_OFF_NONE) memset(r.off, 0, (size_t)nb / 4 * 32 * sizeof(int32_t));
        for (int b = 0; b < nb; b++) {
            const int j0 = b * QT_BLOCK, left = cols - j0;
            const __mmask16 m0 = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
            const __mmask16 m1 = left >= 32 ? (__mmask16)0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1u);
            const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + j0), v1 = _mm512_maskz_loadu_ps(m1, x + j0 + 16);
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            int isum = 0;
            float dx = 0.0f;
            if (amax == 0.0f) {
                memset(r.xq + j0, 0, QT_BLOCK);
            } else {
                dx = amax / 127.0f;
                const __m512 inv = _mm512_set1_ps(127.0f / amax);
                const __m512i q0 = _mm512_cvttps_epi32(
                    _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v0, inv), QT_RN), nlim), lim));
                const __m512i q1 = _mm512_cvttps_epi32(
                    _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v1, inv), QT_RN), nlim), lim));
                _mm_storeu_si128((__m128i *)(r.xq + j0), _mm512_cvtepi32_epi8(q0));
                _mm_storeu_si128((__m128i *)(r.xq + j0 + 16), _mm512_cvtepi32_epi8(q1));
                isum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            }
            r.dx[b] = dx;
            r.fsum[b] = dx * (float)isum;
            if (off_mode == Q8_OFF_PAIRS_128) r.off[(b / 4) * 32 + (b & 2) * 8 + (b & 1) * 8] = -128 * isum;
            else if (off_mode == Q8_OFF_BLOCK_128) r.off[b] = -128 * isum;
        }
    }
}

static void prep_q8_avx512(const qt_mat *W, const float *X, int n, void *buf) {
    prep_q8_rows_avx512(W, X, n, buf, Q8_OFF_PAIRS_128);
}
static void prep_q8x16_avx512(const qt_mat *W, const float *X, int n, void *buf) {
    prep_q8_rows_avx512(W, X, n, buf, Q8_OFF_BLOCK_128);
}
static void prep_q4_avx512(const qt_mat *W, const float *X, int n, void *buf) {
    q8_prep_ex(W, X, n, buf, 4, Q8_OFF_QUADS_8);
}
static void prep_q4m_avx512(const qt_mat *W, const float *X, int n, void *buf) {
    q8_prep_ex(W, X, n, buf, 4, Q8_OFF_NONE);
}

/* QT_Q8_B32_X16: one group of 16 rows against N <= 4 rows of X. Per block,
 * 8 vpdpbusd (4 columns x 16 rows each, the X bytes broadcast) give the 16
 * rows' exact integer dots (started at -128 isum, which cancels the + 128 of
 * the stored bytes); then acc = fma(isum, d_w * dx, acc) per row: the
 * sequence of mm_q8x16_scalar, so the same bits. */
AI void tile_x16(int N, const qt_mat *W, size_t g, int nb, const void *prep, int i0, __m512 acc[4]) {
    const uint8_t *base = (const uint8_t *)W->data + g * (size_t)nb * 512;
    const uint16_t *sb = W->scales + g * (size_t)nb * 16;
    q8_rows xr[4];
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) {
        xr[i] = q8_prep_row(prep, W->cols, i0 + i);
        acc[i] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const __m512i *wp = (const __m512i *)(base + (size_t)b * 512);
        /* every line of the block 4 KiB ahead: one core then reads at the
         * rate of a plain load loop (two lines of eight: 20-30 % slower) */
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(wp + 64 + c), _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + (size_t)b * 16)));
        __m512i w[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) w[c] = _mm512_load_si512(wp + c);
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) {
            const int32_t *x4 = (const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK);
            /* two integer chains (exact, so the split changes no bit) halve the latency */
            __m512i d0 = _mm512_set1_epi32(xr[i].off[b]), d1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 8; c += 2) {
                d0 = _mm512_dpbusd_epi32(d0, w[c], _mm512_set1_epi32(x4[c]));
                d1 = _mm512_dpbusd_epi32(d1, w[c + 1], _mm512_set1_epi32(x4[c + 1]));
            }
            const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xr[i].dx[b]));
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), s, acc[i]);
        }
    }
}

/* Two adjacent groups (32 rows) against 1 <= N <= X32_ROWS rows of X: each
 * broadcast of 4 X bytes feeds both groups' vpdpbusd, so a block takes 6 loads
 * per 8 products instead of tile_x16's 5 per 4 (its loads, not the products,
 * bound it when N > 1: prefill, batched streams). Per row the same exact
 * integer dot and the same float operations as tile_x16: the same bits.
 * X32_ROWS = 6: 24 accumulators and 3 operands fit the 32 registers (8 would
 * spill); the talker's products with 8-32 rows of X take 0.85-0.96 of the
 * time of a 4-row tile (0.6B int8, 2 threads, 2-vCPU Zen 5 guest; docs/BENCH.md,
 * "a 6-row int8 tile for prefill"). */
#define X32_ROWS 6
AI void tile_x32(int N, const qt_mat *W, size_t g, int nb, const void *prep, int i0, __m512 acc[2][X32_ROWS]) {
    const size_t gb = (size_t)nb * 512;
    const uint8_t *base0 = (const uint8_t *)W->data + g * gb, *base1 = base0 + gb;
    const uint16_t *sb0 = W->scales + g * (size_t)nb * 16, *sb1 = sb0 + (size_t)nb * 16;
    q8_rows xr[X32_ROWS];
#pragma GCC unroll 6
    for (int i = 0; i < N; i++) {
        xr[i] = q8_prep_row(prep, W->cols, i0 + i);
        acc[0][i] = acc[1][i] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const __m512i *wp0 = (const __m512i *)(base0 + (size_t)b * 512), *wp1 = (const __m512i *)(base1 + (size_t)b * 512);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) { /* every line 4 KiB ahead, as tile_x16 */
            _mm_prefetch((const char *)(wp0 + 64 + c), _MM_HINT_T0);
            _mm_prefetch((const char *)(wp1 + 64 + c), _MM_HINT_T0);
        }
        __m512i d0[X32_ROWS], d1[X32_ROWS];
#pragma GCC unroll 6
        for (int i = 0; i < N; i++) d0[i] = d1[i] = _mm512_set1_epi32(xr[i].off[b]);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const __m512i w0 = _mm512_load_si512(wp0 + c), w1 = _mm512_load_si512(wp1 + c);
#pragma GCC unroll 6
            for (int i = 0; i < N; i++) {
                const __m512i xb = _mm512_set1_epi32(((const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK))[c]);
                d0[i] = _mm512_dpbusd_epi32(d0[i], w0, xb);
                d1[i] = _mm512_dpbusd_epi32(d1[i], w1, xb);
            }
        }
        const __m512 dw0 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb0 + (size_t)b * 16)));
        const __m512 dw1 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb1 + (size_t)b * 16)));
#pragma GCC unroll 6
        for (int i = 0; i < N; i++) {
            const __m512 dx = _mm512_set1_ps(xr[i].dx[b]);
            acc[0][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0[i]), _mm512_mul_ps(dw0, dx), acc[0][i]);
            acc[1][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1[i]), _mm512_mul_ps(dw1, dx), acc[1][i]);
        }
    }
}

/* Rows [g 16, g 16 + 32) of Y for every row of X, through tile_x32 (n >= 2). */
static void x32_pair(const qt_mat *W, size_t g, int nb, const void *prep, int n, const float *bias, float *Y) {
    const int rows = W->rows;
    const __m512 bv0 = bias ? _mm512_loadu_ps(bias + g * 16) : _mm512_setzero_ps();
    const __m512 bv1 = bias ? _mm512_loadu_ps(bias + g * 16 + 16) : _mm512_setzero_ps();
    for (int i0 = 0; i0 < n; i0 += X32_ROWS) {
        const int N = n - i0 < X32_ROWS ? n - i0 : X32_ROWS;
        __m512 acc[2][X32_ROWS];
        switch (N) {
        case 6: tile_x32(6, W, g, nb, prep, i0, acc); break;
        case 5: tile_x32(5, W, g, nb, prep, i0, acc); break;
        case 4: tile_x32(4, W, g, nb, prep, i0, acc); break;
        case 3: tile_x32(3, W, g, nb, prep, i0, acc); break;
        case 2: tile_x32(2, W, g, nb, prep, i0, acc); break;
        default: tile_x32(1, W, g, nb, prep, i0, acc); break;
        }
        for (int i = 0; i < N; i++) {
            float *y = Y + (size_t)(i0 + i) * rows + g * 16;
            _mm512_storeu_ps(y, _mm512_add_ps(acc[0][i], bv0));
            _mm512_storeu_ps(y + 16, _mm512_add_ps(acc[1][i], bv1));
        }
    }
}

/* QT_Q4M_B32_X16: one group of 16 rows against N <= 4 rows of X. Per block,
 * 4 loads of 64 bytes masked with 0x0f (columns 4c..4c+3) and with 0xf0
 * (16 x columns 16+4c..16+4c+3) feed 8 vpdpbusd; the high chain's sum is
 * exactly 16 x its dot, so >> 4 gives it back. Then per row
 * accd = fma(isum, d_w * dx, accd), accm = fma(m_w, fsum, accm): the
 * sequence of mm_q4mx16_scalar, so the same bits. */
AI void tile_q4x16(int N, const qt_mat *W, size_t g, int nb, const void *prep, int i0, __m512 acc[4]) {
    const uint8_t *base = (const uint8_t *)W->data + g * (size_t)nb * 256;
    const uint16_t *sb = W->scales + g * (size_t)nb * 16, *mb = W->mins + g * (size_t)nb * 16;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), hi4 = _mm512_set1_epi8((char)0xf0);
    q8_rows xr[4];
    __m512 accd[4], accm[4];
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) {
        xr[i] = q8_prep_row(prep, W->cols, i0 + i);
        accd[i] = accm[i] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const __m512i *wp = (const __m512i *)(base + (size_t)b * 256);
        /* every line of the block 8 KiB ahead (4 KiB or half the lines: 5-8 % slower talker) */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) _mm_prefetch((const char *)(wp + 128 + c), _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + (size_t)b * 16)));
        const __m512 mw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(mb + (size_t)b * 16)));
        __m512i wl[4], wh[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_load_si512(wp + c);
            wl[c] = _mm512_and_si512(v, lo4);
            wh[c] = _mm512_and_si512(v, hi4);
        }
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) {
            const int32_t *x4 = (const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK);
            __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                d0 = _mm512_dpbusd_epi32(d0, wl[c], _mm512_set1_epi32(x4[c]));
                d1 = _mm512_dpbusd_epi32(d1, wh[c], _mm512_set1_epi32(x4[c + 4]));
            }
            const __m512i d = _mm512_add_epi32(d0, _mm512_srai_epi32(d1, 4));
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xr[i].dx[b]));
            accd[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, accd[i]);
            accm[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xr[i].fsum[b]), accm[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) acc[i] = _mm512_add_ps(accd[i], accm[i]);
}

/* Rows [r0, r1) of Y through the 16-row tiles of QT_Q8_B32_X16 (q4 = 0;
 * whole pairs of groups through x32_pair when n >= 2) or QT_Q4M_B32_X16
 * (q4 = 1); a group the range only partly covers is computed whole and
 * stored masked. */
AI void mm_x16(int q4, const qt_mat *W, const void *prep, int n, const float *bias, float *Y, int r0, int r1) {
    const int rows = W->rows, nb = qt_kpad(W->cols) / QT_BLOCK;
    for (int g = r0 / 16; g * 16 < r1; g++) {
        if (!q4 && n >= 2 && g * 16 >= r0 && g * 16 + 32 <= r1) { /* two whole groups */
            x32_pair(W, (size_t)g, nb, prep, n, bias, Y);
            g++;
            continue;
        }
        const int lo = g * 16 < r0 ? r0 : g * 16, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
        const __mmask16 m = (__mmask16)(((1u << (hi - g * 16)) - 1u) & ~((1u << (lo - g * 16)) - 1u));
        const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + (size_t)g * 16) : _mm512_setzero_ps();
        for (int i0 = 0; i0 < n; i0 += 4) {
            const int N = n - i0 < 4 ? n - i0 : 4;
            __m512 acc[4];
#define X16_TILE(NN)                                                                                                   \
    (q4 ? tile_q4x16(NN, W, (size_t)g, nb, prep, i0, acc) : tile_x16(NN, W, (size_t)g, nb, prep, i0, acc))
            switch (N) {
            case 4: X16_TILE(4); break;
            case 3: X16_TILE(3); break;
            case 2: X16_TILE(2); break;
            default: X16_TILE(1); break;
            }
#undef X16_TILE
            for (int i = 0; i < N; i++)
                _mm512_mask_storeu_ps(Y + (size_t)(i0 + i) * rows + (size_t)g * 16, m, _mm512_add_ps(acc[i], bv));
        }
    }
}

static void mm_q8x16_avx512(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                            int r0, int r1) {
    (void)X;
    mm_x16(0, W, prep, n, bias, Y, r0, r1);
}
static void mm_q4mx16_avx512(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                             int r0, int r1) {
    (void)X;
    mm_x16(1, W, prep, n, bias, Y, r0, r1);
}

/* ------------------------------------------------------------ dot / axpy */

static float dot_avx512(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int j = 0;
    for (; j + 64 <= n; j += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 32), _mm512_loadu_ps(b + j + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 48), _mm512_loadu_ps(b + j + 48), s3);
    }
    for (; j + 16 <= n; j += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
    if (j < n) {
        const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j), s0);
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static void axpy_avx512(float *y, float a, const float *x, int n) {
    const __m512 av = _mm512_set1_ps(a);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + j), _mm512_loadu_ps(y + j)));
    if (j < n) {
        const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        _mm512_mask_storeu_ps(y + j, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, y + j)));
    }
}

/* ops_attn_head with this table's dot and axpy inlined: the scores are
 * dot_avx512 itself, and the weighted sum of V keeps up to 128 outputs in
 * registers across the positions (out = fma(p_j, V_j, out) for j = 0, 1, ...
 * per element, as the axpy calls do from out = 0), so the same bits without a
 * call, a load and a store of out per position. */
static void attn_head_avx512(const float *q, const float *K, const float *V, size_t kv_stride, int np, int hd,
                             float scale, float *scores, float *out) {
    for (int j = 0; j < np; j++) scores[j] = dot_avx512(q, K + (size_t)j * kv_stride, hd) * scale;
    ops_softmax(scores, np);
    for (int c0 = 0; c0 < hd; c0 += 128) {
        const int w = hd - c0 < 128 ? hd - c0 : 128, nv = (w + 15) / 16;
        const __mmask16 last = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1u : 0xFFFFu);
        __m512 acc[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) acc[v] = _mm512_setzero_ps();
        for (int j = 0; j < np; j++) {
            const __m512 p = _mm512_set1_ps(scores[j]);
            const float *x = V + (size_t)j * kv_stride + c0;
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++)
                if (v < nv)
                    acc[v] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(v == nv - 1 ? last : 0xFFFF, x + 16 * v), acc[v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            if (v < nv) _mm512_mask_storeu_ps(out + c0 + 16 * v, v == nv - 1 ? last : 0xFFFF, acc[v]);
    }
}

/* ------------------------------------------------------------ SwiGLU */

/* e^x by exp_poly.h's sequence; 2^n by scalef, which saturates to inf and to
 * 0 / subnormals correctly. Within a few ulp of expf. */
AI __m512 exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EXP_X_MIN)), _mm512_set1_ps(EXP_X_MAX));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < EXP_POLY_N; k++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[k]));
    return _mm512_scalef_ps(p, n);
}

/* g = g / (1 + e^-g) * u, 16 lanes at a time, the tail masked: every element
 * goes through the same operations wherever it sits. NaN in g stays NaN. */
static void swiglu_avx512(float *g, const float *u, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + j), uv = _mm512_maskz_loadu_ps(m, u + j);
        const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv));
    }
}

/* ------------------------------------------------------------ ELU */

/* expm1(x) for x <= 0 (the ELU's negative side; the caller keeps x > 0 and
 * NaN): x clamped to [-87, 0] (expm1 is -1 in f32 below), x = n ln 2 + r with
 * |r| <= ln 2 / 2, expm1(r) = r + r^2 (1/2 + r/6 + ... + r^6/8!) (truncation
 * ~2e-10 relative), then expm1(x) = 2^n expm1(r) + (2^n - 1) in one FMA:
 * exactly expm1(r) when n = 0, so small x keep their relative accuracy. */
AI __m512 expm1_neg_avx512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(EXPM1_X_MIN));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXPM1_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < EXPM1_POLY_N; k++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXPM1_POLY[k]));
    const __m512 em = _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r);
    const __m512 s = _mm512_scalef_ps(_mm512_set1_ps(1.0f), n);
    return _mm512_fmadd_ps(s, em, _mm512_sub_ps(s, _mm512_set1_ps(1.0f)));
}

/* x = x > 0 ? x : expm1(x), 16 lanes at a time, the tail masked; x >= 0 (the
 * zeros keep their sign, as expm1f(+-0) = +-0) and NaN lanes are stored unchanged. */
static void elu_avx512(float *x, int n) {
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        const __mmask16 neg = _mm512_mask_cmp_ps_mask(m, v, _mm512_setzero_ps(), _CMP_LT_OQ);
        if (neg) _mm512_mask_storeu_ps(x + j, neg, expm1_neg_avx512(v));
    }
}

void ops_fill_avx512(ops_kernels *k, int vnni, int bf16) {
    k->mm[OPS_WF_F32] = mm_f32_avx512;
    k->mm[OPS_WF_F16] = mm_f16_avx512;
    k->mm[OPS_WF_BF16] = mm_bf16_avx512;
    if (vnni) {
        k->mm[OPS_WF_Q8] = mm_q8_avx512;
        k->mm[OPS_WF_Q4] = mm_q4_avx512;
        k->mm[OPS_WF_Q4M] = mm_q4m_avx512;
        k->prep[OPS_WF_Q8] = prep_q8_avx512;
        k->prep[OPS_WF_Q4] = prep_q4_avx512;
        k->prep[OPS_WF_Q4M] = prep_q4m_avx512;
        for (int f = OPS_WF_Q8; f <= OPS_WF_Q4M; f++) k->prep_size[f] = q8_prep_size;
        k->mm[OPS_WF_Q8X16] = mm_q8x16_avx512;
        k->prep[OPS_WF_Q8X16] = prep_q8x16_avx512;
        k->prep_size[OPS_WF_Q8X16] = q8_prep_size;
        k->mm[OPS_WF_Q4MX16] = mm_q4mx16_avx512;
        k->prep[OPS_WF_Q4MX16] = prep_q8x16_avx512;
        k->prep_size[OPS_WF_Q4MX16] = q8_prep_size;
        k->prefer_x16 = 1;
        k->x16_q8_signed = 0; /* vpdpbusd takes the weights unsigned (q + 128) */
    }
    k->mm_bf16_dp = bf16 ? mm_bf16dp_avx512 : NULL;
    k->dot = dot_avx512;
    k->axpy = axpy_avx512;
    k->attn_head = attn_head_avx512;
    k->swiglu = swiglu_avx512;
    k->elu = elu_avx512;
}
