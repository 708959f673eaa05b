/* Golden test of the language-model side: for every run of every case in
 * tests/golden/data, the engine's prompt embeddings, prefill layers, per-step
 * hidden states and logits (talker and code predictor) are compared with the
 * official implementation's arrays (max|d|/max|ref| <= 1e-5), and the greedy
 * codes must match exactly. e2e runs go from the UTF-8 strings.
 * The same tolerance holds on the Vulkan backend (QTTS_BACKEND=vulkan), where
 * the sums run in another order on the device (docs/TESTING.md lists the
 * errors measured per stage). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "npy.h"
#include "test.h"

#define TOL 1e-5

typedef struct cap {
    int H, V, Vc, G, L;
    float *prompt; int P;
    float *queue; int nq;
    float *pad;
    float *layers;        /* [L][P][H] residual after each layer */
    float *step_hidden;   /* [steps][H] */
    float *scores;        /* [steps][V] */
    int steps;
    float *cp_in;         /* [frames][2][H] */
    int cp_frames;
    float *cp_scores;     /* [frames][G-1][Vc] */
    int cp_n;             /* logits calls */
} cap;

static void on_prompt(const prompt_out *p, int h, void *u) {
    cap *c = u;
    c->P = p->n_pos;
    c->prompt = malloc(sizeof(float) * p->n_pos * h);
    memcpy(c->prompt, p->embeds, sizeof(float) * p->n_pos * h);
    c->nq = p->n_queue;
    c->queue = malloc(sizeof(float) * p->n_queue * h);
    memcpy(c->queue, p->queue, sizeof(float) * p->n_queue * h);
    c->pad = malloc(sizeof(float) * h);
    memcpy(c->pad, p->tts_pad, sizeof(float) * h);
    c->layers = malloc(sizeof(float) * c->L * p->n_pos * h);
}
static void on_layer(int l, const float *x, int n, void *u) {
    cap *c = u;
    memcpy(c->layers + (size_t)l * n * c->H, x, sizeof(float) * n * c->H);
}
static void on_hidden(int step, const float *y, int h, void *u) {
    cap *c = u;
    c->step_hidden = realloc(c->step_hidden, sizeof(float) * (step + 1) * h);
    memcpy(c->step_hidden + (size_t)step * h, y, sizeof(float) * h);
}
static void on_scores(int step, const float *l, int n, void *u) {
    cap *c = u;
    c->scores = realloc(c->scores, sizeof(float) * (step + 1) * n);
    memcpy(c->scores + (size_t)step * n, l, sizeof(float) * n);
    c->steps = step + 1;
}
static void on_cp_in(const float *in2, int h, void *u) {
    cap *c = u;
    c->cp_in = realloc(c->cp_in, sizeof(float) * (c->cp_frames + 1) * 2 * h);
    memcpy(c->cp_in + (size_t)c->cp_frames * 2 * h, in2, sizeof(float) * 2 * h);
    c->cp_frames++;
}
static void on_cp_logits(int g, const float *l, int n, void *u) {
    cap *c = u;
    c->cp_scores = realloc(c->cp_scores, sizeof(float) * (c->cp_n + 1) * n);
    memcpy(c->cp_scores + (size_t)c->cp_n * n, l, sizeof(float) * n);
    c->cp_n++;
}

static void cap_free(cap *c) {
    free(c->prompt); free(c->queue); free(c->pad); free(c->layers); free(c->step_hidden);
    free(c->scores); free(c->cp_in); free(c->cp_scores);
}

static int load(const char *cs, const char *run, const char *name, npy_array *a) {
    char err[512];
    if (npy_load(test_path("golden/data/%s/golden/%s/%s.npy", cs, run, name), a, err, sizeof err) != 0) {
        test_report(name, 0, "%s", err);
        return 0;
    }
    return 1;
}

/* compare n floats, report "case/run/what" with the errors */
static void cmp(const char *cs, const char *run, const char *what, const float *got, const float *ref, long n,
                double tol) {
    char name[256];
    snprintf(name, sizeof name, "%s/%s/%s", cs, run, what);
    double mabs;
    double r = got ? rel_err(got, ref, n, &mabs) : INFINITY;
    if (!got) mabs = INFINITY;
    test_report(name, r <= tol, "max|d| %.3g rel %.3g > %.1g", mabs, r, tol);
    printf("# %-58s max|d| %.3e  rel %.3e\n", name, mabs, r);
}

static void run_case(const char *cs) {
    char err[1024];
    qtts_model_params mp = qtts_model_default_params();
    mp.load_codec = 0;
    qtts_model *m = NULL;
    qtts_status s = qtts_model_load(&m, test_path("golden/data/%s", cs), &mp, err, sizeof err);
    char name[256];
    snprintf(name, sizeof name, "%s/load", cs);
    test_report(name, s == QTTS_OK, "%s", err);
    if (s) return;
    json_error_t je;
    json_t *prompts = json_load_file(test_path("golden/data/%s/inputs/prompts.json", cs), 0, &je);
    const char *run;
    json_t *pj;
    json_object_foreach(prompts, run, pj) {
        const char *kind = json_string_value(json_object_get(pj, "kind"));
        if (!kind || strcmp(kind, "codec_long") == 0) continue;
        qtts_gen_params gp = qtts_gen_default_params(m);
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        gp.debug = &dbg;
        gp.talker.do_sample = 0;
        gp.predictor.do_sample = 0;
        gp.talker.repetition_penalty = (float)json_number_value(json_object_get(pj, "repetition_penalty"));
        gp.max_new_tokens = (int)json_integer_value(json_object_get(pj, "max_new_tokens"));
        json_t *lang = json_object_get(pj, "language"), *spk = json_object_get(pj, "speaker");
        gp.language = json_is_string(lang) ? json_string_value(lang) : "auto";
        gp.speaker = json_is_string(spk) ? json_string_value(spk) : NULL;
        gp.text_mode = json_is_true(json_object_get(pj, "non_streaming_mode")) ? QTTS_TEXT_MODE_NON_STREAMING
                                                                                : QTTS_TEXT_MODE_STREAMING;
        json_t *input_ids = json_object_get(pj, "input_ids");
        int32_t *text_ids = NULL, *instr_ids = NULL, *ref_ids = NULL;
        json_t *strs = json_object_get(pj, "strings");
        if (strcmp(kind, "e2e") == 0) {
            gp.text = json_string_value(json_object_get(strs, "text"));
            json_t *ins = json_object_get(strs, "instruct");
            gp.instruct = json_is_string(ins) ? json_string_value(ins) : NULL;
        } else {
            text_ids = test_ids_from_json(input_ids, 3, 5, &gp.n_text_ids);
            gp.text_ids = text_ids;
            dbg.newline_id = (int)json_integer_value(json_array_get(input_ids, 2));
            json_t *ins = json_object_get(pj, "instruct_ids");
            if (ins) {
                instr_ids = test_ids_from_json(ins, 3, 2, &gp.n_instruct_ids);
                gp.instruct_ids = instr_ids;
                dbg.user_id = (int)json_integer_value(json_array_get(ins, 1));
            }
        }
        npy_array xv = {0}, rc = {0};
        int32_t *ref_codes = NULL;
        if (strcmp(kind, "xvec") == 0 || strcmp(kind, "icl") == 0) {
            if (!load(cs, run, "xvector", &xv)) continue;
            gp.xvector = xv.f32;
        }
        if (strcmp(kind, "icl") == 0) {
            if (!load(cs, run, "ref_codes", &rc)) continue;
            ref_codes = malloc(sizeof(int32_t) * rc.n);
            for (long i = 0; i < rc.n; i++) ref_codes[i] = (int32_t)rc.i64[i];
            gp.ref_codes = ref_codes;
            gp.n_ref_frames = (int)rc.shape[0];
            ref_ids = test_ids_from_json(json_object_get(pj, "ref_ids"), 3, 2, &gp.n_ref_text_ids);
            gp.ref_text_ids = ref_ids;
        }
        qtts_context *ctx = NULL;
        qtts_context_new(m, NULL, &ctx, NULL, 0);
        const qtts_config *cfg = &m->cfg;
        cap c = {0};
        c.H = cfg->talker.hidden;
        c.V = cfg->talker.vocab;
        c.Vc = cfg->cp.vocab;
        c.G = cfg->n_code_groups;
        c.L = cfg->talker.n_layers;
        gen_trace tr = {0};
        tr.user = &c;
        tr.on_prompt = on_prompt;
        tr.on_prefill_layer = on_layer;
        tr.on_step_hidden = on_hidden;
        tr.on_talker_logits = on_scores;
        tr.cp.on_inputs = on_cp_in;
        tr.cp.on_logits = on_cp_logits;
        tr.cp.user = &c;
        context_set_trace(ctx, &tr);
        int32_t *codes = NULL;
        int nf = 0;
        s = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &nf);
        snprintf(name, sizeof name, "%s/%s/generate", cs, run);
        test_report(name, s == QTTS_OK, "%s", qtts_context_last_error(ctx));
        if (s == QTTS_OK) {
            npy_array a;
            const int H = c.H;
            if (load(cs, run, "talker_inputs_embeds", &a)) {
                if (a.shape[0] != c.P) test_report("prompt length", 0, "%s/%s: got %d positions, golden %ld", cs, run, c.P, a.shape[0]);
                else cmp(cs, run, "talker_inputs_embeds", c.prompt, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "tts_pad_embed", &a)) { cmp(cs, run, "tts_pad_embed", c.pad, a.f32, a.n, TOL); npy_free(&a); }
            if (load(cs, run, "trailing_text_hidden", &a)) {
                int ok = a.shape[0] == c.nq;
                if (!ok) test_report("trailing length", 0, "%s/%s: got %d, golden %ld", cs, run, c.nq, a.shape[0]);
                else cmp(cs, run, "trailing_text_hidden", c.queue, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "talker_prefill_hidden_all_layers", &a) && a.shape[1] == c.P) {
                /* [0] embeddings, [i] layer i-1 output, [L] final norm of the last layer */
                for (int l = 0; l + 1 < c.L; l++) {
                    char w[64];
                    snprintf(w, sizeof w, "prefill_layer%d", l);
                    cmp(cs, run, w, c.layers + (size_t)l * c.P * H, a.f32 + (size_t)(l + 1) * c.P * H, (long)c.P * H, TOL);
                }
                float *fn = malloc(sizeof(float) * c.P * H);
                tf_final_norm(&m->talker.tf, c.layers + (size_t)(c.L - 1) * c.P * H, fn, c.P);
                cmp(cs, run, "prefill_final_norm", fn, a.f32 + (size_t)c.L * c.P * H, (long)c.P * H, TOL);
                free(fn);
                npy_free(&a);
            }
            if (load(cs, run, "talker_prefill_last_layer_out", &a)) {
                cmp(cs, run, "prefill_last_layer_out", c.layers + (size_t)(c.L - 1) * c.P * H, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "talker_step_hidden_final", &a)) {
                cmp(cs, run, "talker_step_hidden_final", a.shape[0] <= c.steps ? c.step_hidden : NULL, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "talker_scores", &a)) {
                cmp(cs, run, "talker_scores", a.shape[0] == c.steps ? c.scores : NULL, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "cp_inputs_embeds", &a)) {
                cmp(cs, run, "cp_inputs_embeds", a.shape[0] == c.cp_frames ? c.cp_in : NULL, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "cp_scores", &a)) {
                cmp(cs, run, "cp_scores", a.n == (long)c.cp_n * c.Vc ? c.cp_scores : NULL, a.f32, a.n, TOL);
                npy_free(&a);
            }
            if (load(cs, run, "codes", &a)) {
                int same = a.shape[0] == nf;
                long first = -1;
                for (long i = 0; same && i < a.n; i++)
                    if (codes[i] != a.i64[i]) { same = 0; first = i; }
                snprintf(name, sizeof name, "%s/%s/codes_exact", cs, run);
                test_report(name, same, "frames %d vs golden %ld; first difference at index %ld", nf, a.shape[0], first);
                npy_free(&a);
            }
        }
        free(codes);
        cap_free(&c);
        qtts_context_free(ctx);
        free(text_ids); free(instr_ids); free(ref_ids); free(ref_codes);
        npy_free(&xv); npy_free(&rc);
    }
    json_decref(prompts);
    qtts_model_free(m);
}

int main(void) {
    printf("# backend %s\n", qtts_backend_name(qtts_model_default_params().backend));
    const char *cases[] = {"custom_voice", "voice_design", "base_clone", "e2e_string"};
    for (int i = 0; i < 4; i++) run_case(cases[i]);
    return test_finish();
}
