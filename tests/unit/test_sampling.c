/* Unit test of token selection (src/model/sampling.c) against the HF
 * transformers 4.57 semantics it claims: RepetitionPenaltyLogitsProcessor,
 * greedy argmax (ties to the lowest index), the warpers temperature ->
 * top-k (ties at the threshold kept) -> top-p (drop tokens whose ascending
 * cumulative probability is <= 1 - p, always keep the top one), then a
 * multinomial draw whose empirical distribution must match the softmax of
 * the warped logits; seeding; and sampling_validate's messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/sampling.h"
#include "test.h"

static qtts_sampling mk(int do_sample, float temperature, int top_k, float top_p) {
    qtts_sampling s = {do_sample, temperature, top_k, top_p, 1.0f};
    return s;
}

/* 1 where logits[i] survived the warpers (not -inf), as a bit mask */
static unsigned kept_mask(const float *l, int n) {
    unsigned m = 0;
    for (int i = 0; i < n; i++)
        if (l[i] != -INFINITY) m |= 1u << i;
    return m;
}

static void test_repetition_penalty(void) {
    float l[6] = {2.0f, -2.0f, 0.0f, 4.0f, 1.0f, -1.0f};
    const int32_t hist[7] = {0, 1, 0, 2, 0, -1, 99}; /* 0 three times; -1 and 99 out of range */
    logits_repetition_penalty(l, 6, hist, 7, 2.0f);
    CHECK("rep_penalty_positive_divided", l[0] == 1.0f, "logit 2 with penalty 2 -> %g, want 1 (once, not 0.25)", l[0]);
    CHECK("rep_penalty_negative_multiplied", l[1] == -4.0f, "logit -2 -> %g, want -4", l[1]);
    CHECK("rep_penalty_zero_unchanged", l[2] == 0.0f, "logit 0 -> %g", l[2]);
    CHECK("rep_penalty_others_untouched", l[3] == 4.0f && l[4] == 1.0f && l[5] == -1.0f,
          "ids not in the history changed: %g %g %g", l[3], l[4], l[5]);
    float l2[3] = {3.0f, -3.0f, 1.5f};
    const int32_t h2[2] = {0, 1};
    logits_repetition_penalty(l2, 3, h2, 2, 1.0f);
    CHECK("rep_penalty_one_is_identity", l2[0] == 3.0f && l2[1] == -3.0f, "penalty 1 changed logits");
    logits_repetition_penalty(l2, 3, h2, 0, 2.0f);
    CHECK("rep_penalty_empty_history", l2[0] == 3.0f && l2[1] == -3.0f, "empty history changed logits");
    logits_repetition_penalty(l2, 3, h2, 2, 1.05f);
    CHECK("rep_penalty_1_05", l2[0] == 3.0f / 1.05f && l2[1] == -3.0f * 1.05f && l2[2] == 1.5f, "%g %g %g", l2[0],
          l2[1], l2[2]);
}

static void test_greedy(void) {
    sampler r;
    qtts_error e;
    if (sampler_init(&r, 64, 1, &e)) {
        test_report("greedy", 0, "sampler_init: %s", e.msg);
        return;
    }
    const qtts_sampling g = mk(0, 1.0f, 0, 1.0f);
    float a[5] = {1.0f, 5.0f, 5.0f, 3.0f, 5.0f};
    CHECK("greedy_tie_lowest_index", sample_token(&r, a, 5, &g) == 1, "argmax of {1,5,5,3,5} is not 1");
    float b[4] = {-INFINITY, -INFINITY, -3.0f, -INFINITY};
    CHECK("greedy_with_neg_inf", sample_token(&r, b, 4, &g) == 2, "argmax ignores -inf wrongly");
    float c[3] = {-1.0f, -0.5f, -2.0f};
    CHECK("greedy_all_negative", sample_token(&r, c, 3, &g) == 1, "argmax of negatives");
    float d[4] = {0.0f, 0.0f, 0.0f, 0.1f};
    CHECK("greedy_last", sample_token(&r, d, 4, &g) == 3, "argmax at the last index");
    /* greedy ignores temperature / top-k / top-p and leaves the logits alone */
    qtts_sampling g2 = mk(0, 0.5f, 1, 0.1f);
    float f[3] = {0.2f, 0.9f, 0.1f};
    CHECK("greedy_ignores_warpers", sample_token(&r, f, 3, &g2) == 1 && f[0] == 0.2f && f[2] == 0.1f,
          "greedy modified the logits or ignored the max");
    /* a sampled distribution with one finite entry always returns it */
    const qtts_sampling s = mk(1, 1.0f, 0, 1.0f);
    int ok = 1;
    for (int i = 0; i < 200 && ok; i++) {
        float one[5] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, -INFINITY};
        ok = sample_token(&r, one, 5, &s) == 3;
    }
    CHECK("sample_single_finite_entry", ok, "drew a -inf token");
    sampler_free(&r);
    sampler_free(&r); /* twice is fine */
}

static void test_warpers(void) {
    sampler r;
    qtts_error e;
    if (sampler_init(&r, 64, 7, &e)) {
        test_report("warpers", 0, "sampler_init: %s", e.msg);
        return;
    }
    /* temperature: logits divided in place */
    float t[4] = {1.0f, -2.0f, 3.5f, 0.25f}, t0[4];
    memcpy(t0, t, sizeof t);
    qtts_sampling sp = mk(1, 0.7f, 0, 1.0f);
    sample_token(&r, t, 4, &sp);
    int ok = 1;
    for (int i = 0; i < 4; i++) ok &= t[i] == t0[i] / 0.7f;
    CHECK("temperature_scaling", ok, "logits after T=0.7: %g %g %g %g", t[0], t[1], t[2], t[3]);

    /* top-k keeps exactly the k largest */
    float k1[6] = {0.5f, 3.0f, -1.0f, 2.0f, 1.0f, 2.5f};
    sp = mk(1, 1.0f, 3, 1.0f);
    sample_token(&r, k1, 6, &sp);
    CHECK("top_k_keeps_k_largest", kept_mask(k1, 6) == ((1u << 1) | (1u << 3) | (1u << 5)), "kept mask 0x%x",
          kept_mask(k1, 6));
    CHECK("top_k_kept_values_unchanged", k1[1] == 3.0f && k1[3] == 2.0f && k1[5] == 2.5f, "kept logits changed");
    /* ties at the threshold are all kept (HF: remove scores < k-th largest) */
    float k2[6] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
    sp = mk(1, 1.0f, 2, 1.0f);
    sample_token(&r, k2, 6, &sp);
    CHECK("top_k_ties_kept", kept_mask(k2, 6) == ((1u << 1) | (1u << 2) | (1u << 4)), "kept mask 0x%x",
          kept_mask(k2, 6));
    float k3[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    sp = mk(1, 1.0f, 1, 1.0f);
    sample_token(&r, k3, 4, &sp);
    CHECK("top_k_one", kept_mask(k3, 4) == (1u << 3), "kept mask 0x%x", kept_mask(k3, 4));
    float k4[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    sp = mk(1, 1.0f, 4, 1.0f);
    sample_token(&r, k4, 4, &sp);
    CHECK("top_k_equal_n_is_off", kept_mask(k4, 4) == 0xf, "kept mask 0x%x", kept_mask(k4, 4));

    /* top-p with probabilities {0.5, 0.25, 0.125, 0.0625, 0.0625}
     * ascending cumulative: 0.0625, 0.125, 0.25, 0.5, 1 */
    const float lp[5] = {logf(0.0625f), logf(0.5f), logf(0.125f), logf(0.25f), logf(0.0625f)};
    static const struct { float p; unsigned mask; } pc[] = {
        {0.8f, (1u << 1) | (1u << 3) | (1u << 2)}, /* drop cum <= 0.2: the two 0.0625 */
        {0.7f, (1u << 1) | (1u << 3)},             /* drop cum <= 0.3: also 0.125 */
        {0.3f, (1u << 1)},                         /* drop cum <= 0.7: all but the top */
        {1e-6f, (1u << 1)},                        /* the top one always stays */
        {0.95f, 0x1f},                             /* drop cum <= 0.05: nothing */
        {0.87f, (1u << 1) | (1u << 3) | (1u << 2)}, /* drop cum <= 0.13: 0.125 is just inside */
        {0.74f, (1u << 1) | (1u << 3)},             /* drop cum <= 0.26: 0.25 is just inside */
        {0.76f, (1u << 1) | (1u << 3) | (1u << 2)}, /* drop cum <= 0.24: 0.25 is just outside */
    };
    for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
        float l[5];
        memcpy(l, lp, sizeof l);
        sp = mk(1, 1.0f, 0, pc[i].p);
        sample_token(&r, l, 5, &sp);
        char name[64];
        snprintf(name, sizeof name, "top_p_%g", pc[i].p);
        CHECK(name, kept_mask(l, 5) == pc[i].mask, "kept mask 0x%x, want 0x%x", kept_mask(l, 5), pc[i].mask);
    }
    /* all equal: exactly one survives a tiny p */
    float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    sp = mk(1, 1.0f, 0, 0.1f);
    sample_token(&r, u, 4, &sp);
    const unsigned um = kept_mask(u, 4);
    CHECK("top_p_uniform_keeps_one", um && !(um & (um - 1)), "kept mask 0x%x", um);
    /* top-p after top-k works on the renormalised survivors: probs {0.4,0.3,0.2,0.1},
     * top_k 3 -> {4/9, 3/9, 2/9}; top_p 0.46 drops cum <= 0.54: 2/9 only
     * (without renormalising, 0.2 + 0.3 = 0.5 <= 0.54 would also drop index 1) */
    float kp[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    sp = mk(1, 1.0f, 3, 0.46f);
    sample_token(&r, kp, 4, &sp);
    CHECK("top_k_then_top_p_renormalised", kept_mask(kp, 4) == 0x3, "kept mask 0x%x, want 0x3", kept_mask(kp, 4));
    /* temperature applies before top-p: T = 0.5 squares the odds {0.5,0.25,0.125,0.0625,0.0625}
     * -> {64,16,4,1,1}/86; top_p 0.8 drops cum <= 0.2 = {1,1,4}/86 (0.07): keeps 2 */
    float tp[5];
    memcpy(tp, lp, sizeof tp);
    sp = mk(1, 0.5f, 0, 0.8f);
    sample_token(&r, tp, 5, &sp);
    CHECK("temperature_before_top_p", kept_mask(tp, 5) == ((1u << 1) | (1u << 3)), "kept mask 0x%x",
          kept_mask(tp, 5));
    sampler_free(&r);
}

/* Draw `draws` tokens and return the chi-square statistic against p. */
static double chi_square(sampler *r, const float *logits, int n, const qtts_sampling *sp, const double *p,
                         int draws, int *count) {
    memset(count, 0, sizeof(int) * n);
    float *l = malloc(sizeof(float) * n);
    for (int d = 0; d < draws; d++) {
        memcpy(l, logits, sizeof(float) * n);
        int tok = sample_token(r, l, n, sp);
        if (tok >= 0 && tok < n) count[tok]++;
    }
    free(l);
    double chi = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == 0) {
            if (count[i]) return INFINITY; /* drew an impossible token */
            continue;
        }
        const double ex = p[i] * draws;
        chi += (count[i] - ex) * (count[i] - ex) / ex;
    }
    return chi;
}

static void softmax_ref(const float *l, int n, double temperature, double *p) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (l[i] / temperature > m) m = l[i] / temperature;
    for (int i = 0; i < n; i++) s += (p[i] = exp(l[i] / temperature - m));
    for (int i = 0; i < n; i++) p[i] /= s;
}

static void test_distribution(void) {
    enum { N = 8, DRAWS = 20000 };
    const float logits[N] = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, -0.5f, 1.5f, -2.0f};
    sampler r;
    qtts_error e;
    if (sampler_init(&r, N, 12345, &e)) {
        test_report("distribution", 0, "sampler_init: %s", e.msg);
        return;
    }
    double p[N];
    int count[N];
    /* chi-square with 7 degrees of freedom: P(chi2 > 24.3) = 0.001; the seed
     * is fixed, so this is deterministic, and a wrong distribution (e.g. T
     * ignored, or an off-by-one in the draw) gives values in the hundreds */
    softmax_ref(logits, N, 0.7, p);
    qtts_sampling sp = mk(1, 0.7f, 0, 1.0f);
    double chi = chi_square(&r, logits, N, &sp, p, DRAWS, count);
    CHECK("draws_match_softmax_T0.7", chi < 24.3, "chi-square %.2f (7 dof), counts %d %d %d %d %d %d %d %d", chi,
          count[0], count[1], count[2], count[3], count[4], count[5], count[6], count[7]);
    /* a wrong reference must be rejected by the same bound (the test can fail) */
    double wrong[N];
    softmax_ref(logits, N, 1.0, wrong);
    sampler_seed(&r, 12345);
    double chi_wrong = chi_square(&r, logits, N, &sp, wrong, DRAWS, count);
    CHECK("chi_square_detects_wrong_temperature", chi_wrong > 100.0, "chi-square vs T=1 only %.2f", chi_wrong);

    /* top-k 3: only indices 2, 6, 4 may appear, in renormalised proportion */
    softmax_ref(logits, N, 1.0, p);
    double s3 = p[2] + p[6] + p[4];
    for (int i = 0; i < N; i++) p[i] = (i == 2 || i == 6 || i == 4) ? p[i] / s3 : 0.0;
    sp = mk(1, 1.0f, 3, 1.0f);
    chi = chi_square(&r, logits, N, &sp, p, DRAWS, count);
    CHECK("draws_match_top_k_3", chi < 13.8 /* 2 dof, p = 0.001 */, "chi-square %.2f, counts %d %d %d %d %d %d %d %d",
          chi, count[0], count[1], count[2], count[3], count[4], count[5], count[6], count[7]);
    /* top-p 0.6 on T=1: sorted probs 0.417 (2), 0.253 (6), ... -> {2, 6} */
    softmax_ref(logits, N, 1.0, p);
    double s2 = p[2] + p[6];
    for (int i = 0; i < N; i++) p[i] = (i == 2 || i == 6) ? p[i] / s2 : 0.0;
    sp = mk(1, 1.0f, 0, 0.6f);
    chi = chi_square(&r, logits, N, &sp, p, DRAWS, count);
    CHECK("draws_match_top_p_0.6", chi < 10.8 /* 1 dof */, "chi-square %.2f, counts %d %d %d %d %d %d %d %d", chi,
          count[0], count[1], count[2], count[3], count[4], count[5], count[6], count[7]);

    /* uniform doubles in [0, 1) */
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sampler_uniform(&r);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        sum += u;
    }
    CHECK("uniform_range_and_mean", lo >= 0.0 && hi < 1.0 && fabs(sum / 100000 - 0.5) < 0.005 && hi > 0.999 &&
                                        lo < 0.001,
          "min %g max %g mean %g", lo, hi, sum / 100000);
    sampler_free(&r);
}

static void draw_seq(uint64_t seed, int *out, int n) {
    sampler r;
    qtts_error e;
    if (sampler_init(&r, 16, seed, &e)) {
        memset(out, 0xff, sizeof(int) * n);
        return;
    }
    const float logits[16] = {0, 1, 2, 3, 0.5f, 1.5f, 2.5f, 3.5f, 0, 1, 2, 3, 0.5f, 1.5f, 2.5f, 3.5f};
    qtts_sampling sp = mk(1, 1.0f, 0, 1.0f);
    for (int i = 0; i < n; i++) {
        float l[16];
        memcpy(l, logits, sizeof l);
        out[i] = sample_token(&r, l, 16, &sp);
    }
    sampler_free(&r);
}

static void test_seeding(void) {
    int a[300], b[300], c[300];
    draw_seq(42, a, 300);
    draw_seq(42, b, 300);
    draw_seq(43, c, 300);
    CHECK("same_seed_same_sequence", memcmp(a, b, sizeof a) == 0, "two samplers seeded 42 differ");
    int diff = 0;
    for (int i = 0; i < 300; i++) diff += a[i] != c[i];
    CHECK("different_seed_different_sequence", diff > 100, "seeds 42 and 43 differ in only %d of 300 draws", diff);
    /* re-seeding restarts the sequence */
    sampler r;
    qtts_error e;
    if (sampler_init(&r, 4, 42, &e) == QTTS_OK) {
        double u1[20], u2[20];
        for (int i = 0; i < 20; i++) u1[i] = sampler_uniform(&r);
        sampler_seed(&r, 42);
        for (int i = 0; i < 20; i++) u2[i] = sampler_uniform(&r);
        CHECK("reseed_restarts", memcmp(u1, u2, sizeof u1) == 0, "sampler_seed did not restart the stream");
        sampler_seed(&r, 0);
        double z = sampler_uniform(&r);
        CHECK("seed_zero_is_random", z != 0.0 && z != sampler_uniform(&r), "seed 0 gives a degenerate stream");
        sampler_free(&r);
    } else {
        test_report("reseed_restarts", 0, "sampler_init: %s", e.msg);
    }
}

static void expect_invalid(const char *name, qtts_sampling sp, const char *field) {
    qtts_error e;
    err_clear(&e);
    qtts_status st = sampling_validate(&sp, "talker", &e);
    CHECK(name, st == QTTS_ERR_INVALID_ARG && strstr(e.msg, "talker") && strstr(e.msg, field), "status %d: \"%s\"",
          (int)st, e.msg);
}

static void test_validate(void) {
    qtts_error e;
    err_clear(&e);
    qtts_sampling ok = {1, 0.9f, 50, 1.0f, 1.05f};
    CHECK("validate_defaults_ok", sampling_validate(&ok, "talker", &e) == QTTS_OK, "%s", e.msg);
    qtts_sampling ok2 = {0, 1e-3f, 0, 1e-3f, 1.0f};
    CHECK("validate_edges_ok", sampling_validate(&ok2, "talker", &e) == QTTS_OK, "%s", e.msg);
    qtts_sampling s = ok;
    s.temperature = 0.0f;
    expect_invalid("validate_temperature_zero", s, "temperature");
    s.temperature = -1.0f;
    expect_invalid("validate_temperature_negative", s, "temperature");
    s.temperature = NAN;
    expect_invalid("validate_temperature_nan", s, "temperature");
    s.temperature = INFINITY;
    expect_invalid("validate_temperature_inf", s, "temperature");
    s = ok;
    s.top_k = -1;
    expect_invalid("validate_top_k_negative", s, "top_k");
    s = ok;
    s.top_p = 0.0f;
    expect_invalid("validate_top_p_zero", s, "top_p");
    s.top_p = 1.5f;
    expect_invalid("validate_top_p_above_one", s, "top_p");
    s.top_p = NAN;
    expect_invalid("validate_top_p_nan", s, "top_p");
    s = ok;
    s.repetition_penalty = 0.0f;
    expect_invalid("validate_penalty_zero", s, "repetition_penalty");
    s.repetition_penalty = NAN;
    expect_invalid("validate_penalty_nan", s, "repetition_penalty");
    s.repetition_penalty = INFINITY;
    expect_invalid("validate_penalty_inf", s, "repetition_penalty");
}

static int cmp_f_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* top-k on vocabularies of real size against a full sort: the kept set is
 * every logit >= the k-th largest, ties included, for many n, k and tie
 * densities (sample_token selects the k-th value without sorting). */
static void test_top_k_large(void) {
    enum { NMAX = 3072 };
    sampler r;
    qtts_error e = {0};
    if (sampler_init(&r, NMAX, 3, &e)) {
        test_report("top_k_large", 0, "sampler_init: %s", e.msg);
        return;
    }
    static float l[NMAX], ref[NMAX];
    uint64_t st = 12345;
    int ok = 1, trials = 0;
    char where[96] = "";
    for (int trial = 0; trial < 300 && ok; trial++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const int n = 2 + (int)((st >> 33) % (NMAX - 1));
        const int k = 1 + (int)((st >> 17) % (uint64_t)(n - 1));
        const int levels = trial % 3 == 0 ? 7 : 1 << 20; /* many ties, or few */
        for (int i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            l[i] = (float)((st >> 40) % (uint64_t)levels) * 0.01f - 3.0f;
        }
        memcpy(ref, l, sizeof(float) * n);
        qsort(ref, n, sizeof(float), cmp_f_desc);
        const float kth = ref[k - 1];
        float orig[NMAX];
        memcpy(orig, l, sizeof(float) * n);
        qtts_sampling sp = mk(1, 1.0f, k, 1.0f);
        sample_token(&r, l, n, &sp);
        for (int i = 0; i < n && ok; i++) {
            const int kept = l[i] != -INFINITY;
            if (kept != (orig[i] >= kth) || (kept && l[i] != orig[i])) {
                ok = 0;
                snprintf(where, sizeof where, "n %d k %d index %d", n, k, i);
            }
        }
        trials++;
    }
    CHECK("top_k_large_matches_sort", ok && trials == 300, "kept set differs from a full sort at %s", where);
    sampler_free(&r);
}

/* The warpers and the draw written out pass by pass over the whole
 * vocabulary, as HF applies them (temperature, top-k mask, top-p over an
 * ascending sort, softmax in double, inverse-CDF draw over the entries in
 * index order, -inf entries adding nothing). sample_token fuses these passes
 * and skips the -inf entries; it must give the same token, the same warped
 * logits and consume the same random numbers. */
static const float *ref_vals;
static int cmp_ref_asc(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    const float x = ref_vals[i], y = ref_vals[j];
    if (x < y) return -1;
    if (x > y) return 1;
    return i < j ? -1 : i > j;
}
static int ref_sample(sampler *r, float *l, int n, const qtts_sampling *sp, int *order) {
    if (sp->temperature != 1.0f)
        for (int i = 0; i < n; i++) l[i] /= sp->temperature;
    if (sp->top_k > 0 && sp->top_k < n) {
        for (int i = 0; i < n; i++) order[i] = i;
        ref_vals = l;
        qsort(order, n, sizeof(int), cmp_ref_asc);
        const float kth = l[order[n - sp->top_k]];
        for (int i = 0; i < n; i++)
            if (l[i] < kth) l[i] = -INFINITY;
    }
    if (sp->top_p < 1.0f) {
        for (int i = 0; i < n; i++) order[i] = i;
        ref_vals = l;
        qsort(order, n, sizeof(int), cmp_ref_asc);
        const float m = l[order[n - 1]];
        double sum = 0;
        for (int i = 0; i < n; i++) sum += l[i] == -INFINITY ? 0.0 : exp((double)l[i] - m);
        double cum = 0;
        for (int k = 0; k < n - 1; k++) {
            const int i = order[k];
            cum += l[i] == -INFINITY ? 0.0 : exp((double)l[i] - m) / sum;
            if (cum <= 1.0 - sp->top_p) l[i] = -INFINITY;
        }
    }
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (l[i] > m) m = l[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += l[i] == -INFINITY ? 0.0 : exp((double)l[i] - m);
    const double u = sampler_uniform(r) * sum;
    double cum = 0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (l[i] == -INFINITY) continue;
        last = i;
        cum += exp((double)l[i] - m);
        if (u < cum) return i;
    }
    if (last >= 0) return last;
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_matches_reference(void) {
    enum { NMAX = 3072, TRIALS = 4000 };
    sampler a, b;
    qtts_error e = {0};
    if (sampler_init(&a, NMAX, 77, &e) || sampler_init(&b, NMAX, 77, &e)) {
        test_report("sample_matches_reference", 0, "sampler_init: %s", e.msg);
        return;
    }
    static float la[NMAX], lb[NMAX];
    static int order[NMAX];
    const float temps[] = {1.0f, 0.9f, 1.3f, 0.05f};
    const float tops[] = {1.0f, 0.95f, 0.8f, 0.3f, 0.001f};
    uint64_t st = 99;
    int bad = 0, n_sampled_inf = 0;
    char where[160] = "";
    for (int t = 0; t < TRIALS && !bad; t++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const int n = t % 5 == 0 ? 2048 : 1 + (int)((st >> 33) % NMAX);
        const int k = (int)((st >> 13) % 4) == 0 ? 0 : (int)((st >> 20) % (uint64_t)(n + 2)); /* 0, in range, n, n + 1 */
        const qtts_sampling sp = mk(1, temps[(st >> 45) % 4], k, tops[(st >> 50) % 5]);
        const int levels = t % 3 == 0 ? 5 : 1 << 20; /* many ties, or few */
        for (int i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            la[i] = (st >> 60) == 0 ? -INFINITY : (float)((st >> 36) % (uint64_t)levels) * (8.0f / levels) - 4.0f;
        }
        if (t % 97 == 0)
            for (int i = 0; i < n; i++) la[i] = -INFINITY; /* nothing left to draw */
        memcpy(lb, la, sizeof(float) * n);
        const int ta = sample_token(&a, la, n, &sp), tb = ref_sample(&b, lb, n, &sp, order);
        n_sampled_inf += la[ta] == -INFINITY;
        const int same_logits = !memcmp(la, lb, sizeof(float) * n);
        if (ta != tb || !same_logits || memcmp(a.s, b.s, sizeof a.s)) {
            bad = 1;
            snprintf(where, sizeof where, "trial %d n %d top_k %d top_p %g temperature %g: token %d vs %d%s", t, n, k,
                     sp.top_p, sp.temperature, ta, tb, same_logits ? "" : ", warped logits differ");
        }
    }
    CHECK("sample_matches_reference", !bad, "%s", where);
    CHECK("sample_reference_cases_cover_empty", n_sampled_inf > 0, "no trial had every logit -inf");
    sampler_free(&a);
    sampler_free(&b);
}

int main(void) {
    test_repetition_penalty();
    test_greedy();
    test_warpers();
    test_top_k_large();
    test_matches_reference();
    test_distribution();
    test_seeding();
    test_validate();
    return test_finish();
}
