/* Voice cloning end to end from the reference recording: for every Base run,
 * qtts_voice_* computes the x-vector and (ICL) the reference codes from the
 * golden reference audio, and synthesis with that voice reproduces the
 * official codes exactly and the waveform within 1e-4. Saved voices round-trip
 * to the same codes; wrong model types and corrupted files are clear errors. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/voice_file.h"
#include "npy.h"
#include "qtts.h"
#include "test.h"

static int codes_equal(const int32_t *c, int nf, const npy_array *g) {
    if (g->n != (long)nf * 16) return 0;
    for (long i = 0; i < g->n; i++)
        if (c[i] != g->i64[i]) return 0;
    return 1;
}

/* Synthesize with voice v: codes and audio (caller frees). */
static int synth(qtts_context *ctx, qtts_gen_params *gp, qtts_voice *v, int32_t **codes, int *nf, float **pcm,
                 size_t *n) {
    gp->voice = v;
    *codes = NULL;
    *pcm = NULL;
    if (qtts_generate_codes(ctx, gp, NULL, NULL, codes, nf)) return 0;
    return qtts_synthesize(ctx, gp, NULL, NULL, NULL, pcm, n) == QTTS_OK;
}

/* A saved ICL voice restores its primed decoder state instead of decoding the
 * reference again: codes and audio bit-identical to a voice file without the
 * state (which decodes the reference), a doctored state is used (the audio
 * changes), and a state of another decoder (other key) is ignored. */
static void primed_checks(qtts_model *m, qtts_context *ctx, qtts_gen_params *gp0, qtts_voice *saved,
                          const unsigned char *buf, size_t size, const char *run) {
    char name[256], err[1024];
    qtts_gen_params gp = *gp0;
    voice_data d;
    qtts_error e;
    if (!saved || voice_load_mem(buf, size, "mem", &d, &e)) {
        snprintf(name, sizeof name, "clone/%s/primed_file", run);
        test_report(name, 0, "%s", e.msg);
        return;
    }
    int32_t *c_ref = NULL, *c = NULL;
    float *p_ref = NULL, *p = NULL;
    int nf_ref = 0, nf = 0;
    size_t n_ref = 0, n = 0;
    /* the reference: the same voice without its state (decodes the reference frames) */
    float *state = d.primed_state;
    size_t sn = d.primed_n;
    d.primed_state = NULL;
    d.primed_n = 0;
    unsigned char *b = NULL;
    size_t bn = 0;
    qtts_voice *plain = NULL;
    int ok = !voice_save_mem(&d, &b, &bn, &e) && !qtts_voice_load_memory(m, b, bn, "plain", &plain, err, sizeof err) &&
             !qtts_voice_has_primed_state(plain) && synth(ctx, &gp, plain, &c_ref, &nf_ref, &p_ref, &n_ref);
    free(b);
    snprintf(name, sizeof name, "clone/%s/unprimed_voice_synthesizes", run);
    test_report(name, ok, "%s", err);
    printf("# clone/%s: primed state %zu floats = %zu bytes of the voice file (%zu in all)\n", run, sn, sn * 4, size);
    /* the saved voice with its state */
    ok = ok && synth(ctx, &gp, saved, &c, &nf, &p, &n);
    snprintf(name, sizeof name, "clone/%s/primed_voice_bit_identical", run);
    test_report(name, ok && nf == nf_ref && !memcmp(c, c_ref, sizeof(int32_t) * 16 * (size_t)nf) && n == n_ref &&
                          !memcmp(p, p_ref, sizeof(float) * n),
                "%d vs %d frames, %zu vs %zu samples", nf, nf_ref, n, n_ref);
    free(c), free(p);
    /* a doctored state with the right key is used: the audio changes */
    d.primed_state = calloc(sn, sizeof(float));
    d.primed_n = sn;
    qtts_voice *doc = NULL;
    b = NULL;
    int used = d.primed_state && !voice_save_mem(&d, &b, &bn, &e) &&
               !qtts_voice_load_memory(m, b, bn, "doctored", &doc, err, sizeof err) &&
               synth(ctx, &gp, doc, &c, &nf, &p, &n) && n == n_ref && memcmp(p, p_ref, sizeof(float) * n) != 0;
    snprintf(name, sizeof name, "clone/%s/primed_state_is_used", run);
    test_report(name, used, "%s", err);
    free(c), free(p), free(b);
    qtts_voice_free(doc);
    /* the real state under another decoder's key is ignored: decoded again, same bits */
    memcpy(d.primed_state, state, sn * sizeof(float));
    d.primed_key ^= 1;
    doc = NULL;
    b = NULL;
    ok = !voice_save_mem(&d, &b, &bn, &e) && !qtts_voice_load_memory(m, b, bn, "other key", &doc, err, sizeof err) &&
         synth(ctx, &gp, doc, &c, &nf, &p, &n) && n == n_ref && !memcmp(p, p_ref, sizeof(float) * n);
    snprintf(name, sizeof name, "clone/%s/primed_other_key_decodes_again", run);
    test_report(name, ok, "%s", err);
    free(c), free(p), free(b);
    qtts_voice_free(doc);
    free(state);
    voice_free(&d);
    free(c_ref), free(p_ref);
    qtts_voice_free(plain);
}

int main(void) {
    char err[1024], name[256];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2; /* the threaded speaker encoder, codec encoder and decoder against the goldens */
    if (qtts_model_load(&m, test_path("golden/data/base_clone"), &mp, err, sizeof err)) {
        test_report("clone/load", 0, "%s", err);
        return test_finish();
    }
    qtts_context *ctx = NULL;
    qtts_context_new(m, NULL, &ctx, NULL, 0);
    npy_array ref = {0};
    npy_load(test_path("golden/data/base_clone/inputs/ref_audio.npy"), &ref, err, sizeof err);
    json_error_t je;
    json_t *prompts = json_load_file(test_path("golden/data/base_clone/inputs/prompts.json"), 0, &je);
    const char *run;
    json_t *pj;
    json_object_foreach(prompts, run, pj) {
        const char *kind = json_string_value(json_object_get(pj, "kind"));
        if (!kind) continue;
        const int icl = !strcmp(kind, "icl");
        long samples = (long)json_integer_value(json_object_get(json_object_get(pj, "ref_audio"), "samples"));
        json_t *in = json_object_get(pj, "input_ids");
        int n_text = 0, n_ref = 0;
        int32_t *text = test_ids_from_json(in, 3, 5, &n_text), *rids = NULL;
        qtts_voice_params vp = qtts_voice_default_params();
        if (icl) {
            rids = test_ids_from_json(json_object_get(pj, "ref_ids"), 3, 2, &n_ref);
            vp.ref_text_ids = rids;
            vp.n_ref_text_ids = n_ref;
        } else {
            vp.xvector_only = 1;
        }
        qtts_voice *v = NULL;
        qtts_status s = qtts_voice_from_pcm(m, ref.f32, (size_t)samples, 24000, &vp, &v, err, sizeof err);
        snprintf(name, sizeof name, "clone/%s/voice", run);
        test_report(name, s == QTTS_OK && qtts_voice_is_icl(v) == icl, "%s", err);
        if (s) continue;
        /* the voice's parts against the goldens */
        unsigned char *buf = NULL;
        size_t size = 0;
        voice_data d;
        qtts_error e;
        memset(&d, 0, sizeof d);
        if (!qtts_voice_save_memory(v, &buf, &size, err, sizeof err) && !voice_load_mem(buf, size, "mem", &d, &e)) {
            npy_array xv = {0}, rc = {0};
            npy_load(test_path("golden/data/base_clone/golden/%s/xvector.npy", run), &xv, err, sizeof err);
            double mabs;
            double r = rel_err(d.xvector, xv.f32, xv.n, &mabs);
            snprintf(name, sizeof name, "clone/%s/xvector", run);
            test_report(name, xv.n == d.xvector_len && r <= 1e-5, "max|d| %.3g rel %.3g", mabs, r);
            printf("# %-40s max|d| %.3e rel %.3e\n", name, mabs, r);
            if (icl) {
                npy_load(test_path("golden/data/base_clone/golden/%s/ref_codes.npy", run), &rc, err, sizeof err);
                snprintf(name, sizeof name, "clone/%s/ref_codes_exact", run);
                test_report(name, codes_equal(d.ref_codes, d.n_ref_frames, &rc), "%d frames vs %ld", d.n_ref_frames,
                            rc.shape[0]);
            }
            npy_free(&xv);
            npy_free(&rc);
        }
        voice_free(&d);
        /* synthesis with the voice */
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.voice = v;
        gp.text_ids = text;
        gp.n_text_ids = n_text;
        qtts_gen_debug dbg = qtts_gen_debug_default_params();
        dbg.newline_id = 10;
        gp.debug = &dbg;
        json_t *lang = json_object_get(pj, "language");
        gp.language = json_string_value(lang);
        gp.text_mode = json_is_true(json_object_get(pj, "non_streaming_mode")) ? QTTS_TEXT_MODE_NON_STREAMING
                                                                                : QTTS_TEXT_MODE_STREAMING;
        gp.talker.do_sample = gp.predictor.do_sample = 0;
        gp.talker.repetition_penalty = (float)json_number_value(json_object_get(pj, "repetition_penalty"));
        gp.max_new_tokens = (int)json_integer_value(json_object_get(pj, "max_new_tokens"));
        npy_array gc = {0}, gw = {0};
        npy_load(test_path("golden/data/base_clone/golden/%s/codes.npy", run), &gc, err, sizeof err);
        npy_load(test_path("golden/data/base_clone/golden/%s/waveform.npy", run), &gw, err, sizeof err);
        int32_t *codes = NULL;
        int nf = 0;
        s = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &nf);
        snprintf(name, sizeof name, "clone/%s/codes_exact", run);
        test_report(name, !s && codes_equal(codes, nf, &gc), "status %d (%s), %d frames", s, qtts_context_last_error(ctx), nf);
        free(codes);
        float *pcm = NULL;
        size_t n = 0;
        s = qtts_synthesize(ctx, &gp, NULL, NULL, NULL, &pcm, &n);
        double mabs = INFINITY;
        if (!s && (long)n == gw.n) rel_err(pcm, gw.f32, gw.n, &mabs);
        snprintf(name, sizeof name, "clone/%s/waveform", run);
        test_report(name, !s && mabs <= 1e-4, "status %d, %zu samples vs %ld, max|d| %.3g", s, n, gw.n, mabs);
        printf("# %-40s max|d| %.3e\n", name, mabs);
        /* again with the same voice: the decoder now starts from the voice's cached primed state */
        float *pcm2 = NULL;
        size_t n2 = 0;
        qtts_status s2 = qtts_synthesize(ctx, &gp, NULL, NULL, NULL, &pcm2, &n2);
        snprintf(name, sizeof name, "clone/%s/second_use_same_bits", run);
        test_report(name, !s && !s2 && n2 == n && !memcmp(pcm, pcm2, sizeof(float) * n), "status %d, %zu vs %zu samples", s2, n2, n);
        free(pcm2);
        free(pcm);
        /* save -> load -> same codes */
        char path[256];
        snprintf(path, sizeof path, "/tmp/qtts-clone-%d-%s.qvoice", (int)getpid(), run);
        qtts_voice *v2 = NULL;
        int ok = !qtts_voice_save(v, path, err, sizeof err) && !qtts_voice_load(m, path, &v2, err, sizeof err);
        if (ok) {
            gp.voice = v2;
            codes = NULL;
            ok = !qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &nf) && codes_equal(codes, nf, &gc);
            free(codes);
        }
        snprintf(name, sizeof name, "clone/%s/save_load_same_codes", run);
        test_report(name, ok, "%s", err);
        if (icl) {
            snprintf(name, sizeof name, "clone/%s/voice_made_primed", run);
            test_report(name, qtts_voice_has_primed_state(v) && v2 && qtts_voice_has_primed_state(v2),
                        "made %d, loaded %d", qtts_voice_has_primed_state(v), v2 ? qtts_voice_has_primed_state(v2) : -1);
            primed_checks(m, ctx, &gp, v2, buf, size, run);
        }
        qtts_voice_free(v2);
        remove(path);
        npy_free(&gc);
        npy_free(&gw);
        free(buf);
        qtts_voice_free(v);
        free(text);
        free(rids);
    }
    /* errors */
    qtts_voice_params vp = qtts_voice_default_params();
    qtts_voice *v = NULL;
    qtts_status s = qtts_voice_from_pcm(m, ref.f32, 24000, 24000, &vp, &v, err, sizeof err);
    test_report("clone/errors/icl_needs_transcript", s == QTTS_ERR_INPUT && strstr(err, "transcript"), "status %d: %s", s, err);
    vp.xvector_only = 1;
    float *silence = calloc(24000, sizeof(float));
    s = qtts_voice_from_pcm(m, silence, 100, 24000, &vp, &v, err, sizeof err);
    test_report("clone/errors/too_short", s == QTTS_ERR_INPUT, "status %d: %s", s, err);
    free(silence);
    s = qtts_voice_from_file(m, "/nonexistent/ref.wav", &vp, &v, err, sizeof err);
    test_report("clone/errors/missing_file", s == QTTS_ERR_IO && strstr(err, "/nonexistent/ref.wav"), "status %d: %s", s, err);
    /* a voice for another variant */
    qtts_voice_from_pcm(m, ref.f32, 38400, 24000, &vp, &v, err, sizeof err);
    unsigned char *buf = NULL;
    size_t size = 0;
    qtts_voice_save_memory(v, &buf, &size, err, sizeof err);
    qtts_voice_free(v);
    qtts_model *cv = NULL;
    qtts_model_load(&cv, test_path("golden/data/custom_voice"), NULL, err, sizeof err);
    s = qtts_voice_load_memory(cv, buf, size, "alice.qvoice", &v, err, sizeof err);
    test_report("clone/errors/voice_for_other_model", s != QTTS_OK && strstr(err, "Base"), "status %d: %s", s, err);
    s = qtts_voice_from_pcm(cv, ref.f32, 38400, 24000, &vp, &v, err, sizeof err);
    test_report("clone/errors/clone_on_custom_voice", s == QTTS_ERR_INPUT && strstr(err, "Base model"), "status %d: %s", s, err);
    buf[size / 2] ^= 0x40;
    s = qtts_voice_load_memory(m, buf, size, "alice.qvoice", &v, err, sizeof err);
    test_report("clone/errors/corrupted_voice", s == QTTS_ERR_FORMAT && strstr(err, "alice.qvoice"), "status %d: %s", s, err);
    free(buf);
    qtts_model_free(cv);
    npy_free(&ref);
    json_decref(prompts);
    qtts_context_free(ctx);
    qtts_model_free(m);
    return test_finish();
}
