/* One model shared by four threads at once (a model is immutable after load).
 * On the e2e_string checkpoint (it has the tokenizer files) each thread, in
 * rounds, tokenizes valid and invalid UTF-8, creates and frees contexts (and
 * fails to make one, with a message of its own), makes a bad request on a
 * context of its own, and synthesizes a short request. On the base_clone
 * checkpoint each thread makes a voice from the reference recording and
 * synthesizes with one voice that all threads share. Every result must equal
 * the one-thread reference made first: the same ids, the same status and
 * message (with the byte offset in the caller's text) for invalid UTF-8, the
 * same voice file bytes, bit-identical audio. `make tsan-test` runs it under
 * ThreadSanitizer, where any data race on the shared model (an error message
 * written into it, say) fails the run. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qtts.h"
#include "test.h"

#define N_THREADS 4
#define N_ROUNDS 3

static const char *const k_valid[] = {"Hello! It's 3:45 pm", "Grüße aus München.", "你好，世界。",
                                      "<|im_start|>assistant\nHi<|im_end|>", "  spaces\tand\nlines  ", "emoji 🎉 ok"};
#define N_VALID ((int)(sizeof k_valid / sizeof k_valid[0]))

static const struct {
    const char *text;
    const char *offset; /* in the message */
} k_invalid[] = {
    {"abc\xff", "byte offset 3 ("},
    {"\xc3", "byte offset 0 ("},
    {"ok \xe2\x82", "byte offset 3 ("},                 /* truncated at the end */
    {"h\xc3\xa9llo \xed\xa0\x80", "byte offset 7 ("}, /* a UTF-16 surrogate after a 2-byte character */
};
#define N_INVALID ((int)(sizeof k_invalid / sizeof k_invalid[0]))

/* What one thread computes; the reference is the same made alone first. */
typedef struct result {
    int32_t *ids[N_VALID];
    int n_ids[N_VALID];
    qtts_status tok_st[N_VALID];
    qtts_status bad_st[N_INVALID];
    char bad_msg[N_INVALID][512];
    float *pcm;
    size_t n_pcm;
    qtts_status synth_st;
    char synth_err[512];
} result;

static void result_free(result *r) {
    for (int i = 0; i < N_VALID; i++) free(r->ids[i]);
    free(r->pcm);
    memset(r, 0, sizeof *r);
}

static const qtts_model *g_model;
static pthread_barrier_t g_start;

static qtts_gen_params request(void) {
    qtts_gen_params gp = qtts_gen_default_params(g_model); /* sampling on: each context's RNG from the seed */
    gp.text = "Hi there.";
    gp.speaker = "vivian";
    gp.language = "english";
    gp.seed = 7;
    gp.max_new_tokens = 12;
    return gp;
}

static void tokenize_all(result *r) {
    for (int i = 0; i < N_VALID; i++)
        r->tok_st[i] = qtts_tokenize(g_model, k_valid[i], &r->ids[i], &r->n_ids[i], NULL, 0);
    for (int i = 0; i < N_INVALID; i++) {
        int32_t *ids = NULL;
        int n = 0;
        r->bad_st[i] = qtts_tokenize(g_model, k_invalid[i].text, &ids, &n, r->bad_msg[i], sizeof r->bad_msg[i]);
        if (ids) r->bad_st[i] = QTTS_ERR_INTERNAL; /* ids on failure: a bug */
        free(ids);
    }
}

static void synthesize(result *r) {
    qtts_context *ctx = NULL;
    r->synth_st = qtts_context_new(g_model, NULL, &ctx, r->synth_err, sizeof r->synth_err);
    if (r->synth_st) return;
    qtts_gen_params gp = request();
    qtts_audio_params ap = qtts_audio_default_params();
    ap.chunk_frames = 2; /* several chunks: with overlap (the default on 2 threads) a pool worker decodes them */
    r->synth_st = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &r->pcm, &r->n_pcm);
    snprintf(r->synth_err, sizeof r->synth_err, "%s", qtts_context_last_error(ctx));
    qtts_context_free(ctx);
}

/* Per thread: what went wrong, as counts and the first message. */
typedef struct worker {
    int index;
    const result *ref;
    int tok_bad, utf8_bad, ctx_bad, own_err_bad, synth_bad;
    char why[1024];
} worker;

/* Count a failure; keep the first one's message. */
static void note(worker *w, int *count, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void note(worker *w, int *count, const char *fmt, ...) {
    if (!w->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->why, sizeof w->why, fmt, ap);
        va_end(ap);
    }
    (*count)++;
}

static int same_result_tok(const result *a, const result *b, int i) {
    return a->tok_st[i] == b->tok_st[i] && a->n_ids[i] == b->n_ids[i] &&
           (a->n_ids[i] == 0 || memcmp(a->ids[i], b->ids[i], sizeof(int32_t) * a->n_ids[i]) == 0);
}

static void *work(void *arg) {
    worker *w = arg;
    const result *ref = w->ref;
    pthread_barrier_wait(&g_start);
    for (int round = 0; round < N_ROUNDS; round++) {
        result r;
        memset(&r, 0, sizeof r);
        tokenize_all(&r);
        for (int i = 0; i < N_VALID; i++)
            if (!same_result_tok(&r, ref, i)) note(w, &w->tok_bad, "round %d: ids of \"%s\" differ", round, k_valid[i]);
        for (int i = 0; i < N_INVALID; i++)
            if (r.bad_st[i] != QTTS_ERR_INPUT || strcmp(r.bad_msg[i], ref->bad_msg[i]) != 0)
                note(w, &w->utf8_bad, "round %d: invalid UTF-8 gave \"%s\"", round, r.bad_msg[i]);

        /* contexts: two made and freed; a failed one reports to its caller only */
        char err[512];
        qtts_context *a = NULL, *b = NULL;
        qtts_status sa = qtts_context_new(g_model, NULL, &a, err, sizeof err);
        qtts_status sb = qtts_context_new(g_model, NULL, &b, err, sizeof err);
        if (sa || sb || !a || !b || err[0]) note(w, &w->ctx_bad, "round %d: context_new failed: %s", round, err);
        qtts_context *none = a;
        qtts_status sn = qtts_context_new(NULL, NULL, &none, err, sizeof err);
        if (sn != QTTS_ERR_INVALID_ARG || none || !strstr(err, "NULL"))
            note(w, &w->ctx_bad, "round %d: a NULL model gave \"%s\"", round, err);

        /* a bad request on a context of its own: the message stays there */
        if (a) {
            qtts_gen_params gp = request();
            gp.speaker = w->index & 1 ? "nobody" : "somebody";
            qtts_status s = qtts_generate_codes(a, &gp, NULL, NULL, NULL, NULL);
            const char *msg = qtts_context_last_error(a);
            if (s != QTTS_ERR_INPUT || !strstr(msg, gp.speaker))
                note(w, &w->own_err_bad, "round %d: unknown speaker gave \"%s\"", round, msg);
        }
        qtts_context_free(a);
        qtts_context_free(b);

        synthesize(&r);
        if (r.synth_st || r.n_pcm != ref->n_pcm || memcmp(r.pcm, ref->pcm, sizeof(float) * r.n_pcm) != 0)
            note(w, &w->synth_bad, "round %d: audio differs from the one-thread run (%s)", round, r.synth_err);
        result_free(&r);
    }
    return NULL;
}

/* Run fn on N_THREADS threads that start together (args[i] each); 0 when
 * every thread ran. */
static int run_threads(void *(*fn)(void *), void *args, size_t arg_size) {
    pthread_t th[N_THREADS];
    pthread_barrier_init(&g_start, NULL, N_THREADS);
    int started = 0;
    for (int i = 0; i < N_THREADS; i++) {
        if (pthread_create(&th[i], NULL, fn, (char *)args + arg_size * i) != 0) break;
        started++;
    }
    if (started < N_THREADS) { /* the barrier would never open: say so and stop */
        test_report("shared/threads", 0, "only %d of %d threads started", started, N_THREADS);
        fflush(stdout);
        _Exit(test_finish());
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_start);
    return 0;
}

static void text_model(void) {
    char err[1024];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2; /* the threads share the model's pool too */
    qtts_status st = qtts_model_load(&m, test_path("golden/data/e2e_string"), &mp, err, sizeof err);
    test_report("shared/load", st == QTTS_OK, "%s", err);
    if (st) return;
    g_model = m;

    /* the reference, alone */
    result ref;
    memset(&ref, 0, sizeof ref);
    tokenize_all(&ref);
    synthesize(&ref);
    static const int32_t hello[10] = {9707, 0, 1084, 594, 220, 18, 25, 19, 20, 8836};
    int ok = 1;
    for (int i = 0; i < N_VALID; i++) ok = ok && ref.tok_st[i] == QTTS_OK && ref.n_ids[i] > 0;
    test_report("shared/reference_tokenize", ok && ref.n_ids[0] == 10 && !memcmp(ref.ids[0], hello, sizeof hello),
                "a valid text did not tokenize, or \"%s\" gave %d ids", k_valid[0], ref.n_ids[0]);
    ok = 1;
    for (int i = 0; i < N_INVALID; i++)
        ok = ok && ref.bad_st[i] == QTTS_ERR_INPUT && strstr(ref.bad_msg[i], "not valid UTF-8") &&
             strstr(ref.bad_msg[i], k_invalid[i].offset);
    test_report("shared/reference_invalid_utf8", ok, "messages: \"%s\" / \"%s\" / \"%s\" / \"%s\"", ref.bad_msg[0],
                ref.bad_msg[1], ref.bad_msg[2], ref.bad_msg[3]);
    test_report("shared/reference_synthesize", ref.synth_st == QTTS_OK && ref.n_pcm > 0, "status %d: %s",
                (int)ref.synth_st, ref.synth_err);

    worker w[N_THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N_THREADS; i++) {
        w[i].index = i;
        w[i].ref = &ref;
    }
    run_threads(work, w, sizeof w[0]);

    for (int i = 0; i < N_THREADS; i++) {
        char name[96];
        snprintf(name, sizeof name, "shared/t%d/tokenize_same_ids", i);
        test_report(name, w[i].tok_bad == 0, "%d mismatches: %s", w[i].tok_bad, w[i].why);
        snprintf(name, sizeof name, "shared/t%d/invalid_utf8_same_message", i);
        test_report(name, w[i].utf8_bad == 0, "%d mismatches: %s", w[i].utf8_bad, w[i].why);
        snprintf(name, sizeof name, "shared/t%d/contexts", i);
        test_report(name, w[i].ctx_bad == 0, "%d failures: %s", w[i].ctx_bad, w[i].why);
        snprintf(name, sizeof name, "shared/t%d/context_keeps_own_error", i);
        test_report(name, w[i].own_err_bad == 0, "%d failures: %s", w[i].own_err_bad, w[i].why);
        snprintf(name, sizeof name, "shared/t%d/synthesize_same_bits", i);
        test_report(name, w[i].synth_bad == 0, "%d of %d rounds: %s", w[i].synth_bad, N_ROUNDS, w[i].why);
    }
    result_free(&ref);
    qtts_model_free(m);
    g_model = NULL;
}

/* ---------------------------------------------------------------- voices */

static const int32_t k_text_ids[8] = {17, 300, 45, 999, 2, 511, 64, 8}; /* ids of the tiny vocabulary */
static const int32_t k_ref_text_ids[5] = {17, 300, 45, 999, 2};

typedef struct voice_result {
    qtts_status st;
    char err[512];
    unsigned char *file; /* the voice saved to memory */
    size_t file_size;
    float *pcm;
    size_t n_pcm;
} voice_result;

typedef struct voice_worker {
    const qtts_voice *shared; /* one voice every thread speaks with */
    const voice_result *ref;
    int voice_bad, synth_bad;
    char why[1024];
} voice_worker;

static const char *g_ref_wav;

/* An ICL voice from the reference recording, saved to memory. */
static void make_voice(voice_result *r) {
    qtts_voice_params vp = qtts_voice_default_params();
    vp.ref_text_ids = k_ref_text_ids;
    vp.n_ref_text_ids = 5;
    qtts_voice *v = NULL;
    r->st = qtts_voice_from_file(g_model, g_ref_wav, &vp, &v, r->err, sizeof r->err);
    if (!r->st) r->st = qtts_voice_save_memory(v, &r->file, &r->file_size, r->err, sizeof r->err);
    qtts_voice_free(v);
}

static void speak_with(const qtts_voice *v, voice_result *r) {
    qtts_context *ctx = NULL;
    r->st = qtts_context_new(g_model, NULL, &ctx, r->err, sizeof r->err);
    if (r->st) return;
    qtts_gen_params gp = qtts_gen_default_params(g_model);
    gp.text_ids = k_text_ids;
    gp.n_text_ids = 8;
    gp.language = "english";
    gp.voice = v;
    gp.seed = 7;
    gp.max_new_tokens = 8;
    qtts_audio_params ap = qtts_audio_default_params();
    ap.chunk_frames = 2;
    r->st = qtts_synthesize(ctx, &gp, &ap, NULL, NULL, &r->pcm, &r->n_pcm);
    snprintf(r->err, sizeof r->err, "%s", qtts_context_last_error(ctx));
    qtts_context_free(ctx);
}

static void *voice_work(void *arg) {
    voice_worker *w = arg;
    pthread_barrier_wait(&g_start);
    for (int round = 0; round < N_ROUNDS; round++) {
        voice_result r;
        memset(&r, 0, sizeof r);
        make_voice(&r);
        if (r.st || r.file_size != w->ref[0].file_size || memcmp(r.file, w->ref[0].file, r.file_size) != 0) {
            if (!w->why[0]) snprintf(w->why, sizeof w->why, "round %d: the voice differs (%s)", round, r.err);
            w->voice_bad++;
        }
        free(r.file);
        memset(&r, 0, sizeof r);
        speak_with(w->shared, &r);
        if (r.st || r.n_pcm != w->ref[1].n_pcm || memcmp(r.pcm, w->ref[1].pcm, sizeof(float) * r.n_pcm) != 0) {
            if (!w->why[0]) snprintf(w->why, sizeof w->why, "round %d: audio differs (%s)", round, r.err);
            w->synth_bad++;
        }
        free(r.pcm);
    }
    return NULL;
}

static void base_model(void) {
    char err[1024];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2;
    qtts_status st = qtts_model_load(&m, test_path("golden/data/base_clone"), &mp, err, sizeof err);
    test_report("shared/voices/load", st == QTTS_OK, "%s", err);
    if (st) return;
    g_model = m;
    g_ref_wav = test_path("golden/data/base_clone/inputs/ref_audio.wav");

    /* the reference, alone: a voice, and speech with it */
    voice_result ref[2];
    memset(ref, 0, sizeof ref);
    qtts_voice *shared = NULL;
    make_voice(&ref[0]);
    if (!ref[0].st) ref[0].st = qtts_voice_load_memory(m, ref[0].file, ref[0].file_size, "reference", &shared, ref[0].err,
                                                       sizeof ref[0].err);
    test_report("shared/voices/reference_voice", ref[0].st == QTTS_OK && qtts_voice_is_icl(shared), "status %d: %s",
                (int)ref[0].st, ref[0].err);
    if (!ref[0].st) speak_with(shared, &ref[1]);
    test_report("shared/voices/reference_synthesize", !ref[0].st && ref[1].st == QTTS_OK && ref[1].n_pcm > 0,
                "status %d: %s", (int)ref[1].st, ref[1].err);

    if (!ref[0].st && !ref[1].st) {
        voice_worker w[N_THREADS];
        memset(w, 0, sizeof w);
        for (int i = 0; i < N_THREADS; i++) {
            w[i].shared = shared;
            w[i].ref = ref;
        }
        run_threads(voice_work, w, sizeof w[0]);
        for (int i = 0; i < N_THREADS; i++) {
            char name[96];
            snprintf(name, sizeof name, "shared/voices/t%d/same_voice_bytes", i);
            test_report(name, w[i].voice_bad == 0, "%d of %d rounds: %s", w[i].voice_bad, N_ROUNDS, w[i].why);
            snprintf(name, sizeof name, "shared/voices/t%d/shared_voice_same_bits", i);
            test_report(name, w[i].synth_bad == 0, "%d of %d rounds: %s", w[i].synth_bad, N_ROUNDS, w[i].why);
        }
    }
    qtts_voice_free(shared);
    for (int i = 0; i < 2; i++) {
        free(ref[i].file);
        free(ref[i].pcm);
    }
    qtts_model_free(m);
    g_model = NULL;
}

int main(void) {
    text_model();
    base_model();
    return test_finish();
}
