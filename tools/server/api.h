/* Shared by the HTTP glue (http.c) and the endpoint handlers (api_*.c): the
 * per-request state, errors in OpenAI's shape, response helpers and the JSON
 * field readers (json.c). Handlers run on the connection's own thread
 * (libmicrohttpd thread-per-connection), so they may block. */
#ifndef QTTS_SERVER_API_H
#define QTTS_SERVER_API_H

#include <jansson.h>
#include <microhttpd.h>
#include <stddef.h>

#include "encode.h"
#include "server.h"

/* An error answered as {"error": {"message", "type", "param", "code"}}. */
typedef struct api_error {
    int status;          /* HTTP status */
    const char *type;    /* "invalid_request_error", "authentication_error", "rate_limit_error",
                            "server_error", "not_found_error" */
    char param[64];      /* offending field or "" */
    char code[48];       /* machine-readable code or "" */
    char message[1024];
    int retry_after_s;   /* > 0: a Retry-After header */
} api_error;

void api_error_set(api_error *e, int status, const char *type, const char *param, const char *code,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
/* Shorthand for a 400 invalid_request_error about param. */
#define API_BAD(e, param, ...) api_error_set((e), 400, "invalid_request_error", (param), "", __VA_ARGS__)

/* The body of an error (new reference). */
json_t *api_error_json(const api_error *e);

/* One request across libmicrohttpd's calls. */
typedef struct http_req {
    server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *url;
    const char *endpoint;  /* metrics label */
    double t0;             /* arrival, tool_now_s() */
    bytebuf body;          /* JSON body */
    size_t n_body;         /* body bytes received */
    size_t limit;          /* body bytes allowed */
    int too_large;
    int status;            /* status queued (for metrics and logs) */
    /* multipart uploads (api_voices.c) */
    struct MHD_PostProcessor *pp;
    void *upload;
} http_req;

/* Queue a response; these add the CORS headers. Return MHD's result. */
enum MHD_Result http_send_json(http_req *r, int status, json_t *body); /* steals body */
enum MHD_Result http_send_error(http_req *r, const api_error *e);
enum MHD_Result http_send_text(http_req *r, int status, const char *content_type, const char *text);
/* Queue resp with status (adds CORS headers, records the status, destroys resp). */
enum MHD_Result http_queue(http_req *r, int status, struct MHD_Response *resp);
/* 1 when the client closed or reset its connection. */
int http_peer_gone(struct MHD_Connection *conn);
/* Restart the connection's idle clock (timeout_s = --timeout): time the
 * server spent making audio is not the client's idleness. */
void http_touch(struct MHD_Connection *conn, int timeout_s);

/* Endpoints (body complete when called). */
enum MHD_Result api_speech(http_req *r);
/* GET /v1/audio/speech/stream: the WebSocket of incremental text (api_ws.c). */
enum MHD_Result api_speech_ws(http_req *r);
/* A speech request's fields (a WebSocket session's config: no input) into
 * j; *format gets response_format, *speed the speed. 0, or -1 with e set. */
struct job;
int api_speech_config(server *s, json_t *o, struct job *j, int *format, double *speed, api_error *e);
/* Parse and validate a speech request body[n] exactly as api_speech does,
 * without running it (for tests and fuzzing): 0 when it would be queued,
 * else -1 with e filled. */
int api_speech_check(server *s, const char *body, size_t n, api_error *e);
enum MHD_Result api_voices_list(http_req *r);
enum MHD_Result api_voices_delete(http_req *r, const char *name);
/* Multipart voice upload: begin on the first call (1 = accepted, else an
 * error was queued), data for each piece of the body, end when complete. */
int api_voices_upload_begin(http_req *r);
int api_voices_upload_data(http_req *r, const char *data, size_t n);
enum MHD_Result api_voices_upload_end(http_req *r);
void api_voices_upload_free(http_req *r);
enum MHD_Result api_health(http_req *r);
enum MHD_Result api_ready(http_req *r);
enum MHD_Result api_metrics(http_req *r);
enum MHD_Result api_models(http_req *r);

/* ---------------------------------------------------------------- json.c */

/* Optional typed fields of a JSON object. Each returns 0 when the field is
 * absent or null, 1 when present and valid (written to *out), -1 after
 * filling e with a 400 naming the field and the expected type. */
int json_opt_string(json_t *o, const char *key, const char **out, api_error *e);
int json_opt_number(json_t *o, const char *key, double lo, double hi, double *out, api_error *e);
int json_opt_int(json_t *o, const char *key, long long lo, long long hi, long long *out, api_error *e);
int json_opt_bool(json_t *o, const char *key, int *out, api_error *e);
/* First key of o not in the NULL-terminated list, or NULL. */
const char *json_unknown_key(json_t *o, const char *const *known);
/* Code points in a valid UTF-8 string. */
size_t utf8_length(const char *s);
/* Standard base64 of n bytes appended to out (NUL not included). 0 ok. */
int base64_append(bytebuf *out, const unsigned char *p, size_t n);

#endif
