/* qtts-bench compare: two JSON reports matched as pairs on the same cases and
 * configurations (../shared/BENCHMARKING.md, procedure 8). Prints each pair's change
 * and the median, mean and weighted change, and how many got better or
 * worse. Dataflow: A.json, B.json -> records keyed by (size, type, weights,
 * threads, chunk, mode, decode placement, case, frames) -> medians of the
 * chosen metric -> deltas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define KEY_WEIGHTS 1
#define KEY_THREADS 2
#define KEY_MODEL 4
#define KEY_DECODE 8

static void record_key(const bench_record *r, int ignore, char *out, size_t n) {
    char w[32] = "*", t[16] = "*", m[160] = "*", d[24] = "*";
    if (!(ignore & KEY_WEIGHTS)) snprintf(w, sizeof w, "%s", r->weights);
    if (!(ignore & KEY_THREADS)) snprintf(t, sizeof t, "%d", r->n_threads);
    if (!(ignore & KEY_MODEL)) snprintf(m, sizeof m, "%s %s", r->size_name, r->type_name);
    if (!(ignore & KEY_DECODE)) snprintf(d, sizeof d, "%s", r->decode); /* "" in reports before --decode */
    snprintf(out, n, "%s|%s|t%s|%d/%d|%s|d%s|%s|f%d", m, w, t, r->first_chunk, r->chunk, r->mode, d, r->case_name,
             r->frames_forced);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int compare_keyed(const bench_report *a, const bench_report *b, const char *metric, int ignore, FILE *out) {
    const metric_desc *d = bench_metric(metric);
    if (!d) {
        fprintf(stderr, "compare: unknown metric '%s'; one of:", metric);
        for (int i = 0; i < bench_n_metrics; i++) fprintf(stderr, " %s", bench_metrics[i].key);
        fputc('\n', stderr);
        return -1;
    }
    const metric_desc *audio = bench_metric("audio_s");
    double *chg = malloc(sizeof(double) * (size_t)(a->n_rec + 1));
    if (!chg) return -1;
    int n = 0, better = 0, worse = 0, same = 0, only_a = 0;
    double wa = 0, wb = 0;
    fprintf(out, "metric: %s (%s)\n", d->key,
            d->lower_is_better == 1 ? "lower is better" : d->lower_is_better == 0 ? "higher is better" : "informational");
    fprintf(out, "A: %s, %s\nB: %s, %s\n\n", a->sys.commit, a->sys.date, b->sys.commit, b->sys.date);
    fprintf(out, "| case | configuration | A median | B median | change |\n|---|---|---|---|---|\n");
    char *used = calloc((size_t)(b->n_rec + 1), 1);
    for (int i = 0; i < a->n_rec; i++) {
        const bench_record *ra = &a->rec[i];
        if (ra->n_runs == 0) continue;
        char ka[512], kb[512];
        record_key(ra, ignore, ka, sizeof ka);
        const bench_record *rb = NULL;
        for (int j = 0; j < b->n_rec && !rb; j++) {
            if (used && used[j]) continue;
            record_key(&b->rec[j], ignore, kb, sizeof kb);
            if (strcmp(ka, kb) == 0 && b->rec[j].n_runs > 0) {
                rb = &b->rec[j];
                if (used) used[j] = 1;
            }
        }
        if (!rb) {
            only_a++;
            continue;
        }
        const double va = record_summary(ra, d).median, vb = record_summary(rb, d).median;
        if (isnan(va) || isnan(vb) || va == 0) continue;
        const double c = (vb - va) / fabs(va) * 100.0;
        chg[n++] = c;
        const double w = record_summary(ra, audio).median;
        if (!isnan(w)) wa += w * va, wb += w * vb;
        const int improved = d->lower_is_better == 1 ? vb < va : vb > va;
        if (vb == va) same++;
        else if (improved) better++;
        else worse++;
        fprintf(out, "| %s | %s %s %s t%d %d/%d %s %s | ", ra->case_name, ra->size_name, ra->type_name, ra->weights,
                ra->n_threads, ra->first_chunk, ra->chunk, ra->mode, ra->decode[0] ? ra->decode : "decode ?");
        fprintf(out, d->fmt, va);
        fputs(" | ", out);
        fprintf(out, d->fmt, vb);
        fprintf(out, " | %+.1f%% |\n", c);
    }
    int only_b = 0;
    for (int j = 0; j < b->n_rec; j++)
        if (used && !used[j] && b->rec[j].n_runs > 0) only_b++;
    free(used);
    fprintf(out, "\nmatched %d pairs (%d only in A, %d only in B)\n", n, only_a, only_b);
    if (n > 0) {
        double mean = 0;
        for (int i = 0; i < n; i++) mean += chg[i];
        mean /= n;
        qsort(chg, (size_t)n, sizeof *chg, cmp_double);
        const double med = bench_percentile(chg, n, 50);
        fprintf(out, "median change %+.2f%%, mean change %+.2f%%, weighted change %+.2f%% (weighted by audio seconds;"
                     " for RTF: total processing time B / A - 1)\n",
                med, mean, wa > 0 ? (wb / wa - 1) * 100 : NAN);
        const char *up = d->key[0] == 'r' && strncmp(d->key, "rtf", 3) == 0 ? "faster" : "better";
        const char *down = up[0] == 'f' ? "slower" : "worse";
        fprintf(out, "%d %s, %d %s, %d unchanged\n", better, up, worse, down, same);
    }
    free(chg);
    return n > 0 ? 0 : -1;
}

/* "weights,threads,model,decode" (any of them) -> KEY_* bits */
static int ignore_bits(const char *v) {
    int ignore = 0;
    if (!v) return 0;
    if (strstr(v, "weights")) ignore |= KEY_WEIGHTS;
    if (strstr(v, "threads")) ignore |= KEY_THREADS;
    if (strstr(v, "model")) ignore |= KEY_MODEL;
    if (strstr(v, "decode")) ignore |= KEY_DECODE;
    return ignore;
}

int compare_reports(const bench_report *a, const bench_report *b, const char *metric, const char *ignore, FILE *out) {
    return compare_keyed(a, b, metric, ignore_bits(ignore), out);
}

int cmd_compare(int argc, char **argv) {
    const char *files[2] = {NULL, NULL}, *metric = "rtf";
    int nf = 0, ignore = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--metric") == 0 && i + 1 < argc) metric = argv[++i];
        else if (strcmp(argv[i], "--ignore") == 0 && i + 1 < argc) ignore |= ignore_bits(argv[++i]);
        else if (argv[i][0] != '-' && nf < 2) files[nf++] = argv[i];
        else {
            fprintf(stderr, "compare: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (nf != 2) {
        fprintf(stderr,
                "usage: qtts-bench compare A.json B.json [--metric rtf] [--ignore weights,threads,model,decode]\n");
        return 2;
    }
    bench_report a, b;
    char err[512];
    if (report_read_json(files[0], &a, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        return 1;
    }
    if (report_read_json(files[1], &b, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        report_free(&a);
        return 1;
    }
    const int rc = compare_keyed(&a, &b, metric, ignore, stdout);
    if (rc) fprintf(stderr, "compare: no case matched between %s and %s\n", files[0], files[1]);
    report_free(&a);
    report_free(&b);
    return rc ? 1 : 0;
}
