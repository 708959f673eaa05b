/* qtts-server in process on a free loopback port, CustomVoice test
 * checkpoint (tests/golden/data/e2e_string): meta endpoints, every response
 * format whole and streamed (raw chunks and SSE) with the streamed samples
 * equal to the whole file's, seeds, speed, every kind of bad request answered
 * 4xx in OpenAI's error shape, body and input limits, API key and CORS, and
 * the batching contract: the same request (fixed seed, sampling on) returns
 * byte-identical pcm and wav bodies alone and while three others run. */
#include <pthread.h>
#include <stdint.h>

#include "srv_util.h"

#define REQ(fmt_, extra)                                                                                               \
    "{\"model\":\"qtts\",\"input\":\"Hello there, how are you today?\",\"voice\":\"vivian\",\"language\":\"english\"," \
    "\"seed\":7,\"do_sample\":true,\"temperature\":0.9,\"top_k\":50,\"subtalker_do_sample\":true,\"response_format\":\"" fmt_ "\"" extra "}"

static void meta(server *s) {
    http_result r;
    char why[512];
    req(s, "GET", "/health", NULL, NULL, &r);
    CHECK("meta/health", r.status == 200 && strstr(r.body, "\"ok\""), "%d %s", r.status, r.body);
    http_result_free(&r);
    req(s, "GET", "/ready", NULL, NULL, &r);
    CHECK("meta/ready", r.status == 200 && strstr(r.body, "\"ready\""), "%d %s", r.status, r.body);
    http_result_free(&r);
    req(s, "GET", "/v1/models", NULL, NULL, &r);
    CHECK("meta/models", r.status == 200 && strstr(r.body, "\"object\":\"list\"") && strstr(r.body, "custom_voice"),
          "%d %s", r.status, r.body);
    http_result_free(&r);
    req(s, "GET", "/metrics", NULL, NULL, &r);
    const char *ct = header(&r, "Content-Type");
    CHECK("meta/metrics_prometheus", r.status == 200 && ct && !strncmp(ct, "text/plain", 10) &&
                                         metrics_value(r.body, "qtts_ready") == 1 &&
                                         metrics_value(r.body, "qtts_slots") == 4 &&
                                         metrics_value(r.body, "qtts_warm_slots") == 4 && strstr(r.body, "qtts_ttfa_seconds_bucket") &&
                                         strstr(r.body, "qtts_rtf_bucket") && strstr(r.body, "qtts_audio_seconds_total"),
          "%d %.200s", r.status, r.body);
    /* the backend the model was loaded on (the library default: cpu unless QTTS_BACKEND says otherwise) */
    char bi[600];
    snprintf(bi, sizeof bi, "qtts_backend_info{backend=\"%s\",device=\"%s\"}", qtts_backend_name(s->info.backend),
             s->info.device_name ? s->info.device_name : "");
    const double alloc = metrics_value(r.body, "qtts_device_bytes_allocated"),
                 resv = metrics_value(r.body, "qtts_device_bytes_reserved");
    CHECK("meta/metrics_backend", metrics_value(r.body, bi) == 1 && strstr(r.body, "# TYPE qtts_backend_info gauge") &&
                                      strstr(r.body, "# TYPE qtts_device_bytes_allocated gauge") &&
                                      strstr(r.body, "# TYPE qtts_device_bytes_reserved gauge") &&
                                      (s->info.backend == QTTS_BACKEND_CPU ? alloc == 0 && resv == 0
                                                                           : alloc > 0 && resv >= alloc),
          "%s: %g; allocated %g reserved %g", bi, metrics_value(r.body, bi), alloc, resv);
    http_result_free(&r);
    req(s, "GET", "/v1/audio/voices", NULL, NULL, &r);
    CHECK("meta/voices_lists_presets", r.status == 200 && strstr(r.body, "\"vivian\"") && strstr(r.body, "\"preset\""),
          "%d %s", r.status, r.body);
    http_result_free(&r);
    req(s, "GET", "/nope", NULL, NULL, &r);
    CHECK("meta/unknown_path_404", r.status == 404 && is_error_shape(&r, NULL, why, sizeof why), "%s", why);
    http_result_free(&r);
    req(s, "GET", "/v1/audio/speech", NULL, NULL, &r);
    const char *allow = header(&r, "Allow");
    CHECK("meta/wrong_method_405", r.status == 405 && allow && !strcmp(allow, "POST") &&
                                       is_error_shape(&r, NULL, why, sizeof why),
          "%s allow %s", why, allow ? allow : "-");
    http_result_free(&r);
}

typedef struct fmt_case {
    const char *name, *body, *mime;
    const unsigned char *magic;
    size_t magic_n, magic_at;
} fmt_case;

static void formats(server *s, unsigned char **pcm_whole, size_t *n_pcm) {
    const fmt_case cases[] = {
        {"wav", REQ("wav", ""), "audio/wav", (const unsigned char *)"RIFF", 4, 0},
        {"pcm", REQ("pcm", ""), "audio/pcm", NULL, 0, 0},
        {"flac", REQ("flac", ""), "audio/flac", (const unsigned char *)"fLaC", 4, 0},
        {"mp3", REQ("mp3", ""), "audio/mpeg", (const unsigned char *)"\xff", 1, 0},
        {"opus", REQ("opus", ""), "audio/ogg", (const unsigned char *)"OpusHead", 8, 28},
        {"default_mp3", "{\"model\":\"tts-1\",\"input\":\"Hi!\",\"voice\":\"ryan\"}", "audio/mpeg",
         (const unsigned char *)"\xff", 1, 0},
    };
    *pcm_whole = NULL;
    *n_pcm = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fmt_case *c = &cases[i];
        for (int streamed = 0; streamed < 2; streamed++) {
            char body[1024], tn[96];
            snprintf(body, sizeof body, "%s", c->body);
            if (streamed) snprintf(body + strlen(body) - 1, sizeof body - strlen(body) + 1, ",\"stream_format\":\"audio\"}");
            http_result r;
            post_json(s, body, &r);
            const char *ct = header(&r, "Content-Type"), *te = header(&r, "Transfer-Encoding");
            snprintf(tn, sizeof tn, "speech/%s%s", c->name, streamed ? "_streamed" : "");
            int ok = r.status == 200 && r.complete && ct && !strcmp(ct, c->mime) && r.n > c->magic_at + c->magic_n &&
                     (!c->magic || !memcmp(r.body + c->magic_at, c->magic, c->magic_n));
            ok = ok && (streamed ? te && strstr(te, "chunked") : header(&r, "Content-Length") != NULL);
            CHECK(tn, ok, "status %d, %zu bytes, type %s, transfer %s: %.200s", r.status, r.n, ct ? ct : "-", te ? te : "-",
                  r.status == 200 ? "" : r.body);
            if (!strcmp(c->name, "pcm")) {
                if (!streamed) {
                    CHECK("speech/pcm_whole_frames", r.n > 0 && r.n % (1920 * 2) == 0, "%zu bytes", r.n);
                    *pcm_whole = malloc(r.n);
                    memcpy(*pcm_whole, r.body, r.n);
                    *n_pcm = r.n;
                } else {
                    CHECK("speech/pcm_streamed_equals_whole", r.n == *n_pcm && !memcmp(r.body, *pcm_whole, r.n),
                          "%zu bytes streamed vs %zu whole", r.n, *n_pcm);
                }
            }
            if (!strcmp(c->name, "wav") && r.n >= 44) {
                const unsigned char *h = (const unsigned char *)r.body;
                uint32_t data = h[40] | h[41] << 8 | h[42] << 16 | (uint32_t)h[43] << 24;
                snprintf(tn, sizeof tn, "speech/wav%s_header", streamed ? "_streamed" : "");
                CHECK(tn, streamed ? data == 0xFFFFFFFFu : data == r.n - 44, "data size %u for %zu bytes", data, r.n);
            }
            const char *seed = header(&r, "X-Qtts-Seed");
            if (i == 0 && !streamed) CHECK("speech/seed_header", seed && !strcmp(seed, "7"), "X-Qtts-Seed %s", seed ? seed : "-");
            http_result_free(&r);
        }
    }
    /* the wav body carries the same samples as pcm */
    http_result r;
    post_json(s, REQ("wav", ""), &r);
    CHECK("speech/wav_data_equals_pcm", r.n == *n_pcm + 44 && *pcm_whole && !memcmp(r.body + 44, *pcm_whole, *n_pcm),
          "%zu bytes vs %zu + 44", r.n, *n_pcm);
    http_result_free(&r);
}

static void sse(server *s, const unsigned char *pcm, size_t n_pcm) {
    http_result r;
    post_json(s, REQ("pcm", ",\"stream_format\":\"sse\""), &r);
    const char *ct = header(&r, "Content-Type");
    CHECK("sse/content_type", r.status == 200 && ct && !strcmp(ct, "text/event-stream"), "%d %s", r.status, ct ? ct : "-");
    unsigned char *audio = NULL;
    size_t n = 0, cap = 0;
    int deltas = 0, done = 0, bad = 0, after_done = 0;
    long long out_tokens = -1;
    for (char *p = r.body; p && *p;) {
        char *end = strstr(p, "\n\n");
        if (!end) {
            bad = 1;
            break;
        }
        *end = 0;
        if (strncmp(p, "data: ", 6)) {
            bad = 1;
            break;
        }
        json_t *ev = json_loads(p + 6, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (done) after_done = 1;
        if (type && !strcmp(type, "speech.audio.delta")) {
            deltas++;
            if (b64_decode_append(json_string_value(json_object_get(ev, "audio")), &audio, &n, &cap)) bad = 1;
        } else if (type && !strcmp(type, "speech.audio.done")) {
            done = 1;
            out_tokens = json_integer_value(json_object_get(json_object_get(ev, "usage"), "output_tokens"));
        } else {
            bad = 1;
        }
        json_decref(ev);
        p = end + 2;
    }
    CHECK("sse/events", !bad && deltas >= 2 && done && !after_done, "bad %d, %d deltas, done %d", bad, deltas, done);
    CHECK("sse/audio_equals_whole", n == n_pcm && pcm && !memcmp(audio, pcm, n), "%zu bytes vs %zu", n, n_pcm);
    CHECK("sse/usage_frames", out_tokens == (long long)(n_pcm / 3840), "output_tokens %lld, %zu frames", out_tokens,
          n_pcm / 3840);
    free(audio);
    http_result_free(&r);
}

static void seeds_and_speed(server *s) {
    http_result a, b, c, d;
    const char *nos = "{\"model\":\"qtts\",\"input\":\"Hello there, how are you today?\",\"voice\":\"vivian\","
                      "\"response_format\":\"pcm\"}";
    post_json(s, REQ("pcm", ""), &a);
    post_json(s, REQ("pcm", ""), &b);
    CHECK("seed/same_seed_same_audio", a.status == 200 && a.n == b.n && !memcmp(a.body, b.body, a.n), "%zu vs %zu", a.n, b.n);
    post_json(s, nos, &c);
    post_json(s, nos, &d);
    const char *sc = header(&c, "X-Qtts-Seed");
    char scopy[64];
    snprintf(scopy, sizeof scopy, "%s", sc ? sc : "");
    const char *sd = header(&d, "X-Qtts-Seed");
    CHECK("seed/fresh_seed_reported", c.status == 200 && d.status == 200 && scopy[0] && sd && strcmp(scopy, sd),
          "seeds %s and %s", scopy, sd ? sd : "-");
    http_result_free(&c);
    http_result_free(&d);
    for (int st = 0; st < 2; st++) {
        char tn[64];
        post_json(s, st ? REQ("pcm", ",\"speed\":2.0,\"stream_format\":\"audio\"") : REQ("pcm", ",\"speed\":2.0"), &c);
        post_json(s, REQ("pcm", ",\"speed\":0.5"), &d);
        const long n1 = (long)a.n / 2, n2 = (long)c.n / 2, n05 = (long)d.n / 2;
        snprintf(tn, sizeof tn, "speed/twice_as_fast%s", st ? "_streamed" : "");
        CHECK(tn, c.status == 200 && labs(n2 - (n1 + 1) / 2) <= 1, "%ld samples at speed 2 from %ld", n2, n1);
        if (!st) CHECK("speed/half_speed", d.status == 200 && labs(n05 - 2 * n1) <= 1, "%ld samples at 0.5 from %ld", n05, n1);
        http_result_free(&c);
        http_result_free(&d);
    }
    /* text_mode: "default" is the model type's choice (non-streaming text for CustomVoice); streaming
     * text puts one text token in the prompt and feeds the rest frame by frame: other audio */
    post_json(s, REQ("pcm", ",\"text_mode\":\"default\""), &c);
    post_json(s, REQ("pcm", ",\"text_mode\":\"non_streaming\""), &d);
    CHECK("text_mode/default_and_non_streaming", c.status == 200 && d.status == 200 && c.n == a.n && d.n == a.n &&
                                                     !memcmp(c.body, a.body, a.n) && !memcmp(d.body, a.body, a.n),
          "%d/%d, %zu and %zu bytes vs %zu", c.status, d.status, c.n, d.n, a.n);
    http_result_free(&c);
    http_result_free(&d);
    post_json(s, REQ("pcm", ",\"text_mode\":\"streaming\""), &c);
    CHECK("text_mode/streaming", c.status == 200 && c.n > 0 && (c.n != a.n || memcmp(c.body, a.body, a.n)),
          "%d, %zu bytes vs %zu", c.status, c.n, a.n);
    http_result_free(&c);
    http_result_free(&a);
    http_result_free(&b);
}

typedef struct bad_case {
    const char *name, *body;
    int status;
    const char *param;
} bad_case;

static void bad_requests(server *s) {
    static char big[9000], longtext[2000];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "{\"input\":\"", 10);
    memcpy(big + sizeof big - 3, "\"}", 3);
    snprintf(longtext, sizeof longtext, "{\"model\":\"m\",\"voice\":\"vivian\",\"input\":\"%0400d\"}", 0);
    const bad_case cases[] = {
        {"malformed_json", "{\"model\": \"m\", \"input\": ", 400, NULL},
        {"not_an_object", "[1, 2, 3]", 400, NULL},
        {"empty_body", "", 400, NULL},
        {"unknown_field", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"volume\":3}", 400, "volume"},
        {"duplicate_field", "{\"model\":\"m\",\"input\":\"hi\",\"input\":\"ho\",\"voice\":\"vivian\"}", 400, NULL},
        {"speed_wrong_type", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"speed\":\"fast\"}", 400, "speed"},
        {"speed_out_of_range", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"speed\":8}", 400, "speed"},
        {"input_wrong_type", "{\"model\":\"m\",\"input\":42,\"voice\":\"vivian\"}", 400, "input"},
        {"voice_wrong_type", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":{\"id\":\"x\"}}", 400, "voice"},
        {"seed_negative", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"seed\":-1}", 400, "seed"},
        {"seed_fraction", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"seed\":1.5}", 400, "seed"},
        {"do_sample_not_bool", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"do_sample\":1}", 400, "do_sample"},
        {"temperature_zero", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"temperature\":0}", 400, "temperature"},
        {"top_p_above_one", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"top_p\":1.5}", 400, "top_p"},
        {"chunk_frames_zero", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"chunk_frames\":0}", 400, "chunk_frames"},
        {"missing_model", "{\"input\":\"hi\",\"voice\":\"vivian\"}", 400, "model"},
        {"missing_input", "{\"model\":\"m\",\"voice\":\"vivian\"}", 400, "input"},
        {"empty_input", "{\"model\":\"m\",\"input\":\"\",\"voice\":\"vivian\"}", 400, "input"},
        {"blank_input", "{\"model\":\"m\",\"input\":\" \\n\\t \",\"voice\":\"vivian\"}", 400, "input"},
        {"input_too_long", longtext, 400, "input"},
        {"body_too_large", big, 413, NULL},
        {"missing_voice", "{\"model\":\"m\",\"input\":\"hi\"}", 400, "voice"},
        {"unknown_voice", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"alloy\"}", 400, "voice"},
        {"unknown_language", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"language\":\"klingon\"}", 400,
         "language"},
        {"unsupported_format", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"response_format\":\"aac\"}", 400,
         "response_format"},
        {"bad_stream_format", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"stream_format\":\"ws\"}", 400,
         "stream_format"},
        {"max_new_tokens_above_cap", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"max_new_tokens\":100000}",
         400, "max_new_tokens"},
        {"unknown_text_mode", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"text_mode\":\"fast\"}", 400,
         "text_mode"},
        {"text_mode_wrong_type", "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"vivian\",\"text_mode\":1}", 400,
         "text_mode"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_result r;
        char tn[96], why[512];
        post_json(s, cases[i].body, &r);
        snprintf(tn, sizeof tn, "errors/%s", cases[i].name);
        CHECK(tn, r.status == cases[i].status && is_error_shape(&r, cases[i].param, why, sizeof why), "%s", why);
        http_result_free(&r);
    }
    /* invalid UTF-8 in the input */
    http_result r;
    char why[512];
    post_json(s, "{\"model\":\"m\",\"input\":\"caf\xe9\",\"voice\":\"vivian\"}", &r);
    CHECK("errors/invalid_utf8", r.status == 400 && is_error_shape(&r, NULL, why, sizeof why), "%s", why);
    http_result_free(&r);
    /* still serving */
    post_json(s, REQ("pcm", ""), &r);
    CHECK("errors/still_serving", r.status == 200 && r.n > 0, "%d", r.status);
    http_result_free(&r);
}

/* ------------------------------------------------------ voice affinity */

/* Two voices in turn, one request at a time: each goes back to the slot whose
 * context served it last, so from the second round on every request skips its
 * whole voice prefix (role 3 + control 4 with a language + speaker + pad = 9
 * positions), not only the 7 before the speaker that any slot's last prompt
 * shares. */
static void affinity(server *s) {
    const char *body[2] = {
        "{\"model\":\"qtts\",\"input\":\"One voice.\",\"voice\":\"aiden\",\"language\":\"english\",\"seed\":1,"
        "\"max_new_tokens\":6,\"response_format\":\"pcm\"}",
        "{\"model\":\"qtts\",\"input\":\"Another voice.\",\"voice\":\"sohee\",\"language\":\"english\",\"seed\":1,"
        "\"max_new_tokens\":6,\"response_format\":\"pcm\"}"};
    int ok = 1;
    double reused[4] = {0};
    char *t = get_metrics(s);
    double last = metrics_value(t, "qtts_prompt_positions_reused_total");
    free(t);
    for (int r = 0; r < 6; r++) {
        http_result res;
        post_json(s, body[r % 2], &res);
        ok &= res.status == 200;
        http_result_free(&res);
        t = get_metrics(s);
        const double now = metrics_value(t, "qtts_prompt_positions_reused_total");
        free(t);
        if (r >= 2) reused[r - 2] = now - last;
        last = now;
    }
    CHECK("affinity/voices_keep_their_slots", ok && reused[0] == 9 && reused[1] == 9 && reused[2] == 9 && reused[3] == 9,
          "ok %d; positions reused by requests 3-6: %.0f %.0f %.0f %.0f (want 9 each)", ok, reused[0], reused[1], reused[2],
          reused[3]);
}

/* ---------------------------------------------------------------- batching */

typedef struct bg {
    server *s;
    int idx;
    atomic_int stop;
    long bytes;
    int status;
} bg;

static void *background(void *arg) { /* a long stream, read until told to stop */
    bg *b = arg;
    char body[512], err[256];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"input\":\"Background speaker number %d is talking for a long while.\",\"voice\":\"%s\","
             "\"seed\":%d,\"response_format\":\"pcm\",\"stream_format\":\"audio\",\"force_frames\":4000}",
             b->idx, b->idx == 0 ? "ryan" : b->idx == 1 ? "serena" : "aiden", 100 + b->idx);
    http_conn *c = hc_open("127.0.0.1", server_port(b->s), "POST", "/v1/audio/speech", NULL, body, strlen(body),
                           TIMEOUT_MS, err, sizeof err);
    if (!c) return NULL;
    b->status = hc_status(c);
    char buf[8192];
    long k;
    while (!b->stop && (k = hc_read(c, buf, sizeof buf)) > 0) b->bytes += k;
    hc_close(c); /* abrupt: the server must free the slot */
    return NULL;
}

static void batching(server *s) {
    http_result alone_pcm, alone_wav, bat_pcm, bat_wav;
    post_json(s, REQ("pcm", ""), &alone_pcm);
    post_json(s, REQ("wav", ""), &alone_wav);
    bg b[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&b[i], 0, sizeof b[i]);
        b[i].s = s;
        b[i].idx = i;
        pthread_create(&th[i], NULL, background, &b[i]);
    }
    const double act = wait_metric(s, "qtts_active_slots", 3, SETTLE_MS);
    char *m0 = get_metrics(s);
    post_json(s, REQ("pcm", ""), &bat_pcm);
    post_json(s, REQ("wav", ""), &bat_wav);
    char *m1 = get_metrics(s);
    /* every step of the window had the 3 others in it (and A's steps had 4) */
    const double streams =
        metrics_value(m1, "qtts_engine_stream_steps_total") - metrics_value(m0, "qtts_engine_stream_steps_total");
    const double steps = metrics_value(m1, "qtts_engine_steps_total") - metrics_value(m0, "qtts_engine_steps_total");
    const double act_after = metrics_value(m1, "qtts_active_slots");
    CHECK("batch/others_running", act == 3 && act_after >= 3 && steps > 0 && streams / steps > 3.0,
          "active %g before, %g after; %.0f stream-steps in %.0f steps", act, act_after, streams, steps);
    CHECK("batch/pcm_bit_identical", alone_pcm.status == 200 && bat_pcm.status == 200 && alone_pcm.n == bat_pcm.n &&
                                          !memcmp(alone_pcm.body, bat_pcm.body, alone_pcm.n),
          "%zu bytes alone vs %zu batched", alone_pcm.n, bat_pcm.n);
    CHECK("batch/wav_bit_identical", alone_wav.status == 200 && bat_wav.status == 200 && alone_wav.n == bat_wav.n &&
                                          !memcmp(alone_wav.body, bat_wav.body, alone_wav.n),
          "%zu bytes alone vs %zu batched", alone_wav.n, bat_wav.n);
    for (int i = 0; i < 3; i++) b[i].stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    double took;
    const double left = wait_metric_took(s, "qtts_active_slots", 0, SETTLE_MS, &took);
    CHECK("batch/disconnected_streams_leave", left == 0 && b[0].status == 200 && b[0].bytes > 0,
          "%g slots still active %.0f ms after, status %d", left, took, b[0].status);
    printf("# batch: the 3 disconnected streams left their slots %.0f ms after their clients\n", took);
    free(m0);
    free(m1);
    http_result_free(&alone_pcm);
    http_result_free(&alone_wav);
    http_result_free(&bat_pcm);
    http_result_free(&bat_wav);
}

/* ---------------------------------------------------------------- long text */

/* Number of the segment a delta event carries, or -1. */
static long event_segment(const char *data) {
    json_t *ev = json_loads(data, 0, NULL);
    json_t *sg = json_object_get(ev, "segment");
    const long k = json_is_integer(sg) ? (long)json_integer_value(sg) : -1;
    json_decref(ev);
    return k;
}

/* A 20,000-character input over the OpenAI API is spoken segment by segment
 * (sentences grouped up to 300 characters, 2 forced frames each): the SSE
 * stream carries every segment's index in order, ends with the segment count,
 * and holds each segment's frames and the 300 ms pauses between them; a
 * client that disconnects halfway frees its stream (the test prints how long
 * that took). */
static void long_text(server *s) {
    enum { N_CHARS = 20000 };
    char *input = malloc(N_CHARS + 64), *body = malloc(N_CHARS + 512);
    size_t k = 0;
    for (int i = 0; k < N_CHARS; i++) k += (size_t)snprintf(input + k, N_CHARS + 64 - k, "Sentence %d says a few words. ", i);
    input[N_CHARS] = 0; /* whole sentences up to here, then a cut word: the last segment ends mid-sentence */
    snprintf(body, N_CHARS + 512,
             "{\"model\":\"m\",\"input\":\"%s\",\"voice\":\"ryan\",\"response_format\":\"pcm\",\"stream_format\":\"sse\","
             "\"force_frames\":2}",
             input);
    http_result r;
    post_json(s, body, &r);
    long last = -1, segments = -1;
    int in_order = 1, deltas = 0;
    size_t n = 0, cap = 0;
    unsigned char *audio = NULL;
    for (char *p = r.status == 200 ? r.body : NULL; p && *p;) {
        char *end = strstr(p, "\n\n");
        if (!end) break;
        *end = 0;
        json_t *ev = json_loads(p + 6, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (type && !strcmp(type, "speech.audio.delta")) {
            const long sg = event_segment(p + 6);
            if (sg < last || sg > last + 1) in_order = 0;
            last = sg;
            deltas++;
            b64_decode_append(json_string_value(json_object_get(ev, "audio")), &audio, &n, &cap);
        } else if (type && !strcmp(type, "speech.audio.done")) {
            segments = (long)json_integer_value(json_object_get(ev, "segments"));
        }
        json_decref(ev);
        p = end + 2;
    }
    const size_t want = (size_t)segments * 2 * 3840 + (size_t)(segments - 1) * 7200 * 2;
    CHECK("long/streams_every_segment_in_order", r.status == 200 && segments >= N_CHARS / 300 && in_order &&
                                                      last == segments - 1 && deltas >= segments,
          "status %d, %ld segments, last %ld, in order %d, %d deltas", r.status, segments, last, in_order, deltas);
    CHECK("long/frames_and_pauses", segments > 0 && n == want, "%zu bytes, want %zu for %ld segments", n, want, segments);
    free(audio);
    http_result_free(&r);
    /* the same, read until halfway, then the client goes away */
    char err[256], buf[16384];
    http_conn *c = hc_open("127.0.0.1", server_port(s), "POST", "/v1/audio/speech", NULL, body, strlen(body), TIMEOUT_MS,
                           err, sizeof err);
    long seen = -1;
    if (c) {
        long got;
        while (seen < segments / 2 && (got = hc_read(c, buf, sizeof buf - 1)) > 0) {
            buf[got] = 0;
            for (const char *q = buf; (q = strstr(q, "\"segment\":")); q++) {
                const long sg = strtol(q + 10, NULL, 10);
                if (sg > seen) seen = sg;
            }
        }
    }
    const double active = c ? wait_metric(s, "qtts_active_slots", 1, SETTLE_MS) : -1;
    if (c) hc_close(c);
    double took;
    const double left = wait_metric_took(s, "qtts_active_slots", 0, SETTLE_MS, &took);
    CHECK("long/disconnect_halfway_frees_the_stream", c && seen >= segments / 2 && active == 1 && left == 0,
          "%s; read to segment %ld of %ld, %g active while reading, %g %.0f ms after", c ? "open" : err, seen,
          segments, active, left, took);
    printf("# long: the stream left its slot %.0f ms after its client\n", took);
    free(input);
    free(body);
}

/* ---------------------------------------------------------------- auth, CORS */

static void auth_cors(qtts_model *m) {
    server_config cfg = test_config();
    cfg.api_key = "sekrit-key";
    cfg.cors_origin = "*";
    server *s = start_server(m, &cfg);
    if (!s) return;
    http_result r;
    char why[512];
    req(s, "GET", "/v1/models", NULL, NULL, &r);
    CHECK("auth/missing_key_401", r.status == 401 && is_error_shape(&r, NULL, why, sizeof why) &&
                                      header(&r, "WWW-Authenticate"),
          "%s", why);
    http_result_free(&r);
    req(s, "GET", "/v1/models", "Authorization: Bearer wrong-key\r\n", NULL, &r);
    CHECK("auth/wrong_key_401", r.status == 401, "%d", r.status);
    http_result_free(&r);
    req(s, "GET", "/v1/models", "Authorization: Bearer sekrit-keyX\r\n", NULL, &r);
    CHECK("auth/longer_key_401", r.status == 401, "%d", r.status);
    http_result_free(&r);
    req(s, "POST", "/v1/audio/speech", "Authorization: Bearer sekrit-key\r\n", REQ("pcm", ""), &r);
    const char *acao = header(&r, "Access-Control-Allow-Origin");
    CHECK("auth/right_key_200", r.status == 200 && r.n > 0, "%d", r.status);
    CHECK("cors/allow_origin_on_responses", acao && !strcmp(acao, "*"), "%s", acao ? acao : "-");
    http_result_free(&r);
    req(s, "GET", "/health", NULL, NULL, &r);
    CHECK("auth/health_needs_no_key", r.status == 200, "%d", r.status);
    http_result_free(&r);
    req(s, "OPTIONS", "/v1/audio/speech",
        "Origin: https://example.org\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: "
        "authorization, content-type\r\n",
        NULL, &r);
    const char *ah = header(&r, "Access-Control-Allow-Headers");
    char ahc[256];
    snprintf(ahc, sizeof ahc, "%s", ah ? ah : "");
    const char *am = header(&r, "Access-Control-Allow-Methods");
    CHECK("cors/preflight", r.status == 204 && strstr(ahc, "Authorization") && am && strstr(am, "POST"), "%d %s", r.status,
          ahc);
    http_result_free(&r);
    server_stop(s);
    cfg = test_config();
    s = start_server(m, &cfg);
    if (!s) return;
    req(s, "OPTIONS", "/v1/audio/speech", "Origin: https://example.org\r\n", NULL, &r);
    CHECK("cors/off_by_default", r.status == 405 && !header(&r, "Access-Control-Allow-Origin"), "%d", r.status);
    http_result_free(&r);
    server_stop(s);
}

/* A streamed response whose next chunk takes longer than --timeout to make
 * (here the engine stalls 2.5 s once, mid-stream, in its step hook) is the
 * server's time, not the client's idleness: the response must come whole.
 * libmicrohttpd counts the time spent in the content reader as idleness, so
 * without http_touch the connection is closed after conn_timeout_s and the
 * response is cut without an error. */
typedef struct stall {
    atomic_int steps, stalled;
} stall;

static void stall_once(void *arg, int n_streams) {
    stall *st = arg;
    (void)n_streams;
    if (atomic_fetch_add(&st->steps, 1) == 12 && !atomic_exchange(&st->stalled, 1)) usleep(2500 * 1000);
}

static void idle_timeout(qtts_model *m) {
    server_config cfg = test_config();
    cfg.n_slots = 1;
    cfg.conn_timeout_s = 1;
    cfg.warmup = 0;
    stall st;
    atomic_init(&st.steps, 0);
    atomic_init(&st.stalled, 0);
    cfg.hooks = (qtts_pipeline_debug){.stepped = stall_once, .arg = &st};
    server *s = start_server(m, &cfg);
    if (!s) return;
    http_result r;
    post_json(s, "{\"model\":\"m\",\"input\":\"Hello there.\",\"voice\":\"vivian\",\"seed\":3,"
                 "\"response_format\":\"pcm\",\"stream_format\":\"audio\",\"force_frames\":40}", &r);
    CHECK("idle_timeout/engine_stalled_mid_stream", atomic_load(&st.stalled) == 1, "%d steps", atomic_load(&st.steps));
    CHECK("idle_timeout/stream_whole_after_stall", r.status == 200 && r.complete && r.n == 40 * 1920 * 2,
          "status %d, complete %d, %zu bytes of %d (%s)", r.status, r.complete, r.n, 40 * 1920 * 2, r.err);
    http_result_free(&r);
    server_stop(s);
}

int main(void) {
    qtts_model *m = load_model(test_path("golden/data/e2e_string"));
    if (!m) return test_finish();
    server_config cfg = test_config();
    cfg.n_slots = 4;
    cfg.queue_depth = 8;
    cfg.max_input_chars = 300;
    cfg.max_body_bytes = 8192;
    server *s = start_server(m, &cfg);
    if (s) {
        meta(s);
        unsigned char *pcm = NULL;
        size_t n_pcm = 0;
        formats(s, &pcm, &n_pcm);
        sse(s, pcm, n_pcm);
        seeds_and_speed(s);
        bad_requests(s);
        batching(s);
        affinity(s);
        free(pcm);
        char *t = get_metrics(s);
        CHECK("metrics/counted", metrics_value(t, "qtts_requests_total{endpoint=\"speech\",status=\"200\"}") >= 20 &&
                                     metrics_value(t, "qtts_requests_total{endpoint=\"speech\",status=\"400\"}") >= 20 &&
                                     metrics_value(t, "qtts_ttfa_seconds_count") >= 5 &&
                                     metrics_value(t, "qtts_audio_seconds_total") > 1,
              "%.400s", t ? t : "");
        /* the same voice again and again in 4 slots: their contexts keep the voice prefix */
        const double pos = metrics_value(t, "qtts_prompt_positions_total"),
                     reused = metrics_value(t, "qtts_prompt_positions_reused_total");
        CHECK("metrics/voice_prefix_reused", pos > 0 && reused > 0 && reused < pos, "%.0f of %.0f prompt positions reused",
              reused, pos);
        /* device time by phase: counted on a GPU backend, 0 on the CPU */
        const char *ph[4] = {"prefill", "talker", "predictor", "sampling"};
        int gpu_ok = 1;
        char gn[96];
        for (int i = 0; i < 4; i++) {
            snprintf(gn, sizeof gn, "qtts_gpu_seconds_total{phase=\"%s\"}", ph[i]);
            const double g = metrics_value(t, gn);
            if (s->info.backend == QTTS_BACKEND_CPU ? g != 0 : !(g > 0)) gpu_ok = 0;
        }
        CHECK("metrics/gpu_seconds_by_phase", gpu_ok && strstr(t, "# TYPE qtts_gpu_seconds_total counter"),
              "backend %s", qtts_backend_name(s->info.backend));
        free(t);
        server_stop(s);
    }
    auth_cors(m);
    idle_timeout(m);
    cfg = test_config(); /* the default limits: a long article fits */
    s = start_server(m, &cfg);
    if (s) {
        long_text(s);
        server_stop(s);
    }
    qtts_model_free(m);
    return test_finish();
}
