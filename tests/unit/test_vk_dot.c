/* Unit test of the int8 dot-product shaders quantize_q8, matvec_q8_dp4 and
 * matvec_q4m_dp4 (src/backend/vulkan/shaders) against the CPU's scalar
 * kernel table, bit for bit.
 * Dataflow: random X -> quantize_q8 on the device -> XQ, XS compared with
 * q8_prep (every int8, every dx and fsum bit); random W -> qmat_quantize
 * (QT_Q8_B32 / QT_Q4M_B32, uploaded) and a copy regrouped by qmat_pack_x16
 * -> the scalar table's X16 kernel with q8x16_prep (the CPU reference) and
 * quantize_q8 + matvec_*_dp4 on the device -> every output compared bit for
 * bit (with bias: y + bias; with VK_MM_ACC: the old Y + that, in f32).
 * Why exact: the integer block dots are exact on both sides and every float
 * step is the same correctly rounded operation in the same order (the
 * shaders' fma must be fused: true on lavapipe with FMA and on GPUs); any
 * layout, order or rounding difference shows as a changed bit.
 * Shapes: rows 1, 7, 64, 300, 2048 x cols 1, 31, 64, 100, 1024, n from 1, 2,
 * 3, 9 (seeded), nonzero y_off and a Y stride wider than the rows (words
 * outside the outputs must keep their value), X at an offset with a wider
 * stride, a zero block (dx = 0) and rows of very different magnitude.
 * Then "# " lines with the time of matvec_q8 (f32 X) and of quantize_q8 +
 * matvec_q8_dp4 / matvec_q4m_dp4 at decode shapes. Skips where the device
 * lacks VK_KHR_shader_integer_dot_product. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"
#include "test.h"
#include "util/dtype.h"

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_internal.h"
#include "backend/vulkan/vk_kernels.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

static qtts_status upload_new(vk_dev *d, vk_buf *b, const void *src, size_t n, qtts_error *e) {
    qtts_status st = vk_buf_alloc(d, b, round16(n), 0, e);
    if (st == QTTS_OK) st = vk_buf_upload(d, b, 0, src, n, e);
    return st;
}

/* 1 when the device offers VK_KHR_shader_integer_dot_product with its
 * shaderIntegerDotProduct feature (what vk_dev_create then enables). */
static int has_int_dot(vk_dev *d) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, NULL) != VK_SUCCESS || !n) return 0;
    VkExtensionProperties *x = calloc(n, sizeof *x);
    int found = 0;
    if (x && vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, x) == VK_SUCCESS)
        for (uint32_t k = 0; k < n; k++) found |= !strcmp(x[k].extensionName, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    free(x);
    if (!found) return 0;
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR f = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
    vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    return f.shaderIntegerDotProduct == VK_TRUE;
}

/* The device side of one case: X, quantised X, W of one format. */
typedef struct dev_case {
    int rows, cols, kpad, nb, n;
    uint32_t x_off, x_stride, y_off, y_stride, bias_off;
    vk_buf x, xq, xs, y, bias, wd, ws, wm;
} dev_case;

static void dev_case_free(vk_dev *d, dev_case *c) {
    vk_buf *b[] = {&c->x, &c->xq, &c->xs, &c->y, &c->bias, &c->wd, &c->ws, &c->wm};
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++) vk_buf_free(d, b[k]);
}

/* Record quantize_q8 over c's X (into c->xq, c->xs). */
static void rec_quantize(vk_cmd *cmd, vk_kernel *kq, const dev_case *c) {
    const vk_pc_quantize_q8 pc = {(uint32_t)c->cols, (uint32_t)c->kpad, (uint32_t)c->n, c->x_off, c->x_stride};
    const vk_binding b[3] = {{&c->x, 0, 0}, {&c->xq, 0, 0}, {&c->xs, 0, 0}};
    vk_cmd_dispatch(cmd, kq, b, 3, &pc, sizeof pc, (uint32_t)(c->nb + 63) / 64, (uint32_t)c->n, 1);
}

/* Record a dp4 matvec (or matvec_q8 with f32 X when f32x) of c. */
static void rec_matvec(vk_cmd *cmd, vk_kernel *k, const dev_case *c, uint32_t flags, int f32x) {
    const vk_pc_matmul pc = {.rows = (uint32_t)c->rows,
                             .cols = (uint32_t)c->cols,
                             .n = (uint32_t)c->n,
                             .kpad = (uint32_t)c->kpad,
                             .x_off = f32x ? c->x_off : 0,
                             .x_stride = f32x ? c->x_stride : 0,
                             .y_off = c->y_off,
                             .y_stride = c->y_stride,
                             .bias_off = c->bias_off,
                             .flags = flags};
    const vk_binding b[7] = {{&c->wd, 0, 0},         {&c->ws, 0, 0},   {c->wm.buf ? &c->wm : NULL, 0, 0},
                             {f32x ? &c->x : &c->xq, 0, 0}, {&c->y, 0, 0}, {&c->bias, 0, 0},
                             {&c->xs, 0, 0}};
    vk_cmd_dispatch(cmd, k, b, 7, &pc, sizeof pc, (uint32_t)(c->rows + VK_MATVEC_ROWS - 1) / VK_MATVEC_ROWS, 1, 1);
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* One shape: returns 0 on a device error (e set), else 1; results via
 * test_report. */
static int run_case(vk_dev *d, vk_cmd *cmd, const ops_kernels *sk, vk_kernel *kq, vk_kernel *kdp[2][2], int rows,
                    int cols, int n, int with_bias, int with_acc, qtts_error *e) {
    dev_case c = {.rows = rows, .cols = cols, .kpad = qt_kpad(cols), .n = n};
    c.nb = c.kpad / QT_BLOCK;
    c.x_off = 3 + rnd_u32() % 5;
    c.x_stride = (uint32_t)cols + rnd_u32() % 4;
    c.y_off = 1 + rnd_u32() % 7;
    c.y_stride = (uint32_t)rows + 2;
    c.bias_off = rnd_u32() % 3;
    const size_t nx = c.x_off + (size_t)n * c.x_stride, ny = c.y_off + (size_t)n * c.y_stride + 3;
    const size_t nbias = c.bias_off + (size_t)rows, nw = (size_t)rows * cols;
    float *X = malloc(nx * 4), *Xc = malloc((size_t)n * cols * 4), *Y0 = malloc(ny * 4), *Y = malloc(ny * 4);
    float *bias = malloc(nbias * 4), *Wf = malloc(nw * 4), *Yc = malloc((size_t)n * rows * 4);
    const size_t xq_bytes = (size_t)n * c.kpad, xs_n = 2 * (size_t)n * c.nb;
    int8_t *xq = malloc(xq_bytes);
    float *xs = malloc(xs_n * 4);
    const size_t prep_bytes = q8_prep_row_bytes(cols) * (size_t)n;
    void *prep = aligned_alloc(64, (prep_bytes + 63) / 64 * 64);
    qt_mat wq[2] = {{0}}, wx[2] = {{0}};
    int ok_dev = 1;
    qtts_status st = QTTS_OK;
    if (!X || !Xc || !Y0 || !Y || !bias || !Wf || !Yc || !xq || !xs || !prep) {
        st = err_set(e, QTTS_ERR_NOMEM, "test: out of memory");
        goto done;
    }
    /* X: rows of different magnitude, NaN outside the rows, a zero block */
    for (size_t k = 0; k < nx; k++) X[k] = NAN;
    for (int i = 0; i < n; i++) {
        const float scale = ldexpf(1.0f, (int)(rnd_u32() % 24) - 12);
        for (int j = 0; j < cols; j++) {
            const float v = (i == 0 && j >= 32 && j < 64) ? 0.0f : rnd() * scale;
            X[c.x_off + (size_t)i * c.x_stride + j] = v;
            Xc[(size_t)i * cols + j] = v;
        }
    }
    for (size_t k = 0; k < ny; k++) Y0[k] = rnd();
    for (size_t k = 0; k < nbias; k++) bias[k] = rnd();
    for (size_t k = 0; k < nw; k++) Wf[k] = rnd();

    /* CPU: the activation blocks */
    const qt_mat wshape = {.dtype = DT_F32, .rows = rows, .cols = cols};
    q8_prep(&wshape, Xc, n, prep);

    /* device: quantize_q8 */
    st = upload_new(d, &c.x, X, nx * 4, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.xq, xq_bytes, 0, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.xs, xs_n * 4, 0, e);
    if (st == QTTS_OK) st = upload_new(d, &c.bias, bias, nbias * 4, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.y, ny * 4, 0, e);
    if (st == QTTS_OK) st = vk_cmd_begin(cmd, e);
    if (st == QTTS_OK) {
        rec_quantize(cmd, kq, &c);
        st = vk_cmd_end(cmd, e);
    }
    if (st == QTTS_OK) st = vk_cmd_submit(cmd, e);
    if (st == QTTS_OK) st = vk_cmd_wait(cmd, e);
    if (st == QTTS_OK) st = vk_buf_download(d, &c.xq, 0, xq, xq_bytes, e);
    if (st == QTTS_OK) st = vk_buf_download(d, &c.xs, 0, xs, xs_n * 4, e);
    if (st != QTTS_OK) goto done;
    {
        char why[160] = "";
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            const q8_rows pr = q8_prep_row(prep, cols, i);
            for (int j = 0; j < c.kpad && ok; j++)
                if (xq[(size_t)i * c.kpad + j] != pr.xq[j]) {
                    snprintf(why, sizeof why, "xq[%d][%d] = %d, CPU %d", i, j, xq[(size_t)i * c.kpad + j], pr.xq[j]);
                    ok = 0;
                }
            for (int b = 0; b < c.nb && ok; b++) {
                const float dx = xs[(size_t)i * c.nb + b], fs = xs[(size_t)(n + i) * c.nb + b];
                if (fbits(dx) != fbits(pr.dx[b]) || fbits(fs) != fbits(pr.fsum[b])) {
                    snprintf(why, sizeof why, "row %d block %d: dx %.9g fsum %.9g, CPU %.9g %.9g", i, b, dx, fs,
                             pr.dx[b], pr.fsum[b]);
                    ok = 0;
                }
            }
        }
        test_report("quantize_q8", ok, "rows %d cols %d n %d: %s", rows, cols, n, why);
    }

    /* CPU reference activations for the X16 kernels */
    sk->prep[OPS_WF_Q8X16](&wshape, Xc, n, prep);
    for (int f = 0; f < 2; f++) {
        const qt_mat src = {.data = Wf, .dtype = DT_F32, .rows = rows, .cols = cols};
        const int qt = f == 0 ? QT_Q8_B32 : QT_Q4M_B32;
        st = qmat_quantize(&src, qt, &wq[f], e);
        if (st == QTTS_OK) st = qmat_quantize(&src, qt, &wx[f], e);
        if (st == QTTS_OK) st = qmat_pack_x16(&wx[f], 0, e);
        if (st != QTTS_OK) goto done;
        const int wf = ops_weight_format(&wx[f]);
        sk->mm[wf](&wx[f], Xc, prep, n, with_bias ? bias + c.bias_off : NULL, Yc, 0, rows);

        vk_buf_free(d, &c.wd);
        vk_buf_free(d, &c.ws);
        vk_buf_free(d, &c.wm);
        const size_t nsc = (size_t)rows * c.nb * sizeof(uint16_t);
        st = upload_new(d, &c.wd, wq[f].data, qmat_row_bytes(&wq[f]) * rows, e);
        if (st == QTTS_OK) st = upload_new(d, &c.ws, wq[f].scales, nsc, e);
        if (st == QTTS_OK && f == 1) st = upload_new(d, &c.wm, wq[f].mins, nsc, e);
        for (int fused = 0; fused < 2 && st == QTTS_OK; fused++) {
        if (st == QTTS_OK) st = vk_buf_upload(d, &c.y, 0, Y0, ny * 4, e);
        if (st == QTTS_OK) st = vk_cmd_begin(cmd, e);
        if (st == QTTS_OK) {
            rec_quantize(cmd, kq, &c);
            rec_matvec(cmd, kdp[f][fused], &c, (with_bias ? VK_MM_BIAS : 0u) | (with_acc ? VK_MM_ACC : 0u), 0);
            st = vk_cmd_end(cmd, e);
        }
        if (st == QTTS_OK) st = vk_cmd_submit(cmd, e);
        if (st == QTTS_OK) st = vk_cmd_wait(cmd, e);
        if (st == QTTS_OK) st = vk_buf_download(d, &c.y, 0, Y, ny * 4, e);
        if (st != QTTS_OK) goto done;
        char why[200] = "";
        int ok = 1, bad = 0;
        for (size_t o = 0; o < ny; o++) {
            const size_t rel = o >= c.y_off ? o - c.y_off : 0;
            const int i = (int)(rel / c.y_stride), r = (int)(rel % c.y_stride);
            const int is_out = o >= c.y_off && i < n && r < rows;
            float want = Y0[o];
            if (is_out) {
                want = Yc[(size_t)i * rows + r];
                if (with_acc) want = Y0[o] + want;
            }
            if (fbits(Y[o]) != fbits(want)) {
                if (ok)
                    snprintf(why, sizeof why, "%s[%d][%d] = %.9g, CPU %.9g", is_out ? "Y" : "outside Y", i, r, Y[o],
                             want);
                ok = 0;
                bad++;
            }
        }
        if (!fused)
            test_report(f == 0 ? "matvec_q8_dp4" : "matvec_q4m_dp4", ok,
                        "rows %d cols %d n %d bias %d acc %d: %d words differ, first %s", rows, cols, n, with_bias,
                        with_acc, bad, why);
        else if (!ok)
            printf("# %s with DP4_FUSED = 1 (the device's fma): rows %d cols %d n %d: %d words differ\n",
                   f == 0 ? "matvec_q8_dp4" : "matvec_q4m_dp4", rows, cols, n, bad);
        }
    }
done:
    if (st != QTTS_OK) ok_dev = 0;
    for (int f = 0; f < 2; f++) {
        qmat_free(&wq[f]);
        qmat_free(&wx[f]);
    }
    dev_case_free(d, &c);
    free(X), free(Xc), free(Y0), free(Y), free(bias), free(Wf), free(Yc), free(xq), free(xs), free(prep);
    return ok_dev;
}

/* "# " lines: ms per call of matvec_q8 (f32 X), quantize_q8 + matvec_q8_dp4
 * and quantize_q8 + matvec_q4m_dp4 at rows x cols, n = 1 (reps replays). */
static qtts_status bench(vk_dev *d, vk_cmd *cmd, vk_kernel *kq, vk_kernel *kdp[2][2], vk_kernel *kold, int rows,
                         int cols, qtts_error *e) {
    if (vk_dev_timestamp_ns(d) <= 0) return QTTS_OK;
    dev_case c = {.rows = rows, .cols = cols, .kpad = qt_kpad(cols), .n = 1, .x_stride = (uint32_t)cols,
                  .y_stride = (uint32_t)rows};
    c.nb = c.kpad / QT_BLOCK;
    const int reps = 10;
    const size_t nw = (size_t)rows * cols;
    float *Wf = malloc(nw * 4), *X = malloc((size_t)cols * 4);
    qt_mat wq[2] = {{0}};
    qtts_status st = (Wf && X) ? QTTS_OK : err_set(e, QTTS_ERR_NOMEM, "test: out of memory");
    double ms[3] = {0};
    if (st == QTTS_OK) {
        for (size_t k = 0; k < nw; k++) Wf[k] = rnd();
        for (int k = 0; k < cols; k++) X[k] = rnd();
        st = upload_new(d, &c.x, X, (size_t)cols * 4, e);
    }
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.xq, (size_t)c.kpad, 0, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.xs, 2 * (size_t)c.nb * 4, 0, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.y, (size_t)rows * 4, 0, e);
    if (st == QTTS_OK) st = vk_buf_alloc(d, &c.bias, 16, 0, e);
    for (int f = 0; f < 2 && st == QTTS_OK; f++) {
        const qt_mat src = {.data = Wf, .dtype = DT_F32, .rows = rows, .cols = cols};
        st = qmat_quantize(&src, f == 0 ? QT_Q8_B32 : QT_Q4M_B32, &wq[f], e);
        if (st != QTTS_OK) break;
        vk_buf_free(d, &c.wd);
        vk_buf_free(d, &c.ws);
        vk_buf_free(d, &c.wm);
        const size_t nsc = (size_t)rows * c.nb * sizeof(uint16_t);
        st = upload_new(d, &c.wd, wq[f].data, qmat_row_bytes(&wq[f]) * rows, e);
        if (st == QTTS_OK) st = upload_new(d, &c.ws, wq[f].scales, nsc, e);
        if (st == QTTS_OK && f == 1) st = upload_new(d, &c.wm, wq[f].mins, nsc, e);
        for (int v = (f == 0 ? 0 : 1); v < 2 && st == QTTS_OK; v++) { /* q8: old then dp4; q4m: dp4 */
            st = vk_cmd_begin(cmd, e);
            if (st != QTTS_OK) break;
            vk_cmd_timestamp(cmd, 0);
            for (int k = 0; k < reps; k++) {
                if (v == 0) {
                    rec_matvec(cmd, kold, &c, 0, 1);
                } else {
                    rec_quantize(cmd, kq, &c);
                    rec_matvec(cmd, kdp[f][0], &c, 0, 0);
                }
            }
            vk_cmd_timestamp(cmd, 1);
            st = vk_cmd_end(cmd, e);
            for (int t = 0; t < 2 && st == QTTS_OK; t++) { /* the first replay warms up */
                st = vk_cmd_submit(cmd, e);
                if (st == QTTS_OK) st = vk_cmd_wait(cmd, e);
            }
            if (st == QTTS_OK) ms[f == 0 ? v : 2] = vk_cmd_elapsed_ms(cmd, 0, 1) / reps;
        }
    }
    if (st == QTTS_OK)
        printf("# rows %d cols %d n 1: matvec_q8 %.3f ms, quantize_q8 + matvec_q8_dp4 %.3f ms, "
               "quantize_q8 + matvec_q4m_dp4 %.3f ms\n",
               rows, cols, ms[0], ms[1], ms[2]);
    for (int f = 0; f < 2; f++) qmat_free(&wq[f]);
    dev_case_free(d, &c);
    free(Wf);
    free(X);
    return st;
}

static const int case_rows[] = {1, 7, 64, 300, 2048};
static const int case_cols[] = {1, 31, 64, 100, 1024};
static const int case_n[] = {1, 2, 3, 9};

int main(void) {
    qtts_error e = {0};
    vk_dev *d = NULL;
    vk_cmd *cmd = NULL;
    if (vk_dev_create(&d, 0, &e) != QTTS_OK) {
        test_skip("vulkan", "no Vulkan device: %s", e.msg);
        return test_finish();
    }
    if (!has_int_dot(d)) {
        test_skip("vulkan_dot", "%s lacks VK_KHR_shader_integer_dot_product", vk_dev_info(d)->name);
        vk_dev_free(d);
        return test_finish();
    }
    const ops_kernels *sk = ops_kernels_by_name("scalar", NULL);
    vk_kernel *kq = NULL, *kdp[2][2] = {{NULL, NULL}, {NULL, NULL}}, *kold = NULL;
    const uint32_t spec_fused = 1;
    qtts_status st = vk_cmd_new(d, &cmd, &e);
    if (st == QTTS_OK) st = vk_kernel_get(d, "quantize_q8", NULL, 0, &kq, &e);
    for (int f = 0; f < 4 && st == QTTS_OK; f++)
        st = vk_kernel_get(d, f / 2 ? "matvec_q4m_dp4" : "matvec_q8_dp4", f % 2 ? &spec_fused : NULL, f % 2,
                           &kdp[f / 2][f % 2], &e);
    if (st == QTTS_OK) st = vk_kernel_get(d, "matvec_q8", NULL, 0, &kold, &e);
    int ci = 0;
    for (size_t a = 0; a < sizeof case_rows / sizeof case_rows[0] && st == QTTS_OK; a++)
        for (size_t b = 0; b < sizeof case_cols / sizeof case_cols[0] && st == QTTS_OK; b++, ci++) {
            const int n = case_n[rnd_u32() % 4];
            if (!run_case(d, cmd, sk, kq, kdp, case_rows[a], case_cols[b], n, ci & 1, (ci >> 1) & 1, &e))
                st = e.status ? e.status : QTTS_ERR_INTERNAL;
        }
    if (st == QTTS_OK) st = bench(d, cmd, kq, kdp, kold, 2048, 1024, &e);
    if (st == QTTS_OK) st = bench(d, cmd, kq, kdp, kold, 1024, 3072, &e);
    if (st == QTTS_OK) st = bench(d, cmd, kq, kdp, kold, 6144, 2048, &e);
    test_report("vulkan_calls", st == QTTS_OK, "%s", e.msg);
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
