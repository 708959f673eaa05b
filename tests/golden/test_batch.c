/* Continuous batching: requests stepped together (joining late, leaving at
 * different times, one removed mid-way) produce exactly the codes and audio
 * they produce alone, with sampling on and different seeds per request; with
 * the weights as stored and quantised to int8 and int4 (whose kernels take
 * the streams of a step as several rows of X). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qtts.h"
#include "test.h"

#define N_REQ 5

typedef struct req {
    const char *text, *speaker;
    uint64_t seed;
    int max_new;
    qtts_context *ctx;
    int32_t codes[64 * 16];
    int n;
    float *pcm;
    size_t n_pcm, cap_pcm;
} req;

static int on_frame(const int32_t *codes, int idx, void *u) {
    req *r = u;
    if (r->n < 64) memcpy(r->codes + r->n * 16, codes, sizeof(int32_t) * 16);
    r->n++;
    /* audio as it comes, on the stream's own codec decoder */
    if (r->n_pcm + 1920 > r->cap_pcm) {
        r->cap_pcm = (r->n_pcm + 1920) * 2;
        r->pcm = realloc(r->pcm, sizeof(float) * r->cap_pcm);
    }
    if (qtts_context_audio_decode(r->ctx, codes, 1, r->pcm + r->n_pcm)) return 1;
    r->n_pcm += 1920;
    return 0;
}

static qtts_gen_params params(const qtts_model *m, const req *r) {
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.text = r->text;
    gp.speaker = r->speaker;
    gp.language = "english";
    gp.talker.do_sample = gp.predictor.do_sample = 1;
    gp.talker.temperature = 0.9f;
    gp.talker.top_k = 50;
    gp.predictor.temperature = 0.9f;
    gp.predictor.top_k = 50;
    gp.seed = r->seed;
    gp.max_new_tokens = r->max_new;
    return gp;
}

/* pfx: the test names' prefix ("batch" for the stored weights) */
static void run(qtts_weight_type wt, const char *pfx) {
    char err[1024], name[96];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2; /* the model's pool differs from the decoder's own (1 thread) */
    mp.weights = wt;
    if (qtts_model_load(&m, test_path("golden/data/e2e_string"), &mp, err, sizeof err)) {
        snprintf(name, sizeof name, "%s/load", pfx);
        test_report(name, 0, "%s", err);
        return;
    }
    req rs[N_REQ] = {
        {"Hello there, how are you today?", "vivian", 11, 20, NULL, {0}, 0, NULL, 0, 0},
        {"It's 3:45 pm. Are you ready?", "ryan", 22, 12, NULL, {0}, 0, NULL, 0, 0},
        {"Guten Morgen, wie geht es dir?", "serena", 33, 25, NULL, {0}, 0, NULL, 0, 0},
        {"A late joiner says hi.", "aiden", 44, 9, NULL, {0}, 0, NULL, 0, 0},
        {"I will be removed halfway.", "dylan", 55, 30, NULL, {0}, 0, NULL, 0, 0},
    };
    /* alone */
    int32_t *alone[N_REQ];
    int n_alone[N_REQ];
    float *pcm_alone[N_REQ];
    size_t npa[N_REQ];
    qtts_context *solo = NULL;
    qtts_context_new(m, NULL, &solo, NULL, 0);
    for (int i = 0; i < N_REQ; i++) {
        qtts_gen_params gp = params(m, &rs[i]);
        qtts_status s = qtts_generate_codes(solo, &gp, NULL, NULL, &alone[i], &n_alone[i]);
        qtts_audio_params ap = qtts_audio_default_params();
        ap.split_text = 0;
        s = s ? s : qtts_synthesize(solo, &gp, &ap, NULL, NULL, &pcm_alone[i], &npa[i]);
        snprintf(name, sizeof name, "%s/alone", pfx);
        if (s) test_report(name, 0, "request %d: %s", i, qtts_context_last_error(solo));
    }
    /* together */
    qtts_batch *b = NULL;
    qtts_batch_new(m, 4, &b);
    qtts_gen_params gps[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        qtts_context_params cp = qtts_context_default_params();
        cp.decode_on_model_threads = i % 2; /* same samples on the model's threads */
        qtts_context_new(m, &cp, &rs[i].ctx, NULL, 0);
        gps[i] = params(m, &rs[i]);
    }
    int order[] = {0, 1, 2, 4};
    for (int j = 0; j < 4; j++) {
        req *r = &rs[order[j]];
        qtts_context_audio_begin(r->ctx, &gps[order[j]]);
        qtts_status s = qtts_batch_add(b, r->ctx, &gps[order[j]], on_frame, r);
        snprintf(name, sizeof name, "%s/add", pfx);
        if (s) test_report(name, 0, "request %d: %s", order[j], qtts_context_last_error(r->ctx));
    }
    qtts_status full = qtts_batch_add(b, rs[3].ctx, &gps[3], on_frame, &rs[3]);
    snprintf(name, sizeof name, "%s/full_is_limit", pfx);
    test_report(name, full == QTTS_ERR_LIMIT, "status %d", full);
    int steps = 0, joined = 0, removed = 0, max_size = 0;
    while (qtts_batch_size(b) > 0 || !joined) {
        if (qtts_batch_size(b) > max_size) max_size = qtts_batch_size(b);
        qtts_batch_step(b);
        steps++;
        if (!joined && qtts_batch_size(b) < 4) { /* the late joiner takes the free slot */
            qtts_context_audio_begin(rs[3].ctx, &gps[3]);
            joined = qtts_batch_add(b, rs[3].ctx, &gps[3], on_frame, &rs[3]) == QTTS_OK;
        }
        if (!removed && rs[4].n >= 6) {
            qtts_batch_remove(b, rs[4].ctx);
            removed = 1;
        }
        if (steps > 1000) break;
    }
    snprintf(name, sizeof name, "%s/streams_overlapped", pfx);
    test_report(name, max_size == 4 && joined && removed, "max size %d, joined %d, removed %d",
                max_size, joined, removed);
    for (int i = 0; i < N_REQ; i++) {
        int nf = -1;
        qtts_status s = qtts_context_finish(rs[i].ctx, &nf);
        if (i == 4) {
            snprintf(name, sizeof name, "%s/removed_is_cancelled", pfx);
            test_report(name, s == QTTS_ERR_CANCELLED && nf == 6 &&
                                                          !memcmp(rs[i].codes, alone[i], sizeof(int32_t) * 16 * 6),
                        "status %d, %d frames", s, nf);
            continue;
        }
        snprintf(name, sizeof name, "%s/request%d_codes_identical", pfx, i);
        test_report(name, s == QTTS_OK && nf == n_alone[i] && rs[i].n == nf &&
                              !memcmp(rs[i].codes, alone[i], sizeof(int32_t) * 16 * (nf < 64 ? nf : 64)),
                    "status %d, %d frames batched vs %d alone", s, nf, n_alone[i]);
        snprintf(name, sizeof name, "%s/request%d_audio_identical", pfx, i);
        test_report(name, rs[i].n_pcm == npa[i] && !memcmp(rs[i].pcm, pcm_alone[i], sizeof(float) * npa[i]),
                    "%zu samples batched vs %zu alone", rs[i].n_pcm, npa[i]);
    }
    for (int i = 0; i < N_REQ; i++) {
        free(alone[i]);
        free(pcm_alone[i]);
        free(rs[i].pcm);
        qtts_context_free(rs[i].ctx);
    }
    qtts_batch_free(b);
    qtts_context_free(solo);
    qtts_model_free(m);
}

int main(void) {
    run(QTTS_WEIGHTS_NATIVE, "batch");
    run(QTTS_WEIGHTS_Q8, "batch/q8");
    run(QTTS_WEIGHTS_Q4, "batch/q4");
    return test_finish();
}
