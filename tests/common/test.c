/* Test harness (see test.h). */
#include "test.h"

#include <math.h>
#include <stdlib.h>

test_state g_test;

void test_report(const char *name, int ok, const char *fmt, ...) {
    if (ok) {
        g_test.passed++;
        printf("ok %s\n", name);
    } else {
        g_test.failed++;
        printf("FAIL %s: ", name);
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
}

void test_skip(const char *name, const char *fmt, ...) {
    g_test.skipped++;
    printf("SKIP %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

int test_finish(void) {
    printf("# %d passed, %d failed, %d skipped\n", g_test.passed, g_test.failed, g_test.skipped);
    return g_test.failed > 100 ? 100 : g_test.failed;
}

const char *test_dir(void) {
    const char *d = getenv("QTTS_TEST_DIR");
    return d && *d ? d : "tests";
}

const char *test_vpath(const char *dir, const char *fmt, va_list ap) {
    static char bufs[64][4096];
    static int k;
    char *b = bufs[k++ & 63];
    char rel[3000];
    vsnprintf(rel, sizeof rel, fmt, ap);
    snprintf(b, 4096, "%s/%s", dir, rel);
    return b;
}

const char *test_path(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *b = test_vpath(test_dir(), fmt, ap);
    va_end(ap);
    return b;
}

double rel_err(const float *a, const float *b, long n, double *max_abs) {
    double md = 0.0, mr = 0.0;
    for (long i = 0; i < n; i++) {
        if (isinf(b[i]) || isinf(a[i])) {
            if (a[i] != b[i]) {
                if (max_abs) *max_abs = INFINITY;
                return INFINITY;
            }
            continue;
        }
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= md)) md = d; /* NaN propagates */
        double r = fabs((double)b[i]);
        if (r > mr) mr = r;
    }
    if (max_abs) *max_abs = md;
    return mr > 0 ? md / mr : md;
}
