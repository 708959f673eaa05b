/* AVX2 + FMA + F16C leaf kernels of the matmul table for every weight format
 * (the row drivers: matmul_driver.h), plus dot/axpy, attention and SwiGLU.
 * Dataflow: W, X rows -> tiles of R in {1, 4} x N in {1, 2} rows -> an 8-lane f32 sum per output -> Y.
 *
 * Bit-exactness: every output Y[i][r] is one accumulator that sees the same
 * sequence of operations whatever the tile, n or row range: float formats FMA
 * 8 columns at a time in column order, the last cols % 8 from a zero-padded
 * copy, then a fixed horizontal sum, then + bias. Int formats: per block of 32
 * an exact int32 dot (vpmaddubsw + vpmaddwd; int8 uses the sign trick
 * |x| * sign(w, x), no int16 overflow since |q| <= 127), converted to f32 and
 * FMA'd with d_w * d_x in block order; int4 unpacks two blocks per vector
 * (activations in group-2 order, quant.h) and cancels its offset exactly in
 * int32 (with min: m * d_x * isum in f32). The 16-row layouts (X16, which
 * the model uses for int8 and int4 weights on this table) have kernels of
 * their own below, with the scalar X16 kernel's bits. Also the int kernels of
 * the AVX-512 table on CPUs without VNNI. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/exp_poly.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"

#define AI static inline __attribute__((always_inline))

enum { DT32 = 0, DT16 = 1, DTBF = 2 };

AI float hsum8(__m256 v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

AI __m256 load_w(int dt, const uint8_t *p, int j) {
    switch (dt) {
    case DT32: return _mm256_loadu_ps((const float *)p + j);
    case DT16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + j)));
    default:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + j))), 16));
    }
}

/* The last rem < 8 weights of a row, zero padded. */
AI __m256 load_w_tail(int dt, const uint8_t *p, int j, int rem) {
    const size_t esz = dt == DT32 ? 4 : 2;
    _Alignas(32) uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    memcpy(buf, p + (size_t)j * esz, (size_t)rem * esz);
    return load_w(dt, buf, 0);
}

AI __m256i tail_mask(int rem) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane);
}

AI void tile_f(int dt, int R, int N, const uint8_t *w, size_t wst, const float *x, size_t xst, int cols,
               float out[4][2]) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) acc[r][i] = _mm256_setzero_ps();
    const int esz = dt == DT32 ? 4 : 2;
    int j = 0;
    for (; j + 8 <= cols; j += 8) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) xv[i] = _mm256_loadu_ps(x + i * xst + j);
        /* the next 4 rows' line at this column into L2 (see matmul_avx512.c) */
        if (R == 4 && ((j * esz) & 63) == 0)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(w + (R + r) * wst + (size_t)j * esz), _MM_HINT_T1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 wv = load_w(dt, w + r * wst, j);
#pragma GCC unroll 2
            for (int i = 0; i < N; i++) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
        }
    }
    if (j < cols) {
        const int rem = cols - j;
        const __m256i m = tail_mask(rem);
        __m256 xv[2];
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) xv[i] = _mm256_maskload_ps(x + i * xst + j, m);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 wv = load_w_tail(dt, w + r * wst, j, rem);
#pragma GCC unroll 2
            for (int i = 0; i < N; i++) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) out[r][i] = hsum8(acc[r][i]);
}

/* ------------------------------------------------------------ int8 / int4 */

enum { FQ8 = 0, FQ4 = 1, FQ4M = 2 };

AI __m256 bcast(__m128 s4, int k) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), _mm256_set1_epi32(k));
}

/* [s_{2p} x4, s_{2p+1} x4] */
AI __m256 bcast_pair(__m128 s4, int p) {
    const __m256i idx = p ? _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3) : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), idx);
}

AI void tile_q(int fmt, int R, int N, const qt_mat *W, int r, const void *prep, int i0, float out[4][2]) {
    const int cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK, ng = nb / 4;
    const size_t rb = qmat_row_bytes(W);
    const uint8_t *wbase = (const uint8_t *)W->data + (size_t)r * rb;
    const uint16_t *sbase = W->scales + (size_t)r * nb;
    const uint16_t *mbase = fmt == FQ4M ? W->mins + (size_t)r * nb : NULL;
    /* prefetch distance in rows: whole tiles, at least 4 KiB ahead */
    const size_t pfd = (4096 + 4 * rb - 1) / (4 * rb) * 4;
    q8_rows xr[2];
    for (int i = 0; i < N; i++) xr[i] = q8_prep_row(prep, cols, i0 + i);
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) acc[rr][i] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1), lo4 = _mm256_set1_epi8(0x0f);
    for (int g = 0; g < ng; g++) {
#pragma GCC unroll 4
        for (int rr = 0; rr < R; rr++) {
            const __m128 dw4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(sbase + (size_t)rr * nb + 4 * g)));
            if (R == 4) { /* next tile (see tile_f) */
                const char *pf = (const char *)(wbase + (pfd + rr) * rb + (size_t)(fmt == FQ8 ? 128 : 64) * g);
                _mm_prefetch(pf, _MM_HINT_T1);
                if (fmt == FQ8) _mm_prefetch(pf + 64, _MM_HINT_T1);
            }
#pragma GCC unroll 2
            for (int i = 0; i < N; i++) {
                const __m128 s4 = _mm_mul_ps(dw4, _mm_loadu_ps(xr[i].dx + 4 * g));
                const int8_t *xq = xr[i].xq + 128 * g;
                __m256 a = acc[rr][i];
                if (fmt == FQ8) {
                    /* one block per vector: |x| * sign(w, x), pair sums <= 2 * 127 * 127 */
#pragma GCC unroll 4
                    for (int blk = 0; blk < 4; blk++) {
                        const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 32 * blk));
                        const __m256i w =
                            _mm256_loadu_si256((const __m256i *)(wbase + rr * rb + (size_t)128 * g + 32 * blk));
                        const __m256i p =
                            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(w, x)), ones);
                        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), bcast(s4, blk), a);
                    }
                } else {
                    /* two blocks per vector (x in group-2 order): lanes 0-3 block 2p, 4-7 block 2p+1 */
#pragma GCC unroll 2
                    for (int pr = 0; pr < 2; pr++) {
                        const __m256i v =
                            _mm256_loadu_si256((const __m256i *)(wbase + rr * rb + (size_t)64 * g + 32 * pr));
                        const __m256i lo = _mm256_and_si256(v, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
                        const __m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 64 * pr));
                        const __m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 64 * pr + 32));
                        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xa), _mm256_maddubs_epi16(hi, xb));
                        p = _mm256_madd_epi16(p, ones);
                        /* Q4: -8 isum in lanes 0 and 4 makes each block's lanes sum to (q - 8) . xq */
                        if (fmt == FQ4)
                            p = _mm256_add_epi32(p, _mm256_loadu_si256((const __m256i *)(xr[i].off + 32 * g + 8 * pr)));
                        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), bcast_pair(s4, pr), a);
                    }
                    if (fmt == FQ4M) {
                        const __m128 m4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(mbase + (size_t)rr * nb + 4 * g)));
                        const __m128 fs4 = _mm_loadu_ps(xr[i].fsum + 4 * g);
                        a = _mm256_fmadd_ps(_mm256_zextps128_ps256(m4), _mm256_zextps128_ps256(fs4), a);
                    }
                }
                acc[rr][i] = a;
            }
        }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 2
        for (int i = 0; i < N; i++) out[rr][i] = hsum8(acc[rr][i]);
}

static void prep_q4_avx2(const qt_mat *W, const float *X, int n, void *buf) {
    q8_prep_ex(W, X, n, buf, 2, Q8_OFF_QUADS_8);
}
static void prep_q4m_avx2(const qt_mat *W, const float *X, int n, void *buf) {
    q8_prep_ex(W, X, n, buf, 2, Q8_OFF_NONE);
}

/* the row drivers and the table entries mm_f32_avx2 ... mm_q4m_avx2 */
#define MM_ISA avx2
#define MM_F_ROWS 2
#define MM_OUT_N 2
#include "backend/cpu/matmul_driver.h"

/* ------------------------------------------------ int8 / int4, 16-row groups */

/* QT_Q8_B32_X16 and QT_Q4M_B32_X16 (quant.h): a group's 16 weight rows are two
 * 8-lane halves, one 32-byte load each per 4 columns, so a broadcast of 4 X
 * bytes meets 16 rows at once and a block's 16 integer dots come out in two
 * vectors, with no horizontal sums. Per output the scalar X16 kernel's
 * sequence: the exact integer dot of each block, acc = fma(isum, d_w * dx,
 * acc) in block order (int4 also accm = fma(m_w, fsum, accm), then
 * acc + accm), then + bias: the same bits as every other table.
 * int8 (no VNNI): the stored q + 128 flipped back to q, then |x| * sign(q, x)
 * by vpmaddubsw (pair sums <= 2 * 127 * 127, no saturation) and vpmaddwd into
 * int32 per 4 columns. int4: the nibbles (0..15) are unsigned already, so
 * vpmaddubsw takes them as they are and a whole block sums in int16
 * (8 products of pairs, each <= 2 * 15 * 127: |sum| <= 30480) before one
 * vpmaddwd. */
/* Rows of X per tile: each has two int32 sums a block and two float
 * accumulators, which are touched once a block and are what the compiler
 * spills (2 rows a tile are no faster in tests/bench/kbench.c) */
#define X16_AVX2_ROWS 4

/* Columns 4c..4c+3 of block b for N rows of X into their int32 sums.
 * QT_Q8_B32_X16 (sgn 0): q + 128 flipped back to q, then |x| * sign(q, x).
 * QT_Q8_B32_X16S (sgn 1): q as stored, |q| once per column group and
 * x * sign(q) per row: 8 instead of 9 operations a row, no flip (same
 * products, so the same exact sums). */
AI void q8x16_cols(int sgn, int N, const uint8_t *wp, int c, const q8_rows *xr, int b, __m256i flip, __m256i *s0,
                   __m256i *s1) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i w0 = _mm256_load_si256((const __m256i *)(wp + 64 * c));
    __m256i w1 = _mm256_load_si256((const __m256i *)(wp + 64 * c + 32));
    if (sgn) {
        const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) {
            const __m256i xb = _mm256_set1_epi32(((const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK))[c]);
            s0[i] = _mm256_add_epi32(s0[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xb, w0)), ones));
            s1[i] = _mm256_add_epi32(s1[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xb, w1)), ones));
        }
        return;
    }
    w0 = _mm256_xor_si256(w0, flip);
    w1 = _mm256_xor_si256(w1, flip);
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) {
        const __m256i xb = _mm256_set1_epi32(((const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK))[c]);
        const __m256i ax = _mm256_abs_epi8(xb);
        s0[i] = _mm256_add_epi32(s0[i], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xb)), ones));
        s1[i] = _mm256_add_epi32(s1[i], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xb)), ones));
    }
}

AI void tile_q8x16_avx2(int sgn, int N, const uint8_t *base, const uint16_t *sb, int nb, const q8_rows *xr, int pf,
                        __m256 acc[2][X16_AVX2_ROWS]) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) acc[0][i] = acc[1][i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *wp = base + (size_t)b * 512;
        if (pf)
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(wp + 4096 + 64 * c), _MM_HINT_T0);
        __m256i s0[X16_AVX2_ROWS], s1[X16_AVX2_ROWS];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) s0[i] = s1[i] = _mm256_setzero_si256();
        /* one stream: all 8 column groups unrolled; more rows: two at a time
         * (a full unroll spills the rows' sums: 3-14 % slower at 4-40 rows in
         * tests/bench/kbench.c) */
        if (N == 1) {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) q8x16_cols(sgn, N, wp, c, xr, b, flip, s0, s1);
        } else {
#pragma GCC unroll 2
            for (int c = 0; c < 8; c++) q8x16_cols(sgn, N, wp, c, xr, b, flip, s0, s1);
        }
        const __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + (size_t)b * 16)));
        const __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + (size_t)b * 16 + 8)));
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) {
            const __m256 dx = _mm256_set1_ps(xr[i].dx[b]);
            acc[0][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[i]), _mm256_mul_ps(dw0, dx), acc[0][i]);
            acc[1][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[i]), _mm256_mul_ps(dw1, dx), acc[1][i]);
        }
    }
}

AI void tile_q4x16_avx2(int N, const uint8_t *base, const uint16_t *sb, const uint16_t *mb, int nb, const q8_rows *xr,
                        int pf, __m256 acc[2][X16_AVX2_ROWS]) {
    const __m256i ones = _mm256_set1_epi16(1), lo4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int i = 0; i < N; i++) acc[0][i] = acc[1][i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *wp = base + (size_t)b * 256;
        if (pf)
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) _mm_prefetch((const char *)(wp + 4096 + 64 * c), _MM_HINT_T0);
        __m256i s0[X16_AVX2_ROWS], s1[X16_AVX2_ROWS];
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) s0[i] = s1[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i v0 = _mm256_load_si256((const __m256i *)(wp + 64 * c));
            const __m256i v1 = _mm256_load_si256((const __m256i *)(wp + 64 * c + 32));
            const __m256i l0 = _mm256_and_si256(v0, lo4), h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), lo4);
            const __m256i l1 = _mm256_and_si256(v1, lo4), h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), lo4);
#pragma GCC unroll 4
            for (int i = 0; i < N; i++) {
                const int32_t *x4 = (const int32_t *)(xr[i].xq + (size_t)b * QT_BLOCK);
                const __m256i xl = _mm256_set1_epi32(x4[c]), xh = _mm256_set1_epi32(x4[c + 4]);
                s0[i] = _mm256_add_epi16(s0[i], _mm256_add_epi16(_mm256_maddubs_epi16(l0, xl), _mm256_maddubs_epi16(h0, xh)));
                s1[i] = _mm256_add_epi16(s1[i], _mm256_add_epi16(_mm256_maddubs_epi16(l1, xl), _mm256_maddubs_epi16(h1, xh)));
            }
        }
        const __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + (size_t)b * 16)));
        const __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + (size_t)b * 16 + 8)));
#pragma GCC unroll 4
        for (int i = 0; i < N; i++) {
            const __m256 dx = _mm256_set1_ps(xr[i].dx[b]);
            acc[0][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s0[i], ones)), _mm256_mul_ps(dw0, dx), acc[0][i]);
            acc[1][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s1[i], ones)), _mm256_mul_ps(dw1, dx), acc[1][i]);
        }
    }
    /* the minima's terms: their own chain, in block order as the scalar kernel */
    for (int i = 0; i < N; i++) {
        __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const __m256 fs = _mm256_set1_ps(xr[i].fsum[b]);
            m0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(mb + (size_t)b * 16))), fs, m0);
            m1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(mb + (size_t)b * 16 + 8))), fs, m1);
        }
        acc[0][i] = _mm256_add_ps(acc[0][i], m0);
        acc[1][i] = _mm256_add_ps(acc[1][i], m1);
    }
}

/* Rows [r0, r1) of Y: group by group (a group's 16 rows x all columns stay in
 * L1/L2 while every tile of X rows passes over them); a group the range only
 * partly covers is computed whole and only its rows in range stored. */
AI void mm_x16_avx2(int q4, int sgn, const qt_mat *W, const void *prep, int n, const float *bias, float *Y, int r0,
                    int r1) {
    const int rows = W->rows, cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK;
    const size_t gbytes = (size_t)nb * (q4 ? 256 : 512);
    for (int g = r0 / 16; g * 16 < r1; g++) {
        const uint8_t *base = (const uint8_t *)W->data + (size_t)g * gbytes;
        const uint16_t *sb = W->scales + (size_t)g * nb * 16, *mb = q4 ? W->mins + (size_t)g * nb * 16 : NULL;
        const int lo = g * 16 < r0 ? r0 : g * 16, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
        _Alignas(32) float bv[16];
        for (int j = 0; j < 16; j++) bv[j] = bias && g * 16 + j < rows ? bias[g * 16 + j] : 0.0f;
        for (int i0 = 0; i0 < n; i0 += X16_AVX2_ROWS) {
            const int N = n - i0 < X16_AVX2_ROWS ? n - i0 : X16_AVX2_ROWS, pf = i0 == 0;
            q8_rows xr[X16_AVX2_ROWS];
            for (int i = 0; i < N; i++) xr[i] = q8_prep_row(prep, cols, i0 + i);
            __m256 acc[2][X16_AVX2_ROWS];
            if (q4) {
                switch (N) {
                case 4: tile_q4x16_avx2(4, base, sb, mb, nb, xr, pf, acc); break;
                case 3: tile_q4x16_avx2(3, base, sb, mb, nb, xr, pf, acc); break;
                case 2: tile_q4x16_avx2(2, base, sb, mb, nb, xr, pf, acc); break;
                default: tile_q4x16_avx2(1, base, sb, mb, nb, xr, pf, acc); break;
                }
            } else {
                switch (N) {
                case 4: tile_q8x16_avx2(sgn, 4, base, sb, nb, xr, pf, acc); break;
                case 3: tile_q8x16_avx2(sgn, 3, base, sb, nb, xr, pf, acc); break;
                case 2: tile_q8x16_avx2(sgn, 2, base, sb, nb, xr, pf, acc); break;
                default: tile_q8x16_avx2(sgn, 1, base, sb, nb, xr, pf, acc); break;
                }
            }
            for (int i = 0; i < N; i++) {
                _Alignas(32) float y[16];
                _mm256_store_ps(y, _mm256_add_ps(acc[0][i], _mm256_load_ps(bv)));
                _mm256_store_ps(y + 8, _mm256_add_ps(acc[1][i], _mm256_load_ps(bv + 8)));
                memcpy(Y + (size_t)(i0 + i) * rows + lo, y + (lo - g * 16), sizeof(float) * (size_t)(hi - lo));
            }
        }
    }
}

static void mm_q8x16_avx2(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                          int r0, int r1) {
    (void)X;
    mm_x16_avx2(0, 0, W, prep, n, bias, Y, r0, r1);
}
static void mm_q8x16s_avx2(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                           int r0, int r1) {
    (void)X;
    mm_x16_avx2(0, 1, W, prep, n, bias, Y, r0, r1);
}
static void mm_q4mx16_avx2(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                           int r0, int r1) {
    (void)X;
    mm_x16_avx2(1, 0, W, prep, n, bias, Y, r0, r1);
}

/* ------------------------------------------------------------ activations */

/* q8_prep_ex(group 1) for one row at a time, 8 lanes wide: per block of 32
 * the same max |x|, dx = amax / 127, q = clamp(round-to-nearest-even(x * (127 /
 * amax))) and isum as the scalar preparation, so the same bytes (a row with
 * an Inf or NaN goes to the scalar one, which marks its blocks NaN). */
static void prep_q8_rows_avx2(const qt_mat *W, const float *X, int n, void *buf, int off_mode) {
    const int cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK;
    const size_t rbytes = q8_prep_row_bytes(cols);
    const __m256 lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f), zero = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int i = 0; i < n; i++) {
        const float *x = X + (size_t)i * cols;
        __m256 fin = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int j = 0; j < cols; j += 8) {
            const __m256 v = cols - j >= 8 ? _mm256_loadu_ps(x + j) : _mm256_maskload_ps(x + j, tail_mask(cols - j));
            fin = _mm256_and_ps(fin, _mm256_cmp_ps(_mm256_mul_ps(v, zero), zero, _CMP_EQ_OQ)); /* 0 for Inf, NaN */
        }
        if (_mm256_movemask_ps(fin) != 0xff) {
            q8_prep_ex(W, x, 1, (unsigned char *)buf + rbytes * (size_t)i, 1, off_mode);
            continue;
        }
        q8_rows r = q8_prep_row(buf, cols, i);
        if (off_mode != Q8_OFF_NONE) memset(r.off, 0, (size_t)nb / 4 * 32 * sizeof(int32_t));
        for (int b = 0; b < nb; b++) {
            const int j0 = b * QT_BLOCK, left = cols - j0;
            __m256 v[4];
            for (int k = 0; k < 4; k++) {
                const int l = left - 8 * k;
                v[k] = l >= 8 ? _mm256_loadu_ps(x + j0 + 8 * k)
                       : l > 0 ? _mm256_maskload_ps(x + j0 + 8 * k, tail_mask(l))
                               : zero;
            }
            __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                     _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            h = _mm_max_ss(h, _mm_movehdup_ps(h));
            const float amax = _mm_cvtss_f32(h);
            int isum = 0;
            float dx = 0.0f;
            if (amax == 0.0f) {
                memset(r.xq + j0, 0, QT_BLOCK);
            } else {
                dx = amax / 127.0f;
                const __m256 inv = _mm256_set1_ps(127.0f / amax);
                __m256i q[4];
                for (int k = 0; k < 4; k++)
                    q[k] = _mm256_cvttps_epi32(_mm256_min_ps(
                        _mm256_max_ps(_mm256_round_ps(_mm256_mul_ps(v[k], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                      nlim),
                        lim));
                const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
                __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
                isum = _mm_cvtsi128_si32(t);
                /* int32 -> int8 in column order (the packs interleave 128-bit lanes) */
                const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
                _mm256_storeu_si256((__m256i *)(r.xq + j0), _mm256_permutevar8x32_epi32(p, order));
            }
            r.dx[b] = dx;
            r.fsum[b] = dx * (float)isum;
            if (off_mode == Q8_OFF_BLOCK_128) r.off[b] = -128 * isum;
        }
    }
}

static void prep_q8x16_avx2(const qt_mat *W, const float *X, int n, void *buf) {
    prep_q8_rows_avx2(W, X, n, buf, Q8_OFF_BLOCK_128);
}

/* ------------------------------------------------------------ dot / axpy */

static float dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), s3);
    }
    for (; j + 8 <= n; j += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    if (j < n) {
        const __m256i m = tail_mask(n - j);
        s0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + j, m), _mm256_maskload_ps(b + j, m), s0);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static void axpy_avx2(float *y, float a, const float *x, int n) {
    const __m256 av = _mm256_set1_ps(a);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
    for (; j < n; j++) y[j] = fmaf(a, x[j], y[j]);
}

/* ops_attn_head with dot_avx2 and axpy_avx2 inlined: the weighted sum of V
 * keeps up to 64 outputs in registers across the positions, each element
 * through the same fma sequence from 0 as the axpy calls (the tail past a
 * multiple of 8 by fmaf, as axpy_avx2): the same bits. */
static void attn_head_avx2(const float *q, const float *K, const float *V, size_t kv_stride, int np, int hd,
                           float scale, float *scores, float *out) {
    for (int j = 0; j < np; j++) scores[j] = dot_avx2(q, K + (size_t)j * kv_stride, hd) * scale;
    ops_softmax(scores, np);
    const int hv = hd / 8 * 8;
    for (int c0 = 0; c0 < hv; c0 += 64) {
        const int nv = (hv - c0 < 64 ? hv - c0 : 64) / 8;
        __m256 acc[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) acc[v] = _mm256_setzero_ps();
        for (int j = 0; j < np; j++) {
            const __m256 p = _mm256_set1_ps(scores[j]);
            const float *x = V + (size_t)j * kv_stride + c0;
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++)
                if (v < nv) acc[v] = _mm256_fmadd_ps(p, _mm256_loadu_ps(x + 8 * v), acc[v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            if (v < nv) _mm256_storeu_ps(out + c0 + 8 * v, acc[v]);
    }
    for (int t = hv; t < hd; t++) {
        float y = 0.0f;
        for (int j = 0; j < np; j++) y = fmaf(scores[j], V[(size_t)j * kv_stride + t], y);
        out[t] = y;
    }
}

/* e^x by exp_poly.h's sequence (the AVX-512 table's), with 2^n applied as two
 * exact powers of two, 2^(n >> 1) then 2^(n - (n >> 1)), so only the last
 * product rounds, as vscalefps does (the AVX-512 results are expected bit for
 * bit; no CPU here has both to compare them). */
AI __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_X_MIN)), _mm256_set1_ps(EXP_X_MAX));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < EXP_POLY_N; k++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[k]));
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* g = g / (1 + e^-g) * u, 8 lanes at a time, the tail through masked loads
 * and stores: every element goes through the same operations wherever it
 * sits (the AVX-512 table's sequence). NaN in g stays NaN. */
static void swiglu_avx2(float *g, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = 0; j < n; j += 8) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - j), lane);
        const __m256 gv = _mm256_maskload_ps(g + j, m), uv = _mm256_maskload_ps(u + j, m);
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        _mm256_maskstore_ps(g + j, m, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv));
    }
}

/* expm1(x) for x <= 0: the AVX-512 table's sequence (expm1_neg_avx512),
 * with 2^n built in the exponent bits (n >= -126 after the clamp: normal). */
AI __m256 expm1_neg_avx2(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(EXPM1_X_MIN));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXPM1_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < EXPM1_POLY_N; k++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXPM1_POLY[k]));
    const __m256 em = _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r);
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    return _mm256_fmadd_ps(s, em, _mm256_sub_ps(s, _mm256_set1_ps(1.0f)));
}

/* x = x > 0 ? x : expm1(x), 8 lanes at a time, the tail through masked
 * loads and stores; x >= 0 (the zeros keep
 * their sign, as expm1f(+-0) = +-0) and NaN lanes are stored unchanged. */
static void elu_avx2(float *x, int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = 0; j < n; j += 8) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - j), lane);
        const __m256 v = _mm256_maskload_ps(x + j, m);
        const __m256i neg = _mm256_and_si256(m, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ)));
        if (!_mm256_testz_si256(neg, neg)) _mm256_maskstore_ps(x + j, neg, expm1_neg_avx2(v));
    }
}

void ops_fill_avx2(ops_kernels *k) {
    k->mm[OPS_WF_F32] = mm_f32_avx2;
    k->mm[OPS_WF_F16] = mm_f16_avx2;
    k->mm[OPS_WF_BF16] = mm_bf16_avx2;
    k->mm[OPS_WF_Q8] = mm_q8_avx2;
    k->mm[OPS_WF_Q4] = mm_q4_avx2;
    k->mm[OPS_WF_Q4M] = mm_q4m_avx2;
    for (int f = OPS_WF_Q8; f <= OPS_WF_Q4M; f++) k->prep_size[f] = q8_prep_size;
    k->prep[OPS_WF_Q8] = q8_prep;
    k->prep[OPS_WF_Q4] = prep_q4_avx2;
    k->prep[OPS_WF_Q4M] = prep_q4m_avx2;
    k->mm[OPS_WF_Q8X16] = mm_q8x16_avx2;
    k->prep[OPS_WF_Q8X16] = prep_q8x16_avx2;
    k->mm[OPS_WF_Q4MX16] = mm_q4mx16_avx2;
    k->prep[OPS_WF_Q4MX16] = prep_q8x16_avx2;
    k->mm[OPS_WF_Q8X16S] = mm_q8x16s_avx2;
    k->prep[OPS_WF_Q8X16S] = prep_q8x16_avx2;
    k->prefer_x16 = 1;
    k->x16_q8_signed = 1;
    k->mm_bf16_dp = NULL;
    k->dot = dot_avx2;
    k->axpy = axpy_avx2;
    k->attn_head = attn_head_avx2;
    k->swiglu = swiglu_avx2;
    k->elu = elu_avx2;
}
