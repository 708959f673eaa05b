/* Unit test of the Vulkan matrix shaders matvec_{f32,bf16,q8,q4m} and
 * matmul_{f32,bf16,q8,q4m} (src/backend/vulkan/shaders) against a double
 * precision reference on seeded random data.
 * Dataflow: random W (f32; bf16 bits; qmat_quantize to QT_Q8_B32 /
 * QT_Q4M_B32), X, bias, Y -> device buffers -> one dispatch -> Y downloaded
 * -> compared with sum_c (double)X[i][c] * w[r][c] where w is the weight the
 * shader must see (qmat_dequant_row for q8/q4m, bf16 bits << 16), plus the
 * bias and the old Y for VK_MM_ACC.
 * Tolerance: |got - ref| <= 1e-5 * s + 1e-6 with s = sum_c |X w| + |bias| +
 * |old Y|: both shaders sum in f32 (at most a few thousand terms, partly in
 * trees), whose rounding stays far below 1e-5 of the sum of magnitudes,
 * while any layout or indexing error changes a term by O(|X w|).
 * Shapes: rows 1, 3, 37, 130, 1000 x cols 1, 7, 31, 64, 100, 130, 1024 with
 * n from 1, 2, 5, 8, 9, 33, 70 (not multiples of the workgroup rows, tiles,
 * blocks or vector widths), with and without bias and VK_MM_ACC, nonzero
 * x_off / y_off and strides wider than the rows (16-byte aligned X rows on
 * half the shapes, for the vec4 path); X words outside its rows are NaN (a
 * read past a row shows), and every Y word outside the outputs must keep
 * its value. Then the real-model shape rows 3072,
 * cols 1024, n 4: matvec and matmul against each other. The largest error
 * relative to s per format and shader is printed as "# " lines. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/quant.h"
#include "test.h"
#include "util/dtype.h"

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_kernels.h"

#define TOL_REL 1e-5
#define TOL_ABS 1e-6

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

enum { F_F32, F_BF16, F_Q8, F_Q4M, F_COUNT };
static const char *fmt_names[F_COUNT] = {"f32", "bf16", "q8", "q4m"};
enum { S_MATVEC, S_MATMUL, S_COUNT };
static const char *shader_names[S_COUNT] = {"matvec", "matmul"};

/* A weight matrix on the device and the f32 values the shaders must see. */
typedef struct dev_w {
    vk_buf data, scales, mins;
    float *w; /* [rows][cols] */
    int rows, cols, kpad;
} dev_w;

static void dev_w_free(vk_dev *d, dev_w *m) {
    vk_buf_free(d, &m->data);
    vk_buf_free(d, &m->scales);
    vk_buf_free(d, &m->mins);
    free(m->w);
    memset(m, 0, sizeof *m);
}

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

static qtts_status upload_new(vk_dev *d, vk_buf *b, const void *src, size_t n, qtts_error *e) {
    qtts_status st = vk_buf_alloc(d, b, round16(n), 0, e);
    if (st == QTTS_OK) st = vk_buf_upload(d, b, 0, src, n, e);
    return st;
}

/* Random rows x cols weights in format fmt, uploaded. */
static qtts_status dev_w_make(vk_dev *d, int fmt, int rows, int cols, dev_w *m, qtts_error *e) {
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->kpad = qt_kpad(cols);
    const size_t nw = (size_t)rows * cols;
    float *src = malloc(nw * sizeof(float));
    m->w = malloc(nw * sizeof(float));
    if (!src || !m->w) {
        free(src);
        return err_set(e, QTTS_ERR_NOMEM, "test: out of memory");
    }
    for (size_t k = 0; k < nw; k++) src[k] = rnd();
    qtts_status st = QTTS_OK;
    if (fmt == F_F32) {
        memcpy(m->w, src, nw * sizeof(float));
        st = upload_new(d, &m->data, src, nw * sizeof(float), e);
    } else if (fmt == F_BF16) {
        uint16_t *b = malloc(nw * sizeof(uint16_t));
        if (!b) {
            free(src);
            return err_set(e, QTTS_ERR_NOMEM, "test: out of memory");
        }
        for (size_t k = 0; k < nw; k++) {
            b[k] = f32_to_bf16(src[k]);
            m->w[k] = bf16_to_f32(b[k]);
        }
        st = upload_new(d, &m->data, b, nw * sizeof(uint16_t), e);
        free(b);
    } else {
        const qt_mat f = {.data = src, .dtype = DT_F32, .rows = rows, .cols = cols};
        qt_mat q;
        st = qmat_quantize(&f, fmt == F_Q8 ? QT_Q8_B32 : QT_Q4M_B32, &q, e);
        if (st == QTTS_OK) {
            for (int r = 0; r < rows; r++) qmat_dequant_row(&q, r, m->w + (size_t)r * cols);
            const size_t nsc = (size_t)rows * (m->kpad / QT_BLOCK) * sizeof(uint16_t);
            st = upload_new(d, &m->data, q.data, qmat_row_bytes(&q) * rows, e);
            if (st == QTTS_OK) st = upload_new(d, &m->scales, q.scales, nsc, e);
            if (st == QTTS_OK && fmt == F_Q4M) st = upload_new(d, &m->mins, q.mins, nsc, e);
            qmat_free(&q);
        }
    }
    free(src);
    if (st != QTTS_OK) dev_w_free(d, m);
    return st;
}

/* One call's shape and layout. */
typedef struct mm_case {
    int n, bias, acc;
    uint32_t x_off, x_stride, y_off, y_stride, bias_off;
} mm_case;

/* X words: the rows plus 8 words after the last one */
static size_t x_len(const dev_w *m, const mm_case *c) {
    return c->x_off + (size_t)(c->n - 1) * c->x_stride + m->cols + 8;
}
/* Y words: the outputs plus 5 words after the last one */
static size_t y_len(const dev_w *m, const mm_case *c) {
    return c->y_off + (size_t)(c->n - 1) * c->y_stride + m->rows + 5;
}

/* Y = shader(W, X, bias, Y0) on the device. */
static qtts_status run_shader(vk_dev *d, vk_cmd *cmd, int fmt, int shader, const dev_w *m, const mm_case *c,
                              const float *X, const float *bias, const float *Y0, float *Y, qtts_error *e) {
    char name[32];
    snprintf(name, sizeof name, "%s_%s", shader_names[shader], fmt_names[fmt]);
    vk_kernel *k = NULL;
    vk_buf xb = {0}, yb = {0}, bb = {0};
    const size_t nx = x_len(m, c), ny = y_len(m, c), nbias = c->bias_off + (size_t)m->rows;
    qtts_status st = vk_kernel_get(d, name, NULL, 0, &k, e);
    if (st == QTTS_OK) st = upload_new(d, &xb, X, nx * sizeof(float), e);
    if (st == QTTS_OK) st = upload_new(d, &yb, Y0, ny * sizeof(float), e);
    if (st == QTTS_OK) st = upload_new(d, &bb, bias, nbias * sizeof(float), e);
    if (st == QTTS_OK) {
        const vk_pc_matmul pc = {.rows = (uint32_t)m->rows,
                                 .cols = (uint32_t)m->cols,
                                 .n = (uint32_t)c->n,
                                 .kpad = (uint32_t)m->kpad,
                                 .x_off = c->x_off,
                                 .x_stride = c->x_stride,
                                 .y_off = c->y_off,
                                 .y_stride = c->y_stride,
                                 .bias_off = c->bias_off,
                                 .flags = (c->bias ? VK_MM_BIAS : 0u) | (c->acc ? VK_MM_ACC : 0u)};
        const vk_binding b[6] = {
            {&m->data, 0, 0},
            {m->scales.buf ? &m->scales : NULL, 0, 0},
            {m->mins.buf ? &m->mins : NULL, 0, 0},
            {&xb, 0, 0},
            {&yb, 0, 0},
            {&bb, 0, 0},
        };
        const uint32_t gx = shader == S_MATVEC ? (uint32_t)(m->rows + VK_MATVEC_ROWS - 1) / VK_MATVEC_ROWS
                                               : (uint32_t)(m->rows + VK_MATMUL_TM - 1) / VK_MATMUL_TM;
        const uint32_t gy = shader == S_MATVEC ? 1u : (uint32_t)(c->n + VK_MATMUL_TN - 1) / VK_MATMUL_TN;
        st = vk_cmd_begin(cmd, e);
        if (st == QTTS_OK) {
            vk_cmd_dispatch(cmd, k, b, 6, &pc, sizeof pc, gx, gy, 1);
            st = vk_cmd_end(cmd, e);
        }
        if (st == QTTS_OK) st = vk_cmd_submit(cmd, e);
        if (st == QTTS_OK) st = vk_cmd_wait(cmd, e);
        if (st == QTTS_OK) st = vk_buf_download(d, &yb, 0, Y, ny * sizeof(float), e);
    }
    vk_buf_free(d, &xb);
    vk_buf_free(d, &yb);
    vk_buf_free(d, &bb);
    return st;
}

/* Compare Y with the reference; returns 1 if every output is within
 * tolerance and every other word of Y kept its Y0 value. *max_rel gets the
 * largest |got - ref| / s; why describes the first failure. */
static int check_y(const dev_w *m, const mm_case *c, const float *X, const float *bias, const float *Y0,
                   const float *Y, double *max_rel, char *why, size_t why_n) {
    const size_t ny = y_len(m, c);
    char *is_out = calloc(ny, 1);
    int ok = 1;
    if (!is_out) {
        snprintf(why, why_n, "out of memory");
        return 0;
    }
    for (int i = 0; i < c->n; i++) {
        const float *x = X + c->x_off + (size_t)i * c->x_stride;
        for (int r = 0; r < m->rows; r++) {
            const float *w = m->w + (size_t)r * m->cols;
            double ref = 0, s = 0;
            for (int k = 0; k < m->cols; k++) {
                const double p = (double)x[k] * (double)w[k];
                ref += p;
                s += fabs(p);
            }
            if (c->bias) {
                ref += bias[c->bias_off + r];
                s += fabs(bias[c->bias_off + r]);
            }
            const size_t o = c->y_off + (size_t)i * c->y_stride + r;
            if (c->acc) {
                ref += Y0[o];
                s += fabs(Y0[o]);
            }
            is_out[o] = 1;
            const double err = fabs((double)Y[o] - ref);
            if (!(err <= TOL_REL * s + TOL_ABS)) {
                if (ok) snprintf(why, why_n, "Y[%d][%d] = %.9g, want %.9g (sum|xw| %.3g)", i, r, Y[o], ref, s);
                ok = 0;
            }
            if (s > 0 && err / s > *max_rel) *max_rel = err / s;
        }
    }
    for (size_t o = 0; o < ny && ok; o++) {
        if (!is_out[o] && memcmp(&Y[o], &Y0[o], sizeof(float)) != 0) {
            snprintf(why, why_n, "Y word %zu is not an output but changed", o);
            ok = 0;
        }
    }
    free(is_out);
    return ok;
}

static float *rnd_vec(size_t n) {
    float *v = malloc((n ? n : 1) * sizeof(float));
    if (v)
        for (size_t k = 0; k < n; k++) v[k] = rnd();
    return v;
}

/* X with NaN in every word outside its rows: a shader that reads past a
 * row (even with a zero weight) gets NaN. */
static float *rnd_x(const dev_w *m, const mm_case *c) {
    const size_t nx = x_len(m, c);
    float *x = malloc(nx * sizeof(float));
    if (x) {
        for (size_t k = 0; k < nx; k++) x[k] = NAN;
        for (int i = 0; i < c->n; i++)
            for (int k = 0; k < m->cols; k++) x[c->x_off + (size_t)i * c->x_stride + k] = rnd();
    }
    return x;
}

static const int case_rows[] = {1, 3, 37, 130, 1000};
static const int case_cols[] = {1, 7, 31, 64, 100, 130, 1024};
static const int case_n[] = {1, 2, 5, 8, 9, 33, 70};

/* Every rows x cols pair of one format, n and the layout varied with the
 * pair, both shaders on the same data. */
static void test_format(vk_dev *d, vk_cmd *cmd, int fmt, double max_rel[S_COUNT]) {
    int fails[S_COUNT] = {0}, cases = 0;
    char first_why[S_COUNT][256] = {{0}};
    qtts_error e = {0};
    for (int ri = 0; ri < 5; ri++) {
        for (int ci = 0; ci < 7; ci++) {
            const int rows = case_rows[ri], cols = case_cols[ci];
            int n = case_n[(ri * 3 + ci) % 7];
            /* keep the biggest shapes' work small on a CPU driver */
            if ((long)rows * cols * n > 20000000L) n = 9;
            const mm_case c = {.n = n,
                               .bias = (ri + ci) % 2,
                               .acc = (ri + 2 * ci) % 3 == 0,
                               /* X rows 16-byte aligned on half the shapes */
                               .x_off = (uint32_t)((ri + ci) % 2 ? (ri * 5 + ci * 3) % 11 : 4 * ((ri + ci) % 3)),
                               .x_stride = (uint32_t)(cols + ((ri + ci) % 2 ? (ci % 3) * 3 : 4 * (ci % 2))),
                               .y_off = (uint32_t)((ri * 7 + ci) % 13),
                               .y_stride = (uint32_t)(rows + (ri % 2) * 5 + ci % 2),
                               .bias_off = (uint32_t)(ri + ci)};
            dev_w m;
            if (dev_w_make(d, fmt, rows, cols, &m, &e) != QTTS_OK) {
                test_report(fmt_names[fmt], 0, "weights %dx%d: %s", rows, cols, e.msg);
                return;
            }
            const size_t ny = y_len(&m, &c);
            float *X = rnd_x(&m, &c), *bias = rnd_vec(c.bias_off + (size_t)rows), *Y0 = rnd_vec(ny),
                  *Y = malloc(ny * sizeof(float));
            for (uint32_t k = 0; bias && k < c.bias_off; k++) bias[k] = NAN; /* not the bias */
            for (int s = 0; s < S_COUNT && X && bias && Y0 && Y; s++) {
                char why[200];
                if (run_shader(d, cmd, fmt, s, &m, &c, X, bias, Y0, Y, &e) != QTTS_OK) {
                    snprintf(why, sizeof why, "%.180s", e.msg);
                } else if (check_y(&m, &c, X, bias, Y0, Y, &max_rel[s], why, sizeof why)) {
                    continue;
                }
                if (!fails[s]++)
                    snprintf(first_why[s], sizeof first_why[s], "rows %d cols %d n %d bias %d acc %d: %s", rows, cols,
                             n, c.bias, c.acc, why);
            }
            cases++;
            free(X);
            free(bias);
            free(Y0);
            free(Y);
            dev_w_free(d, &m);
        }
    }
    for (int s = 0; s < S_COUNT; s++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s", shader_names[s], fmt_names[fmt]);
        test_report(name, fails[s] == 0, "%d of %d shapes wrong, first: %s", fails[s], cases, first_why[s]);
    }
}

/* The real-model shape: matvec and matmul on the same data agree, and each
 * is right. */
static void test_model_shape(vk_dev *d, vk_cmd *cmd, int fmt, double max_rel[S_COUNT]) {
    const int rows = 3072, cols = 1024;
    const mm_case c = {.n = 4, .x_stride = (uint32_t)cols, .y_stride = (uint32_t)rows};
    char name[64], why[200] = "";
    snprintf(name, sizeof name, "model_shape_%s", fmt_names[fmt]);
    qtts_error e = {0};
    dev_w m;
    if (dev_w_make(d, fmt, rows, cols, &m, &e) != QTTS_OK) {
        test_report(name, 0, "weights: %s", e.msg);
        return;
    }
    const size_t ny = y_len(&m, &c);
    float *X = rnd_x(&m, &c), *bias = rnd_vec(rows), *Y0 = rnd_vec(ny), *Y[S_COUNT];
    Y[0] = malloc(ny * sizeof(float));
    Y[1] = malloc(ny * sizeof(float));
    int ok = X && bias && Y0 && Y[0] && Y[1];
    for (int s = 0; s < S_COUNT && ok; s++) {
        if (run_shader(d, cmd, fmt, s, &m, &c, X, bias, Y0, Y[s], &e) != QTTS_OK) {
            snprintf(why, sizeof why, "%s: %.180s", shader_names[s], e.msg);
            ok = 0;
        } else if (!check_y(&m, &c, X, bias, Y0, Y[s], &max_rel[s], why, sizeof why)) {
            ok = 0;
        }
    }
    /* matvec vs matmul, relative to the row's sum |x w| */
    for (int i = 0; i < c.n && ok; i++) {
        for (int r = 0; r < rows && ok; r++) {
            double s = 0;
            for (int k = 0; k < cols; k++) s += fabs((double)X[(size_t)i * cols + k] * m.w[(size_t)r * cols + k]);
            const size_t o = (size_t)i * rows + r;
            if (!(fabs((double)Y[0][o] - Y[1][o]) <= TOL_REL * s + TOL_ABS)) {
                snprintf(why, sizeof why, "Y[%d][%d]: matvec %.9g, matmul %.9g", i, r, Y[0][o], Y[1][o]);
                ok = 0;
            }
        }
    }
    test_report(name, ok, "rows %d cols %d n %d: %s", rows, cols, c.n, why);
    free(X);
    free(bias);
    free(Y0);
    free(Y[0]);
    free(Y[1]);
    dev_w_free(d, &m);
}

int main(void) {
    vk_dev *d = NULL;
    vk_cmd *cmd = NULL;
    qtts_error e = {0};
    if (vk_dev_create(&d, 0, &e) != QTTS_OK) {
        test_skip("vulkan", "no Vulkan device: %s", e.msg);
        return test_finish();
    }
    if (vk_cmd_new(d, &cmd, &e) != QTTS_OK) {
        test_report("vk_cmd_new", 0, "%s", e.msg);
        vk_dev_free(d);
        return test_finish();
    }
    printf("# device: %s\n", vk_dev_info(d)->name);
    for (int f = 0; f < F_COUNT; f++) {
        double max_rel[S_COUNT] = {0};
        test_format(d, cmd, f, max_rel);
        test_model_shape(d, cmd, f, max_rel);
        for (int s = 0; s < S_COUNT; s++)
            printf("# %s_%s: largest |got - ref| / sum|x w| = %.3g\n", shader_names[s], fmt_names[f], max_rel[s]);
    }
    vk_cmd_free(cmd);
    vk_dev_free(d);
    return test_finish();
}

#else

int main(void) {
    test_skip("vulkan", "built without Vulkan (apt-get install libvulkan-dev glslc)");
    return test_finish();
}

#endif
