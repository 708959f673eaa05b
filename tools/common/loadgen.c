/* Load generator (see loadgen.h). Per concurrency level C: C client threads
 * send R identical streamed requests (pcm, same seed, so every request does
 * the same work) and time each: TTFA = request sent -> first body byte (the
 * first PCM), RTF = request seconds / audio seconds. The server's /metrics
 * before and after give the frames generated and the engine's step and
 * decode seconds, hence generation throughput (audio seconds of frames per
 * second of batched stepping, decode excluded). Definitions follow
 * ../shared/BENCHMARKING.md (docs/BENCH.md, "Server"); the report prints
 * them. */
#include "loadgen.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../server/metrics.h"
#include "client.h"
#include "clock.h"

#define LG_MAX_TEXTS 32

/* --mix: short, medium and long texts, with numbers, names and questions, in
 * three languages (../shared/BENCHMARKING.md: one paragraph hides things). Mixed
 * lengths also keep a closed loop's clients from finishing together and
 * coming back as a burst, so a level measures requests joining a running
 * batch. The second is the default --text. */
static const char *const MIX_TEXTS[] = {
    "Hi Anna, can you hear me?",
    "Hello, my name is Ryan. It is 3:45 pm on the 12th of June; are you ready to begin?",
    "The quarterly report from Dr. Elena Petrova arrived on Tuesday: revenue rose 12.5 percent to 4.2 million "
    "dollars, while costs fell by nearly a third. Should we share the figures with the board before Friday, or wait "
    "for the audit?",
    "Guten Morgen, Herr Schmidt! Der Zug nach M\xc3\xbcnchen f\xc3\xa4hrt um 8:15 Uhr von Gleis 3 ab. Haben Sie "
    "Ihre Fahrkarte schon?",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe6\x9d\x8e\xe6\x98\x8e\xef\xbc\x81\xe6\x98\x8e\xe5\xa4\xa9"
    "\xe4\xb8\x8b\xe5\x8d\x88\xe4\xb8\x89\xe7\x82\xb9\xe7\x9a\x84\xe4\xbc\x9a\xe8\xae\xae\xe8\xbf\x98"
    "\xe5\x9c\xa8\xe4\xb8\x89\xe5\x8f\xb7\xe4\xbc\x9a\xe8\xae\xae\xe5\xae\xa4\xe5\x90\x97\xef\xbc\x9f",
};

typedef struct lg_opts {
    char host[256];
    int port;
    int levels[16], n_levels;
    int requests;
    int warmup;
    int rounds;
    const char *voice, *instructions, *language, *api_key, *format, *text_mode;
    const char *texts[LG_MAX_TEXTS]; /* request i says texts[i % n_texts] */
    int n_texts;
    int frames[LG_MAX_TEXTS]; /* force_frames per text (--frames auto: each text's own) */
    int chunk_frames, first_chunk_frames, max_new_tokens, force_frames;
    long long seed;
    int timeout_ms;
} lg_opts;

typedef struct result {
    int ok;
    int status;
    double ttfa_s, total_s, audio_s;
} result;

typedef struct level_run {
    const lg_opts *o;
    char *const *bodies; /* [o->n_texts]: request i sends bodies[i % n_texts] */
    atomic_int next;
    int n;
    result *res;
} level_run;

static void one_request(const lg_opts *o, const char *body, result *r) {
    char headers[1024] = "Content-Type: application/json\r\n";
    if (o->api_key) snprintf(headers + strlen(headers), sizeof headers - strlen(headers), "Authorization: Bearer %s\r\n", o->api_key);
    char err[256];
    const double t0 = tool_now_s();
    memset(r, 0, sizeof *r);
    r->ttfa_s = -1;
    http_conn *c = hc_open(o->host, o->port, "POST", "/v1/audio/speech", headers, body, strlen(body), o->timeout_ms, err,
                           sizeof err);
    if (!c) return;
    r->status = hc_status(c);
    char buf[65536];
    size_t bytes = 0;
    long k;
    while ((k = hc_read(c, buf, sizeof buf)) > 0) {
        if (r->ttfa_s < 0) r->ttfa_s = tool_now_s() - t0;
        bytes += (size_t)k;
    }
    r->total_s = tool_now_s() - t0;
    r->ok = k == 0 && r->status == 200 && bytes > 0;
    r->audio_s = bytes / 2.0 / 24000.0; /* pcm: s16 mono 24 kHz */
    hc_close(c);
}

static void *worker(void *arg) {
    level_run *lr = arg;
    for (;;) {
        int i = atomic_fetch_add(&lr->next, 1);
        if (i >= lr->n) return NULL;
        one_request(lr->o, lr->bodies[i % lr->o->n_texts], &lr->res[i]);
    }
}

/* 1-minute load average of the machine (other work competing for the cores). */
static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static char *get_metrics(const lg_opts *o) {
    http_result r;
    char headers[512] = "";
    if (hc_request(o->host, o->port, "GET", "/metrics", headers, NULL, 0, o->timeout_ms, &r) || r.status != 200) {
        http_result_free(&r);
        return NULL;
    }
    char *b = r.body;
    r.body = NULL;
    http_result_free(&r);
    return b;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation, not nearest rank: with 8 requests a nearest-rank
 * median is the 4th fastest, and a burst whose first half is served early
 * and second half late reads as if all were served early. */
double lg_percentile(const double *v, int n, double p) {
    if (n <= 0) return NAN;
    if (p <= 0) return v[0];
    if (p >= 100) return v[n - 1];
    const double x = p / 100.0 * (n - 1);
    const int k = (int)floor(x);
    if (k + 1 >= n) return v[n - 1];
    return v[k] + (x - k) * (v[k + 1] - v[k]);
}

/* A whole decimal in [lo, hi], or -1 (the caller says which option). */
static int int_arg(const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int lg_typical_frames(const char *text) {
    double seconds = 0;
    const unsigned char *p = (const unsigned char *)text;
    while (p && *p) {
        uint32_t cp = *p;
        int len = 1;
        if (cp >= 0xC0 && cp < 0xE0) len = 2, cp &= 0x1F;
        else if (cp >= 0xE0 && cp < 0xF0) len = 3, cp &= 0x0F;
        else if (cp >= 0xF0 && cp < 0xF8) len = 4, cp &= 0x07;
        else if (cp >= 0x80) len = 0; /* a stray continuation or invalid lead byte */
        for (int k = 1; k < len; k++) {
            if ((p[k] & 0xC0) != 0x80) { /* truncated sequence: the lead byte alone */
                len = 0;
                break;
            }
            cp = cp << 6 | (p[k] & 0x3F);
        }
        if (len == 0) len = 1, cp = 0xFFFD;
        const int cjk = (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x9FFF) ||
                        (cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0xF900 && cp <= 0xFAFF);
        seconds += cjk ? 1 / 4.5 : 1 / 15.0;
        p += len;
    }
    const int frames = (int)ceil(seconds * 12.5 - 1e-9);
    return frames < 1 ? 1 : frames;
}

static void usage(void) {
    printf("usage: qtts-server --loadgen [options]   or   qtts-bench server [options]\n"
           "options:          [--url http://127.0.0.1:8000] [--concurrency 1,2,4,8] [--requests N]\n"
           "                  [--warmup N] [--text STR] [--voice NAME] [--instructions STR] [--language L]\n"
           "                  [--seed N] [--chunk-frames N] [--first-chunk-frames N] [--max-new-tokens N]\n"
           "                  [--frames N|auto (exactly N frames per request, end of speech ignored; auto: the\n"
           "                   text's length at a typical speaking rate, for random checkpoints)]\n"
           "                  [--text STR again (up to 32: request i says text i mod their count)]\n"
           "                  [--mix (5 built-in texts: short, medium and long; English, German, Chinese)]\n"
           "                  [--rounds N (repeat the sweep, levels interleaved; default 1)]\n"
           "                  [--text-mode default|non_streaming|streaming]\n"
           "                  [--api-key KEY] [--timeout-s S]\n"
           "Sends R = max(N, C) streamed pcm requests at each concurrency C (default N = 8) and prints a\n"
           "markdown table: TTFA and RTF per request (median, p95), aggregate audio s / wall s, and the\n"
           "server's generation throughput from /metrics.\n");
}

static char *make_body(const lg_opts *o, int t) {
    json_t *b = json_object();
    json_object_set_new(b, "model", json_string("qtts"));
    json_object_set_new(b, "input", json_string(o->texts[t]));
    if (o->voice) json_object_set_new(b, "voice", json_string(o->voice));
    if (o->instructions) json_object_set_new(b, "instructions", json_string(o->instructions));
    if (o->language) json_object_set_new(b, "language", json_string(o->language));
    json_object_set_new(b, "response_format", json_string("pcm"));
    json_object_set_new(b, "stream_format", json_string("audio"));
    json_object_set_new(b, "seed", json_integer(o->seed));
    if (o->chunk_frames) json_object_set_new(b, "chunk_frames", json_integer(o->chunk_frames));
    if (o->first_chunk_frames) json_object_set_new(b, "first_chunk_frames", json_integer(o->first_chunk_frames));
    if (o->max_new_tokens) json_object_set_new(b, "max_new_tokens", json_integer(o->max_new_tokens));
    if (o->frames[t]) json_object_set_new(b, "force_frames", json_integer(o->frames[t]));
    if (o->text_mode) json_object_set_new(b, "text_mode", json_string(o->text_mode));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static void free_bodies(char **bodies, int n) {
    for (int t = 0; t < n; t++) free(bodies[t]);
}

/* The first preset speaker the server lists, for CustomVoice servers. */
static void pick_voice(lg_opts *o, char *buf, size_t n) {
    if (o->voice || o->instructions) return;
    http_result r;
    if (!hc_request(o->host, o->port, "GET", "/v1/audio/voices", NULL, NULL, 0, o->timeout_ms, &r) && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *d = json_object_get(j, "data");
        const char *type = json_string_value(json_object_get(j, "model_type"));
        if (type && !strcmp(type, "voice_design")) o->instructions = "A calm, clear voice.";
        else if (json_array_size(d) > 0) {
            snprintf(buf, n, "%s", json_string_value(json_object_get(json_array_get(d, 0), "id")));
            o->voice = buf;
        }
        json_decref(j);
    }
    http_result_free(&r);
}

int loadgen_main(int argc, char **argv) {
    lg_opts o;
    memset(&o, 0, sizeof o);
    snprintf(o.host, sizeof o.host, "127.0.0.1");
    o.port = 8000;
    int def_levels[] = {1, 2, 4, 8};
    memcpy(o.levels, def_levels, sizeof def_levels);
    o.n_levels = 4;
    o.requests = 8;
    int frames_auto = 0, mix = 0;
    o.warmup = 1;
    o.rounds = 1;
    o.seed = 42;
    o.timeout_ms = 600000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--loadgen")) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--mix")) {
            mix = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "loadgen: %s needs a value (or is unknown)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--url")) {
            const char *p = strncmp(v, "http://", 7) ? v : v + 7;
            const char *colon = strrchr(p, ':');
            size_t hl = colon ? (size_t)(colon - p) : strcspn(p, "/");
            if (hl >= sizeof o.host) hl = sizeof o.host - 1;
            memcpy(o.host, p, hl);
            o.host[hl] = 0;
            long port = 80;
            char pbuf[16] = "";
            if (colon) snprintf(pbuf, sizeof pbuf, "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
            if (!hl || (colon && int_arg(pbuf, 1, 65535, &port))) {
                fprintf(stderr, "loadgen: bad --url %s (want http://HOST:PORT)\n", v);
                return 2;
            }
            o.port = (int)port;
            continue;
        } else if (!strcmp(a, "--concurrency")) {
            o.n_levels = 0;
            for (const char *p = v; *p;) {
                char item[16];
                const size_t len = strcspn(p, ",");
                long c = 0;
                snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
                if (o.n_levels == 16 || len >= sizeof item || int_arg(item, 1, 256, &c)) {
                    fprintf(stderr, "loadgen: bad --concurrency %s (up to 16 levels of 1..256, comma-separated)\n", v);
                    return 2;
                }
                o.levels[o.n_levels++] = (int)c;
                p += len;
                if (*p == ',') p++;
            }
            if (!o.n_levels) {
                fprintf(stderr, "loadgen: bad --concurrency %s\n", v);
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--frames") && !strcmp(v, "auto")) {
            frames_auto = 1;
            continue;
        }
        /* numeric options: whole numbers in range, else a usage error (not atoi's silent 0) */
        static const struct {
            const char *name;
            long lo, hi;
        } nums[] = {{"--requests", 1, 100000},      {"--warmup", 0, 1000},       {"--rounds", 1, 1000},
                    {"--seed", 0, 0x7fffffffL},     {"--chunk-frames", 1, 64},   {"--first-chunk-frames", 1, 64},
                    {"--max-new-tokens", 1, 1 << 20}, {"--frames", 1, 1 << 20},  {"--timeout-s", 1, 86400}};
        int is_num = -1;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
            if (!strcmp(a, nums[k].name)) is_num = (int)k;
        long x = 0;
        if (is_num >= 0 && int_arg(v, nums[is_num].lo, nums[is_num].hi, &x)) {
            fprintf(stderr, "loadgen: %s takes a whole number in [%ld, %ld]%s (got '%s')\n", a, nums[is_num].lo,
                    nums[is_num].hi, strcmp(a, "--frames") ? "" : " or auto", v);
            return 2;
        }
        if (!strcmp(a, "--requests")) o.requests = (int)x;
        else if (!strcmp(a, "--warmup")) o.warmup = (int)x;
        else if (!strcmp(a, "--rounds")) o.rounds = (int)x;
        else if (!strcmp(a, "--text")) {
            if (o.n_texts == LG_MAX_TEXTS) {
                fprintf(stderr, "loadgen: at most %d --text\n", LG_MAX_TEXTS);
                return 2;
            }
            o.texts[o.n_texts++] = v;
        }
        else if (!strcmp(a, "--voice")) o.voice = v;
        else if (!strcmp(a, "--instructions")) o.instructions = v;
        else if (!strcmp(a, "--language")) o.language = v;
        else if (!strcmp(a, "--text-mode")) {
            if (strcmp(v, "default") && strcmp(v, "non_streaming") && strcmp(v, "streaming")) {
                fprintf(stderr, "loadgen: --text-mode takes default, non_streaming or streaming (got '%s')\n", v);
                return 2;
            }
            o.text_mode = v;
        }
        else if (!strcmp(a, "--seed")) o.seed = x;
        else if (!strcmp(a, "--chunk-frames")) o.chunk_frames = (int)x;
        else if (!strcmp(a, "--first-chunk-frames")) o.first_chunk_frames = (int)x;
        else if (!strcmp(a, "--max-new-tokens")) o.max_new_tokens = (int)x;
        else if (!strcmp(a, "--frames")) o.force_frames = (int)x, frames_auto = 0;
        else if (!strcmp(a, "--api-key")) o.api_key = v;
        else if (!strcmp(a, "--timeout-s")) o.timeout_ms = (int)x * 1000;
        else {
            fprintf(stderr, "loadgen: unknown option %s\n", a);
            return 2;
        }
    }
    if (o.requests < 1) o.requests = 1;
    if (o.rounds < 1) o.rounds = 1;
    if (mix && o.n_texts) {
        fprintf(stderr, "loadgen: --mix and --text exclude each other\n");
        return 2;
    }
    if (mix)
        for (size_t t = 0; t < sizeof MIX_TEXTS / sizeof MIX_TEXTS[0]; t++) o.texts[o.n_texts++] = MIX_TEXTS[t];
    if (!o.n_texts) o.texts[o.n_texts++] = MIX_TEXTS[1]; /* the default text */
    for (int t = 0; t < o.n_texts; t++) o.frames[t] = frames_auto ? lg_typical_frames(o.texts[t]) : o.force_frames;
    char vbuf[128];
    pick_voice(&o, vbuf, sizeof vbuf);
    char *bodies[LG_MAX_TEXTS] = {0};
    for (int t = 0; t < o.n_texts; t++)
        if (!(bodies[t] = make_body(&o, t))) {
            free_bodies(bodies, o.n_texts);
            return 1;
        }
    char *m0 = get_metrics(&o);
    if (!m0) {
        fprintf(stderr, "loadgen: no /metrics from %s:%d: is the server running?\n", o.host, o.port);
        free_bodies(bodies, o.n_texts);
        return 1;
    }
    const char *inf = strstr(m0, "\nqtts_info{");
    if (inf) printf("# server: %.*s\n", (int)strcspn(inf + 1, "\n"), inf + 1);
    free(m0);
    char cpu[256] = "?";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (ci && fgets(line, sizeof line, ci))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (ci) fclose(ci);
    printf("# client machine: %s, %ld online CPUs, load average %.2f at start\n", cpu, sysconf(_SC_NPROCESSORS_ONLN),
           loadavg());
    printf("# qtts-server load test: %s:%d, %s%s, seed %lld, pcm streamed, chunk %d frames after a first of %d\n", o.host,
           o.port, o.voice ? "voice " : "instructions ", o.voice ? o.voice : o.instructions, o.seed,
           o.chunk_frames ? o.chunk_frames : 4, o.first_chunk_frames ? o.first_chunk_frames : 1);
    for (int t = 0; t < o.n_texts; t++) {
        if (o.n_texts > 1) printf("# text %d of %d (request i says text i mod %d): ", t + 1, o.n_texts, o.n_texts);
        else printf("# text: ");
        printf("%s%s%s\n", o.texts[t], o.text_mode ? "; text_mode " : "", o.text_mode ? o.text_mode : "");
        if (o.frames[t])
            printf("#   %s request generates exactly %d frames (%.2f s; end of speech ignored%s)\n",
                   o.n_texts > 1 ? "its" : "every", o.frames[t], o.frames[t] * 0.08,
                   frames_auto ? "; auto: the text at a typical speaking rate" : "");
    }
    for (int li = 0; li < o.n_levels; li++) {
        const int R = o.requests > o.levels[li] ? o.requests : o.levels[li];
        if (R % o.n_texts)
            printf("# note: %d requests at concurrency %d are not a multiple of %d texts: the levels do different work\n",
                   R, o.levels[li], o.n_texts);
    }
    for (int i = 0; i < o.warmup; i++) {
        result r;
        one_request(&o, bodies[i % o.n_texts], &r);
        printf("# cold request %d: status %d, TTFA %.3f s, %.2f s audio in %.3f s (RTF %.3f)\n", i + 1, r.status,
               r.ttfa_s, r.audio_s, r.total_s, r.audio_s > 0 ? r.total_s / r.audio_s : NAN);
    }
    /* per level, over all rounds */
    typedef struct acc {
        result *res;
        int n;
        double wall, audio, frames, sstreams, steps, step_s, dec_s, pre_s, pre_n, load;
    } acc;
    acc a[16];
    memset(a, 0, sizeof a);
    int rc = 0;
    for (int round = 0; round < o.rounds; round++)
        for (int li = 0; li < o.n_levels; li++) { /* levels interleaved: drift hits all alike */
            const int C = o.levels[li];
            const int R = o.requests > C ? o.requests : C;
            level_run lr;
            lr.o = &o;
            lr.bodies = bodies;
            atomic_init(&lr.next, 0);
            lr.n = R;
            lr.res = calloc((size_t)R, sizeof(result));
            pthread_t th[256];
            char *ma = get_metrics(&o);
            const double l0 = loadavg();
            const double t0 = tool_now_s();
            int nt = 0;
            for (int t = 0; t < C; t++)
                if (!pthread_create(&th[nt], NULL, worker, &lr)) nt++;
            for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
            const double wall = tool_now_s() - t0;
            char *mb = get_metrics(&o);
            acc *x = &a[li];
            x->res = realloc(x->res, sizeof(result) * (size_t)(x->n + R));
            memcpy(x->res + x->n, lr.res, sizeof(result) * (size_t)R);
            x->n += R;
            double audio = 0;
            for (int i = 0; i < R; i++) audio += lr.res[i].ok ? lr.res[i].audio_s : 0;
            x->wall += wall;
            x->audio += audio;
#define DELTA(name) (metrics_value(mb, name) - metrics_value(ma, name))
            x->frames += DELTA("qtts_frames_generated_total");
            x->steps += DELTA("qtts_engine_steps_total");
            x->sstreams += DELTA("qtts_engine_stream_steps_total");
            x->step_s += DELTA("qtts_engine_step_seconds_total");
            x->dec_s += DELTA("qtts_engine_decode_seconds_total");
            x->pre_s += DELTA("qtts_engine_prefill_seconds_total");
            x->pre_n += DELTA("qtts_engine_prefills_total");
#undef DELTA
            x->load += (l0 + loadavg()) / 2 / o.rounds;
            printf("# round %d, concurrency %d: %d requests, %.2f audio s in %.2f wall s (%.3f audio s / wall s), "
                   "load average %.2f; TTFA ms in request order:", round + 1, C, R, audio, wall, audio / wall, loadavg());
            for (int i = 0; i < R; i++) printf(lr.res[i].ok ? " %.0f" : " -", lr.res[i].ttfa_s * 1e3);
            printf("\n");
            fflush(stdout);
            free(lr.res);
            free(ma);
            free(mb);
        }
    printf("\n| concurrency | requests | ok | TTFA median s | TTFA p95 s | RTF median | RTF p95 | audio s / wall s |"
           " gen audio s / step s | mean batch | step ms | decode ms / frame | prefill ms | load avg |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    double e2e_at[16], gen_at[16], ttfa_at[16], join_at[16];
    int join_n[16], any_join = 0;
    for (int li = 0; li < o.n_levels; li++) {
        acc *x = &a[li];
        const int C = o.levels[li], R = o.requests > C ? o.requests : C;
        double *ttfa = calloc((size_t)x->n + 1, sizeof(double)), *rtf = calloc((size_t)x->n + 1, sizeof(double));
        double *join = calloc((size_t)x->n + 1, sizeof(double));
        int ok = 0;
        join_n[li] = 0;
        for (int i = 0; i < x->n; i++) {
            if (!x->res[i].ok) continue;
            ttfa[ok] = x->res[i].ttfa_s;
            rtf[ok] = x->res[i].total_s / x->res[i].audio_s;
            ok++;
            /* each round's requests are in dispatch order: the first C leave together */
            if (i % R >= C) join[join_n[li]++] = x->res[i].ttfa_s;
        }
        qsort(join, (size_t)join_n[li], sizeof(double), cmp_d);
        join_at[li] = lg_percentile(join, join_n[li], 50);
        any_join |= join_n[li] > 0;
        free(join);
        qsort(ttfa, (size_t)ok, sizeof(double), cmp_d);
        qsort(rtf, (size_t)ok, sizeof(double), cmp_d);
        if (ok < x->n) rc = 1;
        e2e_at[li] = x->audio / x->wall;
        gen_at[li] = x->step_s > 0 ? x->frames * 0.08 / x->step_s : NAN;
        ttfa_at[li] = lg_percentile(ttfa, ok, 50);
        printf("| %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.1f | %.1f | %.1f | %.2f |\n",
               o.levels[li], x->n, ok, ttfa_at[li], lg_percentile(ttfa, ok, 95), lg_percentile(rtf, ok, 50),
               lg_percentile(rtf, ok, 95), e2e_at[li], gen_at[li], x->steps > 0 ? x->sstreams / x->steps : NAN,
               x->steps > 0 ? 1000 * x->step_s / x->steps : NAN, x->frames > 0 ? 1000 * x->dec_s / x->frames : NAN,
               x->pre_n > 0 ? 1000 * x->pre_s / x->pre_n : NAN, x->load);
        free(ttfa);
        free(rtf);
        free(x->res);
    }
    if (o.n_levels > 0 && o.levels[0] == 1) {
        printf("\n| concurrency | generation throughput vs 1 | audio s / wall s vs 1 | median TTFA vs 1 |\n|---|---|---|---|\n");
        for (int li = 0; li < o.n_levels; li++)
            printf("| %d | %.2fx | %.2fx | %.2fx |\n", o.levels[li], gen_at[li] / gen_at[0], e2e_at[li] / e2e_at[0],
                   ttfa_at[li] / ttfa_at[0]);
    }
    if (any_join) {
        printf("\n| concurrency | requests after the first C | their TTFA median s | vs median TTFA at %d |\n"
               "|---|---|---|---|\n",
               o.levels[0]);
        for (int li = 0; li < o.n_levels; li++)
            if (join_n[li] > 0)
                printf("| %d | %d | %.3f | %.2fx |\n", o.levels[li], join_n[li], join_at[li], join_at[li] / ttfa_at[0]);
    }
    printf("\nTTFA: request sent -> first PCM byte received. RTF = request seconds / audio seconds (lower is faster;\n"
           "RTFx = 1/RTF). audio s / wall s: all audio received at that level / the level's wall time (end to end).\n"
           "gen audio s / step s: frames generated x 0.08 s / engine seconds in batched steps (talker + code predictor\n"
           "+ sampling; prefill and codec decode excluded), from the server's /metrics. mean batch = streams per step.\n"
           "step ms: engine time per batched step; decode ms / frame: codec decoder time per stream-frame (on the\n"
           "engine thread, after each step); prefill ms: prompt + prefill per request; load avg: the machine's\n"
           "1-minute load average during the level (other work competing for the cores). Median and p95: linear\n"
           "interpolation between order statistics (numpy's default; the median of 8 is the mean of the 4th and 5th).\n"
           "Requests after the first C of each round: the ones sent after the level's opening burst of C, each as a\n"
           "client's last request ended, so they join a running batch (with texts of mixed length, --mix, the clients\n"
           "come back at different times; with one text they finish together and come back as bursts).\n");
    free_bodies(bodies, o.n_texts);
    return rc;
}
