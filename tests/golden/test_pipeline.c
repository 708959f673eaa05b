/* End-to-end golden test of qtts_synthesize: for every text-to-speech run of
 * every case (x-vector and ICL clones included, fed the golden x-vector and
 * reference codes), the waveform equals the official one within 1e-4; the
 * streamed chunks (any chunk size, with and without overlapped decoding, on
 * one thread and, for two cases, on a pool of two where overlap decodes on a
 * thread of its own that parks the pool's worker) concatenate to exactly the
 * same samples as the whole call, also when the decode thread falls behind
 * and decodes its last chunks on both threads; a callback can stop synthesis
 * cleanly; qtts_decode_codes matches too. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npy.h"
#include "pipeline.h"
#include "qtts.h"
#include "test.h"
#include "util/error.h"

#define WAVE_TOL 1e-4

typedef struct collect {
    float *pcm;
    size_t n, cap;
    int calls;
    int stop_after; /* stop after this many calls (0 = never) */
    int off_thread; /* calls not on the thread that set caller */
    pthread_t caller;
} collect;

static int on_audio(const float *pcm, size_t n, void *u) {
    collect *c = u;
    c->off_thread += c->calls > 0 && !pthread_equal(pthread_self(), c->caller);
    if (c->n + n > c->cap) {
        c->cap = (c->n + n) * 2;
        c->pcm = realloc(c->pcm, sizeof(float) * c->cap);
    }
    memcpy(c->pcm + c->n, pcm, sizeof(float) * n);
    c->n += n;
    c->calls++;
    return c->stop_after && c->calls >= c->stop_after;
}

/* Every run of case cs on a model with n_threads threads (with 2, overlap
 * lends the pool's worker to the decoder: another code path, the same bits). */
static void run_case(const char *cs, int n_threads) {
    char err[1024], name[256];
    char cst[96]; /* test names: the case, and the thread count when not 1 */
    if (n_threads > 1) snprintf(cst, sizeof cst, "%s/t%d", cs, n_threads);
    else snprintf(cst, sizeof cst, "%s", cs);
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = n_threads;
    qtts_status s = qtts_model_load(&m, test_path("golden/data/%s", cs), &mp, err, sizeof err);
    snprintf(name, sizeof name, "pipeline/%s/load", cst);
    test_report(name, s == QTTS_OK, "%s", err);
    if (s) return;
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    json_error_t je;
    json_t *prompts = json_load_file(test_path("golden/data/%s/inputs/prompts.json", cs), 0, &je);
    const char *run;
    json_t *pj;
    int streaming_checked = 0;
    json_object_foreach(prompts, run, pj) {
        const char *kind = json_string_value(json_object_get(pj, "kind"));
        if (!kind || !strcmp(kind, "codec_long")) continue;
        qtts_gen_params gp = qtts_gen_default_params(m);
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        gp.debug = &dbg;
        gp.talker.do_sample = gp.predictor.do_sample = 0;
        gp.talker.repetition_penalty = (float)json_number_value(json_object_get(pj, "repetition_penalty"));
        gp.max_new_tokens = (int)json_integer_value(json_object_get(pj, "max_new_tokens"));
        json_t *lang = json_object_get(pj, "language"), *spk = json_object_get(pj, "speaker");
        gp.language = json_is_string(lang) ? json_string_value(lang) : "auto";
        gp.speaker = json_is_string(spk) ? json_string_value(spk) : NULL;
        gp.text_mode = json_is_true(json_object_get(pj, "non_streaming_mode")) ? QTTS_TEXT_MODE_NON_STREAMING
                                                                                : QTTS_TEXT_MODE_STREAMING;
        int32_t *text_ids = NULL, *instr = NULL, *ref = NULL, *ref_codes = NULL;
        npy_array xv = {0}, rc = {0}, wave = {0};
        json_t *in = json_object_get(pj, "input_ids");
        if (!strcmp(kind, "e2e")) {
            json_t *st = json_object_get(pj, "strings");
            gp.text = json_string_value(json_object_get(st, "text"));
            json_t *ins = json_object_get(st, "instruct");
            gp.instruct = json_is_string(ins) ? json_string_value(ins) : NULL;
        } else {
            text_ids = test_ids_from_json(in, 3, 5, &gp.n_text_ids);
            gp.text_ids = text_ids;
            dbg.newline_id = (int)json_integer_value(json_array_get(in, 2));
            json_t *ins = json_object_get(pj, "instruct_ids");
            if (ins) {
                instr = test_ids_from_json(ins, 3, 2, &gp.n_instruct_ids);
                gp.instruct_ids = instr;
                dbg.user_id = (int)json_integer_value(json_array_get(ins, 1));
            }
        }
        if (!strcmp(kind, "xvec") || !strcmp(kind, "icl")) {
            npy_load(test_path("golden/data/%s/golden/%s/xvector.npy", cs, run), &xv, err, sizeof err);
            gp.xvector = xv.f32;
        }
        if (!strcmp(kind, "icl")) {
            npy_load(test_path("golden/data/%s/golden/%s/ref_codes.npy", cs, run), &rc, err, sizeof err);
            ref_codes = malloc(sizeof(int32_t) * (rc.n ? rc.n : 1));
            for (long i = 0; i < rc.n; i++) ref_codes[i] = (int32_t)rc.i64[i];
            gp.ref_codes = ref_codes;
            gp.n_ref_frames = (int)rc.shape[0];
            ref = test_ids_from_json(json_object_get(pj, "ref_ids"), 3, 2, &gp.n_ref_text_ids);
            gp.ref_text_ids = ref;
        }
        if (npy_load(test_path("golden/data/%s/golden/%s/waveform.npy", cs, run), &wave, err, sizeof err)) {
            test_report(run, 0, "%s", err);
            continue;
        }
        float *pcm = NULL;
        size_t n = 0;
        s = qtts_synthesize(ctx, &gp, NULL, NULL, NULL, &pcm, &n);
        snprintf(name, sizeof name, "pipeline/%s/%s/waveform", cst, run);
        double mabs = INFINITY;
        if (!s && (long)n == wave.n) rel_err(pcm, wave.f32, wave.n, &mabs);
        test_report(name, s == QTTS_OK && (long)n == wave.n && mabs <= WAVE_TOL,
                    "status %d (%s), %zu samples vs golden %ld, max|d| %.3g", s, qtts_context_last_error(ctx), n,
                    wave.n, mabs);
        printf("# %-52s max|d| %.3e (%zu samples)\n", name, mabs, n);
        /* streaming through the callback: same samples for several chunkings, threaded or not.
         * ICL: the streamed audio starts at the end of the reference; the whole call follows
         * the official cut, which may keep one extra leading sample. */
        if (s == QTTS_OK) {
            const size_t lead = (!strcmp(kind, "icl") && n > 0) ? n % 1920 : 0;
            const int chunks[][2] = {{1, 1}, {1, 4}, {2, 3}, {5, 2}, {8, 8}};
            const int n_chunk = streaming_checked ? 2 : 5;
            for (int k = 0; k < n_chunk; k++)
                for (int ov = 0; ov <= 1; ov++) {
                    qtts_audio_params ap = qtts_audio_default_params();
                    ap.first_chunk_frames = chunks[k][0];
                    ap.chunk_frames = chunks[k][1];
                    ap.overlap = ov;
                    collect c = {0};
                    qtts_status s2 = qtts_synthesize(ctx, &gp, &ap, on_audio, &c, NULL, NULL);
                    snprintf(name, sizeof name, "pipeline/%s/%s/stream_%d_%d_overlap%d", cst, run, chunks[k][0],
                             chunks[k][1], ov);
                    int same = s2 == QTTS_OK && c.n + lead == n && !memcmp(c.pcm, pcm + lead, sizeof(float) * c.n);
                    test_report(name, same, "status %d, %zu samples (+%zu lead) vs %zu, memcmp differs", s2, c.n, lead, n);
                    free(c.pcm);
                }
            streaming_checked = 1;
        }
        free(pcm);
        npy_free(&wave);
        npy_free(&xv);
        npy_free(&rc);
        free(text_ids);
        free(instr);
        free(ref);
        free(ref_codes);
    }
    json_decref(prompts);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* The custom_voice model on n_threads threads and a context on it; a test
 * failure named `name` and 0 if it does not load. */
static int load_cv(int n_threads, const char *name, qtts_model **m, qtts_context **ctx) {
    char err[1024];
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = n_threads;
    *m = NULL;
    *ctx = NULL;
    if (qtts_model_load(m, test_path("golden/data/custom_voice"), &mp, err, sizeof err)) {
        test_report(name, 0, "%s", err);
        return 0;
    }
    qtts_context_new(*m, NULL, ctx, NULL, 0);
    return 1;
}

/* The test checkpoint golden/data/<name> on one thread, or NULL after a
 * failure named `test` (with the loader's message). */
static qtts_model *load_or_report(const char *name, const char *test) {
    char err[1024];
    qtts_model *m = NULL;
    if (qtts_model_load(&m, test_path("golden/data/%s", name), NULL, err, sizeof err)) {
        test_report(test, 0, "%s", err);
        return NULL;
    }
    return m;
}

static const int32_t short_ids[] = {17, 300, 45, 999, 2, 511, 64, 8};

/* A short sampled request for ryan: 8 text ids, at most max_new frames; its
 * template ids go to *dbg, which gp.debug points at. */
static qtts_gen_params short_request(const qtts_model *m, int max_new, uint64_t seed, qtts_gen_debug *dbg) {
    qtts_gen_params gp = qtts_gen_default_params(m);
    *dbg = qtts_gen_debug_default_params();
    dbg->newline_id = 10;
    gp.debug = dbg;
    gp.text_ids = short_ids;
    gp.n_text_ids = 8;
    gp.speaker = "ryan";
    gp.max_new_tokens = max_new;
    gp.seed = seed;
    return gp;
}

/* The callback can stop synthesis; what was delivered stays valid. */
static void cancel_test(int n_threads) {
    char err[1024];
    qtts_model *m;
    qtts_context *ctx;
    if (!load_cv(n_threads, "pipeline/cancel", &m, &ctx)) return;
    qtts_gen_debug dbg;
    qtts_gen_params gp = short_request(m, 40, 7, &dbg);
    for (int ov = 0; ov <= 1; ov++) {
        qtts_audio_params ap = qtts_audio_default_params();
        ap.first_chunk_frames = 1;
        ap.chunk_frames = 2;
        ap.overlap = ov;
        collect c = {0};
        c.stop_after = 3;
        qtts_status s = qtts_synthesize(ctx, &gp, &ap, on_audio, &c, NULL, NULL);
        char name[64];
        snprintf(name, sizeof name, "pipeline/cancel_overlap%d_t%d", ov, n_threads);
        test_report(name, s == QTTS_ERR_CANCELLED && c.calls == 3 && c.n == 5 * 1920, "status %d, %d calls, %zu samples", s,
                    c.calls, c.n);
        free(c.pcm);
        /* the context is reusable afterwards and sampling is seeded: two runs agree */
        float *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        qtts_status s1 = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &a, &na);
        qtts_status s2 = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &b, &nb);
        snprintf(name, sizeof name, "pipeline/reuse_after_cancel_seeded_overlap%d_t%d", ov, n_threads);
        test_report(name, !s1 && !s2 && na == nb && na == 39 * 1920 && !memcmp(a, b, sizeof(float) * na),
                    "status %d/%d, %zu vs %zu samples", s1, s2, na, nb);
        free(a);
        free(b);
    }
    if (n_threads > 1) { /* the rest does not depend on the threads */
        qtts_context_free(ctx);
        qtts_model_free(m);
        return;
    }
    /* bad chunk sizes, bad overlap */
    qtts_audio_params ap = qtts_audio_default_params();
    ap.chunk_frames = 0;
    float *p = NULL;
    size_t n = 0;
    qtts_status s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &p, &n);
    test_report("pipeline/bad_chunk_frames", s == QTTS_ERR_INVALID_ARG && strstr(qtts_context_last_error(ctx), "chunk"),
                "status %d: %s", s, qtts_context_last_error(ctx));
    ap = qtts_audio_default_params();
    ap.overlap = 2;
    s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &p, &n);
    test_report("pipeline/bad_overlap", s == QTTS_ERR_INVALID_ARG && strstr(qtts_context_last_error(ctx), "overlap"),
                "status %d: %s", s, qtts_context_last_error(ctx));
    /* decode of saved codes == golden waveform */
    npy_array codes = {0}, wave = {0};
    npy_load(test_path("golden/data/custom_voice/golden/stream_en_ryan_rp105/codes.npy"), &codes, err, sizeof err);
    npy_load(test_path("golden/data/custom_voice/golden/stream_en_ryan_rp105/waveform.npy"), &wave, err, sizeof err);
    int32_t *c32 = malloc(sizeof(int32_t) * (codes.n + 1));
    for (long i = 0; i < codes.n; i++) c32[i] = (int32_t)codes.i64[i];
    s = qtts_decode_codes(ctx, c32, (int)codes.shape[0], &p, &n);
    double mabs = INFINITY;
    if (!s && (long)n == wave.n) rel_err(p, wave.f32, wave.n, &mabs);
    test_report("pipeline/decode_codes", !s && mabs <= WAVE_TOL, "status %d, max|d| %.3g", s, mabs);
    free(p);
    c32[5] = 5000; /* out of range code */
    s = qtts_decode_codes(ctx, c32, (int)codes.shape[0], &p, &n);
    test_report("pipeline/decode_bad_code", s == QTTS_ERR_INPUT, "status %d: %s", s, qtts_context_last_error(ctx));
    free(c32);
    npy_free(&codes);
    npy_free(&wave);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* The default overlap (-1, auto): with one thread every chunk is decoded on
 * the calling thread; with two, the chunks after the first come from the
 * lent worker; the same samples both ways. */
static void auto_overlap_test(void) {
    float *pcm[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    int off[2] = {-1, -1}, calls[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        qtts_model *m;
        qtts_context *ctx;
        if (!load_cv(t + 1, "pipeline/auto_overlap", &m, &ctx)) return;
        qtts_gen_debug dbg;
        qtts_gen_params gp = short_request(m, 24, 3, &dbg);
        qtts_audio_params ap = qtts_audio_default_params();
        ap.chunk_frames = 1;
        collect c = {0};
        c.caller = pthread_self();
        if (!qtts_synthesize(ctx, &gp, &ap, on_audio, &c, NULL, NULL)) {
            off[t] = c.off_thread;
            calls[t] = c.calls;
        }
        pcm[t] = c.pcm;
        n[t] = c.n;
        qtts_context_free(ctx);
        qtts_model_free(m);
    }
    test_report("pipeline/auto_overlap_default", qtts_audio_default_params().overlap == -1, "default %d",
                qtts_audio_default_params().overlap);
    test_report("pipeline/auto_overlap_one_thread_inline", off[0] == 0 && calls[0] >= 8, "%d of %d chunks off thread",
                off[0], calls[0]);
    test_report("pipeline/auto_overlap_two_threads_lent", off[1] >= 1 && calls[1] == calls[0],
                "%d of %d chunks from another thread", off[1], calls[1]);
    test_report("pipeline/auto_overlap_same_samples", n[0] == n[1] && n[0] && !memcmp(pcm[0], pcm[1], n[0] * 4),
                "%zu vs %zu samples", n[0], n[1]);
    free(pcm[0]);
    free(pcm[1]);
}

/* qtts_synthesize's one stream whose decode thread falls behind
 * generation: a hook holds the thread at its first chunk until all the
 * frames are made (and 5 ms at each), so chunks are still queued when
 * generation ends, and while the driving thread waits for them the decode
 * thread decodes them on both of the model's threads; the chunk it took
 * during generation stays on one. The samples are those of decoding inline. */
#define DRAIN_FRAMES 40

typedef struct drain_seen {
    atomic_int steps;
    int chunks, on_all, other, waited;
} drain_seen;

static void count_step(void *arg, int n_streams) {
    (void)n_streams;
    atomic_fetch_add(&((drain_seen *)arg)->steps, 1);
}

static void hold_chunk(void *arg, int slot, int n, int n_threads) {
    drain_seen *d = arg;
    (void)slot;
    (void)n;
    if (d->chunks++ == 0) {
        for (int i = 0; i < 30000 && atomic_load(&d->steps) < DRAIN_FRAMES; i++) usleep(1000);
        d->waited = atomic_load(&d->steps) >= DRAIN_FRAMES;
    }
    if (n_threads == 2) d->on_all++;
    else if (n_threads != 1) d->other++;
    usleep(5000);
}

typedef struct solo_out {
    collect c;
    int done;
    qtts_status st;
} solo_out;

static int solo_chunk(const qtts_chunk *ch, void *u) { return on_audio(ch->pcm, ch->n_samples, &((solo_out *)u)->c); }

static void solo_done(const qtts_request_result *r, void *u) {
    solo_out *o = u;
    o->st = r->status;
    o->done = 1;
}

static void drain_test(void) {
    qtts_model *m;
    qtts_context *ctx;
    if (!load_cv(2, "pipeline/drain_on_all_threads", &m, &ctx)) return;
    qtts_gen_debug dbg;
    qtts_gen_params gp = short_request(m, DRAIN_FRAMES + 1, 5, &dbg);
    dbg.force_frames = DRAIN_FRAMES;
    qtts_audio_params ap = qtts_audio_default_params();
    ap.first_chunk_frames = 1;
    ap.chunk_frames = 2;
    ap.overlap = 0;
    float *ref = NULL;
    size_t n_ref = 0;
    const qtts_status s0 = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &ref, &n_ref);
    drain_seen seen;
    memset(&seen, 0, sizeof seen);
    const qtts_pipeline_debug hooks = {.chunk_begun = hold_chunk, .stepped = count_step, .arg = &seen};
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    pp.decode_threads = 1;
    pp.decode_share_cores = 1;
    pp.debug = &hooks;
    qtts_pipeline *p = NULL;
    qtts_error e;
    err_clear(&e);
    solo_out o;
    memset(&o, 0, sizeof o);
    qtts_status s = pipeline_new_on_context(ctx, &pp, &p, &e);
    if (!s) {
        const qtts_request rq = {&gp, &ap, solo_chunk, solo_done, &o, 0};
        s = qtts_pipeline_add(p, &rq, NULL, e.msg, sizeof e.msg);
    }
    while (!s && qtts_pipeline_n_requests(p) > 0) {
        if (qtts_pipeline_busy(p)) qtts_pipeline_step(p);
        else qtts_pipeline_wait(p, 1000);
    }
    qtts_pipeline_free(p);
    test_report("pipeline/drain_on_all_threads",
                !s0 && !s && o.done && !o.st && seen.waited && seen.on_all >= 1 && seen.on_all < seen.chunks &&
                    !seen.other,
                "status %d/%d/%d, held %d: %d of %d chunks on 2 threads, %d on neither 1 nor 2: %s", s0, s, o.st,
                seen.waited, seen.on_all, seen.chunks, seen.other, e.msg);
    test_report("pipeline/drain_same_samples", n_ref && o.c.n == n_ref && !memcmp(o.c.pcm, ref, sizeof(float) * n_ref),
                "%zu vs %zu samples", o.c.n, n_ref);
    free(o.c.pcm);
    free(ref);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

typedef struct pieces_seen { int calls, n; char first[256]; } pieces_seen;
static int on_piece(int i, int n, const char *text, void *u) {
    pieces_seen *p = u;
    if (p->calls == 0) snprintf(p->first, sizeof p->first, "%s", text);
    p->calls++;
    p->n = n;
    return 0;
}

/* Long text: split into pieces, each stopped by the runaway cap (the golden
 * checkpoints never emit EOS), joined with pauses; max_new_tokens overrides. */
static void long_text_test(void) {
    qtts_model *m = load_or_report("e2e_string", "pipeline/long/load");
    if (!m) return;
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    const char *text = "The first sentence is here. A second one follows it!\n\n"
                       "Dies ist ein zweiter Absatz. 这是第三段。还有一句话？";
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.text = text;
    gp.speaker = "vivian";
    gp.talker.do_sample = gp.predictor.do_sample = 0;
    gp.max_new_tokens = 8192;
    qtts_audio_params ap = qtts_audio_default_params();
    ap.split.max_chars = 30;
    pieces_seen ps = {0};
    ap.on_segment = on_piece;
    ap.segment_user = &ps;
    float *pcm = NULL;
    size_t n = 0;
    qtts_status s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &pcm, &n);
    /* expected frames: per piece 50 + 8 x tokens; count tokens per piece */
    const char *want_pieces[] = {"The first sentence is here.", "A second one follows it!", "Dies ist ein zweiter Absatz.",
                                 "这是第三段。还有一句话？"};
    const int pauses_ms[] = {300, 700, 300, 0};
    size_t want = 0, pause_at[4] = {0};
    for (int i = 0; i < 4; i++) {
        int32_t *ids = NULL;
        int k = 0;
        char tpl[512];
        snprintf(tpl, sizeof tpl, "<|im_start|>assistant\n%s<|im_end|>\n<|im_start|>assistant\n", want_pieces[i]);
        qtts_tokenize(m, tpl, &ids, &k, NULL, 0);
        want += (size_t)(50 + 8 * (k - 8)) * 1920;
        pause_at[i] = want;
        want += (size_t)pauses_ms[i] * 24;
        free(ids);
    }
    test_report("pipeline/long/pieces", s == QTTS_OK && ps.calls == 4 && ps.n == 4 && !strcmp(ps.first, want_pieces[0]),
                "status %d (%s), %d pieces, first \"%s\"", s, qtts_context_last_error(ctx), ps.calls, ps.first);
    test_report("pipeline/long/capped_lengths", s == QTTS_OK && n == want && qtts_context_n_capped_segments(ctx) == 4 &&
                    qtts_context_stop_reason(ctx) == QTTS_STOP_LENGTH_CAP,
                "%zu samples, want %zu; %d capped, stop reason %d", n, want, qtts_context_n_capped_segments(ctx),
                (int)qtts_context_stop_reason(ctx));
    /* the pauses are exact silence where they belong */
    int silent = s == QTTS_OK && n == want;
    for (int i = 0; i < 3 && silent; i++)
        for (size_t j = pause_at[i]; j < pause_at[i] + (size_t)pauses_ms[i] * 24; j++)
            if (pcm[j] != 0.0f) silent = 0;
    test_report("pipeline/long/pauses", silent, "a pause is missing or not silent");
    free(pcm);
    /* explicit max_new_tokens without the cap */
    gp.auto_length_cap = 0;
    gp.max_new_tokens = 20;
    ap.split.enabled = 0;
    ap.on_segment = NULL;
    s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &pcm, &n);
    test_report("pipeline/long/max_new_tokens_override", s == QTTS_OK && n == 19 * 1920 &&
                    qtts_context_stop_reason(ctx) == QTTS_STOP_MAX_TOKENS && qtts_context_n_capped_segments(ctx) == 0,
                "status %d, %zu samples, stop %d", s, n, (int)qtts_context_stop_reason(ctx));
    free(pcm);
    /* odd inputs: punctuation only, emoji only, every supported language */
    const char *odd[] = {"?!...", "😀👍🏽🇩🇪", "Hello there.", "你好，世界。", "こんにちは。", "안녕하세요.", "Guten Tag.",
                         "Bonjour à tous.", "Привет, мир.", "Olá, tudo bem?", "¡Hola, amigo!", "Ciao a tutti."};
    const char *langs[] = {"auto", "auto", "english", "chinese", "japanese", "korean", "german", "french", "russian",
                           "portuguese", "spanish", "italian"};
    gp.auto_length_cap = 1;
    gp.max_new_tokens = 8192;
    ap.split.enabled = 1;
    for (int i = 0; i < 12; i++) {
        gp.text = odd[i];
        gp.language = langs[i];
        s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &pcm, &n);
        char name[96];
        snprintf(name, sizeof name, "pipeline/odd/%s_%d", langs[i], i);
        test_report(name, s == QTTS_OK && n > 0 && n % 1920 == 0, "status %d (%s), %zu samples", s,
                    qtts_context_last_error(ctx), n);
        free(pcm);
    }
    gp.text = " \n ";
    s = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &pcm, &n);
    test_report("pipeline/odd/blank", s == QTTS_ERR_INPUT, "status %d", s);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* The KV cache grows while decoding (a new request reserves the prompt +
 * 256 positions; past that it doubles, keeping what was written): a 600-frame
 * generation on a fresh context grows it from 512 to 1024 positions mid-way,
 * and must give the same codes as the same request on a context whose cache
 * is already big enough (grown by an earlier 600-frame request, so nothing
 * moves), and as the fresh run again. Sampled with a fixed seed, so any
 * position lost or shifted by the growth changes what follows. */
static void cache_growth_test(void) {
    qtts_model *m = load_or_report("custom_voice", "pipeline/cache_growth/load");
    if (!m) return;
    qtts_gen_debug dbg;
    qtts_gen_params gp = short_request(m, 600, 7, &dbg);
    gp.language = "english";
    dbg.force_frames = 600;
    int32_t *codes[3] = {NULL, NULL, NULL};
    int nf[3] = {0, 0, 0}, ok = 1;
    qtts_context *fresh = NULL, *grown = NULL;
    ok = !qtts_context_new(m, NULL, &fresh, NULL, 0) && !qtts_context_new(m, NULL, &grown, NULL, 0);
    ok = ok && !qtts_generate_codes(fresh, &gp, NULL, NULL, &codes[0], &nf[0]); /* grows mid-way */
    int32_t *warm = NULL;
    int nw = 0;
    ok = ok && !qtts_generate_codes(grown, &gp, NULL, NULL, &warm, &nw);        /* grows the same way */
    ok = ok && !qtts_generate_codes(grown, &gp, NULL, NULL, &codes[1], &nf[1]); /* big enough: no growth */
    qtts_context_free(fresh);
    fresh = NULL;
    ok = ok && !qtts_context_new(m, NULL, &fresh, NULL, 0) && !qtts_generate_codes(fresh, &gp, NULL, NULL, &codes[2], &nf[2]);
    test_report("pipeline/cache_growth/ran", ok && nf[0] == 600 && nf[1] == 600 && nf[2] == 600, "frames %d %d %d",
                nf[0], nf[1], nf[2]);
    int first_diff = -1;
    for (int f = 0; ok && f < 600 * 16 && first_diff < 0; f++)
        if (codes[0][f] != codes[1][f] || codes[0][f] != codes[2][f]) first_diff = f / 16;
    test_report("pipeline/cache_growth/same_codes", ok && first_diff < 0,
                "frame %d differs between a growing cache and one already big enough", first_diff);
    free(warm);
    for (int i = 0; i < 3; i++) free(codes[i]);
    qtts_context_free(fresh);
    qtts_context_free(grown);
    qtts_model_free(m);
}

/* One request on ctx (which may reuse the voice prefix of its last prompt)
 * and on a fresh context without reuse: the same codes, and the positions
 * ctx reused. Returns 1 if both ran. */
static int prefix_run(qtts_model *m, qtts_context *ctx, const qtts_gen_params *gp, int *same, int *reused, int *n_prompt) {
    qtts_context_params cp = qtts_context_default_params();
    cp.reuse_voice_prefix = 0;
    qtts_context *fresh = NULL;
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    int ok = !qtts_generate_codes(ctx, gp, NULL, NULL, &a, &na);
    qtts_stats st;
    qtts_context_get_stats(ctx, &st);
    *reused = st.n_prompt_reused;
    *n_prompt = st.n_prompt;
    ok = ok && !qtts_context_new(m, &cp, &fresh, NULL, 0) && !qtts_generate_codes(fresh, gp, NULL, NULL, &b, &nb);
    qtts_context_get_stats(fresh, &st);
    *same = ok && na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * 16 * (size_t)na) && st.n_prompt_reused == 0;
    free(a);
    free(b);
    qtts_context_free(fresh);
    return ok;
}

/* Voice prefix reuse: a prompt whose leading positions that do not depend on
 * the text (role, codec control with language and speaker, an ICL
 * reference's transcript) equal those of the last prompt on the context
 * skips them, with the codes of a full prefill (sampled with a fixed seed:
 * a wrong K/V anywhere changes what follows). The positions reused stop
 * where the prompts differ, and at the text even when the texts are equal. */
static void voice_prefix_test(void) {
    qtts_model *m = load_or_report("custom_voice", "pipeline/voice_prefix/load");
    if (!m) return;
    static const int32_t other_ids[] = {5, 77, 1000, 88, 3, 9, 410, 12, 66, 7, 200};
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    /* role 3 + control [think, think_bos, language, think_eos] + speaker + pad = 9 with a language,
     * [nothink, think_bos, think_eos] + speaker + pad = 8 for auto */
    struct {
        const char *what, *speaker, *language;
        const int32_t *ids;
        int n_ids, want, frames;
    } runs[] = {
        {"first", "ryan", "english", short_ids, 8, 0, 4}, /* the cache keeps its first 64 positions */
        {"grown_cache", "ryan", "english", other_ids, 11, 9, 100}, /* grows to 128, keeping the 9 */
        {"same_text", "ryan", "english", other_ids, 11, 9, 24},
        {"other_speaker", "vivian", "english", other_ids, 11, 7, 24},
        {"auto_language", "vivian", "auto", short_ids, 8, 3, 24},
        {"again_auto", "vivian", "auto", other_ids, 11, 8, 24},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        qtts_gen_debug dbg;
        qtts_gen_params gp = short_request(m, 30, 11 + r, &dbg);
        gp.text_ids = runs[r].ids;
        gp.n_text_ids = runs[r].n_ids;
        gp.speaker = runs[r].speaker;
        gp.language = runs[r].language;
        dbg.force_frames = runs[r].frames;
        gp.text_mode = r % 2 ? QTTS_TEXT_MODE_NON_STREAMING : QTTS_TEXT_MODE_STREAMING;
        int same = 0, reused = -1, np = 0;
        const int ran = prefix_run(m, ctx, &gp, &same, &reused, &np);
        char name[96];
        snprintf(name, sizeof name, "pipeline/voice_prefix/%s", runs[r].what);
        test_report(name, ran && same && reused == runs[r].want,
                    "ran %d, codes same as a full prefill %d, %d of %d positions reused (want %d)", ran, same, reused, np,
                    runs[r].want);
    }
    /* off: never reused */
    qtts_context_params cp = qtts_context_default_params();
    cp.reuse_voice_prefix = 0;
    qtts_context *off = NULL;
    qtts_gen_debug dbg;
    qtts_gen_params gp = short_request(m, 30, 3, &dbg);
    dbg.force_frames = 4;
    qtts_stats st = {0};
    int ok = !qtts_context_new(m, &cp, &off, NULL, 0) && !qtts_generate_codes(off, &gp, NULL, NULL, NULL, NULL) &&
             !qtts_generate_codes(off, &gp, NULL, NULL, NULL, NULL);
    qtts_context_get_stats(off, &st);
    test_report("pipeline/voice_prefix/off", ok && st.n_prompt_reused == 0 && st.n_prompt > 0, "ran %d, %d reused",
                ok, st.n_prompt_reused);
    qtts_context_free(off);
    qtts_context_free(ctx);
    qtts_model_free(m);

    /* an in-context clone: the reference transcript's positions are part of the voice */
    if (!(m = load_or_report("base_clone", "pipeline/voice_prefix/icl_load"))) return;
    char err[1024];
    npy_array xv = {0};
    if (npy_load(test_path("golden/data/base_clone/golden/icl_stream_en/xvector.npy"), &xv, err, sizeof err)) {
        test_report("pipeline/voice_prefix/icl_xvector", 0, "%s", err);
        qtts_model_free(m);
        return;
    }
    int32_t ref_codes[10 * 16];
    for (int i = 0; i < 10 * 16; i++) ref_codes[i] = (i * 37 + 5) % 1000;
    static const int32_t ref_ids[] = {40, 41, 42};
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    for (int r = 0; r < 4; r++) {
        gp = short_request(m, 30, 21 + r, &dbg);
        gp.speaker = NULL;
        gp.language = "english";
        gp.xvector = xv.f32;
        gp.ref_codes = ref_codes;
        gp.n_ref_frames = 10;
        gp.ref_text_ids = ref_ids;
        gp.n_ref_text_ids = 3;
        gp.text_ids = r % 2 ? other_ids : short_ids;
        gp.n_text_ids = r % 2 ? 11 : 8;
        gp.text_mode = r >= 2 ? QTTS_TEXT_MODE_NON_STREAMING : QTTS_TEXT_MODE_STREAMING;
        dbg.force_frames = 16;
        /* 3 role + 6 control (language, x-vector) + the 3 reference transcript positions;
         * those carry the reference codes in streaming mode, the codec pad in
         * non-streaming mode, so a change of mode keeps only the control block */
        const int want = r == 0 ? 0 : r == 2 ? 9 : 12;
        int same = 0, reused = -1, np = 0;
        const int ran = prefix_run(m, ctx, &gp, &same, &reused, &np);
        char name[96];
        snprintf(name, sizeof name, "pipeline/voice_prefix/icl_%d", r);
        test_report(name, ran && same && reused == want,
                    "ran %d (%s), codes same as a full prefill %d, %d of %d positions reused (want %d)", ran,
                    qtts_context_last_error(ctx), same, reused, np, want);
    }
    npy_free(&xv);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* Measurement aids: forced frame counts, per-phase stats, teacher forcing. */
static void stats_test(void) {
    char err[1024];
    qtts_model *m = load_or_report("custom_voice", "pipeline/stats/load");
    if (!m) return;
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    const int32_t ids[] = {17, 300, 45, 999, 2, 511, 64, 8};
    qtts_gen_params gp = qtts_gen_default_params(m);
    qtts_gen_debug dbg = qtts_gen_debug_default_params();
    dbg.newline_id = 10;
    gp.debug = &dbg;
    gp.text_ids = ids;
    gp.n_text_ids = 8;
    gp.speaker = "ryan";
    gp.language = "english";
    gp.text_mode = QTTS_TEXT_MODE_STREAMING;
    gp.talker.do_sample = gp.predictor.do_sample = 0;
    dbg.force_frames = 20;
    float *pcm = NULL;
    size_t n = 0;
    qtts_status s = qtts_synthesize(ctx, &gp, NULL, NULL, NULL, &pcm, &n);
    qtts_stats st;
    qtts_context_get_stats(ctx, &st);
    test_report("pipeline/stats/force_frames", s == QTTS_OK && n == 20 * 1920 && st.n_frames == 20,
                "status %d, %zu samples, %d frames", s, n, st.n_frames);
    test_report("pipeline/stats/phases", st.prefill_ms > 0 && st.talker_ms > 0 && st.predictor_ms > 0 && st.decode_ms > 0 &&
                                             st.first_audio_ms > 0 && st.n_chunks >= 5 && st.n_prompt == 10,
                "prefill %.3f talker %.3f cp %.3f decode %.3f first %.3f chunks %d prompt %d", st.prefill_ms, st.talker_ms,
                st.predictor_ms, st.decode_ms, st.first_audio_ms, st.n_chunks, st.n_prompt);
    /* the same request with 2 and 3 compute threads: the same bits */
    for (int th = 2; th <= 3; th++) {
        qtts_model_params mp = qtts_model_default_params();
        mp.n_threads = th;
        qtts_model *m2 = NULL;
        qtts_context *c2 = NULL;
        float *p2 = NULL;
        size_t n2 = 0;
        qtts_status s2 = qtts_model_load(&m2, test_path("golden/data/custom_voice"), &mp, err, sizeof err);
        if (!s2) s2 = qtts_context_new(m2, NULL, &c2, NULL, 0);
        if (!s2) s2 = qtts_synthesize(c2, &gp, NULL, NULL, NULL, &p2, &n2);
        char name[64];
        snprintf(name, sizeof name, "pipeline/threads_%d_same_bits", th);
        test_report(name, s2 == QTTS_OK && n2 == n && !memcmp(p2, pcm, sizeof(float) * n), "status %d, %zu vs %zu samples", s2,
                    n2, n);
        free(p2);
        qtts_context_free(c2);
        qtts_model_free(m2);
    }
    free(pcm);
    /* teacher forcing with the golden greedy codes: full agreement; with other codes: those codes come out */
    npy_array gc = {0};
    npy_load(test_path("golden/data/custom_voice/golden/stream_en_ryan_rp105/codes.npy"), &gc, err, sizeof err);
    int32_t *t = malloc(sizeof(int32_t) * gc.n);
    for (long i = 0; i < gc.n; i++) t[i] = (int32_t)gc.i64[i];
    dbg.force_frames = 0;
    dbg.teacher_codes = t;
    dbg.n_teacher_frames = (int)gc.shape[0];
    int32_t *codes = NULL;
    int nf = 0;
    s = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &nf);
    qtts_context_get_stats(ctx, &st);
    int all = st.teacher_frames == 8;
    for (int g = 0; g < 16; g++) all = all && st.teacher_agree[g] == 8;
    test_report("pipeline/stats/teacher_agreement_full", s == QTTS_OK && nf == 8 && all, "status %d, %d frames, cb0 %d/%d",
                s, nf, st.teacher_agree[0], st.teacher_frames);
    free(codes);
    for (long i = 0; i < gc.n; i++) t[i] = (int32_t)((gc.i64[i] + 7 * i) % 2048);
    s = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &nf);
    qtts_context_get_stats(ctx, &st);
    int fed = s == QTTS_OK && nf == 8 && !memcmp(codes, t, sizeof(int32_t) * 8 * 16);
    int total = 0;
    for (int g = 0; g < 16; g++) total += st.teacher_agree[g];
    test_report("pipeline/stats/teacher_codes_fed", fed && total < 8 * 16, "status %d, agreement %d of 128", s, total);
    free(codes);
    free(t);
    npy_free(&gc);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

int main(void) {
    const char *cases[] = {"custom_voice", "voice_design", "base_clone", "e2e_string"};
    for (int i = 0; i < 4; i++) run_case(cases[i], 1);
    run_case("custom_voice", 2);
    run_case("base_clone", 2);
    cancel_test(1);
    cancel_test(2);
    auto_overlap_test();
    drain_test();
    long_text_test();
    stats_test();
    cache_growth_test();
    voice_prefix_test();
    return test_finish();
}
