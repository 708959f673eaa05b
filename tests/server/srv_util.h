/* Helpers shared by the in-process server tests (included, not linked):
 * load a test checkpoint, start a server on a free loopback port and wait
 * until it is ready, send requests with the small client, check the OpenAI
 * error shape, read /metrics, decode base64, read the process RSS. */
#ifndef QTTS_TESTS_SERVER_SRV_UTIL_H
#define QTTS_TESTS_SERVER_SRV_UTIL_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "metrics.h"
#include "qtts.h"
#include "server.h"
#include "test.h"

#define TIMEOUT_MS 180000

static inline qtts_model *load_model(const char *dir) {
    char err[1024];
    qtts_model *m = NULL;
    qtts_model_params mp = qtts_model_default_params();
    if (qtts_model_load(&m, dir, &mp, err, sizeof err)) {
        test_report("load_model", 0, "%s: %s", dir, err);
        return NULL;
    }
    return m;
}

/* A config for tests: any free port on 127.0.0.1, quiet. */
static inline server_config test_config(void) {
    server_config c = server_default_config();
    c.port = 0;
    c.verbose = getenv("QTTS_SERVER_TEST_VERBOSE") ? 2 : 0;
    c.drain_s = 2;
    c.max_frames = 4096;
    return c;
}

static inline server *start_server(qtts_model *m, const server_config *cfg) {
    char err[1024];
    server *s = NULL;
    if (server_start(&s, m, cfg, err, sizeof err)) {
        test_report("start_server", 0, "%s", err);
        return NULL;
    }
    for (int i = 0; i < 3000 && !server_ready(s); i++) usleep(10000);
    if (!server_ready(s)) test_report("start_server/ready", 0, "not ready after 30 s");
    return s;
}

static inline int req(server *s, const char *method, const char *path, const char *headers, const char *body,
               http_result *out) {
    return hc_request("127.0.0.1", server_port(s), method, path, headers, body, body ? strlen(body) : 0, TIMEOUT_MS,
                      out);
}

static inline int post_json(server *s, const char *body, http_result *out) {
    return req(s, "POST", "/v1/audio/speech", "Content-Type: application/json\r\n", body, out);
}

static inline const char *header(const http_result *r, const char *name) {
    static _Thread_local char v[8][512]; /* a few values may be held at once */
    static _Thread_local int k;
    char *b = v[k++ & 7];
    return r->headers && !hc_find_header(r->headers, name, b, sizeof v[0]) ? b : NULL;
}

/* 1 when r is an OpenAI-shaped error {"error": {"message": str, "type": str,
 * "param": str|null, "code": str|null}} (and param matches when given). */
static inline int is_error_shape(const http_result *r, const char *param, char *why, size_t n) {
    json_error_t je;
    json_t *o = r->body ? json_loads(r->body, 0, &je) : NULL;
    json_t *e = json_object_get(o, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *type = json_string_value(json_object_get(e, "type"));
    json_t *p = json_object_get(e, "param"), *c = json_object_get(e, "code");
    int ok = msg && *msg && type && *type && p && (json_is_string(p) || json_is_null(p)) && c &&
             (json_is_string(c) || json_is_null(c));
    if (ok && param) ok = json_is_string(p) && !strcmp(json_string_value(p), param);
    const char *ct = header(r, "Content-Type");
    if (ok && (!ct || strncmp(ct, "application/json", 16))) ok = 0;
    snprintf(why, n, "status %d, content type %.100s, body %.300s", r->status, ct ? ct : "-", r->body ? r->body : "");
    json_decref(o);
    return ok;
}

static inline char *get_metrics(server *s) {
    http_result r;
    if (req(s, "GET", "/metrics", NULL, NULL, &r) || r.status != 200) {
        http_result_free(&r);
        return NULL;
    }
    char *b = r.body;
    r.body = NULL;
    http_result_free(&r);
    return b;
}

static inline double metric(server *s, const char *name) {
    char *t = get_metrics(s);
    double v = metrics_value(t, name);
    free(t);
    return v;
}

static inline double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Polls metric name every 10 ms until it equals v or ms milliseconds have
 * passed; returns the last value read, and in *took_ms (may be NULL) how
 * long it waited. The bound only keeps a broken server from hanging the
 * test; it is not a speed claim (sanitizer builds on a loaded machine take
 * seconds for what a plain build does in milliseconds), so a check that
 * waits for a state uses SETTLE_MS and prints how long the state took. */
#define SETTLE_MS 60000
static inline double wait_metric_took(server *s, const char *name, double v, int ms, double *took_ms) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double x = metric(s, name);
    while (x != v && ms_since(&t0) < ms) {
        usleep(10000);
        x = metric(s, name);
    }
    if (took_ms) *took_ms = ms_since(&t0);
    return x;
}

static inline double wait_metric(server *s, const char *name, double v, int ms) {
    return wait_metric_took(s, name, v, ms, NULL);
}

static inline int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Append the decoded bytes of a base64 string; -1 on a bad character. */
static inline int b64_decode_append(const char *s, unsigned char **out, size_t *n, size_t *cap) {
    unsigned v = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        int d = b64val((unsigned char)*s);
        if (d < 0) return -1;
        v = (v << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (*n == *cap) *out = realloc(*out, *cap = *cap ? *cap * 2 : 65536);
            (*out)[(*n)++] = (unsigned char)(v >> bits);
        }
    }
    return 0;
}

/* VmRSS of this process in KiB. */
static inline long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

#endif
