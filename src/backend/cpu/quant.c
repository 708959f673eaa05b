/* Block quantisation of weights at load and of activations per call (see
 * quant.h). Scalar C on purpose: weight quantisation runs once at load, and
 * the activation side is O(n cols) per matmul against O(n rows cols) for the
 * product itself. */
#include "backend/cpu/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROUND64(x) (((x) + 63) & ~(size_t)63)

uint16_t qt_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                                    /* below 2^-14: subnormal or zero */
        float v;
        memcpy(&v, &a, 4);
        /* v * 2^24 is exact; add/subtract 2^23 rounds it to an integer (RNE) */
        const float q = (v * 16777216.0f + 8388608.0f) - 8388608.0f;
        return (uint16_t)(sign | (uint32_t)q); /* q == 1024 is the smallest normal */
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

/* Round to nearest even for |v| < 2^22 without a libm call. */
static inline float round_ne(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* min/max/clamp without libm (fmaxf is a call on the x86-64 baseline); the
 * inputs here are finite. */
static inline float maxf(float a, float b) { return a > b ? a : b; }
static inline float minf(float a, float b) { return a < b ? a : b; }
static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

static int nb_of(int cols) { return qt_kpad(cols) / QT_BLOCK; }

size_t qmat_row_bytes(const qt_mat *m) {
    const size_t kpad = (size_t)qt_kpad(m->cols);
    if (!qt_is_quant(m)) return (size_t)m->cols * dtype_size(m->dtype);
    return m->dtype == DT_I8 ? kpad : kpad / 2; /* X16: the average per row */
}

void qmat_dequant_row(const qt_mat *m, int r, float *out) {
    if (!qt_is_quant(m)) {
        const size_t off = (size_t)r * m->cols * dtype_size(m->dtype);
        dtype_to_f32(m->dtype, (const uint8_t *)m->data + off, out, (size_t)m->cols);
        return;
    }
    const int nb = nb_of(m->cols), cols = m->cols;
    if (m->quant == QT_Q8_B32_X16 || m->quant == QT_Q8_B32_X16S) {
        const size_t g = (size_t)r / 16, j = (size_t)r % 16;
        const int sgn = m->quant == QT_Q8_B32_X16S;
        for (int b = 0; b * QT_BLOCK < cols; b++) {
            const float d = f16_to_f32(m->scales[(g * nb + b) * 16 + j]);
            const uint8_t *blk = (const uint8_t *)m->data + (g * nb + b) * 512;
            for (int c = 0; c < QT_BLOCK && b * QT_BLOCK + c < cols; c++) {
                const uint8_t v = blk[(c / 4) * 64 + j * 4 + c % 4];
                out[b * QT_BLOCK + c] = d * (float)(sgn ? (int)(int8_t)v : (int)v - 128);
            }
        }
        return;
    }
    if (m->quant == QT_Q4M_B32_X16) {
        const size_t g = (size_t)r / 16, j = (size_t)r % 16;
        for (int b = 0; b * QT_BLOCK < cols; b++) {
            const float d = f16_to_f32(m->scales[(g * nb + b) * 16 + j]);
            const float mn = f16_to_f32(m->mins[(g * nb + b) * 16 + j]);
            const uint8_t *blk = (const uint8_t *)m->data + (g * nb + b) * 256;
            for (int c = 0; c < QT_BLOCK && b * QT_BLOCK + c < cols; c++) {
                const uint8_t byte = blk[((c & 15) / 4) * 64 + j * 4 + c % 4];
                out[b * QT_BLOCK + c] = d * (float)(c < 16 ? byte & 15 : byte >> 4) + mn;
            }
        }
        return;
    }
    const uint8_t *row = (const uint8_t *)m->data + (size_t)r * qmat_row_bytes(m);
    const uint16_t *sc = m->scales + (size_t)r * nb;
    for (int b = 0; b * QT_BLOCK < cols; b++) {
        const float d = f16_to_f32(sc[b]);
        const float mn = m->quant == QT_Q4M_B32 ? f16_to_f32(m->mins[(size_t)r * nb + b]) : 0.0f;
        for (int j = 0; j < QT_BLOCK && b * QT_BLOCK + j < cols; j++) {
            float v;
            if (m->quant == QT_Q8_B32) {
                v = d * (float)(int8_t)row[b * QT_BLOCK + j];
            } else {
                const uint8_t byte = row[b * 16 + (j & 15)];
                const int q = j < 16 ? (byte & 15) : (byte >> 4);
                v = m->quant == QT_Q4_B32 ? d * (float)(q - 8) : d * (float)q + mn;
            }
            out[b * QT_BLOCK + j] = v;
        }
    }
}

/* Quantise one block of 32 weights w (padding already zero). */
static void quant_block_q8(const float *w, int8_t *q, uint16_t *d16) {
    float amax = 0.0f;
    for (int j = 0; j < QT_BLOCK; j++) amax = maxf(amax, fabsf(w[j]));
    *d16 = qt_f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(*d16);
    for (int j = 0; j < QT_BLOCK; j++) {
        const float v = d > 0.0f ? clampf(round_ne(w[j] / d), -127.0f, 127.0f) : 0.0f;
        q[j] = (int8_t)v;
    }
}

static void quant_block_q4(const float *w, uint8_t *p, uint16_t *d16, uint16_t *m16, int with_min) {
    uint8_t q[QT_BLOCK];
    if (!with_min) {
        float vmax = 0.0f;
        for (int j = 0; j < QT_BLOCK; j++)
            if (fabsf(w[j]) > fabsf(vmax)) vmax = w[j];
        *d16 = qt_f32_to_f16(vmax / -8.0f);
        const float d = f16_to_f32(*d16);
        for (int j = 0; j < QT_BLOCK; j++) {
            const float v = d != 0.0f ? clampf(round_ne(w[j] / d) + 8.0f, 0.0f, 15.0f) : 8.0f;
            q[j] = (uint8_t)v;
        }
    } else {
        float mn = w[0], mx = w[0];
        for (int j = 1; j < QT_BLOCK; j++) {
            mn = minf(mn, w[j]);
            mx = maxf(mx, w[j]);
        }
        *m16 = qt_f32_to_f16(mn);
        const float m = f16_to_f32(*m16);
        *d16 = qt_f32_to_f16((mx - m) / 15.0f);
        const float d = f16_to_f32(*d16);
        for (int j = 0; j < QT_BLOCK; j++) {
            const float v = d > 0.0f ? clampf(round_ne((w[j] - m) / d), 0.0f, 15.0f) : 0.0f;
            q[j] = (uint8_t)v;
        }
    }
    for (int j = 0; j < 16; j++) p[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

qtts_status qmat_quantize(const qt_mat *src, int qtype, qt_mat *dst, qtts_error *e) {
    memset(dst, 0, sizeof *dst);
    if (!src || !dtype_is_float(src->dtype))
        return err_set(e, QTTS_ERR_INVALID_ARG, "qmat_quantize: the source must be an F32, F16 or BF16 matrix");
    if (qtype != QT_Q8_B32 && qtype != QT_Q4_B32 && qtype != QT_Q4M_B32)
        return err_set(e, QTTS_ERR_INVALID_ARG, "qmat_quantize: unknown quantised format %d", qtype);
    if (src->rows < 1 || src->cols < 1 || src->cols > (1 << 24))
        return err_set(e, QTTS_ERR_INVALID_ARG, "qmat_quantize: bad shape [%d, %d]", src->rows, src->cols);
    const int kpad = qt_kpad(src->cols), nb = kpad / QT_BLOCK, rows = src->rows;
    qt_mat m = {.dtype = qtype == QT_Q8_B32 ? DT_I8 : DT_U8, .rows = rows, .cols = src->cols, .quant = qtype};
    const size_t row_bytes = qmat_row_bytes(&m);
    const size_t data_bytes = ROUND64(row_bytes * rows), sc_bytes = ROUND64((size_t)rows * nb * 2);
    const size_t total = data_bytes + sc_bytes * (qtype == QT_Q4M_B32 ? 2 : 1);
    uint8_t *buf = aligned_alloc(64, total);
    float *w = malloc(sizeof(float) * kpad);
    if (!buf || !w) {
        free(buf);
        free(w);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory quantising a [%d, %d] matrix (%.1f MiB)", rows,
                       src->cols, total / 1048576.0);
    }
    uint16_t *sc = (uint16_t *)(buf + data_bytes);
    uint16_t *mins = qtype == QT_Q4M_B32 ? (uint16_t *)(buf + data_bytes + sc_bytes) : NULL;
    for (int r = 0; r < rows; r++) {
        qmat_dequant_row(src, r, w);
        for (int j = src->cols; j < kpad; j++) w[j] = 0.0f;
        uint8_t *row = buf + (size_t)r * row_bytes;
        for (int b = 0; b < nb; b++) {
            uint16_t *d16 = sc + (size_t)r * nb + b, *m16 = mins ? mins + (size_t)r * nb + b : NULL, m_unused;
            if (qtype == QT_Q8_B32) quant_block_q8(w + b * QT_BLOCK, (int8_t *)row + b * QT_BLOCK, d16);
            else quant_block_q4(w + b * QT_BLOCK, row + b * 16, d16, m16 ? m16 : &m_unused, qtype == QT_Q4M_B32);
        }
    }
    free(w);
    m.data = buf;
    m.scales = sc;
    m.mins = mins;
    m.owned = buf;
    m.owned_bytes = total;
    *dst = m;
    return QTTS_OK;
}

/* QT_Q8_B32_X16: int8 q + off (128; 0 for QT_Q8_B32_X16S, read as int8) at
 * [g][b][c][j][t] = row 16 g + j, column 32 b + 4 c + t */
static void pack_rows_q8(const qt_mat *m, uint8_t *buf, uint16_t *sc, int off) {
    const int nb = nb_of(m->cols), kpad = qt_kpad(m->cols);
    const int8_t *q = m->data;
    for (int r = 0; r < m->rows; r++) {
        const size_t g = (size_t)r / 16, j = (size_t)r % 16;
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = buf + (g * nb + b) * 512;
            for (int c = 0; c < QT_BLOCK; c++)
                blk[(c / 4) * 64 + j * 4 + c % 4] = (uint8_t)((int)q[(size_t)r * kpad + b * QT_BLOCK + c] + off);
            sc[(g * nb + b) * 16 + j] = m->scales[(size_t)r * nb + b];
        }
    }
}

/* QT_Q4M_B32_X16: byte [g][b][c][j][t] = q of column 32 b + 4 c + t (low
 * nibble) and of column 32 b + 16 + 4 c + t (high nibble), row 16 g + j */
static void pack_rows_q4m(const qt_mat *m, uint8_t *buf, uint16_t *sc, uint16_t *mins) {
    const int nb = nb_of(m->cols);
    const size_t rb = qmat_row_bytes(m);
    for (int r = 0; r < m->rows; r++) {
        const size_t g = (size_t)r / 16, j = (size_t)r % 16;
        const uint8_t *row = (const uint8_t *)m->data + (size_t)r * rb;
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = buf + (g * nb + b) * 256;
            const uint8_t *src = row + b * 16; /* byte k: column k low, column k + 16 high */
            for (int c = 0; c < 4; c++)
                for (int t = 0; t < 4; t++) blk[c * 64 + j * 4 + t] = src[4 * c + t];
            sc[(g * nb + b) * 16 + j] = m->scales[(size_t)r * nb + b];
            mins[(g * nb + b) * 16 + j] = m->mins[(size_t)r * nb + b];
        }
    }
}

qtts_status qmat_pack_x16(qt_mat *m, int q8_signed, qtts_error *e) {
    const int q8 = m && m->dtype == DT_I8 && m->quant == QT_Q8_B32 && m->scales;
    const int q4m = m && m->dtype == DT_U8 && m->quant == QT_Q4M_B32 && m->scales && m->mins;
    if (!q8 && !q4m)
        return err_set(e, QTTS_ERR_INVALID_ARG, "qmat_pack_x16: not a QT_Q8_B32 or QT_Q4M_B32 matrix");
    const int nb = nb_of(m->cols);
    const size_t groups = ((size_t)m->rows + 15) / 16, blk_bytes = q8 ? 512 : 256;
    const size_t data_bytes = groups * nb * blk_bytes, sc_bytes = ROUND64(groups * nb * 16 * 2);
    const size_t total = data_bytes + sc_bytes * (q4m ? 2 : 1);
    uint8_t *buf = aligned_alloc(64, total);
    if (!buf)
        return err_set(e, QTTS_ERR_NOMEM, "out of memory regrouping a [%d, %d] %s matrix", m->rows, m->cols,
                       q8 ? "int8" : "int4");
    uint16_t *sc = (uint16_t *)(buf + data_bytes), *mins = q4m ? (uint16_t *)(buf + data_bytes + sc_bytes) : NULL;
    const int off = q8 && !q8_signed ? 128 : 0;
    memset(buf, off, data_bytes); /* padding rows: q = 0 (int8), q = 0 with d = m = 0 (int4) */
    memset(sc, 0, sc_bytes * (q4m ? 2 : 1));
    if (q8) pack_rows_q8(m, buf, sc, off);
    else pack_rows_q4m(m, buf, sc, mins);
    free(m->owned);
    m->data = buf;
    m->scales = sc;
    m->mins = mins;
    m->quant = !q8 ? QT_Q4M_B32_X16 : q8_signed ? QT_Q8_B32_X16S : QT_Q8_B32_X16;
    m->owned = buf;
    m->owned_bytes = total;
    return QTTS_OK;
}

size_t qmat_quant_bytes_max(int rows, int cols) {
    /* int8 data with rows padded to 16, f16 scales and minima, each part 64-byte aligned */
    const size_t rows16 = ((size_t)rows + 15) / 16 * 16, kpad = (size_t)qt_kpad(cols);
    return rows16 * kpad + 2 * rows16 * (kpad / QT_BLOCK) * 2 + 3 * 64;
}

qtts_status qmat_move_to_arena(qt_mat *m, huge_arena *a) {
    if (!m || !qt_is_quant(m) || !m->owned || !m->owned_bytes) return QTTS_ERR_INVALID_ARG;
    uint8_t *buf = huge_arena_copy(a, m->owned, m->owned_bytes);
    if (!buf) return QTTS_ERR_NOMEM;
    const uint8_t *old = m->owned;
    m->data = buf + ((const uint8_t *)m->data - old);
    m->scales = (const uint16_t *)(buf + ((const uint8_t *)m->scales - old));
    if (m->mins) m->mins = (const uint16_t *)(buf + ((const uint8_t *)m->mins - old));
    free(m->owned);
    m->owned = NULL; /* the arena's owner frees it */
    m->owned_bytes = 0;
    return QTTS_OK;
}

void qmat_free(qt_mat *m) {
    if (!m) return;
    free(m->owned);
    memset(m, 0, sizeof *m);
}

double qmat_rel_rms(const qt_mat *src, const qt_mat *q) {
    float *a = malloc(sizeof(float) * src->cols), *b = malloc(sizeof(float) * src->cols);
    double num = 0.0, den = 0.0;
    if (a && b)
        for (int r = 0; r < src->rows; r++) {
            qmat_dequant_row(src, r, a);
            qmat_dequant_row(q, r, b);
            for (int j = 0; j < src->cols; j++) {
                num += ((double)b[j] - a[j]) * ((double)b[j] - a[j]);
                den += (double)a[j] * a[j];
            }
        }
    free(a);
    free(b);
    return den > 0.0 ? sqrt(num / den) : 0.0;
}

/* ------------------------------------------------------------ activations */

size_t q8_prep_size(const qt_mat *W, int n) { return q8_prep_row_bytes(W->cols) * (size_t)n; }

void q8_prep_ex(const qt_mat *W, const float *X, int n, void *buf, int group, int off_mode) {
    const int cols = W->cols, kpad = qt_kpad(cols), nb = kpad / QT_BLOCK;
    for (int i = 0; i < n; i++) {
        const float *x = X + (size_t)i * cols;
        q8_rows r = q8_prep_row(buf, cols, i);
        if (off_mode != Q8_OFF_NONE) memset(r.off, 0, (size_t)nb / 4 * 32 * sizeof(int32_t));
        for (int b = 0; b < nb; b++) {
            const int j0 = b * QT_BLOCK, j1 = j0 + QT_BLOCK < cols ? j0 + QT_BLOCK : cols;
            float amax = 0.0f;
            int finite = 1;
            for (int j = j0; j < j1; j++) {
                const float a = fabsf(x[j]);
                finite &= a <= 3.4028234663852886e38f; /* false for inf and NaN */
                amax = a > amax ? a : amax;
            }
            int8_t q[QT_BLOCK];
            int isum = 0;
            float dx;
            if (!finite) {
                dx = NAN; /* the block's products become NaN, as in f32 */
                memset(q, 0, sizeof q);
            } else if (amax == 0.0f) {
                dx = 0.0f;
                memset(q, 0, sizeof q);
            } else {
                dx = amax / 127.0f;
                const float inv = 127.0f / amax;
                for (int j = 0; j < QT_BLOCK; j++) {
                    const float v = j0 + j < j1 ? clampf(round_ne(x[j0 + j] * inv), -127.0f, 127.0f) : 0.0f;
                    q[j] = (int8_t)v;
                    isum += q[j];
                }
            }
            r.dx[b] = dx;
            r.fsum[b] = dx * (float)isum;
            if (group <= 1) {
                memcpy(r.xq + j0, q, QT_BLOCK);
            } else {
                int8_t *g = r.xq + (b / group) * group * QT_BLOCK;
                memcpy(g + (b % group) * 16, q, 16);
                memcpy(g + group * 16 + (b % group) * 16, q + 16, 16);
            }
            int32_t *o = r.off + (b / 4) * 32;
            if (off_mode == Q8_OFF_PAIRS_128) o[(b & 2) * 8 + (b & 1) * 8] = -128 * isum;
            else if (off_mode == Q8_OFF_QUADS_8) o[(b & 3) * 4] = -8 * isum;
            else if (off_mode == Q8_OFF_BLOCK_128) r.off[b] = -128 * isum;
        }
    }
}

void q8_prep(const qt_mat *W, const float *X, int n, void *buf) { q8_prep_ex(W, X, n, buf, 1, Q8_OFF_NONE); }

void q8x16_prep(const qt_mat *W, const float *X, int n, void *buf) {
    q8_prep_ex(W, X, n, buf, 1, Q8_OFF_BLOCK_128);
}

static size_t bf16_row_elems(int cols) { return ((size_t)cols + 31) / 32 * 32; }

size_t bf16_prep_size(const qt_mat *W, int n) { return bf16_row_elems(W->cols) * 2 * (size_t)n; }

const uint16_t *bf16_prep_row(const void *buf, int cols, int i) {
    return (const uint16_t *)buf + bf16_row_elems(cols) * (size_t)i;
}

void bf16_prep(const qt_mat *W, const float *X, int n, void *buf) {
    const int cols = W->cols;
    const size_t kp = bf16_row_elems(cols);
    for (int i = 0; i < n; i++) {
        uint16_t *o = (uint16_t *)buf + kp * (size_t)i;
        const float *x = X + (size_t)i * cols;
        for (int j = 0; j < cols; j++) o[j] = f32_to_bf16(x[j]);
        for (size_t j = (size_t)cols; j < kp; j++) o[j] = 0;
    }
}
