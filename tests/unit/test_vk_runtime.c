/* The Vulkan runtime (src/backend/vulkan/vk.h): device listing, buffers and
 * their transfers, the kernel cache, recorded command buffers replayed
 * several times, copies, timestamps and the memory accounting, on the
 * first usable device (lavapipe in CI). The shader is selftest_add.comp
 * (y[i] += x[i] * MUL); inputs are small integers, so every float result is
 * exact and compared for equality. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static void test_devices(int *first_usable) {
    qtts_device_info info[8];
    int n = 0;
    qtts_error e = {0};
    qtts_status st = vk_list_devices(info, 8, &n, &e);
    *first_usable = -1;
    if (st != QTTS_OK) {
        test_skip("vk_list_devices", "%s", e.msg);
        return;
    }
    int sane = n >= 1;
    for (int i = 0; i < n && i < 8; i++) {
        const qtts_device_info *d = &info[i];
        printf("# device %d: %s | %s | %s | api %u.%u | %.0f MiB | subgroup %u | int8_dot %d fp16 %d int8_storage %d "
               "| max range %lld | usable %d %s\n",
               i, d->name, d->driver, d->type, VK_API_VERSION_MAJOR(d->api_version),
               VK_API_VERSION_MINOR(d->api_version), (double)d->memory_bytes / (1 << 20), d->subgroup_size,
               d->int8_dot, d->fp16, d->int8_storage, (long long)d->max_buffer_range, d->usable, d->why_not);
        sane = sane && d->name[0] && d->driver[0] && d->type[0] && d->memory_bytes > 0 &&
               d->max_buffer_range >= (1 << 20);
        if (d->usable) {
            sane = sane && d->api_version >= VK_API_VERSION_1_2 && d->subgroup_size >= 1 &&
                   d->subgroup_size <= 128 && (d->subgroup_size & (d->subgroup_size - 1)) == 0 &&
                   d->int8_storage && !d->why_not[0];
            if (*first_usable < 0) *first_usable = i;
        } else {
            sane = sane && d->why_not[0];
        }
    }
    CHECK("vk_list_devices", sane, "%d devices, fields not sane", n);
    if (*first_usable < 0) test_skip("vk_usable_device", "no listed device is usable");
}

/* Upload, partial upload, fill and download of a buffer of `bytes`. */
static void test_round_trip(vk_dev *d, int host_visible, size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "vk_buf_round_trip_%s_%zu", host_visible ? "host" : "device", bytes);
    qtts_error e = {0};
    vk_buf b = {0};
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        test_report(name, 0, "out of host memory");
        free(src);
        free(dst);
        return;
    }
    for (size_t i = 0; i < bytes; i++) src[i] = (unsigned char)rnd();
    int ok = vk_buf_alloc(d, &b, bytes, host_visible, &e) == QTTS_OK;
    ok = ok && (host_visible ? b.map != NULL : 1) && b.size == bytes;
    ok = ok && vk_buf_upload(d, &b, 0, src, bytes, &e) == QTTS_OK;
    ok = ok && vk_buf_download(d, &b, 0, dst, bytes, &e) == QTTS_OK;
    int same = ok && !memcmp(src, dst, bytes);
    /* 5 bytes at offset 3, then a fill of 16 bytes at 8 */
    const unsigned char patch[5] = {1, 2, 3, 4, 5};
    ok = ok && vk_buf_upload(d, &b, 3, patch, 5, &e) == QTTS_OK;
    memcpy(src + 3, patch, 5);
    ok = ok && vk_buf_fill(d, &b, 8, 16, 0xdeadbeefu, &e) == QTTS_OK;
    uint32_t w = 0xdeadbeefu;
    for (int i = 0; i < 4; i++) memcpy(src + 8 + 4 * i, &w, 4);
    ok = ok && vk_buf_download(d, &b, 1, dst + 1, bytes - 1, &e) == QTTS_OK;
    same = same && ok && !memcmp(src + 1, dst + 1, bytes - 1);
    /* out of range and misaligned requests are refused */
    qtts_error e2 = {0};
    int refused = vk_buf_upload(d, &b, bytes - 2, patch, 5, &e2) == QTTS_ERR_INVALID_ARG &&
                  vk_buf_fill(d, &b, 2, 4, 0, &e2) == QTTS_ERR_INVALID_ARG;
    test_report(name, ok && same && refused, "%s", !ok ? e.msg : !same ? "contents differ" : "bad range accepted");
    vk_buf_free(d, &b);
    free(src);
    free(dst);
}

static void test_kernels(vk_dev *d) {
    qtts_error e = {0};
    vk_kernel *k1 = NULL, *k1b = NULL, *k2 = NULL, *kx = NULL;
    uint32_t s1[2] = {64, 1}, s2[2] = {64, 2};
    int ok = vk_kernel_get(d, "selftest_add", s1, 2, &k1, &e) == QTTS_OK;
    ok = ok && vk_kernel_get(d, "selftest_add", s1, 2, &k1b, &e) == QTTS_OK;
    ok = ok && vk_kernel_get(d, "selftest_add", s2, 2, &k2, &e) == QTTS_OK;
    test_report("vk_kernel_cache", ok && k1 && k1 == k1b && k2 && k2 != k1, "%s", ok ? "cache keys wrong" : e.msg);
    qtts_error ex = {0};
    qtts_status st = vk_kernel_get(d, "no_such_shader", NULL, 0, &kx, &ex);
    test_report("vk_kernel_unknown_shader", st == QTTS_ERR_INVALID_ARG && !kx && strstr(ex.msg, "no_such_shader"),
                "status %d, message \"%s\"", (int)st, ex.msg);
}

/* selftest_add recorded once and replayed 3 times; then a copy to a
 * host-visible buffer; then a recording of more dispatches than one
 * descriptor pool holds. */
static void test_cmd(vk_dev *d) {
    enum { N = 1000 };
    qtts_error e = {0};
    float x[N], y[N], want[N];
    for (int i = 0; i < N; i++) x[i] = (float)(int)(rnd() % 201) - 100.0f;
    vk_buf bx = {0}, by = {0}, bh = {0};
    vk_kernel *k1 = NULL, *k2 = NULL;
    vk_cmd *c = NULL;
    uint32_t s1[2] = {64, 1}, s2[2] = {32, 2};
    int ok = vk_buf_alloc(d, &bx, sizeof x, 0, &e) == QTTS_OK;
    ok = ok && vk_buf_alloc(d, &by, sizeof y + 512, 0, &e) == QTTS_OK;
    ok = ok && vk_buf_alloc(d, &bh, sizeof y, 1, &e) == QTTS_OK;
    ok = ok && vk_buf_upload(d, &bx, 0, x, sizeof x, &e) == QTTS_OK;
    ok = ok && vk_buf_fill(d, &by, 0, sizeof y + 512, 0, &e) == QTTS_OK;
    ok = ok && vk_kernel_get(d, "selftest_add", s1, 2, &k1, &e) == QTTS_OK;
    ok = ok && vk_kernel_get(d, "selftest_add", s2, 2, &k2, &e) == QTTS_OK;
    ok = ok && vk_cmd_new(d, &c, &e) == QTTS_OK;
    if (!ok) {
        test_report("vk_cmd_setup", 0, "%s", e.msg);
        goto done;
    }
    uint32_t n = N;
    vk_binding b[2] = {{&bx, 0, 0}, {&by, 0, sizeof y}};
    ok = vk_cmd_begin(c, &e) == QTTS_OK;
    vk_cmd_timestamp(c, 0);
    vk_cmd_dispatch(c, k1, b, 2, &n, sizeof n, (N + 63) / 64, 1, 1);
    vk_cmd_timestamp(c, 1);
    vk_cmd_copy(c, &by, 0, &bh, 0, sizeof y);
    ok = ok && vk_cmd_end(c, &e) == QTTS_OK;
    double ms = 0;
    int counts_ok = 1;
    for (int rep = 1; ok && rep <= 3; rep++) {
        ok = vk_cmd_submit(c, &e) == QTTS_OK && vk_cmd_wait(c, &e) == QTTS_OK;
        const float *h = bh.map;
        for (int i = 0; ok && i < N; i++) counts_ok = counts_ok && h[i] == (float)rep * x[i];
        double t = vk_cmd_elapsed_ms(c, 0, 1);
        if (t < 0 || t > 60000) counts_ok = 0;
        ms += t;
    }
    test_report("vk_cmd_replay_3x", ok && counts_ok, "%s", ok ? "y is not 3 x after 3 replays" : e.msg);
    ok = ok && vk_buf_download(d, &by, 0, y, sizeof y, &e) == QTTS_OK;
    int same = 1;
    for (int i = 0; ok && i < N; i++) same = same && y[i] == 3.0f * x[i];
    test_report("vk_cmd_copy", ok && same, "%s", ok ? "device and host-visible copies differ" : e.msg);
    test_report("vk_timestamps", vk_dev_timestamp_ns(d) >= 0 && ms >= 0, "elapsed %.3f ms", ms);
    printf("# 3 replays of selftest_add (n %d): %.3f ms of GPU time, timestamp period %.3f ns\n", N, ms,
           vk_dev_timestamp_ns(d));

    /* offsets: y[64..64+N) += 2 x over bindings at byte offset 256 */
    for (int i = 0; i < N; i++) want[i] = 3.0f * x[i];
    vk_binding bo[2] = {{&bx, 0, 0}, {&by, 256, 0}};
    ok = ok && vk_cmd_begin(c, &e) == QTTS_OK;
    vk_cmd_dispatch(c, k2, bo, 2, &n, sizeof n, (N + 31) / 32, 1, 1);
    ok = ok && vk_cmd_end(c, &e) == QTTS_OK && vk_cmd_submit(c, &e) == QTTS_OK && vk_cmd_wait(c, &e) == QTTS_OK;
    float yo[N + 128];
    ok = ok && vk_buf_download(d, &by, 0, yo, sizeof yo, &e) == QTTS_OK;
    same = 1;
    for (int i = 0; ok && i < N + 128; i++) {
        float w = (i < N ? want[i] : 0.0f) + (i >= 64 && i < 64 + N ? 2.0f * x[i - 64] : 0.0f);
        same = same && yo[i] == w;
    }
    test_report("vk_cmd_binding_offset_spec", ok && same, "%s", ok ? "wrong values" : e.msg);

    /* 600 dispatches in one recording (several descriptor pools), twice */
    ok = ok && vk_buf_fill(d, &by, 0, sizeof y, 0, &e) == QTTS_OK;
    ok = ok && vk_cmd_begin(c, &e) == QTTS_OK;
    for (int i = 0; i < 600; i++) vk_cmd_dispatch(c, k1, b, 2, &n, sizeof n, (N + 63) / 64, 1, 1);
    ok = ok && vk_cmd_end(c, &e) == QTTS_OK;
    for (int rep = 0; ok && rep < 2; rep++) ok = vk_cmd_submit(c, &e) == QTTS_OK && vk_cmd_wait(c, &e) == QTTS_OK;
    ok = ok && vk_buf_download(d, &by, 0, y, sizeof y, &e) == QTTS_OK;
    same = 1;
    for (int i = 0; ok && i < N; i++) same = same && y[i] == 1200.0f * x[i];
    test_report("vk_cmd_many_dispatches", ok && same, "%s", ok ? "y is not 1200 x" : e.msg);

    /* a recording error is sticky and reported by vk_cmd_end */
    qtts_error e2 = {0};
    int rec_ok = vk_cmd_begin(c, &e2) == QTTS_OK;
    vk_cmd_dispatch(c, k1, b, VK_MAX_BINDINGS + 1, &n, sizeof n, 1, 1, 1);
    vk_cmd_dispatch(c, k1, b, 2, &n, sizeof n, 1, 1, 1);
    qtts_status st = vk_cmd_end(c, &e2);
    qtts_error e3 = {0};
    test_report("vk_cmd_sticky_error",
                rec_ok && st != QTTS_OK && strstr(e2.msg, "vk_cmd_dispatch") && vk_cmd_submit(c, &e3) != QTTS_OK,
                "status %d: %s", (int)st, e2.msg);
done:
    vk_cmd_free(c);
    vk_buf_free(d, &bx);
    vk_buf_free(d, &by);
    vk_buf_free(d, &bh);
}

static void run(void) {
    int dev = -1;
    test_devices(&dev);
    if (dev < 0) return;
    qtts_error e = {0};
    vk_dev *d = NULL;
    if (vk_dev_create(&d, dev, &e) != QTTS_OK) {
        test_skip("vk_dev_create", "%s", e.msg);
        return;
    }
    test_report("vk_dev_create", vk_dev_info(d)->usable && vk_dev_info(d)->name[0], "bad info");
    vk_dev *bad = NULL;
    qtts_error eb = {0};
    qtts_status st = vk_dev_create(&bad, 1000, &eb);
    test_report("vk_dev_create_bad_index", st == QTTS_ERR_INVALID_ARG && !bad, "status %d: %s", (int)st, eb.msg);

    int64_t a0 = vk_dev_bytes_allocated(d);
    vk_buf b = {0}, h = {0};
    int ok = vk_buf_alloc(d, &b, 1001, 0, &e) == QTTS_OK && vk_buf_alloc(d, &h, 3000, 1, &e) == QTTS_OK;
    int64_t a1 = vk_dev_bytes_allocated(d), r1 = vk_dev_bytes_reserved(d);
    vk_buf_free(d, &b);
    int64_t a2 = vk_dev_bytes_allocated(d);
    vk_buf_free(d, &h);
    vk_buf_free(d, &h); /* a zeroed buffer is accepted */
    int64_t a3 = vk_dev_bytes_allocated(d);
    test_report("vk_bytes_accounting", ok && a1 == a0 + 4001 && r1 >= a1 && a2 == a0 + 3000 && a3 == a0,
                "%s: %lld %lld %lld %lld", ok ? "counts" : e.msg, (long long)a0, (long long)a1, (long long)a2,
                (long long)a3);
    vk_buf z = {0};
    test_report("vk_buf_alloc_zero", vk_buf_alloc(d, &z, 0, 0, &e) == QTTS_ERR_INVALID_ARG, "0 bytes accepted");

    test_round_trip(d, 0, 1001);
    test_round_trip(d, 1, 1001);
    test_round_trip(d, 0, 4096);
    test_round_trip(d, 0, (size_t)100 << 20);
    test_kernels(d);
    test_cmd(d);
    test_report("vk_bytes_after_tests", vk_dev_bytes_allocated(d) == a0, "%lld bytes still allocated",
                (long long)(vk_dev_bytes_allocated(d) - a0));
    vk_dev_free(d);
    vk_dev_free(NULL);
}
#endif

int main(void) {
#ifdef QTTS_HAVE_VULKAN
    run();
#else
    test_skip("vulkan", "built without Vulkan (apt-get install libvulkan-dev glslc)");
#endif
    return test_finish();
}
