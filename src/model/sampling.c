/* Token selection (see sampling.h). */
#include "model/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sampler_seed(sampler *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

qtts_status sampler_init(sampler *r, int max_vocab, uint64_t seed, qtts_error *e) {
    memset(r, 0, sizeof *r);
    r->cap = max_vocab;
    r->vals = malloc(sizeof(float) * max_vocab);
    r->order = malloc(sizeof(int) * max_vocab);
    r->ex = malloc(sizeof(double) * max_vocab);
    if (!r->vals || !r->order || !r->ex) {
        sampler_free(r);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory for the sampler");
    }
    sampler_seed(r, seed);
    return QTTS_OK;
}

void sampler_free(sampler *r) {
    if (!r) return;
    free(r->vals);
    free(r->order);
    free(r->ex);
    memset(r, 0, sizeof *r);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(sampler *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sampler_uniform(sampler *r) { return (double)(next_u64(r) >> 11) * 0x1.0p-53; }

void logits_repetition_penalty(float *logits, int n, const int32_t *hist, int n_hist, float penalty) {
    if (penalty == 1.0f) return;
    /* HF gathers the logits of the history ids, penalises them, and scatters
     * them back: an id present twice is penalised once. */
    for (int i = 0; i < n_hist; i++) {
        int id = hist[i];
        if (id < 0 || id >= n) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = hist[j] == id;
        if (seen) continue;
        float x = logits[id];
        logits[id] = x < 0 ? x * penalty : x / penalty;
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The k-th largest of x[n] (1 <= k <= n), the value a descending sort would
 * put at index k - 1: a min-heap h[k] of the k largest seen so far, so one
 * comparison rejects most entries (n log k at worst instead of sorting n). */
static float kth_largest(const float *x, int n, int k, float *h) {
    for (int i = 0; i < k; i++) { /* heapify the first k: sift up */
        int c = i;
        h[c] = x[i];
        while (c > 0 && h[(c - 1) / 2] > h[c]) {
            const float t = h[c];
            h[c] = h[(c - 1) / 2];
            h[(c - 1) / 2] = t;
            c = (c - 1) / 2;
        }
    }
    for (int i = k; i < n; i++) {
        if (!(x[i] > h[0])) continue;
        int c = 0; /* replace the smallest, sift down */
        h[0] = x[i];
        for (;;) {
            const int l = 2 * c + 1, r = l + 1;
            int m = c;
            if (l < k && h[l] < h[m]) m = l;
            if (r < k && h[r] < h[m]) m = r;
            if (m == c) break;
            const float t = h[c];
            h[c] = h[m];
            h[m] = t;
            c = m;
        }
    }
    return h[0];
}

/* sort indices by value ascending; ties: HF's torch.sort is not stable-specified,
 * we use index order, which only matters for exactly equal logits. */
static int cmp_idx_asc(const void *a, const void *b, void *vals) {
    int i = *(const int *)a, j = *(const int *)b;
    float x = ((const float *)vals)[i], y = ((const float *)vals)[j];
    if (x < y) return -1;
    if (x > y) return 1;
    return i < j ? -1 : i > j;
}

int sample_token(sampler *r, float *logits, int n, const qtts_sampling *sp) {
    if (!sp->do_sample) return argmax(logits, n);
    const float temp = sp->temperature; /* a local: logits may not alias it, so the loop vectorises */
    if (temp != 1.0f)
        for (int i = 0; i < n; i++) logits[i] /= temp;
    const int top_k = sp->top_k > 0 && sp->top_k < n;
    const float kth = top_k ? kth_largest(logits, n, sp->top_k, r->vals) : -INFINITY;
    if (sp->top_p < 1.0f) {
        if (top_k)
            for (int i = 0; i < n; i++)
                if (logits[i] < kth) logits[i] = -INFINITY;
        for (int i = 0; i < n; i++) r->order[i] = i;
        qsort_r(r->order, n, sizeof(int), cmp_idx_asc, logits);
        /* softmax over sorted ascending, cumulative; drop those with cum <= 1-p, keep the last */
        float m = logits[r->order[n - 1]];
        double sum = 0;
        for (int i = 0; i < n; i++) sum += (logits[i] == -INFINITY) ? 0.0 : exp((double)logits[i] - m);
        double cum = 0;
        for (int k = 0; k < n - 1; k++) {
            int i = r->order[k];
            cum += (logits[i] == -INFINITY) ? 0.0 : exp((double)logits[i] - m) / sum;
            if (cum <= 1.0 - sp->top_p) logits[i] = -INFINITY;
        }
    }
    /* The candidates (every entry not -inf, ascending) with the top-k cut in
     * the same pass, then softmax and the draw over them alone: a -inf entry
     * adds exactly 0 to the sums, so skipping it changes no bit, and each
     * exp is computed once for the sum and the draw. */
    int nc = 0;
    float m = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (logits[i] < kth) logits[i] = -INFINITY;
        if (logits[i] == -INFINITY) continue;
        r->order[nc++] = i;
        if (logits[i] > m) m = logits[i];
    }
    double sum = 0;
    for (int c = 0; c < nc; c++) {
        r->ex[c] = exp((double)logits[r->order[c]] - m);
        sum += r->ex[c];
    }
    double u = sampler_uniform(r) * sum, cum = 0;
    for (int c = 0; c < nc; c++) {
        cum += r->ex[c];
        if (u < cum) return r->order[c];
    }
    return nc > 0 ? r->order[nc - 1] : argmax(logits, n);
}

qtts_status sampling_validate(const qtts_sampling *sp, const char *who, qtts_error *e) {
    if (!(sp->temperature > 0.0f) || !isfinite(sp->temperature))
        return err_set(e, QTTS_ERR_INVALID_ARG, "%s temperature must be > 0 (got %g)", who, sp->temperature);
    if (sp->top_k < 0) return err_set(e, QTTS_ERR_INVALID_ARG, "%s top_k must be >= 0 (got %d)", who, sp->top_k);
    if (!(sp->top_p > 0.0f && sp->top_p <= 1.0f))
        return err_set(e, QTTS_ERR_INVALID_ARG, "%s top_p must be in (0, 1] (got %g)", who, sp->top_p);
    if (!(sp->repetition_penalty > 0.0f) || !isfinite(sp->repetition_penalty))
        return err_set(e, QTTS_ERR_INVALID_ARG, "%s repetition_penalty must be > 0 (got %g)", who,
                       sp->repetition_penalty);
    return QTTS_OK;
}
