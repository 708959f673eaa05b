/* Incremental text through the library pipeline (qtts_request.incremental_text,
 * qtts_pipeline_push_text / _end_text): for any split of the text into pieces
 * (random sizes, one byte at a time, splits inside UTF-8 characters), with
 * steps run between the pieces so that generation catches up with the text
 * and waits, the codes and the audio are bit-identical to the same request
 * with the whole text at once in the streaming text mode: greedy and seeded
 * sampling; on real-vocabulary strings (every 10th tokenizer golden string);
 * several incremental requests batched with a whole-text one; a sentence per
 * segment, equal to whole-text requests whose split makes the same segments;
 * an in-context (ICL) clone, whose prefill waits for as many text tokens as
 * fill the reference's codec positions (the tiny Base checkpoint with the
 * tiny tokenizer); cancellation before any text and while waiting for text
 * frees everything; empty and invalid text fail with QTTS_ERR_INPUT. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qtts.h"
#include "test.h"

typedef struct run {
    int32_t *codes;
    int n, cap;
    float *pcm;
    size_t n_pcm, cap_pcm;
    int done, max_segment;
    qtts_status st;
    qtts_request_result res;
    uint64_t id;
    qtts_gen_params gp;    /* borrowed by the pipeline until on_done */
    qtts_audio_params ap;
} run;

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

static int on_frame(const int32_t *codes, int idx, void *u) {
    run *r = u;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->codes = realloc(r->codes, sizeof(int32_t) * 16 * (size_t)r->cap);
    }
    memcpy(r->codes + (size_t)r->n * 16, codes, sizeof(int32_t) * 16);
    r->n++;
    return 0;
}

static int on_audio(const qtts_chunk *c, void *u) {
    run *r = u;
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
    run *r = u;
    r->res = *res;
    r->res.error = NULL;
    r->st = res->status;
    r->done = 1;
}

static void run_free(run *r) {
    free(r->codes);
    free(r->pcm);
    memset(r, 0, sizeof *r);
}

static qtts_gen_params gen(const qtts_model *m, int sample, uint64_t seed, int frames) {
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.speaker = "vivian";
    gp.language = "english";
    gp.text_mode = QTTS_TEXT_MODE_STREAMING;
    gp.talker.do_sample = gp.predictor.do_sample = sample;
    gp.seed = seed;
    gp.max_new_tokens = frames;
    return gp;
}

static qtts_audio_params audio(int split) {
    qtts_audio_params ap = qtts_audio_default_params();
    ap.split.enabled = split;
    ap.split.max_chars = 16;
    ap.first_chunk_frames = 1;
    ap.chunk_frames = 3;
    return ap;
}

static void steps(qtts_pipeline *p, int n) {
    for (int i = 0; i < n && qtts_pipeline_busy(p); i++) qtts_pipeline_step(p);
}

static void finish(qtts_pipeline *p) {
    for (int guard = 0; qtts_pipeline_n_requests(p) > 0 && guard < 100000; guard++) {
        if (qtts_pipeline_busy(p)) qtts_pipeline_step(p);
        else qtts_pipeline_wait(p, 50);
    }
}

static qtts_status add(qtts_pipeline *p, run *r, const char *text, int incremental) {
    r->gp.text = text;
    r->ap.on_frame = on_frame;
    r->ap.frame_user = r;
    const qtts_request rq = {&r->gp, &r->ap, on_audio, on_done, r, incremental};
    char err[512];
    const qtts_status st = qtts_pipeline_add(p, &rq, &r->id, err, sizeof err);
    if (st) printf("# add: %s\n", err);
    return st;
}

/* The whole text at once, a request alone. */
static void whole(qtts_pipeline *p, run *r, const char *text) {
    if (!add(p, r, text, 0)) finish(p);
}

/* Push text[len] in pieces (mode 0: 1..8 bytes, 1: one byte, 2: 1..40),
 * running 0..2 steps after each; then its end. */
static void push_all(qtts_pipeline *p, uint64_t id, const char *text, size_t len, int mode) {
    for (size_t i = 0; i < len;) {
        size_t k = mode == 1 ? 1 : 1 + rnd() % (mode == 0 ? 8 : 40);
        if (k > len - i) k = len - i;
        qtts_pipeline_push_text(p, id, text + i, k);
        i += k;
        steps(p, (int)(rnd() % 3));
    }
    qtts_pipeline_end_text(p, id);
}

static int same(const run *a, const run *b) {
    return a->done && b->done && a->st == QTTS_OK && b->st == QTTS_OK && a->n == b->n && a->n > 0 &&
           !memcmp(a->codes, b->codes, sizeof(int32_t) * 16 * (size_t)a->n) && a->n_pcm == b->n_pcm &&
           !memcmp(a->pcm, b->pcm, sizeof(float) * a->n_pcm);
}

static void split_invariance(const qtts_model *m, qtts_pipeline *p) {
    const char *text = "Streaming text arrives a few tokens at a time, and speech starts before it ends — très bien, 你好";
    for (int sample = 0; sample < 2; sample++) {
        run ref = {0};
        ref.gp = gen(m, sample, 77, 60);
        ref.ap = audio(0);
        whole(p, &ref, text);
        int bad = 0, waited = 0;
        char why[256] = "";
        for (int mode = 0; mode < 3; mode++)
            for (int rep = 0; rep < (mode == 1 ? 1 : 3); rep++) {
                run r = {0};
                r.gp = gen(m, sample, 77, 60);
                r.ap = audio(0);
                r.gp.text = NULL;
                if (add(p, &r, NULL, 1)) {
                    bad++;
                    continue;
                }
                push_all(p, r.id, text, strlen(text), mode);
                finish(p);
                if (!same(&r, &ref)) {
                    if (!bad) snprintf(why, sizeof why, "mode %d: status %d, %d frames vs %d, %zu samples vs %zu", mode,
                                       r.st, r.n, ref.n, r.n_pcm, ref.n_pcm);
                    bad++;
                }
                waited += mode == 1;
                run_free(&r);
            }
        char name[128];
        snprintf(name, sizeof name, "incremental/%s: any split gives the whole text's codes and audio",
                 sample ? "seeded sampling" : "greedy");
        test_report(name, bad == 0 && waited == 1, "%d runs differ; first: %s", bad, why);
        run_free(&ref);
    }
}

/* the non-streaming text mode (the CustomVoice default): a segment starts once its text is
 * complete, and is the whole text's */
static void non_streaming(const qtts_model *m, qtts_pipeline *p) {
    const char *text = "The whole sentence goes into the prompt, so it waits for its end";
    run ref = {0};
    ref.gp = gen(m, 1, 31, 40);
    ref.gp.text_mode = QTTS_TEXT_MODE_DEFAULT;
    ref.ap = audio(0);
    whole(p, &ref, text);
    int bad = 0, early = 0;
    for (int mode = 0; mode < 2; mode++) {
        run r = {0};
        r.gp = ref.gp;
        r.ap = audio(0);
        if (!add(p, &r, NULL, 1)) {
            qtts_pipeline_push_text(p, r.id, text, strlen(text));
            steps(p, 5);
            early += r.n > 0; /* nothing before the end of the text */
            qtts_pipeline_end_text(p, r.id);
            finish(p);
        }
        bad += !same(&r, &ref);
        run_free(&r);
    }
    test_report("incremental/non-streaming mode: starts at the end of its text, as the whole text", !bad && !early,
                "%d runs differ, %d started before the end", bad, early);
    run_free(&ref);
}

/* every 10th tokenizer golden string (trimmed), 1 byte at a time and in random pieces */
static void golden_strings(const qtts_model *m, qtts_pipeline *p) {
    json_error_t je;
    json_t *root = json_load_file(test_path("unit/data/tokenizer/tok_golden.json"), 0, &je);
    json_t *cases = root ? json_object_get(root, "cases") : NULL;
    int n_run = 0, bad = 0;
    char why[512] = "";
    for (size_t i = 0; i < json_array_size(cases); i += 10) {
        const char *s = json_string_value(json_object_get(json_array_get(cases, i), "text"));
        size_t b = 0, e = strlen(s);
        while (b < e && strchr(" \t\r\n", s[b])) b++;
        while (e > b && strchr(" \t\r\n", s[e - 1])) e--;
        if (e - b < 2) continue;
        char *t = strndup(s + b, e - b);
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        dbg.force_frames = 24; /* the same length whatever the model says: the text matters throughout */
        run ref = {0};
        ref.gp = gen(m, (int)(i / 10) % 2, 1000 + i, 100);
        ref.gp.debug = &dbg;
        ref.ap = audio(0);
        whole(p, &ref, t);
        for (int mode = 0; mode < 2; mode++) {
            run r = {0};
            r.gp = ref.gp;
            r.ap = audio(0);
            if (!add(p, &r, NULL, 1)) {
                push_all(p, r.id, t, strlen(t), mode == 0 ? 1 : 0);
                finish(p);
            }
            n_run++;
            if (!same(&r, &ref)) {
                if (!bad) snprintf(why, sizeof why, "string %zu (%.60s), mode %d: status %d/%d, %d frames vs %d", i, t,
                                   mode, r.st, ref.st, r.n, ref.n);
                bad++;
            }
            run_free(&r);
        }
        run_free(&ref);
        free(t);
    }
    test_report("incremental/golden strings: any split gives the whole text's codes and audio", n_run >= 40 && bad == 0,
                "%d of %d runs differ; first: %s", bad, n_run, why);
    json_decref(root);
}

/* three incremental requests and a whole-text one in one pipeline */
static void batched(const qtts_model *m) {
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    pp.max_streams = 4;
    pp.decode_threads = 1;
    qtts_pipeline *p = NULL, *solo = NULL;
    char err[512];
    qtts_pipeline_params sp = qtts_pipeline_default_params();
    if (qtts_pipeline_new(m, &pp, &p, err, sizeof err) || qtts_pipeline_new(m, &sp, &solo, err, sizeof err)) {
        test_report("incremental/batched", 0, "%s", err);
        qtts_pipeline_free(p);
        return;
    }
    const char *texts[4] = {"The first voice talks about the weather today.", "A second one counts: one, two, three.",
                            "Ein dritter spricht Deutsch, langsam.", "The whole-text request says hello."};
    run alone[4] = {{0}}, rs[4] = {{0}};
    for (int i = 0; i < 4; i++) {
        alone[i].gp = gen(m, 1, 500 + i, 50);
        alone[i].ap = audio(0);
        whole(solo, &alone[i], texts[i]);
        rs[i].gp = alone[i].gp;
        rs[i].ap = audio(0);
        add(p, &rs[i], i == 3 ? texts[3] : NULL, i < 3);
    }
    size_t at[3] = {0, 0, 0};
    int max_streams = 0;
    for (int guard = 0; guard < 100000 && qtts_pipeline_n_requests(p) > 0; guard++) {
        for (int i = 0; i < 3; i++) { /* each text at its own pace */
            const size_t len = strlen(texts[i]);
            if (at[i] < len && rnd() % (i + 2) == 0) {
                size_t k = 1 + rnd() % 5;
                if (k > len - at[i]) k = len - at[i];
                qtts_pipeline_push_text(p, rs[i].id, texts[i] + at[i], k);
                if ((at[i] += k) == len) qtts_pipeline_end_text(p, rs[i].id);
            }
        }
        if (qtts_pipeline_busy(p)) {
            qtts_pipeline_step(p);
            qtts_step_info si;
            qtts_pipeline_last_step(p, &si);
            if (si.n_streams > max_streams) max_streams = si.n_streams;
        } else if (at[0] == strlen(texts[0]) && at[1] == strlen(texts[1]) && at[2] == strlen(texts[2])) {
            qtts_pipeline_wait(p, 20); /* the decode thread finishes the last chunks */
        }
    }
    int bad = 0;
    for (int i = 0; i < 4; i++)
        if (!same(&rs[i], &alone[i])) {
            bad++;
            int d = 0;
            while (d < rs[i].n && d < alone[i].n && !memcmp(rs[i].codes + d * 16, alone[i].codes + d * 16, 64)) d++;
            size_t ds = 0;
            while (ds < rs[i].n_pcm && ds < alone[i].n_pcm && rs[i].pcm[ds] == alone[i].pcm[ds]) ds++;
            printf("# request %d: status %d/%d, %d frames vs %d alone, first differing frame %d, %zu vs %zu samples "
                   "(first differing sample %zu); result: %zu samples, %d frames, %d chunks, stop %d/%d\n", i, rs[i].st,
                   alone[i].st, rs[i].n, alone[i].n, d, rs[i].n_pcm, alone[i].n_pcm, ds, rs[i].res.n_samples,
                   rs[i].res.n_frames, rs[i].res.stats.n_chunks, rs[i].res.stop_reason, alone[i].res.stop_reason);
        }
    test_report("incremental/batched: each request's codes and audio as alone", bad == 0 && max_streams >= 2,
                "%d of 4 differ, at most %d streams in a step", bad, max_streams);
    for (int i = 0; i < 4; i++) {
        run_free(&rs[i]);
        run_free(&alone[i]);
    }
    qtts_pipeline_free(p);
    qtts_pipeline_free(solo);
}

static const char *const g_sentences[4] = {"Hello there now.", "Fine, thank you!", "And how are you?", "Very well, too."};
static int g_seg_bad, g_seg_calls;
/* on_segment of incremental text: the segment's text so far, never the next one's */
static int on_segment(int segment, int n_segments, const char *text, void *u) {
    (void)u;
    g_seg_calls++;
    if (segment < 0 || segment > 3 || n_segments != segment + 1 || strncmp(g_sentences[segment], text, strlen(text)))
        g_seg_bad++;
    return 0;
}

/* a sentence per segment: as whole-text requests whose split makes the same
 * segments (sentences of at most 16 characters, max_chars 16) */
static void segments(const qtts_model *m, qtts_pipeline *p) {
    const char *text = "Hello there now.  Fine, thank you!\n\nAnd how are you? Very well, too.";
    run ref = {0}, once = {0};
    ref.gp = gen(m, 1, 9, 30);
    ref.ap = audio(1);
    whole(p, &ref, text);
    once.gp = ref.gp;
    once.ap = audio(1);
    if (!add(p, &once, NULL, 1)) {
        qtts_pipeline_push_text(p, once.id, text, strlen(text));
        qtts_pipeline_end_text(p, once.id);
        finish(p);
    }
    int bad = 0;
    for (int rep = 0; rep < 4; rep++) {
        run r = {0};
        r.gp = ref.gp;
        r.ap = audio(1);
        r.ap.on_segment = on_segment;
        if (!add(p, &r, NULL, 1)) {
            push_all(p, r.id, text, strlen(text), rep == 0 ? 1 : 0);
            finish(p);
        }
        bad += !same(&r, &ref) || r.res.n_segments != 4 || r.max_segment != 3;
        run_free(&r);
    }
    test_report("incremental/segments: a sentence each, pauses as the whole text's", same(&once, &ref) && bad == 0 &&
                    ref.res.n_segments == 4,
                "whole-text %d segments, at once same %d, %d split runs differ", ref.res.n_segments, same(&once, &ref),
                bad);
    test_report("incremental/segments: on_segment gets each sentence's text so far", g_seg_calls == 16 && !g_seg_bad,
                "%d calls (want 16), %d wrong", g_seg_calls, g_seg_bad);
    run_free(&ref);
    run_free(&once);
}

static void cancel_and_errors(const qtts_model *m, qtts_pipeline *p) {
    run a = {0}, b = {0}, c = {0}, d = {0};
    a.gp = b.gp = c.gp = d.gp = gen(m, 1, 3, 200);
    a.ap = b.ap = c.ap = d.ap = audio(1);
    /* a: no text yet; b: waits for text mid-sentence */
    add(p, &a, NULL, 1);
    steps(p, 3);
    qtts_pipeline_cancel(p, a.id);
    finish(p);
    add(p, &b, "This sentence goes on and on and", 1);
    for (int i = 0; i < 200 && qtts_pipeline_busy(p); i++) qtts_pipeline_step(p);
    const int stalled = !qtts_pipeline_busy(p) && qtts_pipeline_n_requests(p) == 1 && b.n > 0;
    qtts_pipeline_cancel(p, b.id);
    finish(p);
    const qtts_status after = qtts_pipeline_push_text(p, b.id, "x", 1);
    test_report("incremental/cancel before and while waiting for text",
                a.done && a.st == QTTS_ERR_CANCELLED && a.n == 0 && stalled && b.done && b.st == QTTS_ERR_CANCELLED &&
                    after == QTTS_ERR_INVALID_ARG,
                "a: done %d status %d; b: stalled %d, done %d status %d, %d frames; push after the end %d", a.done, a.st,
                stalled, b.done, b.st, b.n, after);
    add(p, &c, NULL, 1);
    qtts_pipeline_push_text(p, c.id, " \n ", 3);
    qtts_pipeline_end_text(p, c.id);
    finish(p);
    add(p, &d, "Fine so far, \xff then not", 1);
    qtts_pipeline_end_text(p, d.id);
    finish(p);
    test_report("incremental/empty or invalid text is QTTS_ERR_INPUT", c.done && c.st == QTTS_ERR_INPUT && d.done &&
                    d.st == QTTS_ERR_INPUT, "empty: %d %d, invalid: %d %d", c.done, c.st, d.done, d.st);
    run_free(&a);
    run_free(&b);
    run_free(&c);
    run_free(&d);
}

/* ICL: 24 reference frames and a short transcript: the prefill holds the first text tokens beside them */
static void icl(void) {
    char dir[256], cmd[2048], err[1024];
    snprintf(dir, sizeof dir, "/tmp/qtts-incr-icl-%d", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "set -e; mkdir -p %s; for f in %s/*; do ln -sf \"$(cd \"$(dirname \"$f\")\" && pwd)/$(basename \"$f\")\" %s/; "
             "done; cp %s/* %s/",
             dir, test_path("golden/data/base_clone"), dir, test_path("golden/tiny_tokenizer"), dir);
    if (system(cmd)) {
        test_report("incremental/icl/setup", 0, "%s failed", cmd);
        return;
    }
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.backend = QTTS_BACKEND_CPU;
    qtts_pipeline *p = NULL;
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    if (qtts_model_load(&m, dir, &mp, err, sizeof err) || qtts_pipeline_new(m, &pp, &p, err, sizeof err)) {
        test_report("incremental/icl/load", 0, "%s", err);
        qtts_model_free(m);
        return;
    }
    float xv[64];
    for (int i = 0; i < 64; i++) xv[i] = 0.05f * (float)((i * 7) % 11 - 5);
    int32_t ref_codes[24 * 16];
    for (int i = 0; i < 24 * 16; i++) ref_codes[i] = (i * 37 + 5) % 1000;
    const char *text = "Hello Bob, how are you today? Fine, thanks a lot for asking me";
    run ref = {0};
    ref.gp = qtts_gen_default_params(m);
    ref.gp.language = "english";
    ref.gp.xvector = xv;
    ref.gp.ref_codes = ref_codes;
    ref.gp.n_ref_frames = 24;
    ref.gp.ref_text = "Hi there";
    ref.gp.text_mode = QTTS_TEXT_MODE_STREAMING;
    ref.gp.seed = 5;
    qtts_gen_debug dbg = qtts_gen_debug_default_params();
    dbg.force_frames = 40;
    ref.gp.debug = &dbg;
    ref.ap = audio(0);
    whole(p, &ref, text);
    int bad = 0;
    char why[256] = "";
    for (int mode = 0; mode < 3; mode++) {
        run r = {0};
        r.gp = ref.gp;
        r.ap = audio(0);
        if (!add(p, &r, NULL, 1)) {
            push_all(p, r.id, text, strlen(text), mode);
            finish(p);
        }
        if (!same(&r, &ref)) {
            if (!bad) snprintf(why, sizeof why, "mode %d: status %d/%d, %d frames vs %d", mode, r.st, ref.st, r.n, ref.n);
            bad++;
        }
        run_free(&r);
    }
    test_report("incremental/icl: any split gives the whole text's codes and audio", bad == 0, "%d of 3 differ; %s",
                bad, why);
    run_free(&ref);
    qtts_pipeline_free(p);
    qtts_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
}

int main(void) {
    char err[1024];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 1;
    mp.backend = QTTS_BACKEND_CPU;
    if (qtts_model_load(&m, test_path("golden/data/e2e_string"), &mp, err, sizeof err)) {
        test_report("incremental/load", 0, "%s", err);
        return test_finish();
    }
    qtts_pipeline *p = NULL;
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    pp.decode_threads = 0;
    if (qtts_pipeline_new(m, &pp, &p, err, sizeof err)) {
        test_report("incremental/pipeline", 0, "%s", err);
        qtts_model_free(m);
        return test_finish();
    }
    split_invariance(m, p);
    non_streaming(m, p);
    golden_strings(m, p);
    segments(m, p);
    cancel_and_errors(m, p);
    qtts_pipeline_free(p);
    batched(m);
    qtts_model_free(m);
    icl();
    return test_finish();
}
