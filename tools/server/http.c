/* libmicrohttpd glue: the daemon (thread per connection, so handlers may
 * block on their job), routing, limits (body size, connections, idle
 * timeout), API-key auth, CORS, and response helpers. Dataflow per request:
 * first call (headers) -> auth, route and Content-Length checks -> body
 * pieces (JSON buffered up to the limit, multipart streamed to the upload
 * parser) -> last call -> handler -> completion callback (metrics, log). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "api.h"
#include "http.h"
#include "metrics.h"

static void add_cors(const server *s, struct MHD_Response *resp) {
    if (!s->cfg.cors_origin) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", s->cfg.cors_origin);
    if (strcmp(s->cfg.cors_origin, "*")) MHD_add_response_header(resp, "Vary", "Origin");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", "X-Qtts-Seed, Retry-After");
}

enum MHD_Result http_queue(http_req *r, int status, struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    add_cors(r->srv, resp);
    r->status = status;
    enum MHD_Result res = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return res;
}

enum MHD_Result http_send_text(http_req *r, int status, const char *content_type, const char *text) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", content_type);
    return http_queue(r, status, resp);
}

static enum MHD_Result send_json_headers(http_req *r, int status, json_t *body, int retry_after_s) {
    char *txt = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!txt) return MHD_NO;
    size_t n = strlen(txt);
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(txt);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (retry_after_s > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after_s);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    return http_queue(r, status, resp);
}

enum MHD_Result http_send_json(http_req *r, int status, json_t *body) { return send_json_headers(r, status, body, 0); }

enum MHD_Result http_send_error(http_req *r, const api_error *e) {
    if (r->srv->cfg.verbose >= 1)
        srv_log(r->srv, 2, "%s %s -> %d %s", r->method, r->url, e->status, e->message);
    return send_json_headers(r, e->status, api_error_json(e), e->retry_after_s);
}

int http_peer_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void http_touch(struct MHD_Connection *conn, int timeout_s) {
    if (timeout_s <= 0) return;
    /* libmicrohttpd restarts the idle clock when a connection's timeout is set
     * from 0 (there is no other call for it) */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)timeout_s);
}

/* Compare without leaking the key's length or content through timing. */
static int same_secret(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = (unsigned char)(na != nb);
    for (size_t i = 0; i < nb; i++) d |= (unsigned char)(a[i % (na ? na : 1)] ^ b[i]);
    return d == 0 && na == nb;
}

static int authorized(const server *s, struct MHD_Connection *c) {
    if (!s->cfg.api_key || !*s->cfg.api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    return same_secret(h, s->cfg.api_key);
}

typedef enum route {
    R_NONE = 0,
    R_HEALTH,
    R_READY,
    R_METRICS,
    R_MODELS,
    R_SPEECH,
    R_VOICES,
    R_VOICE_ONE,
    R_SPEECH_WS,
} route;

static route find_route(const char *url, const char **endpoint, const char **allow) {
    static const struct {
        const char *path;
        route r;
        const char *endpoint, *allow;
    } table[] = {
        {"/health", R_HEALTH, "health", "GET, HEAD"},
        {"/ready", R_READY, "ready", "GET, HEAD"},
        {"/metrics", R_METRICS, "metrics", "GET"},
        {"/v1/models", R_MODELS, "models", "GET"},
        {"/v1/audio/speech", R_SPEECH, "speech", "POST"},
        {"/v1/audio/speech/stream", R_SPEECH_WS, "speech_stream", "GET"},
        {"/v1/audio/voices", R_VOICES, "voices", "GET, POST"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(url, table[i].path)) {
            *endpoint = table[i].endpoint;
            *allow = table[i].allow;
            return table[i].r;
        }
    if (!strncmp(url, "/v1/audio/voices/", 17) && url[17]) {
        *endpoint = "voices";
        *allow = "DELETE";
        return R_VOICE_ONE;
    }
    *endpoint = "other";
    *allow = NULL;
    return R_NONE;
}

static int method_ok(route rt, const char *m) {
    const int get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    switch (rt) {
    case R_HEALTH:
    case R_READY:
    case R_METRICS:
    case R_MODELS: return get;
    case R_SPEECH: return !strcmp(m, "POST");
    case R_SPEECH_WS: return !strcmp(m, "GET");
    case R_VOICES: return get || !strcmp(m, "POST");
    case R_VOICE_ONE: return !strcmp(m, "DELETE");
    default: return 0;
    }
}

static enum MHD_Result preflight(http_req *r) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    return http_queue(r, 204, resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    server *s = cls;
    (void)version;
    http_req *r = *con_cls;
    api_error e;
    if (!r) { /* headers only: decide early what can be decided */
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        *con_cls = r;
        r->srv = s;
        r->conn = c;
        r->method = method;
        r->url = url;
        r->t0 = tool_now_s();
        const char *allow = NULL;
        route rt = find_route(url, &r->endpoint, &allow);
        r->limit = s->cfg.max_body_bytes;
        if (!strcmp(method, "OPTIONS")) {
            if (s->cfg.cors_origin && rt != R_NONE) return preflight(r);
            api_error_set(&e, rt == R_NONE ? 404 : 405, "invalid_request_error", "", "",
                          rt == R_NONE ? "Unknown path %s" : "CORS is not enabled on this server (--cors-origin)", url);
            return http_send_error(r, &e);
        }
        if (rt == R_NONE) {
            api_error_set(&e, 404, "invalid_request_error", "", "unknown_url", "Unknown request URL: %s %s", method, url);
            return http_send_error(r, &e);
        }
        if (!method_ok(rt, method)) {
            api_error_set(&e, 405, "invalid_request_error", "", "method_not_allowed",
                          "Method %s is not allowed on %s (allowed: %s)", method, url, allow);
            json_t *body = api_error_json(&e);
            char *txt = json_dumps(body, JSON_COMPACT);
            json_decref(body);
            struct MHD_Response *resp =
                txt ? MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_FREE) : NULL;
            if (!resp) {
                free(txt);
                return MHD_NO;
            }
            MHD_add_response_header(resp, "Content-Type", "application/json");
            MHD_add_response_header(resp, "Allow", allow);
            return http_queue(r, 405, resp);
        }
        if (!strncmp(url, "/v1/", 4) && !authorized(s, c)) {
            api_error_set(&e, 401, "invalid_request_error", "", "invalid_api_key",
                          "Incorrect or missing API key: send the header 'Authorization: Bearer KEY'");
            return http_send_error(r, &e);
        }
        const int upload = rt == R_VOICES && !strcmp(method, "POST");
        if (upload) r->limit = s->cfg.max_upload_bytes;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > r->limit) {
            api_error_set(&e, 413, "invalid_request_error", "", "request_too_large",
                          "The request body is %s bytes; the limit is %zu", cl, r->limit);
            return http_send_error(r, &e);
        }
        if (upload && !api_voices_upload_begin(r)) return MHD_YES; /* error queued */
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        const size_t n = *upload_size;
        *upload_size = 0;
        if (r->status) return MHD_YES; /* answered already: discard */
        r->n_body += n;
        if (r->n_body > r->limit || r->too_large) {
            r->too_large = 1;
            return MHD_YES;
        }
        if (r->pp) {
            api_voices_upload_data(r, upload_data, n); /* a parse error is kept and answered at the end */
            return MHD_YES;
        }
        if (bytebuf_put(&r->body, upload_data, n)) return MHD_NO;
        return MHD_YES;
    }
    if (r->status) return MHD_YES; /* already answered (early error) */
    if (r->too_large) {
        api_error_set(&e, 413, "invalid_request_error", "", "request_too_large",
                      "The request body is larger than the limit of %zu bytes", r->limit);
        return http_send_error(r, &e);
    }
    const char *allow = NULL;
    route rt = find_route(url, &r->endpoint, &allow);
    switch (rt) {
    case R_HEALTH: return api_health(r);
    case R_READY: return api_ready(r);
    case R_METRICS: return api_metrics(r);
    case R_MODELS: return api_models(r);
    case R_SPEECH: return api_speech(r);
    case R_VOICES: return !strcmp(method, "POST") ? api_voices_upload_end(r) : api_voices_list(r);
    case R_VOICE_ONE: return api_voices_delete(r, url + 17);
    case R_SPEECH_WS: return api_speech_ws(r);
    default: return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    (void)c;
    http_req *r = *con_cls;
    if (!r) return;
    /* 499: the client went away before an answer was queued (nginx's convention) */
    const int status = r->status ? r->status : 499;
    metrics_request(s->mx, r->endpoint ? r->endpoint : "other", status);
    if (s->cfg.verbose >= 1)
        srv_log(s, 2, "%s %s %d %.3f s%s", r->method, r->url, status, tool_now_s() - r->t0,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    api_voices_upload_free(r);
    bytebuf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    server *s = cls;
    if (s->cfg.verbose < 2) return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    srv_log(s, 3, "libmicrohttpd: %s", msg);
}

int http_start(server *s, char *err, size_t n) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (gai || !ai) {
        snprintf(err, n, "cannot resolve --host %s: %s", s->cfg.host, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->httpd = MHD_start_daemon(
        flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)s->cfg.conn_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->httpd) {
        snprintf(err, n, "cannot listen on %s port %d (in use, or not an address of this machine?)", s->cfg.host,
                 s->cfg.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->httpd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->cfg.port;
    return 0;
}

void http_stop(server *s) {
    if (s->httpd) MHD_stop_daemon(s->httpd);
    s->httpd = NULL;
}
