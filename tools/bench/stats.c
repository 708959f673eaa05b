/* Order statistics for benchmark runs: median, p95, min, max (and mean, never
 * reported alone). Percentiles interpolate linearly between order statistics
 * (R's type 7, numpy's default): p95 of 5 runs lies between the 4th and 5th. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(const double *sorted, int n, double p) {
    if (n <= 0) return NAN;
    if (n == 1) return sorted[0];
    const double h = (n - 1) * p / 100.0;
    const int lo = (int)floor(h);
    if (lo >= n - 1) return sorted[n - 1];
    return sorted[lo] + (h - lo) * (sorted[lo + 1] - sorted[lo]);
}

bench_summary bench_summarize(const double *v, int n) {
    bench_summary s = {NAN, NAN, NAN, NAN, NAN, 0};
    double *t = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!t) return s;
    int k = 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) t[k++] = v[i], sum += v[i];
    if (k > 0) {
        qsort(t, (size_t)k, sizeof *t, cmp_double);
        s.n = k;
        s.min = t[0];
        s.max = t[k - 1];
        s.median = bench_percentile(t, k, 50);
        s.p95 = bench_percentile(t, k, 95);
        s.mean = sum / k;
    }
    free(t);
    return s;
}
