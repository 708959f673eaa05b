/* Block-quantised weight formats (int8, int4) and the activation side of the
 * integer dot products.
 * Dataflow: BF16/F16/F32 weights at load -> qmat_quantize -> qt_mat with
 * dtype DT_I8/DT_U8 -> per call, X [n][cols] -> q8_prep (int8 per row and
 * block of 32) -> integer block dots in the kernels.
 *
 * Weight layouts (row r, kpad = cols rounded up to 128, nb = kpad / 32 blocks;
 * padding columns hold zero weights, padding blocks a zero scale):
 *  QT_Q8_B32   int8 q[rows][kpad]; w = d[b] * q, q in [-127, 127],
 *              d = max|w| / 127 of the block, stored f16.
 *  QT_Q4_B32   u8 p[rows][kpad/2]: block b's 16 bytes hold q[j] in the low
 *              nibble of byte j and q[j + 16] in the high nibble;
 *              w = d * (q - 8), q in [0, 15], d = -(w of max |w|) / 8.
 *  QT_Q4M_B32  nibbles as Q4; w = d * q + m, q in [0, 15], m = min w,
 *              d = (max w - min w) / 15; mins[rows][nb] f16.
 *  QT_Q8_B32_X16  the values of QT_Q8_B32 regrouped for integer dot
 *              instructions that take 4 bytes per lane: rows in groups of 16
 *              (the last padded with zero rows), u8 data
 *              [rows16][nb][8][16][4] = q + 128 with [.][b][c][j][t] holding
 *              row 16 g + j, column 32 b + 4 c + t; scales f16 [rows16][nb][16].
 *              One 64-byte load then feeds 16 rows at once, and a block's
 *              integer dots of 16 rows come out in one vector; each output is
 *              sum over blocks b, in order, of fma(isum_b, d_w * dx_b, acc)
 *              (every table computes it that way: the same bits).
 *  QT_Q8_B32_X16S  QT_Q8_B32_X16 with each byte q itself (int8, no + 128),
 *              padding rows 0: for tables whose integer dot multiplies |w| by
 *              x with w's sign (AVX2), which then skip the flip back to q.
 *              The same values and output sequence as QT_Q8_B32_X16.
 *  QT_Q4M_B32_X16  the values of QT_Q4M_B32 regrouped the same way: u8
 *              [rows16][nb][4][16][4], byte [.][b][c][j][t] of row 16 g + j
 *              holding q of column 32 b + 4 c + t in its low nibble and of
 *              column 32 b + 16 + 4 c + t in its high nibble (a 64-byte load
 *              masked with 0x0f, and with 0xf0, feeds 16 rows of 4 columns);
 *              scales and mins f16 [rows16][nb][16] (padding rows: q, d and
 *              m all 0). Each output is accd + accm with, over blocks b in
 *              order, accd = fma(isum_b, d_w * dx_b, accd) and
 *              accm = fma(m_w, fsum_b, accm) (every table: the same bits).
 * Scales and minima are f16 (stored rounded, and the weights quantised with
 * the rounded value).
 *
 * Activation blocks (any ISA): for row i and block b of 32 columns,
 * dx = max|x| / 127, xq = round-to-nearest-even(x / dx) in [-127, 127]
 * (all 0 when max|x| = 0), isum = sum xq, fsum = dx * isum. A block's
 * contribution to Y[i][r] is d_w * dx * sum(q_w xq) with the integer sum exact
 * (plus m * fsum for Q4M); only the f32 sum over blocks is rounded. */
#ifndef QTTS_BACKEND_CPU_QUANT_H
#define QTTS_BACKEND_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"
#include "util/error.h"
#include "util/huge_arena.h"

#define QT_BLOCK 32
#define QT_KPAD_ALIGN 128

/* cols rounded up to QT_KPAD_ALIGN */
static inline int qt_kpad(int cols) { return (cols + QT_KPAD_ALIGN - 1) / QT_KPAD_ALIGN * QT_KPAD_ALIGN; }

/* Quantise a float matrix (F32, F16 or BF16) into qtype (QT_Q8_B32,
 * QT_Q4_B32 or QT_Q4M_B32). Allocates dst's buffer (release with qmat_free);
 * dst is zeroed on failure. src may be freed afterwards. */
qtts_status qmat_quantize(const qt_mat *src, int qtype, qt_mat *dst, qtts_error *e);

/* Regroup a QT_Q8_B32 or QT_Q4M_B32 matrix from qmat_quantize in place into
 * QT_Q8_B32_X16 (QT_Q8_B32_X16S with q8_signed) or QT_Q4M_B32_X16 (same
 * values; the old buffer is freed). Other formats: QTTS_ERR_INVALID_ARG. On
 * failure m is unchanged. */
qtts_status qmat_pack_x16(qt_mat *m, int q8_signed, qtts_error *e);

/* Move a matrix made by qmat_quantize (or regrouped) into arena storage (the
 * values unchanged; its own buffer is freed and owned becomes NULL, so
 * qmat_free leaves the bytes to the arena's owner). QTTS_ERR_NOMEM when the
 * arena has no room: m is then unchanged and keeps its buffer. */
qtts_status qmat_move_to_arena(qt_mat *m, huge_arena *a);

/* Release a matrix made by qmat_quantize (and zero it); accepts NULL and a
 * zeroed matrix. Only for matrices from qmat_quantize (or zero-initialised). */
void qmat_free(qt_mat *m);

/* An upper bound of the bytes of a rows x cols matrix quantised in any
 * format (qmat_quantize, then qmat_pack_x16): owned_bytes never exceeds it. */
size_t qmat_quant_bytes_max(int rows, int cols);

/* Bytes per row of quantised weight data. */
size_t qmat_row_bytes(const qt_mat *m);

/* out[cols] = dequantised row r (any format, quantised or float). */
void qmat_dequant_row(const qt_mat *m, int r, float *out);

/* Relative RMS error of a quantised matrix against its source:
 * sqrt(sum (w' - w)^2 / sum w^2) over all weights. */
double qmat_rel_rms(const qt_mat *src, const qt_mat *q);

/* f32 -> f16, round to nearest even (overflow to inf, NaN kept). */
uint16_t qt_f32_to_f16(float f);

/* Prepared activations: per row of X, 64-byte aligned sections
 *   int8 xq[kpad] | float dx[nb] | float fsum[nb] | int32 off[nb / 4][32]
 * xq order: group = 1 keeps column order; group = 2 or 4 stores, per group of
 * that many blocks, the first 16 values of each block, then the last 16 of
 * each (the order in which the AVX2 / AVX-512 int4 kernels unpack nibbles).
 * dx and fsum stay in block order. off holds, per group of 4 blocks, integer
 * start values of the vpdpbusd accumulators that cancel the kernels' weight
 * offset (-128 isum for int8 with the sign bit flipped, -8 isum for int4),
 * laid out for the lanes each block lands in (see q8_prep_ex). */
typedef struct q8_rows {
    int8_t *xq;
    float *dx, *fsum;
    int32_t *off;
} q8_rows;
enum { Q8_OFF_NONE, Q8_OFF_PAIRS_128, Q8_OFF_QUADS_8, Q8_OFF_BLOCK_128 };
/* Bytes of one prepared row, and row i of a prepared buffer for W's width.
 * Inline: the kernels ask for every row of X once per tile of W (thousands of
 * calls a frame with several rows of X). */
static inline size_t q8_prep_row_bytes(int cols) {
    const size_t kpad = (size_t)qt_kpad(cols), nb = kpad / QT_BLOCK, fb = (nb * sizeof(float) + 63) & ~(size_t)63;
    return kpad + 2 * fb + nb / 4 * 32 * sizeof(int32_t);
}
static inline q8_rows q8_prep_row(const void *buf, int cols, int i) {
    const size_t kpad = (size_t)qt_kpad(cols), nb = kpad / QT_BLOCK, fb = (nb * sizeof(float) + 63) & ~(size_t)63;
    uint8_t *p = (uint8_t *)buf + q8_prep_row_bytes(cols) * (size_t)i;
    q8_rows r = {(int8_t *)p, (float *)(p + kpad), (float *)(p + kpad + fb), (int32_t *)(p + kpad + 2 * fb)};
    return r;
}
size_t q8_prep_size(const qt_mat *W, int n);
/* Quantise X [n][cols] into buf with the xq order of group (1, 2 or 4) and
 * the off vectors of off_mode: Q8_OFF_PAIRS_128: two 16-lane vectors per group,
 * lanes 0 and 8 of the first = -128 isum of blocks 0 and 1, of the second
 * blocks 2 and 3; Q8_OFF_QUADS_8: one vector, lane 4b = -8 isum of block b;
 * Q8_OFF_BLOCK_128: off[b] = -128 isum of block b (QT_Q8_B32_X16). */
void q8_prep_ex(const qt_mat *W, const float *X, int n, void *buf, int group, int off_mode);
/* q8_prep_ex with column order and no off vectors (the scalar layout). */
void q8_prep(const qt_mat *W, const float *X, int n, void *buf);
/* q8_prep_ex with column order and Q8_OFF_BLOCK_128 (the X16 layouts). */
void q8x16_prep(const qt_mat *W, const float *X, int n, void *buf);

/* BF16 activations for the vdpbf16ps kernel: per row, uint16 [kpad2] with
 * kpad2 = cols rounded up to 32 (zero padded), round to nearest even. */
size_t bf16_prep_size(const qt_mat *W, int n);
void bf16_prep(const qt_mat *W, const float *X, int n, void *buf);
const uint16_t *bf16_prep_row(const void *buf, int cols, int i);

#endif
