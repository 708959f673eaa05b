/* Lower-precision weights (int8, int4 quantised at load) against the
 * official fp32 goldens: with teacher forcing on the golden codes, the talker
 * and code-predictor logits stay within a documented relative error of the
 * golden logits (max|d| / max|ref| over every step), and the share of greedy
 * choices that agree with the golden codes is reported per format. The f32
 * path's own exactness is gated by test_lm_golden. EOS is banned while teacher
 * forcing, so its column is left out. Bounds (measured on these tiny random
 * checkpoints, whose logits carry a 20-80x gain: q8 worst 6.7e-2 and 94-95%
 * agreement, q4 worst 5.6e-1 and 51-57%): q8 logits <= 0.1 and agreement >=
 * 85%, q4 logits <= 1.0 and agreement >= 35% (chance is 1/2048). Real-size
 * quality is measured by qtts-bench's quality arm (docs/BENCH.md). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "npy.h"
#include "test.h"

typedef struct cap {
    float *talker, *cp;
    int n_t, n_c, V, Vc;
} cap;

static void on_scores(int step, const float *l, int n, void *u) {
    cap *c = u;
    c->talker = realloc(c->talker, sizeof(float) * (step + 1) * n);
    memcpy(c->talker + (size_t)step * n, l, sizeof(float) * n);
    c->n_t = step + 1;
}
static void on_cp(int g, const float *l, int n, void *u) {
    cap *c = u;
    c->cp = realloc(c->cp, sizeof(float) * (c->n_c + 1) * n);
    memcpy(c->cp + (size_t)c->n_c * n, l, sizeof(float) * n);
    c->n_c++;
}

static void run(const char *cs, qtts_weight_type wt, const char *wname, double tol, double min_agree) {
    char err[1024], name[256];
    qtts_model_params mp = qtts_model_default_params();
    mp.weights = wt;
    mp.load_codec = 0;
    qtts_model *m = NULL;
    if (qtts_model_load(&m, test_path("golden/data/%s", cs), &mp, err, sizeof err)) {
        test_report("quant/load", 0, "%s", err);
        return;
    }
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    json_error_t je;
    json_t *prompts = json_load_file(test_path("golden/data/%s/inputs/prompts.json", cs), 0, &je);
    const char *rn;
    json_t *pj;
    double worst_t = 0, worst_c = 0;
    long agree = 0, total = 0;
    json_object_foreach(prompts, rn, pj) {
        const char *kind = json_string_value(json_object_get(pj, "kind"));
        if (!kind || (strcmp(kind, "tts") && strcmp(kind, "e2e"))) continue;
        qtts_gen_params gp = qtts_gen_default_params(m);
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        gp.debug = &dbg;
        gp.talker.do_sample = gp.predictor.do_sample = 0;
        gp.talker.repetition_penalty = (float)json_number_value(json_object_get(pj, "repetition_penalty"));
        json_t *lang = json_object_get(pj, "language"), *spk = json_object_get(pj, "speaker");
        gp.language = json_is_string(lang) ? json_string_value(lang) : "auto";
        gp.speaker = json_is_string(spk) ? json_string_value(spk) : NULL;
        gp.text_mode = json_is_true(json_object_get(pj, "non_streaming_mode")) ? QTTS_TEXT_MODE_NON_STREAMING
                                                                                : QTTS_TEXT_MODE_STREAMING;
        int32_t *t = NULL, *ins = NULL;
        json_t *in = json_object_get(pj, "input_ids"), *ij = json_object_get(pj, "instruct_ids");
        t = test_ids_from_json(in, 3, 5, &gp.n_text_ids);
        gp.text_ids = t;
        dbg.newline_id = (int)json_integer_value(json_array_get(in, 2));
        if (ij) {
            ins = test_ids_from_json(ij, 3, 2, &gp.n_instruct_ids);
            gp.instruct_ids = ins;
            dbg.user_id = (int)json_integer_value(json_array_get(ij, 1));
        }
        npy_array codes = {0}, ts = {0}, cps = {0};
        npy_load(test_path("golden/data/%s/golden/%s/codes.npy", cs, rn), &codes, err, sizeof err);
        npy_load(test_path("golden/data/%s/golden/%s/talker_scores.npy", cs, rn), &ts, err, sizeof err);
        npy_load(test_path("golden/data/%s/golden/%s/cp_scores.npy", cs, rn), &cps, err, sizeof err);
        int32_t *teacher = malloc(sizeof(int32_t) * (codes.n + 1));
        for (long i = 0; i < codes.n; i++) teacher[i] = (int32_t)codes.i64[i];
        dbg.teacher_codes = teacher;
        dbg.n_teacher_frames = (int)codes.shape[0];
        cap c = {0};
        gen_trace tr = {0};
        tr.user = &c;
        tr.on_talker_logits = on_scores;
        tr.cp.on_logits = on_cp;
        tr.cp.user = &c;
        context_set_trace(ctx, &tr);
        qtts_status s = qtts_generate_codes(ctx, &gp, NULL, NULL, NULL, NULL);
        qtts_stats st;
        qtts_context_get_stats(ctx, &st);
        /* teacher forcing stops after the teacher frames: compare the steps both have */
        const long nt = (long)(c.n_t < ts.shape[0] ? c.n_t : ts.shape[0]) * ts.shape[1];
        for (long r = 0; r < nt / ts.shape[1]; r++) c.talker[r * ts.shape[1] + 2150] = ts.f32[r * ts.shape[1] + 2150];
        const long nc = cps.n < (long)c.n_c * 2048 ? cps.n : (long)c.n_c * 2048;
        double ma, rt = s ? INFINITY : rel_err(c.talker, ts.f32, nt, &ma), rc = s ? INFINITY : rel_err(c.cp, cps.f32, nc, &ma);
        if (rt > worst_t) worst_t = rt;
        if (rc > worst_c) worst_c = rc;
        for (int g = 0; g < 16; g++) agree += st.teacher_agree[g];
        total += 16L * st.teacher_frames;
        snprintf(name, sizeof name, "quant/%s/%s/%s/logits", wname, cs, rn);
        test_report(name, s == QTTS_OK && rt <= tol && rc <= tol, "status %d, talker rel %.3g, predictor rel %.3g > %.2g", s,
                    rt, rc, tol);
        context_set_trace(ctx, NULL);
        free(c.talker);
        free(c.cp);
        free(teacher);
        free(t);
        free(ins);
        npy_free(&codes);
        npy_free(&ts);
        npy_free(&cps);
    }
    snprintf(name, sizeof name, "quant/%s/%s/greedy_agreement", wname, cs);
    test_report(name, total > 0 && agree >= min_agree * total, "%ld of %ld choices agree (< %.0f%%)", agree, total,
                100 * min_agree);
    printf("# quant %-6s %-13s worst logits rel: talker %.3e predictor %.3e; greedy agreement with the fp32 goldens %.1f%% (%ld/%ld)\n",
           wname, cs, worst_t, worst_c, total ? 100.0 * agree / total : 0.0, agree, total);
    json_decref(prompts);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* Greedy codes of 12 forced frames with the per-frame matrices in the huge-page
 * arena (the default) and read in place from the file mapping (huge_pages 0):
 * the same codes, as stored and quantised (the arena moves bytes, it never
 * changes them). */
static int32_t *codes_with(const char *cs, qtts_weight_type wt, int huge, int *n) {
    char err[1024];
    qtts_model_params mp = qtts_model_default_params();
    mp.weights = wt;
    mp.load_codec = 0;
    mp.huge_pages = huge;
    qtts_model *m = NULL;
    qtts_context *ctx = NULL;
    int32_t *codes = NULL;
    *n = 0;
    if (qtts_model_load(&m, test_path("golden/data/%s", cs), &mp, err, sizeof err) == QTTS_OK &&
        qtts_context_new(m, NULL, &ctx, NULL, 0) == QTTS_OK) {
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.talker.do_sample = gp.predictor.do_sample = 0;
        static const int32_t ids[] = {97, 11, 879, 13}; /* the tiny checkpoints have 1024 text ids */
        gp.text_ids = ids;
        gp.n_text_ids = 4;
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        dbg.force_frames = 12;
        gp.debug = &dbg;
        if (qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, n) != QTTS_OK) {
            printf("# %s\n", qtts_context_last_error(ctx));
            *n = 0;
        }
    }
    qtts_context_free(ctx);
    qtts_model_free(m);
    return codes;
}

static void test_huge_pages_same_codes(void) {
    static const qtts_weight_type wts[] = {QTTS_WEIGHTS_NATIVE, QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_Q4};
    static const char *names[] = {"native", "q8", "q4"};
    for (int i = 0; i < 3; i++) {
        int n0 = 0, n1 = 0;
        int32_t *c0 = codes_with("custom_voice", wts[i], 0, &n0), *c1 = codes_with("custom_voice", wts[i], 1, &n1);
        char name[96];
        snprintf(name, sizeof name, "quant/huge_pages_same_codes/%s", names[i]);
        test_report(name, n0 == 12 && n1 == 12 && memcmp(c0, c1, sizeof(int32_t) * 16 * 12) == 0,
                    "frames %d and %d, or the codes differ", n0, n1);
        free(c0);
        free(c1);
    }
}

int main(void) {
    test_huge_pages_same_codes();
    const char *cases[] = {"custom_voice", "voice_design", "e2e_string"};
    for (int i = 0; i < 3; i++) {
        run(cases[i], QTTS_WEIGHTS_Q8, "q8", 0.1, 0.85);
        run(cases[i], QTTS_WEIGHTS_Q4, "q4", 1.0, 0.35);
    }
    return test_finish();
}
