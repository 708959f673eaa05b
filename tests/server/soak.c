/* The server soak with faults (make soak, tests/server/soak.sh): N client
 * threads send a random mix to a running qtts-server on a Base checkpoint
 * for a fixed time and check every answer, then the server's state.
 * Mix: whole and streamed (audio, SSE) speech in every format; voice uploads
 * and deletes; clients that disconnect at a random point; slow readers;
 * malformed JSON, wrong types and bodies over the limit; enough load that the
 * queue limit answers 429. Checks: a well-formed request gets complete audio
 * of its format (WAV sizes consistent, MP3 / FLAC / Ogg magic, PCM whole
 * samples, SSE ending in speech.audio.done) or an OpenAI-shaped error with a
 * status its case allows; no response is cut; at the end /metrics shows no
 * active slot and an empty queue, the voices uploaded and kept are listed
 * and speak, the server process is alive, and its RSS is within
 * --rss-tolerance of its RSS after warm-up (the first --warm-s seconds).
 * Prints the requests by kind, the statuses by code, the RSS over time and
 * "ok soak" or "FAIL soak: ...". Loopback only; it stops by itself. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "metrics.h"

#define TIMEOUT_MS 120000
#define N_KEPT 3
#define MAX_STATUS 600

enum { K_WHOLE, K_STREAM, K_SSE, K_DISCONNECT, K_SLOW, K_MALFORMED, K_OVERSIZED, K_UPLOAD, K_DELETE, K_META, N_KINDS };
static const char *const kind_names[N_KINDS] = {"whole",   "stream",    "sse",    "disconnect", "slow_reader",
                                                "malformed", "oversized", "upload", "delete",     "meta"};
static const char *const formats[5] = {"mp3", "opus", "flac", "wav", "pcm"};

static int g_port, g_pid;
static double g_end_s;
static unsigned char *g_wav;
static size_t g_n_wav;
static size_t g_max_body;
static atomic_ulong n_kind[N_KINDS], n_status[MAX_STATUS], n_fail;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_fail[1024];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failure(const char *fmt, ...) {
    char m[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (atomic_fetch_add(&n_fail, 1) < 20) fprintf(stderr, "soak: %s\n", m);
    pthread_mutex_lock(&fail_mu);
    if (!first_fail[0]) snprintf(first_fail, sizeof first_fail, "%s", m);
    pthread_mutex_unlock(&fail_mu);
}

static void count_status(int st) { atomic_fetch_add(&n_status[st > 0 && st < MAX_STATUS ? st : 0], 1); }

static long rss_kb(void) {
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", g_pid);
    FILE *f = fopen(p, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* 1 when r is {"error": {"message": str, "type": str, ...}} */
static int error_shaped(const char *body, char *code, size_t n) {
    json_error_t je;
    json_t *o = body ? json_loads(body, 0, &je) : NULL;
    json_t *e = json_object_get(o, "error");
    const int ok = json_is_string(json_object_get(e, "message")) && json_is_string(json_object_get(e, "type"));
    const char *c = json_string_value(json_object_get(e, "code"));
    snprintf(code, n, "%s", c ? c : "");
    json_decref(o);
    return ok;
}

static unsigned le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (unsigned)p[3] << 24; }

/* Is b[n] a whole file of format fmt (streamed: sizes may be unknown)? */
static const char *audio_problem(const char *fmt, const unsigned char *b, size_t n, int streamed) {
    if (!strcmp(fmt, "wav")) {
        if (n < 44 || memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4)) return "not a WAV";
        if (!streamed && (le32(b + 40) != n - 44 || le32(b + 4) != n - 8)) return "WAV sizes disagree with the length";
        if ((n - 44) % 2) return "WAV data is not whole samples";
        return NULL;
    }
    if (!strcmp(fmt, "pcm")) return n == 0 ? "no PCM" : n % 2 ? "PCM is not whole samples" : NULL;
    if (!strcmp(fmt, "flac")) return n < 4 || memcmp(b, "fLaC", 4) ? "not FLAC" : NULL;
    if (!strcmp(fmt, "opus")) return n < 4 || memcmp(b, "OggS", 4) ? "not Ogg" : NULL;
    if (n < 3 || !((b[0] == 0xFF && (b[1] & 0xE0) == 0xE0) || !memcmp(b, "ID3", 3))) return "not MP3";
    return NULL;
}

typedef struct client {
    int id;
    unsigned seed;
    int n_tmp;             /* temporary voices made */
    char tmp_voice[64];    /* last temporary voice not yet deleted, or "" */
} client;

static int rnd(client *c, int n) { return (int)(rand_r(&c->seed) % (unsigned)n); }

static const char *pick_voice(client *c, int *temporary) {
    static const char *const kept[N_KEPT] = {"keep0", "keep1", "keep2"};
    *temporary = 0;
    if (c->tmp_voice[0] && rnd(c, 3) == 0) {
        *temporary = 1;
        return c->tmp_voice;
    }
    return kept[rnd(c, N_KEPT)];
}

static void speech_body(client *c, char *out, size_t n, const char *voice, const char *fmt, const char *sfmt) {
    static const char *const texts[] = {"Hello there.", "A short sentence. And another one!", "Testing, one, two.",
                                        "Soak test, client speaking."};
    snprintf(out, n,
             "{\"model\":\"qtts\",\"input\":\"%s\",\"voice\":\"%s\",\"response_format\":\"%s\",\"max_new_tokens\":%d,"
             "\"seed\":%d%s%s%s}",
             texts[rnd(c, 4)], voice, fmt, 4 + rnd(c, 20), rnd(c, 1000), sfmt ? ",\"stream_format\":\"" : "",
             sfmt ? sfmt : "", sfmt ? "\"" : "");
}

/* The statuses a well-formed speech request may get: 200, 429 (queue full),
 * and 400 voice_not_found when it named a temporary voice another request
 * may have deleted. */
static int allowed_error(int status, const char *code, int temporary) {
    if (status == 429) return 1;
    if (status == 400 && temporary && !strcmp(code, "voice_not_found")) return 1;
    return 0;
}

static void do_speech(client *c, int kind) {
    int temporary;
    const char *voice = pick_voice(c, &temporary);
    const char *fmt = formats[rnd(c, 5)];
    const char *sfmt = kind == K_STREAM || kind == K_SLOW ? "audio" : kind == K_SSE ? "sse" : NULL;
    char body[512], err[256];
    speech_body(c, body, sizeof body, voice, fmt, sfmt);
    http_conn *h = hc_open("127.0.0.1", g_port, "POST", "/v1/audio/speech", "Content-Type: application/json\r\n",
                           body, strlen(body), TIMEOUT_MS, err, sizeof err);
    if (!h) {
        failure("%s: no response: %s", kind_names[kind], err);
        return;
    }
    const int st = hc_status(h);
    count_status(st);
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    long k;
    const int disconnect_at = kind == K_DISCONNECT ? rnd(c, 20000) : -1;
    int cut = 0;
    for (;;) {
        if (n + 4096 > cap) buf = realloc(buf, cap *= 2);
        if (disconnect_at >= 0 && n >= (size_t)disconnect_at) break;
        k = hc_read(h, buf + n, kind == K_SLOW ? 1024 : cap - n - 1);
        if (k == 0) break;
        if (k < 0) {
            cut = 1;
            break;
        }
        n += (size_t)k;
        if (kind == K_SLOW) usleep(20000 + 1000 * rnd(c, 80)); /* a reader that stalls between pieces */
    }
    buf[n] = 0;
    hc_close(h);
    if (disconnect_at >= 0) { /* went away: nothing to check but that the server lives on */
        free(buf);
        return;
    }
    if (st == 200) {
        const char *why = NULL;
        if (cut) why = "the response was cut";
        else if (kind == K_SSE) {
            if (!strstr((char *)buf, "speech.audio.done")) why = "SSE stream without speech.audio.done";
            else if (strstr((char *)buf, "\"type\":\"error\"")) why = "SSE stream carries an error event";
        } else why = audio_problem(fmt, buf, n, sfmt != NULL);
        if (why) failure("%s %s (%s, voice %s): %s (%zu bytes)", kind_names[kind], fmt, sfmt ? sfmt : "whole", voice,
                         why, n);
    } else {
        char code[64];
        if (cut || !error_shaped((char *)buf, code, sizeof code) || !allowed_error(st, code, temporary))
            failure("%s %s voice %s: HTTP %d %s%.200s", kind_names[kind], fmt, voice, st, cut ? "(cut) " : "",
                    (char *)buf);
    }
    free(buf);
}

/* A connection that sends part of a request, or all of it, and goes away. */
static void do_raw_disconnect(client *c) {
    char body[512], req[1024];
    speech_body(c, body, sizeof body, "keep0", formats[rnd(c, 5)], rnd(c, 2) ? "audio" : NULL);
    int n = snprintf(req, sizeof req, "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        failure("disconnect: cannot connect");
        if (fd >= 0) close(fd);
        return;
    }
    ssize_t w = send(fd, req, (size_t)(1 + rnd(c, n)), MSG_NOSIGNAL);
    (void)w;
    usleep(1000 * rnd(c, 300));
    close(fd);
}

static void do_malformed(client *c) {
    static const char *const bodies[] = {
        "{\"model\":\"qtts\",\"input\":", "[1,2,3]", "{\"model\":\"qtts\",\"input\":\"x\",\"voice\":\"keep0\",\"speed\":\"fast\"}",
        "{\"model\":\"qtts\",\"input\":\"x\",\"voice\":\"keep0\",\"frobnicate\":1}",
        "{\"model\":\"qtts\",\"input\":\"x\",\"voice\":\"keep0\",\"response_format\":\"aac\"}",
        "{\"model\":\"qtts\",\"input\":\"   \",\"voice\":\"keep0\"}", "{\"model\":\"qtts\",\"input\":\"x\",\"voice\":\"no_such_voice\"}",
        "\xff\xfe{", ""};
    const char *b = bodies[rnd(c, (int)(sizeof bodies / sizeof bodies[0]))];
    http_result r;
    hc_request("127.0.0.1", g_port, "POST", "/v1/audio/speech", "Content-Type: application/json\r\n", b, strlen(b),
               TIMEOUT_MS, &r);
    count_status(r.status);
    char code[64];
    if (r.status != 400 || !r.complete || !error_shaped(r.body, code, sizeof code))
        failure("malformed body %.40s: HTTP %d %.200s", b, r.status, r.body ? r.body : r.err);
    http_result_free(&r);
}

static void do_oversized(client *c) {
    const size_t n = g_max_body + 1 + (size_t)rnd(c, 100000);
    char *b = malloc(n);
    memset(b, ' ', n);
    memcpy(b, "{\"model\":\"qtts\",\"input\":\"", 26);
    http_result r;
    hc_request("127.0.0.1", g_port, "POST", "/v1/audio/speech", "Content-Type: application/json\r\n", b, n, TIMEOUT_MS,
               &r);
    count_status(r.status);
    /* the server may answer 413 before reading the body and close: the
     * client's send can fail then, but a 413 must come back */
    if (r.status != 413) failure("oversized body (%zu bytes): HTTP %d %.200s", n, r.status, r.body ? r.body : r.err);
    http_result_free(&r);
    free(b);
}

static int upload(const char *name, int icl, int *status) {
    static const char pre_fmt[] = "--SOAKB\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n%s\r\n%s"
                                  "--SOAKB\r\nContent-Disposition: form-data; name=\"audio\"; filename=\"r.wav\"\r\n"
                                  "Content-Type: audio/wav\r\n\r\n";
    char pre[512];
    snprintf(pre, sizeof pre, pre_fmt, name,
             icl ? "--SOAKB\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nHello there.\r\n" : "");
    static const char post[] = "\r\n--SOAKB--\r\n";
    const size_t n = strlen(pre) + g_n_wav + strlen(post);
    char *b = malloc(n);
    memcpy(b, pre, strlen(pre));
    memcpy(b + strlen(pre), g_wav, g_n_wav);
    memcpy(b + strlen(pre) + g_n_wav, post, strlen(post));
    http_result r;
    hc_request("127.0.0.1", g_port, "POST", "/v1/audio/voices", "Content-Type: multipart/form-data; boundary=SOAKB\r\n",
               b, n, TIMEOUT_MS, &r);
    free(b);
    *status = r.status;
    int ok = r.status == 201 && r.complete;
    if (!ok) failure("upload %s: HTTP %d %.200s", name, r.status, r.body ? r.body : r.err);
    http_result_free(&r);
    return ok ? 0 : -1;
}

static void do_upload(client *c) {
    if (c->tmp_voice[0]) return;
    char name[64];
    snprintf(name, sizeof name, "tmp%d_%d", c->id, c->n_tmp++);
    int st;
    if (!upload(name, rnd(c, 2), &st)) snprintf(c->tmp_voice, sizeof c->tmp_voice, "%s", name);
    count_status(st);
}

static void do_delete(client *c) {
    if (!c->tmp_voice[0]) return;
    char path[128];
    snprintf(path, sizeof path, "/v1/audio/voices/%s", c->tmp_voice);
    http_result r;
    hc_request("127.0.0.1", g_port, "DELETE", path, NULL, NULL, 0, TIMEOUT_MS, &r);
    count_status(r.status);
    if (r.status != 200) failure("delete %s: HTTP %d %.200s", c->tmp_voice, r.status, r.body ? r.body : r.err);
    c->tmp_voice[0] = 0;
    http_result_free(&r);
}

static void do_meta(client *c) {
    static const char *const paths[] = {"/health", "/ready", "/metrics", "/v1/models", "/v1/audio/voices"};
    const char *p = paths[rnd(c, 5)];
    http_result r;
    hc_request("127.0.0.1", g_port, "GET", p, NULL, NULL, 0, TIMEOUT_MS, &r);
    count_status(r.status);
    if (r.status != 200 || !r.complete) failure("GET %s: HTTP %d %s", p, r.status, r.err);
    http_result_free(&r);
}

static void *client_main(void *arg) {
    client *c = arg;
    while (now_s() < g_end_s) {
        const int x = rnd(c, 100);
        int kind = x < 30 ? K_WHOLE : x < 45 ? K_STREAM : x < 53 ? K_SSE : x < 61 ? K_DISCONNECT : x < 66 ? K_SLOW
                 : x < 74 ? K_MALFORMED : x < 77 ? K_OVERSIZED : x < 85 ? K_UPLOAD : x < 92 ? K_DELETE : K_META;
        atomic_fetch_add(&n_kind[kind], 1);
        switch (kind) {
        case K_DISCONNECT:
            if (rnd(c, 2)) do_raw_disconnect(c);
            else do_speech(c, kind);
            break;
        case K_WHOLE:
        case K_STREAM:
        case K_SSE:
        case K_SLOW: do_speech(c, kind); break;
        case K_MALFORMED: do_malformed(c); break;
        case K_OVERSIZED: do_oversized(c); break;
        case K_UPLOAD: do_upload(c); break;
        case K_DELETE: do_delete(c); break;
        default: do_meta(c);
        }
    }
    if (c->tmp_voice[0]) do_delete(c);
    return NULL;
}

static char *get_text(const char *path, int *status) {
    http_result r;
    hc_request("127.0.0.1", g_port, "GET", path, NULL, NULL, 0, TIMEOUT_MS, &r);
    *status = r.status;
    char *t = r.body ? strdup(r.body) : NULL;
    http_result_free(&r);
    return t;
}

int main(int argc, char **argv) {
    double minutes = 1, warm_s = -1, rss_tol = 0.05;
    int n_clients = 8;
    const char *wav_path = NULL;
    unsigned seed = 1;
    g_max_body = 65536;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) g_port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pid")) g_pid = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--minutes")) minutes = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--clients")) n_clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ref")) wav_path = argv[i + 1];
        else if (!strcmp(argv[i], "--seed")) seed = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-body")) g_max_body = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--warm-s")) warm_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--rss-tolerance")) rss_tol = atof(argv[i + 1]);
    }
    if (!g_port || !g_pid || !wav_path || n_clients < 1 || n_clients > 64) {
        fprintf(stderr, "usage: soak --port P --pid PID --ref WAV [--minutes M] [--clients N] [--seed S] "
                        "[--max-body BYTES] [--warm-s S] [--rss-tolerance F]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    FILE *f = fopen(wav_path, "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END);
    g_n_wav = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_wav = malloc(g_n_wav);
    if (fread(g_wav, 1, g_n_wav, f) != g_n_wav) return 2;
    fclose(f);
    /* the voices kept through the run */
    for (int k = 0; k < N_KEPT; k++) {
        char name[16];
        snprintf(name, sizeof name, "keep%d", k);
        int st;
        if (upload(name, k & 1, &st)) {
            printf("FAIL soak: cannot upload the kept voice %s\n", name);
            return 1;
        }
    }
    const double t0 = now_s(), run_s = minutes * 60;
    if (warm_s < 0) warm_s = run_s * 0.2 < 60 ? run_s * 0.2 : 60;
    g_end_s = t0 + run_s;
    client *cs = calloc((size_t)n_clients, sizeof *cs);
    pthread_t *th = calloc((size_t)n_clients, sizeof *th);
    for (int i = 0; i < n_clients; i++) {
        cs[i].id = i;
        cs[i].seed = seed * 7919u + (unsigned)i * 104729u;
        pthread_create(&th[i], NULL, client_main, &cs[i]);
    }
    /* RSS over time: one sample every tenth of the run, and at warm-up's end */
    long rss_warm = -1, rss[11];
    int n_rss = 0;
    double next = t0;
    while (now_s() < g_end_s) {
        if (rss_warm < 0 && now_s() >= t0 + warm_s) rss_warm = rss_kb();
        if (now_s() >= next && n_rss < 11) {
            rss[n_rss++] = rss_kb();
            next += run_s / 10;
        }
        if (kill(g_pid, 0)) {
            failure("the server process is gone");
            break;
        }
        usleep(200000);
    }
    for (int i = 0; i < n_clients; i++) pthread_join(th[i], NULL);
    usleep(500000); /* cancelled streams leave their slots before the next step */
    /* the end state */
    int st;
    char *m = NULL;
    double active = -1, queued = -1;
    for (int tries = 0; tries < 50; tries++) { /* a disconnected stream may take a step to leave */
        free(m);
        m = get_text("/metrics", &st);
        active = metrics_value(m, "qtts_active_slots");
        queued = metrics_value(m, "qtts_queue_depth");
        if (active == 0 && queued == 0) break;
        usleep(200000);
    }
    if (active != 0 || queued != 0) failure("at the end /metrics shows %g active slots and %g queued", active, queued);
    const long rss_end = rss_kb();
    if (n_rss < 11) rss[n_rss++] = rss_end;
    if (rss_warm > 0 && (rss_end > rss_warm * (1 + rss_tol) || rss_end < rss_warm * (1 - rss_tol)))
        failure("RSS at the end %ld kB vs %ld kB after warm-up (%+.1f%%, tolerance %.0f%%)", rss_end, rss_warm,
                100.0 * (rss_end - rss_warm) / rss_warm, 100 * rss_tol);
    char *voices = get_text("/v1/audio/voices", &st);
    for (int k = 0; k < N_KEPT; k++) {
        char name[32], body[512];
        snprintf(name, sizeof name, "\"keep%d\"", k);
        if (!voices || !strstr(voices, name)) failure("the kept voice %s is not listed", name);
        snprintf(body, sizeof body, "{\"model\":\"qtts\",\"input\":\"Still here.\",\"voice\":\"keep%d\","
                 "\"response_format\":\"wav\",\"max_new_tokens\":8}", k);
        http_result r;
        hc_request("127.0.0.1", g_port, "POST", "/v1/audio/speech", "Content-Type: application/json\r\n", body,
                   strlen(body), TIMEOUT_MS, &r);
        if (r.status != 200 || !r.complete || audio_problem("wav", (unsigned char *)r.body, r.n, 0))
            failure("the kept voice keep%d does not speak after the run: HTTP %d", k, r.status);
        http_result_free(&r);
    }
    for (int i = 0; i < n_clients; i++) {
        char name[64];
        snprintf(name, sizeof name, "\"tmp%d_", i);
        if (voices && strstr(voices, name)) failure("a temporary voice of client %d is still listed", i);
    }
    if (kill(g_pid, 0)) failure("the server process is gone");
    /* report */
    printf("soak: %.1f min, %d clients\nrequests by kind:", minutes, n_clients);
    unsigned long total = 0;
    for (int k = 0; k < N_KINDS; k++) {
        printf(" %s %lu", kind_names[k], atomic_load(&n_kind[k]));
        total += atomic_load(&n_kind[k]);
    }
    printf(" (total %lu)\nresponses by status:", total);
    for (int s = 0; s < MAX_STATUS; s++)
        if (atomic_load(&n_status[s])) printf(" %d: %lu", s, atomic_load(&n_status[s]));
    printf("\nRSS (kB) at each tenth of the run:");
    for (int i = 0; i < n_rss; i++) printf(" %ld", rss[i]);
    printf("\nRSS after warm-up (%.0f s) %ld kB, at the end %ld kB (%+.2f%%)\n", warm_s, rss_warm, rss_end,
           rss_warm > 0 ? 100.0 * (rss_end - rss_warm) / rss_warm : 0.0);
    printf("server: qtts_speech_requests_total %g, qtts_rejected_total %g, qtts_disconnects_total %g, "
           "qtts_active_slots %g, qtts_queue_depth %g\n", metrics_value(m, "qtts_speech_requests_total"),
           metrics_value(m, "qtts_rejected_total"), metrics_value(m, "qtts_disconnects_total"), active, queued);
    free(m);
    free(voices);
    if (atomic_load(&n_fail)) printf("FAIL soak: %lu problems, the first: %s\n", atomic_load(&n_fail), first_fail);
    else printf("ok soak\n");
    free(cs);
    free(th);
    free(g_wav);
    return atomic_load(&n_fail) ? 1 : 0;
}
