/* GET /v1/audio/speech/stream upgraded to a WebSocket: text in as it is
 * written, speech out as it is made (docs/SERVER.md, "Streaming text in").
 * The protocol is vLLM-Omni's: the client sends session.config (the speech
 * request's fields, without input), then input.text pieces, then input.done
 * (an utterance ends; the session stays open for the next) or
 * session.close; the server answers audio.start / binary PCM frames /
 * audio.done per sentence, session.done per utterance, and error events.
 * Each utterance is one incremental-text job (scheduler.c, job_text): the
 * library splits it into sentences as the text arrives and speaks each one
 * while its text is still coming (the streaming text mode).
 *
 * The session runs on the connection's own thread (libmicrohttpd
 * thread-per-connection): one loop polls the socket for messages and the
 * job for audio. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "api.h"
#include "scheduler.h"
#include "../common/clock.h"
#include "ws.h"

#define WS_MAX_MESSAGE (1 << 20) /* bytes of one client message at most */
#define WS_READ_SAMPLES 4800

typedef struct session {
    server *srv;
    int fd;
    uint8_t *rbuf;            /* received, not yet parsed */
    size_t rn, rcap;
    char *msg;                /* a fragmented text message being put together */
    size_t msg_n;
    int in_msg;
    json_t *config;           /* the last session.config (its fields, without type) */
    int stream_audio;
    job *j;                   /* the utterance being spoken, or NULL */
    int utterance;
    int sentence;             /* sentence (segment) of the current utterance whose audio is out, -1 none */
    size_t sentence_bytes, total_bytes;
    int n_sentences;
    uint8_t *hold;            /* stream_audio false: a sentence's PCM */
    size_t hold_n, hold_cap;
    float *pcm;
    int16_t *s16;
    int closing;              /* session.close received: close once the utterance is out */
    double last_rx;           /* tool_now_s() of the last message */
    int done;
} session;

static int send_json(session *s, json_t *o) {
    char *t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!t) return -1;
    const int rc = ws_send_frame(s->fd, WS_TEXT, t, strlen(t));
    free(t);
    return rc;
}

static void send_error(session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_error(session *s, const char *fmt, ...) {
    char m[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    send_json(s, json_pack("{s:s, s:s}", "type", "error", "message", m));
}

static void close_with(session *s, int code, const char *reason) {
    uint8_t p[125];
    const size_t rl = strlen(reason) < 120 ? strlen(reason) : 120;
    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, rl);
    ws_send_frame(s->fd, WS_CLOSE, p, 2 + rl);
    s->done = 1;
    /* read what the client still sends (up to 2 s) so that closing does not
     * reset the connection before it has read the close frame */
    shutdown(s->fd, SHUT_WR);
    char sink[16384];
    const double t0 = tool_now_s();
    while (tool_now_s() - t0 < 2) {
        struct pollfd pf = {s->fd, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0 && recv(s->fd, sink, sizeof sink, 0) <= 0) break;
    }
}

/* A new utterance's job from the session config. 0, or -1 (error sent). */
static int start_utterance(session *s) {
    job *j = job_new();
    if (!j) {
        send_error(s, "out of memory");
        return -1;
    }
    json_t *c = json_deep_copy(s->config);
    json_object_del(c, "stream_audio");
    if (!json_object_get(c, "response_format")) json_object_set_new(c, "response_format", json_string("pcm"));
    if (!json_object_get(c, "text_mode")) json_object_set_new(c, "text_mode", json_string("streaming"));
    api_error e;
    memset(&e, 0, sizeof e);
    int fmt = 0;
    double speed = 1;
    int rc = api_speech_config(s->srv, c, j, &fmt, &speed, &e);
    json_decref(c);
    if (!rc && fmt != AF_PCM) {
        rc = -1;
        snprintf(e.message, sizeof e.message, "response_format must be \"pcm\" (s16le, 24 kHz, mono) on the WebSocket");
    }
    if (!rc && speed != 1.0) {
        rc = -1;
        snprintf(e.message, sizeof e.message, "speed is not supported on the WebSocket");
    }
    if (rc) {
        send_error(s, "%s", e.message);
        job_release(j);
        return -1;
    }
    j->incremental = 1;
    const int q = sched_submit(s->srv->sch, j);
    if (q) {
        send_error(s, q == -1 ? "the server is busy (its queue is full); try again later" : "the server is stopping");
        job_release(j);
        return -1;
    }
    s->j = j;
    s->sentence = -1;
    s->sentence_bytes = s->total_bytes = 0;
    s->n_sentences = 0;
    return 0;
}

static void sentence_done(session *s, int error) {
    if (s->sentence < 0) return;
    if (!s->stream_audio && s->hold_n) ws_send_frame(s->fd, WS_BINARY, s->hold, s->hold_n);
    s->hold_n = 0;
    send_json(s, json_pack("{s:s, s:i, s:i, s:I, s:b}", "type", "audio.done", "utterance_index", s->utterance,
                           "sentence_index", s->sentence, "total_bytes", (json_int_t)s->sentence_bytes, "error", error));
    s->sentence = -1;
}

/* Audio of the current utterance to the client; its end events once it ended. */
static void pump_audio(session *s) {
    if (!s->j) return;
    for (;;) {
        int done = 0, seg = 0;
        const size_t n = job_read(s->j, s->pcm, WS_READ_SAMPLES, 0, &done, &seg);
        if (n) {
            if (seg != s->sentence) {
                sentence_done(s, 0);
                s->sentence = seg;
                s->sentence_bytes = 0;
                s->n_sentences++;
                send_json(s, json_pack("{s:s, s:i, s:i, s:s, s:i}", "type", "audio.start", "utterance_index",
                                       s->utterance, "sentence_index", seg, "format", "pcm", "sample_rate", 24000));
            }
            for (size_t i = 0; i < n; i++) {
                s->s16[i] = pcm_to_s16(s->pcm[i]); /* as the HTTP endpoint's pcm */
            }
            const size_t nb = n * 2;
            s->sentence_bytes += nb;
            s->total_bytes += nb;
            if (s->stream_audio) {
                if (ws_send_frame(s->fd, WS_BINARY, s->s16, nb)) {
                    s->done = 1;
                    return;
                }
            } else {
                if (s->hold_n + nb > s->hold_cap) {
                    size_t cap = s->hold_cap ? s->hold_cap : 1 << 16;
                    while (cap < s->hold_n + nb) cap *= 2;
                    uint8_t *h = realloc(s->hold, cap);
                    if (!h) {
                        send_error(s, "out of memory");
                        s->done = 1;
                        return;
                    }
                    s->hold = h;
                    s->hold_cap = cap;
                }
                memcpy(s->hold + s->hold_n, s->s16, nb);
                s->hold_n += nb;
            }
        }
        if (done) {
            job *j = s->j;
            const int failed = j->status != QTTS_OK;
            sentence_done(s, failed);
            if (failed) send_error(s, "%s", j->err);
            send_json(s, json_pack("{s:s, s:i, s:i, s:I}", "type", "session.done", "utterance_index", s->utterance,
                                   "total_sentences", s->n_sentences, "total_bytes", (json_int_t)s->total_bytes));
            job_release(j);
            s->j = NULL;
            s->utterance++;
            return;
        }
        if (!n) return;
    }
}

static void on_message(session *s, const char *t, size_t n) {
    json_error_t je;
    json_t *o = json_loadb(t, n, JSON_REJECT_DUPLICATES, &je);
    const char *type = o ? json_string_value(json_object_get(o, "type")) : NULL;
    if (!o || !json_is_object(o) || !type) {
        send_error(s, "a message is a JSON object with a \"type\" (session.config, input.text, input.done, "
                      "session.close)%s%s", o ? "" : ": ", o ? "" : je.text);
    } else if (!strcmp(type, "session.config")) {
        if (s->j) send_error(s, "session.config while an utterance is being spoken: send it after session.done");
        else {
            int sa = 1;
            json_t *v = json_object_get(o, "stream_audio");
            json_t *c = json_deep_copy(o);
            json_object_del(c, "type");
            json_object_del(c, "stream_audio");
            if (!json_object_get(c, "response_format")) json_object_set_new(c, "response_format", json_string("pcm"));
            job *tj = job_new(); /* checked now, so that a bad config is answered at once */
            api_error e;
            memset(&e, 0, sizeof e);
            int fmt = 0;
            double speed = 1;
            const int bad = !tj || api_speech_config(s->srv, c, tj, &fmt, &speed, &e);
            job_release(tj);
            json_decref(c);
            if (v && !json_is_boolean(v)) send_error(s, "stream_audio must be true or false");
            else if (bad) send_error(s, "%s", tj ? e.message : "out of memory");
            else if (fmt != AF_PCM) send_error(s, "response_format must be \"pcm\" (s16le, 24 kHz, mono) on the WebSocket");
            else {
                if (v) sa = json_is_true(v);
                json_decref(s->config);
                s->config = json_deep_copy(o);
                json_object_del(s->config, "type");
                s->stream_audio = sa;
            }
        }
    } else if (!strcmp(type, "input.text")) {
        json_t *v = json_object_get(o, "text");
        if (!json_is_string(v)) send_error(s, "input.text needs a string \"text\"");
        else if (!s->config) send_error(s, "send session.config first");
        else if (s->closing) send_error(s, "the session is closing");
        else if ((s->j || !start_utterance(s)) &&
                 job_text(s->j, json_string_value(v), json_string_length(v), 0))
            send_error(s, "the utterance no longer takes text (it ended)");
    } else if (!strcmp(type, "input.done")) {
        if (s->j) job_text(s->j, NULL, 0, 1);
        else send_json(s, json_pack("{s:s, s:i, s:i, s:i}", "type", "session.done", "utterance_index", s->utterance++,
                                    "total_sentences", 0, "total_bytes", 0));
    } else if (!strcmp(type, "session.close")) {
        s->closing = 1;
        if (s->j) job_text(s->j, NULL, 0, 1);
    } else {
        send_error(s, "unknown message type \"%.60s\"", type);
    }
    json_decref(o);
}

/* Parse what was received. 0, or -1 when the session ends. */
static int on_bytes(session *s) {
    size_t off = 0;
    while (!s->done) {
        ws_frame f;
        const long k = ws_parse_frame(s->rbuf + off, s->rn - off, WS_MAX_MESSAGE, &f);
        if (k == 0) break;
        if (k < 0) {
            close_with(s, (int)-k, -k == WS_CLOSE_TOO_BIG ? "message too big" : "protocol error");
            return -1;
        }
        off += (size_t)k;
        s->last_rx = tool_now_s();
        switch (f.opcode) {
        case WS_PING: ws_send_frame(s->fd, WS_PONG, f.payload, f.len); break;
        case WS_PONG: break;
        case WS_CLOSE: {
            const int code = f.len >= 2 ? f.payload[0] << 8 | f.payload[1] : WS_CLOSE_NORMAL;
            uint8_t p[2] = {(uint8_t)(code >> 8), (uint8_t)code};
            ws_send_frame(s->fd, WS_CLOSE, p, 2);
            s->done = 1;
            return -1;
        }
        case WS_BINARY: close_with(s, WS_CLOSE_UNSUPPORTED, "binary messages are not accepted"); return -1;
        case WS_TEXT:
        case WS_CONT:
            if ((f.opcode == WS_TEXT) == s->in_msg) {
                close_with(s, WS_CLOSE_PROTOCOL, "unexpected continuation");
                return -1;
            }
            if (s->msg_n + f.len > WS_MAX_MESSAGE) {
                close_with(s, WS_CLOSE_TOO_BIG, "message too big");
                return -1;
            }
            char *m = realloc(s->msg, s->msg_n + f.len + 1);
            if (!m) {
                close_with(s, WS_CLOSE_ERROR, "out of memory");
                return -1;
            }
            s->msg = m;
            memcpy(s->msg + s->msg_n, f.payload, f.len);
            s->msg_n += f.len;
            s->in_msg = !f.fin;
            if (f.fin) {
                on_message(s, s->msg, s->msg_n);
                s->msg_n = 0;
            }
            break;
        }
    }
    memmove(s->rbuf, s->rbuf + off, s->rn - off);
    s->rn -= off;
    return 0;
}

static void run_session(session *s) {
    const int idle_s = s->srv->cfg.conn_timeout_s > 0 ? s->srv->cfg.conn_timeout_s : 30;
    s->last_rx = tool_now_s();
    while (!s->done) {
        if (atomic_load(&s->srv->stopping)) {
            close_with(s, WS_CLOSE_GOING_AWAY, "the server is stopping");
            break;
        }
        if (on_bytes(s)) break;
        struct pollfd pf = {s->fd, POLLIN, 0};
        const int pr = poll(&pf, 1, 10);
        if (pr > 0) {
            if (s->rn + 65536 > s->rcap) {
                uint8_t *b = realloc(s->rbuf, s->rcap = s->rn + 65536 + WS_MAX_MESSAGE / 4);
                if (!b) {
                    close_with(s, WS_CLOSE_ERROR, "out of memory");
                    break;
                }
                s->rbuf = b;
            }
            const ssize_t k = recv(s->fd, s->rbuf + s->rn, s->rcap - s->rn, 0);
            if (k <= 0 && !(k < 0 && errno == EINTR)) break; /* the client went away */
            if (k > 0) s->rn += (size_t)k;
            continue;
        }
        pump_audio(s);
        if (s->closing && !s->j) {
            close_with(s, WS_CLOSE_NORMAL, "session closed");
            break;
        }
        /* a client that goes quiet while its utterance still takes text ends the session */
        if (tool_now_s() - s->last_rx > idle_s) {
            int waiting_text = 1;
            if (s->j) {
                pthread_mutex_lock(&s->j->mu);
                waiting_text = !s->j->tin_end;
                pthread_mutex_unlock(&s->j->mu);
            }
            if (waiting_text) {
                send_error(s, "no message for %d s: closing (send input.done to end an utterance)", idle_s);
                close_with(s, WS_CLOSE_POLICY, "idle");
                break;
            }
        }
    }
    if (s->j) { /* the client left mid-utterance: the job is dropped */
        job_cancel(s->j);
        job_release(s->j);
        s->j = NULL;
    }
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra, size_t n_extra,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
    (void)c;
    (void)con_cls;
    session s;
    memset(&s, 0, sizeof s);
    s.srv = cls;
    s.fd = sock;
    s.stream_audio = 1;
    s.sentence = -1;
    s.rcap = 65536 + n_extra;
    s.rbuf = malloc(s.rcap);
    s.pcm = malloc(sizeof(float) * WS_READ_SAMPLES);
    s.s16 = malloc(sizeof(int16_t) * WS_READ_SAMPLES);
    /* a client that stops reading must not hold the session (and the server's stop) for ever */
    const struct timeval tv = {10, 0};
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (s.rbuf && s.pcm && s.s16) {
        memcpy(s.rbuf, extra, n_extra);
        s.rn = n_extra;
        run_session(&s);
    }
    free(s.rbuf);
    free(s.pcm);
    free(s.s16);
    free(s.msg);
    free(s.hold);
    json_decref(s.config);
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

enum MHD_Result api_speech_ws(http_req *r) {
    api_error e;
    const char *up = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
    const char *conn = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connection");
    const char *ver = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
    const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
    if (!up || strcasecmp(up, "websocket") || !conn || !strcasestr(conn, "upgrade") || !key || strlen(key) > 100) {
        api_error_set(&e, 426, "invalid_request_error", "", "upgrade_required",
                      "GET /v1/audio/speech/stream is a WebSocket: send Upgrade: websocket with a Sec-WebSocket-Key");
        return http_send_error(r, &e);
    }
    if (!ver || strcmp(ver, "13")) {
        api_error_set(&e, 426, "invalid_request_error", "", "upgrade_required", "Sec-WebSocket-Version must be 13");
        return http_send_error(r, &e);
    }
    char accept[29];
    ws_accept_key(key, accept);
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, r->srv);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Upgrade", "websocket");
    MHD_add_response_header(resp, "Connection", "Upgrade");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
    return http_queue(r, 101, resp);
}
