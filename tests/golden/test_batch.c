/* Continuous batching through the library pipeline (qtts_pipeline): requests
 * stepped together (joining late, leaving at different times, one cancelled
 * mid-way, one spoken in several text segments) produce exactly the codes
 * and audio they produce alone with qtts_synthesize, with sampling on and
 * different seeds and chunk sizes per request; with the weights as stored
 * and quantised to int8 and int4 (whose kernels take the streams of a step as
 * several rows of X), decoding on the driving thread and on a decode
 * thread. A full pipeline refuses a request with QTTS_ERR_LIMIT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qtts.h"
#include "test.h"

#define N_REQ 6
#define MAX_FRAMES 256

typedef struct req {
    const char *text, *speaker;
    uint64_t seed;
    int max_new;
    int first_chunk, chunk;
    int32_t codes[MAX_FRAMES * 16];
    int n;                  /* frames seen (all segments) */
    float *pcm;
    size_t n_pcm, cap_pcm;
    int max_segment;        /* highest segment index seen in a chunk */
    int done;
    qtts_request_result res;
    uint64_t id;
} req;

static int on_frame(const int32_t *codes, int idx, void *u) {
    req *r = u;
    if (r->n < MAX_FRAMES) memcpy(r->codes + r->n * 16, codes, sizeof(int32_t) * 16);
    r->n++;
    return 0;
}

static int on_audio(const qtts_chunk *c, void *u) {
    req *r = u;
    if (r->n_pcm + c->n_samples > r->cap_pcm) {
        r->cap_pcm = (r->n_pcm + c->n_samples) * 2;
        r->pcm = realloc(r->pcm, sizeof(float) * r->cap_pcm);
    }
    memcpy(r->pcm + r->n_pcm, c->pcm, sizeof(float) * c->n_samples);
    r->n_pcm += c->n_samples;
    if (c->segment > r->max_segment) r->max_segment = c->segment;
    return 0;
}

static void on_done(const qtts_request_result *res, void *u) {
    req *r = u;
    r->res = *res;
    r->res.error = NULL; /* borrowed for the call only */
    r->done = 1;
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

static qtts_audio_params audio(const req *r) {
    qtts_audio_params ap = qtts_audio_default_params();
    ap.first_chunk_frames = r->first_chunk;
    ap.chunk_frames = r->chunk;
    ap.split.max_chars = 24; /* request 5 is three segments */
    return ap;
}

static void add(qtts_pipeline *p, const qtts_model *m, req *r, const char *pfx, int i) {
    static qtts_gen_params gps[N_REQ]; /* borrowed by the pipeline until on_done */
    static qtts_audio_params aps[N_REQ];
    gps[i] = params(m, r);
    aps[i] = audio(r);
    aps[i].on_frame = on_frame;
    aps[i].frame_user = r;
    const qtts_request rq = {&gps[i], &aps[i], on_audio, on_done, r, 0};
    char err[512], name[96];
    const qtts_status s = qtts_pipeline_add(p, &rq, &r->id, err, sizeof err);
    snprintf(name, sizeof name, "%s/add%d", pfx, i);
    if (s) test_report(name, 0, "%s", err);
}

/* pfx: the test names' prefix ("batch" for the stored weights) */
static void run(qtts_weight_type wt, int decode_threads, const char *pfx) {
    char err[1024], name[96];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2;
    mp.weights = wt;
    if (qtts_model_load(&m, test_path("golden/data/e2e_string"), &mp, err, sizeof err)) {
        snprintf(name, sizeof name, "%s/load", pfx);
        test_report(name, 0, "%s", err);
        return;
    }
    req rs[N_REQ] = {
        {.text = "Hello there, how are you today?", .speaker = "vivian", .seed = 11, .max_new = 20, .first_chunk = 1, .chunk = 4},
        {.text = "It's 3:45 pm. Are you ready?", .speaker = "ryan", .seed = 22, .max_new = 12, .first_chunk = 2, .chunk = 3},
        {.text = "Guten Morgen, wie geht es dir?", .speaker = "serena", .seed = 33, .max_new = 25, .first_chunk = 1, .chunk = 1},
        {.text = "A late joiner says hi.", .speaker = "aiden", .seed = 44, .max_new = 9, .first_chunk = 1, .chunk = 4},
        {.text = "I will be cancelled halfway.", .speaker = "dylan", .seed = 55, .max_new = 30, .first_chunk = 1, .chunk = 2},
        {.text = "First part here. Then a second one! And a third?", .speaker = "eric", .seed = 66, .max_new = 10,
         .first_chunk = 1, .chunk = 4},
    };
    /* alone: qtts_synthesize, the same parameters */
    float *pcm_alone[N_REQ];
    size_t npa[N_REQ];
    int32_t codes_alone[N_REQ][MAX_FRAMES * 16];
    int n_alone[N_REQ];
    qtts_context *solo = NULL;
    qtts_context_new(m, NULL, &solo, NULL, 0);
    for (int i = 0; i < N_REQ; i++) {
        req a = rs[i];
        qtts_gen_params gp = params(m, &a);
        qtts_audio_params ap = audio(&a);
        ap.overlap = decode_threads;
        ap.on_frame = on_frame;
        ap.frame_user = &a;
        a.n = 0;
        qtts_status s = qtts_synthesize(solo, &gp, &ap, NULL, NULL, &pcm_alone[i], &npa[i]);
        memcpy(codes_alone[i], a.codes, sizeof a.codes);
        n_alone[i] = a.n;
        snprintf(name, sizeof name, "%s/alone", pfx);
        if (s) test_report(name, 0, "request %d: %s", i, qtts_context_last_error(solo));
    }
    /* together: 4 streams for 6 requests */
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    pp.max_streams = 4;
    pp.decode_threads = decode_threads;
    pp.prefill_budget_ms = 0; /* one prefill per step: the joiners start at different frames */
    qtts_pipeline *p = NULL;
    if (qtts_pipeline_new(m, &pp, &p, err, sizeof err)) {
        snprintf(name, sizeof name, "%s/pipeline_new", pfx);
        test_report(name, 0, "%s", err);
        qtts_model_free(m);
        return;
    }
    const int first[] = {0, 1, 2, 4};
    for (int j = 0; j < 4; j++) add(p, m, &rs[first[j]], pfx, first[j]);
    {
        qtts_gen_params gp = params(m, &rs[3]);
        const qtts_request rq = {&gp, NULL, NULL, NULL, NULL, 0};
        const qtts_status full = qtts_pipeline_add(p, &rq, NULL, err, sizeof err);
        snprintf(name, sizeof name, "%s/full_is_limit", pfx);
        test_report(name, full == QTTS_ERR_LIMIT && strstr(err, "full"), "status %d: %s", full, err);
    }
    int steps = 0, joined = 0, cancelled = 0, max_streams = 0;
    while (qtts_pipeline_n_requests(p) > 0 || joined < 2) {
        if (qtts_pipeline_busy(p)) {
            qtts_pipeline_step(p);
            qtts_step_info si;
            qtts_pipeline_last_step(p, &si);
            if (si.n_streams > max_streams) max_streams = si.n_streams;
        } else {
            qtts_pipeline_wait(p, 100);
        }
        steps++;
        /* the late joiners take the streams that free up */
        if (joined < 2 && qtts_pipeline_n_free(p) > 0) {
            const int k = joined ? 5 : 3;
            add(p, m, &rs[k], pfx, k);
            joined++;
        }
        if (!cancelled && rs[4].n >= 6) {
            qtts_pipeline_cancel(p, rs[4].id);
            cancelled = 1;
        }
        if (steps > 5000) break;
    }
    snprintf(name, sizeof name, "%s/streams_overlapped", pfx);
    test_report(name, max_streams == 4 && joined == 2 && cancelled, "max %d streams, %d joined, cancelled %d",
                max_streams, joined, cancelled);
    for (int i = 0; i < N_REQ; i++) {
        req *r = &rs[i];
        if (i == 4) {
            snprintf(name, sizeof name, "%s/cancelled", pfx);
            test_report(name, r->done && r->res.status == QTTS_ERR_CANCELLED &&
                                  r->res.stop_reason == QTTS_STOP_CANCELLED && r->n == 6 &&
                                  !memcmp(r->codes, codes_alone[i], sizeof(int32_t) * 16 * 6) && r->n_pcm <= npa[i] &&
                                  !memcmp(r->pcm, pcm_alone[i], sizeof(float) * r->n_pcm),
                        "done %d, status %d, %d frames, %zu samples", r->done, r->res.status, r->n, r->n_pcm);
            continue;
        }
        const int nf = r->n < MAX_FRAMES ? r->n : MAX_FRAMES;
        snprintf(name, sizeof name, "%s/request%d_codes_identical", pfx, i);
        test_report(name, r->done && r->res.status == QTTS_OK && r->n == n_alone[i] && r->res.n_frames == r->n &&
                              !memcmp(r->codes, codes_alone[i], sizeof(int32_t) * 16 * nf),
                    "status %d, %d frames batched vs %d alone", r->res.status, r->n, n_alone[i]);
        snprintf(name, sizeof name, "%s/request%d_audio_identical", pfx, i);
        test_report(name, r->n_pcm == npa[i] && r->res.n_samples == npa[i] &&
                              !memcmp(r->pcm, pcm_alone[i], sizeof(float) * npa[i]),
                    "%zu samples batched vs %zu alone", r->n_pcm, npa[i]);
    }
    /* on a GPU the decoder reads every generated frame's codes where they were made */
    qtts_model_info mi;
    qtts_model_get_info(m, &mi);
    int n_frames = 0, n_dev = 0, all = 1; /* the cancelled request decodes what it got before the cancel */
    for (int i = 0; i < N_REQ; i++) {
        const int nd = rs[i].res.stats.n_device_codes, nf = rs[i].res.n_frames;
        all &= i == 4 ? nd <= nf : nd == nf;
        n_frames += nf;
        n_dev += nd;
    }
    snprintf(name, sizeof name, "%s/codes_stay_on_device", pfx);
    test_report(name, mi.backend == QTTS_BACKEND_CPU ? n_dev == 0 : all && n_dev > 0,
                "%s: %d of %d frames decoded from the device's code ring", qtts_backend_name(mi.backend), n_dev,
                n_frames);
    snprintf(name, sizeof name, "%s/segments", pfx);
    test_report(name, rs[5].res.n_segments == 3 && rs[5].max_segment == 2 && rs[3].res.n_segments == 1,
                "%d segments, last chunk of segment %d", rs[5].res.n_segments, rs[5].max_segment);
    qtts_pipeline_free(p);
    for (int i = 0; i < N_REQ; i++) {
        free(pcm_alone[i]);
        free(rs[i].pcm);
    }
    qtts_context_free(solo);
    qtts_model_free(m);
}

int main(void) {
    run(QTTS_WEIGHTS_NATIVE, 0, "batch");
    run(QTTS_WEIGHTS_NATIVE, 1, "batch/decode_thread");
    run(QTTS_WEIGHTS_Q8, 1, "batch/q8");
    run(QTTS_WEIGHTS_Q4, 0, "batch/q4");
    return test_finish();
}
