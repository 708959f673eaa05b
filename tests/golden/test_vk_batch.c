/* Batched frames on the Vulkan backend (lmv_batch_frame): streams stepped
 * together, joining and leaving at different frames, in changing orders and
 * groups of 1 to LMV_BATCH_MAX, get exactly the codes they get stepped alone
 * (lmv_frame), with sampling on (every warper, a seed each, different
 * parameters per stream) and teacher forcing on one; with the weights as
 * stored and quantised to int8 and int4. Each batch records its frame once
 * per batch size, whatever streams it later serves: a stream re-prefilled
 * with a longer prompt (new, larger caches) joins a size already recorded
 * and still gets its codes alone. Reports, as lavapipe figures where
 * that is the device, one frame of 4 streams batched against 4 frames one
 * after another. Prompts are seeded random rows (the step's arithmetic, not
 * the text front end, is under test). SKIP without a Vulkan device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "model/lm_vulkan.h"
#include "util/clock.h"
#include "test.h"

#define N_STREAMS 10
#define FRAMES 10
#define G_MAX 16

typedef struct stream_def {
    int P, nq, start; /* prompt rows, text queue rows, the global step it joins at */
    uint64_t seed;
    qtts_sampling talker, pred;
    int teacher;
} stream_def;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

typedef struct inputs {
    float *embeds, *queue, *pad;
    int32_t *teach;
} inputs;

static void make_inputs(inputs *in, const stream_def *d, int H, int G) {
    in->embeds = malloc(sizeof(float) * d->P * H);
    in->queue = malloc(sizeof(float) * (d->nq + 1) * H);
    in->pad = malloc(sizeof(float) * H);
    for (int i = 0; i < d->P * H; i++) in->embeds[i] = 0.05f * frand();
    for (int i = 0; i < (d->nq + 1) * H; i++) in->queue[i] = 0.05f * frand();
    for (int i = 0; i < H; i++) in->pad[i] = 0.05f * frand();
    in->teach = malloc(sizeof(int32_t) * FRAMES * G);
    for (int i = 0; i < FRAMES * G; i++) in->teach[i] = (int32_t)((i * 37 + 5) % 1000);
}

static qtts_status prefill(lmv_stream *s, const stream_def *d, const inputs *in, int G, qtts_error *e) {
    const lmv_request q = {in->embeds, d->P, in->queue, d->nq, in->pad, FRAMES, &d->talker, &d->pred, d->seed, 1,
                           d->teacher ? in->teach : NULL, d->teacher ? FRAMES / 2 : 0, 0};
    double ms;
    return lmv_prefill(s, &q, NULL, &ms, e);
}

static void run(qtts_weight_type wt, const char *pfx, int timing) {
    char err[1024], name[128];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.backend = QTTS_BACKEND_VULKAN;
    mp.weights = wt;
    if (qtts_model_load(&m, test_path("golden/data/e2e_string"), &mp, err, sizeof err)) {
        snprintf(name, sizeof name, "%s/load", pfx);
        test_report(name, 0, "%s", err);
        return;
    }
    const int H = m->cfg.talker.hidden, G = m->cfg.n_code_groups;
    qtts_error e;
    err_clear(&e);
    stream_def defs[N_STREAMS];
    inputs ins[N_STREAMS];
    for (int i = 0; i < N_STREAMS; i++) {
        stream_def *d = &defs[i];
        memset(d, 0, sizeof *d);
        d->P = 5 + 3 * i;
        d->nq = i % 4;
        d->start = i < 6 ? 0 : i - 4; /* six at once, then one joining per step */
        d->seed = 1000 + 17 * i;
        d->talker.do_sample = d->pred.do_sample = i != 3; /* one greedy */
        d->talker.temperature = 0.7f + 0.1f * i;
        d->pred.temperature = 0.9f;
        d->talker.top_k = i % 2 ? 50 : 0;
        d->talker.top_p = i % 3 ? 0.9f : 1.0f;
        d->pred.top_k = 30;
        d->pred.top_p = 1.0f;
        d->talker.repetition_penalty = i % 2 ? 1.05f : 1.0f;
        d->pred.repetition_penalty = 1.0f;
        d->teacher = i == 2;
        make_inputs(&ins[i], d, H, G);
    }
    /* alone */
    static int32_t ref[N_STREAMS][FRAMES][G_MAX];
    lmv_stream *ss[N_STREAMS];
    qtts_status st = QTTS_OK;
    for (int i = 0; i < N_STREAMS && !st; i++) st = lmv_stream_new(m->lmv, &ss[i], &e);
    for (int i = 0; i < N_STREAMS && !st; i++) {
        st = prefill(ss[i], &defs[i], &ins[i], G, &e);
        for (int f = 0; f < FRAMES && !st; f++) {
            lmv_times t;
            st = lmv_frame(ss[i], NULL, ref[i][f], NULL, &t, &e);
        }
    }
    snprintf(name, sizeof name, "%s/alone", pfx);
    test_report(name, !st, "%s", st ? e.msg : "");
    /* together: each step, the active streams (joined, not done) in a
       order rotating every third step, cut into groups of at most `cap`
       (cap cycling 3, 8, 1, 5 every third step), each group one batched
       frame; streams leave when done */
    lmv_batch *bt[N_STREAMS] = {0};
    int done[N_STREAMS] = {0}, fi[N_STREAMS] = {0}, bad = 0, groups = 0, max_b = 0;
    int sizes[N_STREAMS][LMV_BATCH_MAX + 1]; /* sizes[gi][nb]: batch gi ran nb streams */
    memset(sizes, 0, sizeof sizes);
    for (int i = 0; i < N_STREAMS && !st; i++) st = lmv_batch_new(m->lmv, &bt[i], &e);
    for (int step = 0; !st; step++) {
        lmv_stream *act[N_STREAMS];
        int idx[N_STREAMS], na = 0;
        for (int k = 0; k < N_STREAMS; k++) {
            const int i = (k + step / 3) % N_STREAMS;
            if (defs[i].start == step && !(st = prefill(ss[i], &defs[i], &ins[i], G, &e))) fi[i] = 0;
            if (defs[i].start <= step && !done[i]) {
                idx[na] = i;
                act[na++] = ss[i];
            }
        }
        if (!na) {
            int left = 0;
            for (int i = 0; i < N_STREAMS; i++) left += !done[i];
            if (!left) break;
            continue;
        }
        const int caps[4] = {3, 8, 1, 5}, cap = caps[(step / 3) % 4];
        for (int g0 = 0, gi = 0; g0 < na && !st; g0 += cap, gi++) {
            const int nb = na - g0 < cap ? na - g0 : cap;
            int32_t codes[LMV_BATCH_MAX * G_MAX];
            lmv_times t;
            st = lmv_batch_frame(bt[gi], act + g0, nb, codes, NULL, &t, &e);
            sizes[gi][nb] = 1;
            groups++;
            if (nb > max_b) max_b = nb;
            for (int j = 0; j < nb && !st; j++) {
                const int i = idx[g0 + j];
                if (memcmp(codes + j * G, ref[i][fi[i]], sizeof(int32_t) * G)) {
                    if (!bad) fprintf(stderr, "# stream %d frame %d differs (step %d, group of %d)\n", i, fi[i], step, nb);
                    bad++;
                }
                if (++fi[i] == FRAMES) done[i] = 1;
            }
        }
    }
    fprintf(stderr, "# %s: %d batched frames of 1 to %d streams\n", pfx, groups, max_b);
    snprintf(name, sizeof name, "%s/together_exact", pfx);
    test_report(name, !st && !bad, "%s%d frames differ (%d batched frames, up to %d streams)", st ? e.msg : "", bad,
                groups, max_b);
    /* one recording per size each batch ran, whatever streams it served */
    int rec_bad = 0, n_sizes = 0, n_rec = 0;
    for (int i = 0; i < N_STREAMS && bt[i]; i++) {
        int k = 0;
        for (int nb = 1; nb <= LMV_BATCH_MAX; nb++) k += sizes[i][nb];
        n_sizes += k;
        n_rec += lmv_batch_recordings(bt[i]);
        rec_bad += lmv_batch_recordings(bt[i]) != k;
    }
    snprintf(name, sizeof name, "%s/one_recording_per_size", pfx);
    test_report(name, !st && !rec_bad && n_sizes > 0, "%d recordings for %d (batch, size) pairs", n_rec, n_sizes);
    /* a stream whose caches and scratch were made again (a longer prompt) joins a recorded size */
    if (!st) {
        stream_def dl = defs[1];
        dl.P = 300;
        inputs il;
        make_inputs(&il, &dl, H, G);
        int32_t want[2][FRAMES][G_MAX], got[LMV_BATCH_MAX * G_MAX];
        st = prefill(ss[1], &dl, &il, G, &e);
        for (int f = 0; f < 4 && !st; f++) {
            lmv_times t;
            st = lmv_frame(ss[1], NULL, want[1][f], NULL, &t, &e);
        }
        if (!st) st = prefill(ss[0], &defs[0], &ins[0], G, &e);
        for (int f = 0; f < 4 && !st; f++) {
            lmv_times t;
            st = lmv_frame(ss[0], NULL, want[0][f], NULL, &t, &e);
        }
        const int before = lmv_batch_recordings(bt[0]);
        const int had2 = sizes[0][2];
        if (!st) st = prefill(ss[0], &defs[0], &ins[0], G, &e);
        if (!st) st = prefill(ss[1], &dl, &il, G, &e);
        int diff = 0;
        for (int f = 0; f < 4 && !st; f++) {
            lmv_times t;
            st = lmv_batch_frame(bt[0], ss, 2, got, NULL, &t, &e);
            for (int j = 0; j < 2 && !st; j++) diff += memcmp(got + j * G, want[j][f], sizeof(int32_t) * G) != 0;
        }
        const int made = lmv_batch_recordings(bt[0]) - before;
        snprintf(name, sizeof name, "%s/regrown_stream_joins", pfx);
        test_report(name, !st && !diff && made == (had2 ? 0 : 1), "%s%d frames differ; %d new recordings (size 2 %s)",
                    st ? e.msg : "", diff, made, had2 ? "recorded before" : "new");
        free(il.embeds);
        free(il.queue);
        free(il.pad);
        free(il.teach);
    }
    if (timing && !st) {
        /* the recording's length: dispatches and copies of one frame, alone and batched */
        int32_t cc[LMV_BATCH_MAX * G_MAX];
        lmv_times pc1 = {0}, pcb[3] = {{0}};
        const int bs[3] = {1, 4, LMV_BATCH_MAX};
        for (int i = 0; i < LMV_BATCH_MAX && !st; i++) st = prefill(ss[i], &defs[i], &ins[i], G, &e);
        if (!st) st = lmv_frame(ss[0], NULL, cc, NULL, &pc1, &e);
        for (int i = 0; i < 3 && !st; i++) st = lmv_batch_frame(bt[i + 1], ss, bs[i], cc, NULL, &pcb[i], &e);
        if (!st)
            fprintf(stderr,
                    "# %s dispatches + copies per frame: alone %d + %d; batched B = 1: %d + %d, B = 4: %d + %d, "
                    "B = %d: %d + %d\n",
                    pfx, pc1.dispatches, pc1.copies, pcb[0].dispatches, pcb[0].copies, pcb[1].dispatches,
                    pcb[1].copies, LMV_BATCH_MAX, pcb[2].dispatches, pcb[2].copies);
        /* one frame of 4 streams: batched (recorded), and one after another */
        for (int i = 0; i < 4 && !st; i++) st = prefill(ss[i], &defs[i], &ins[i], G, &e);
        int32_t codes[LMV_BATCH_MAX * G_MAX];
        double tb = 1e30, ts = 1e30;
        lmv_times pb = {0}, p1 = {0}; /* device phase times: the batch's, one stream's */
        for (int rep = 0; rep < 4 && !st; rep++) {
            double t0 = now_ms();
            st = lmv_batch_frame(bt[0], ss, 4, codes, NULL, &pb, &e);
            double t1 = now_ms();
            for (int i = 0; i < 4 && !st; i++) st = lmv_frame(ss[i], NULL, codes, NULL, &p1, &e);
            double t2 = now_ms();
            if (rep > 0) { /* the first records both */
                if (t1 - t0 < tb) tb = t1 - t0;
                if (t2 - t1 < ts) ts = t2 - t1;
            }
        }
        snprintf(name, sizeof name, "%s/timing", pfx);
        test_report(name, !st, "%s", st ? e.msg : "");
        if (!st)
            fprintf(stderr, "# %s on %s: one frame of 4 streams batched %.1f ms, 4 frames one after another %.1f ms (%.2fx)\n",
                    pfx, lmv_device(m->lmv)->name, tb, ts, ts / tb);
        if (!st)
            fprintf(stderr,
                    "# %s device ms talker / predictor / sampling: batch of 4 %.1f / %.1f / %.1f, one stream "
                    "%.1f / %.1f / %.1f\n",
                    pfx, pb.talker, pb.predictor, pb.sampling, p1.talker, p1.predictor, p1.sampling);
    }
    for (int i = 0; i < N_STREAMS; i++) lmv_batch_free(bt[i]);
    for (int i = 0; i < N_STREAMS; i++) {
        lmv_stream_free(ss[i]);
        free(ins[i].embeds);
        free(ins[i].queue);
        free(ins[i].pad);
        free(ins[i].teach);
    }
    qtts_model_free(m);
}

int main(void) {
    char err[1024];
    qtts_device_info dev[8];
    int n_dev = 0;
    if (qtts_backend_devices(QTTS_BACKEND_VULKAN, dev, 8, &n_dev, err, sizeof err) || n_dev == 0) {
        test_skip("vk_batch", "%s", err[0] ? err : "no Vulkan device");
        return test_finish();
    }
    run(QTTS_WEIGHTS_NATIVE, "vk_batch", 1);
    run(QTTS_WEIGHTS_Q8, "vk_batch/q8", 1);
    run(QTTS_WEIGHTS_Q4, "vk_batch/q4", 0);
    return test_finish();
}
