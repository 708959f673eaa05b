/* qtts-server under load and faults (in process, e2e_string checkpoint):
 * 16 simultaneous streams on 4 slots with a queue of 8 -> the overflow gets
 * 429 with Retry-After, everything admitted completes in full; clients that
 * close their socket mid-stream or while queued free their slot (the test
 * prints how long that took); idle and too-slow connections time out; a
 * request running past its time is cut; RSS stays flat over 50 mixed requests (with disconnects); the
 * server still answers /health at the end. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "srv_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define N_BURST 16
#define FRAMES 60

typedef struct burst {
    server *s;
    pthread_barrier_t *go;
    int status;
    long bytes;
    int complete;
    char retry_after[32];
    int error_shape;
} burst;

static void *burst_one(void *arg) {
    burst *b = arg;
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"input\":\"Load test request.\",\"voice\":\"vivian\",\"response_format\":\"pcm\","
             "\"stream_format\":\"audio\",\"force_frames\":%d,\"seed\":1}",
             FRAMES);
    pthread_barrier_wait(b->go);
    http_result r;
    int rc = post_json(b->s, body, &r);
    b->status = r.status;
    b->bytes = (long)r.n;
    b->complete = rc == 0;
    const char *ra = header(&r, "Retry-After");
    snprintf(b->retry_after, sizeof b->retry_after, "%s", ra ? ra : "");
    char why[512];
    b->error_shape = r.status != 200 && is_error_shape(&r, NULL, why, sizeof why);
    http_result_free(&r);
    return NULL;
}

static void overload(server *s) {
    pthread_t th[N_BURST];
    burst b[N_BURST];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N_BURST);
    for (int i = 0; i < N_BURST; i++) {
        memset(&b[i], 0, sizeof b[i]);
        b[i].s = s;
        b[i].go = &go;
        pthread_create(&th[i], NULL, burst_one, &b[i]);
    }
    for (int i = 0; i < N_BURST; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    int ok = 0, busy = 0, other = 0, full = 1, retry = 1, shape = 1;
    char statuses[256] = "";
    for (int i = 0; i < N_BURST; i++) {
        if (b[i].status == 200) {
            ok++;
            full = full && b[i].complete && b[i].bytes == (long)FRAMES * 1920 * 2;
        } else if (b[i].status == 429) {
            busy++;
            retry = retry && atoi(b[i].retry_after) >= 1;
            shape = shape && b[i].error_shape;
        } else {
            other++;
        }
        snprintf(statuses + strlen(statuses), sizeof statuses - strlen(statuses), " %d%s", b[i].status,
                 b[i].status == 200 && !b[i].complete ? "(cut)" : "");
    }
    CHECK("overload/some_429", busy >= 1 && other == 0 && ok + busy == N_BURST, "%d ok, %d busy (429), %d other:%s", ok,
          busy, other, statuses);
    CHECK("overload/admitted_at_least_slots_plus_queue", ok >= 12, "%d of %d admitted", ok, N_BURST);
    CHECK("overload/429_has_retry_after", busy == 0 || retry, "missing Retry-After");
    CHECK("overload/429_error_shape", busy == 0 || shape, "not an OpenAI error body");
    CHECK("overload/admitted_streams_complete", full, "a stream was cut short");
    CHECK("overload/rejected_counted", metric(s, "qtts_rejected_total") == busy, "%g", metric(s, "qtts_rejected_total"));
    CHECK("overload/slots_free_after", wait_metric(s, "qtts_active_slots", 0, SETTLE_MS) == 0 &&
                                            wait_metric(s, "qtts_queue_depth", 0, SETTLE_MS) == 0,
          "slots or queue still busy");
}

typedef struct streamer {
    server *s;
    int seed;
    http_conn *c;
    long first;
} streamer;

static http_conn *open_stream(server *s, int seed, int frames) {
    char body[512], err[256];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"input\":\"A long stream that the client drops.\",\"voice\":\"ryan\",\"seed\":%d,"
             "\"response_format\":\"wav\",\"stream_format\":\"audio\",\"force_frames\":%d}",
             seed, frames);
    return hc_open("127.0.0.1", server_port(s), "POST", "/v1/audio/speech", NULL, body, strlen(body), TIMEOUT_MS, err,
                   sizeof err);
}

static void *open_async(void *arg) {
    streamer *st = arg;
    st->c = open_stream(st->s, st->seed, 4000);
    return NULL;
}

static void disconnects(server *s) {
    const double d0 = metric(s, "qtts_disconnects_total");
    http_conn *c[4];
    int got = 0;
    for (int i = 0; i < 4; i++) {
        c[i] = open_stream(s, i, 4000);
        char buf[4096];
        if (c[i] && hc_status(c[i]) == 200 && hc_read(c[i], buf, sizeof buf) > 0) got++;
    }
    CHECK("disconnect/streams_started", got == 4 && wait_metric(s, "qtts_active_slots", 4, SETTLE_MS) == 4, "%d started", got);
    /* a fifth one waits in the queue; its client gives up too */
    streamer q = {s, 9, NULL, 0};
    pthread_t th;
    pthread_create(&th, NULL, open_async, &q);
    const double queued = wait_metric(s, "qtts_queue_depth", 1, SETTLE_MS);
    for (int i = 0; i < 4; i++) hc_close(c[i]); /* abrupt: no reading to the end */
    const double left = wait_metric(s, "qtts_active_slots", 1, SETTLE_MS); /* the queued one moved in */
    pthread_join(th, NULL);
    CHECK("disconnect/queued_request_admitted_after", queued == 1 && left == 1 && q.c && hc_status(q.c) == 200,
          "queued %g, active %g", queued, left);
    hc_close(q.c);
    double took;
    const double active = wait_metric_took(s, "qtts_active_slots", 0, SETTLE_MS, &took);
    CHECK("disconnect/slots_freed", active == 0, "%g slots active %.0f ms after the clients left", active, took);
    printf("# disconnect: the 5 slots were free %.0f ms after their clients left\n", took);
    CHECK("disconnect/counted", metric(s, "qtts_disconnects_total") - d0 >= 5, "%g", metric(s, "qtts_disconnects_total") - d0);
    /* a client that leaves while its request waits in the queue */
    for (int i = 0; i < 4; i++) c[i] = open_stream(s, 20 + i, 4000);
    wait_metric(s, "qtts_active_slots", 4, SETTLE_MS);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)server_port(s));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char *body = "{\"model\":\"m\",\"input\":\"queued then gone\",\"voice\":\"ryan\",\"stream_format\":\"audio\"}";
    char head[512];
    snprintf(head, sizeof head, "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    int sent = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send(fd, head, strlen(head), MSG_NOSIGNAL) > 0;
    const double qd = wait_metric(s, "qtts_queue_depth", 1, SETTLE_MS);
    close(fd);
    for (int i = 0; i < 4; i++) hc_close(c[i]);
    const double act_left = wait_metric_took(s, "qtts_active_slots", 0, SETTLE_MS, &took);
    const double q_left = wait_metric(s, "qtts_queue_depth", 0, SETTLE_MS);
    CHECK("disconnect/while_queued", sent && qd == 1 && act_left == 0 && q_left == 0,
          "sent %d, queue %g while waiting; %g slots active and %g queued %.0f ms after the clients left", sent, qd,
          act_left, q_left, took);
    printf("# disconnect: with a queued client gone too, the slots were free %.0f ms after the clients left\n", took);
}

static void timeouts(qtts_model *m) {
    server_config cfg = test_config();
    cfg.conn_timeout_s = 1;
    cfg.request_timeout_s = 1;
    cfg.n_slots = 1;
    server *s = start_server(m, &cfg);
    if (!s) return;
    /* an idle connection is closed */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)server_port(s));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int conn = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    /* half a request: headers promising a body that never comes */
    const char *part = "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":";
    send(fd, part, strlen(part), MSG_NOSIGNAL);
    char buf[256];
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    CHECK("timeout/stalled_body_closed", conn && k <= 0, "recv gave %zd (connection not closed within 5 s)", k);
    close(fd);
    /* a request longer than --request-timeout is cut and its slot freed */
    http_conn *c = open_stream(s, 1, 4000);
    char b[65536];
    long n = 0, r = 0;
    while (c && (r = hc_read(c, b, sizeof b)) > 0) n += r;
    CHECK("timeout/request_cut", c && hc_status(c) == 200 && r < 0 && n < 4000L * 3840,
          "read %ld bytes, last %ld (the body should end early with an error)", n, r);
    hc_close(c);
    CHECK("timeout/slot_freed", wait_metric(s, "qtts_active_slots", 0, SETTLE_MS) == 0, "slot still busy");
    server_stop(s);
}

/* Beyond --max-connections new connections are closed at once; the server stays healthy. */
static void connection_limit(qtts_model *m) {
    server_config cfg = test_config();
    cfg.max_connections = 3;
    server *s = start_server(m, &cfg);
    if (!s) return;
    int fd[6], closed = 0, open_ = 0;
    for (int i = 0; i < 6; i++) {
        fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)server_port(s));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct timeval tv = {0, 500000};
        setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd[i], (struct sockaddr *)&a, sizeof a)) {
            closed++;
            continue;
        }
        usleep(20000);
    }
    for (int i = 0; i < 6; i++) {
        char c;
        ssize_t k = recv(fd[i], &c, 1, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed++;
        else if (k < 0) open_++;
    }
    for (int i = 0; i < 6; i++) close(fd[i]);
    CHECK("limits/connections_beyond_the_limit_closed", closed == 3 && open_ == 3, "%d closed, %d open of 6 (limit 3)",
          closed, open_);
    http_result r;
    int st = 0;
    for (int i = 0; i < 100 && st != 200; i++) { /* the idle ones are gone once their threads see the close */
        req(s, "GET", "/health", NULL, NULL, &r);
        st = r.status;
        http_result_free(&r);
        if (st != 200) usleep(20000);
    }
    CHECK("limits/healthy_after_the_flood", st == 200, "health %d", st);
    server_stop(s);
}

typedef struct pair {
    server *s;
    int i;
    http_result r;
} pair;

static void *decode_mode_one(void *arg) {
    pair *p = arg;
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"input\":\"Decode mode check number %d.\",\"voice\":\"%s\",\"seed\":%d,"
             "\"do_sample\":true,\"response_format\":\"wav\",\"stream_format\":\"audio\",\"force_frames\":%d}",
             p->i, p->i % 2 ? "ryan" : "serena", 30 + p->i, 10 + 7 * p->i);
    post_json(p->s, body, &p->r);
    return NULL;
}

/* The same concurrent requests give the same bytes whether frames are decoded
 * on the engine thread (0), one decode thread (1) or two (2), or (3) by one
 * decode thread that parks a worker of a two-thread model while it decodes. */
static void decode_modes(qtts_model *m, const char *dir) {
    unsigned char *ref[4] = {0};
    size_t nref[4] = {0};
    qtts_model *m2 = NULL;
    for (int mode = 1; mode >= 0; mode = mode == 1 ? 2 : mode == 2 ? 0 : mode == 0 ? 3 : -1) {
        server_config cfg = test_config();
        cfg.decode_threads = mode == 3 ? 1 : mode;
        if (mode == 3) {
            char err[1024];
            qtts_model_params mp = qtts_model_default_params();
            mp.n_threads = 2;
            if (qtts_model_load(&m2, dir, &mp, err, sizeof err)) {
                CHECK("decode_modes/load_two_threads", 0, "%s", err);
                break;
            }
            cfg.lend_thread = 1;
        }
        server *s = start_server(mode == 3 ? m2 : m, &cfg);
        if (!s) break;
        pair p[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            memset(&p[i], 0, sizeof p[i]);
            p[i].s = s;
            p[i].i = i;
            pthread_create(&th[i], NULL, decode_mode_one, &p[i]);
        }
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        int same = 1;
        for (int i = 0; i < 4; i++) {
            if (mode == 1) {
                same = same && p[i].r.status == 200 && p[i].r.n > 44;
                nref[i] = p[i].r.n;
                ref[i] = malloc(p[i].r.n);
                memcpy(ref[i], p[i].r.body, p[i].r.n);
            } else {
                same = same && p[i].r.status == 200 && p[i].r.n == nref[i] && !memcmp(p[i].r.body, ref[i], nref[i]);
            }
            http_result_free(&p[i].r);
        }
        char tn[64];
        if (mode == 3) snprintf(tn, sizeof tn, "decode_modes/lent_thread_same_bytes");
        else snprintf(tn, sizeof tn, mode == 1 ? "decode_modes/one_worker_ok" : "decode_modes/%d_threads_same_bytes", mode);
        CHECK(tn, same, "a response differs from the one-worker run");
        server_stop(s);
    }
    qtts_model_free(m2);
    for (int i = 0; i < 4; i++) free(ref[i]);
}

static void *mixed_one(void *arg) {
    server *s = arg;
    static const char *const bodies[] = {
        "{\"model\":\"m\",\"input\":\"Memory check, whole pcm.\",\"voice\":\"vivian\",\"response_format\":\"pcm\"}",
        "{\"model\":\"m\",\"input\":\"Memory check, streamed wav.\",\"voice\":\"ryan\",\"response_format\":\"wav\","
        "\"stream_format\":\"audio\",\"force_frames\":40}",
        "{\"model\":\"m\",\"input\":\"Memory check, events.\",\"voice\":\"serena\",\"response_format\":\"mp3\","
        "\"stream_format\":\"sse\"}",
        "{\"model\":\"m\",\"input\":\"Memory check, opus at speed.\",\"voice\":\"aiden\",\"response_format\":\"opus\","
        "\"speed\":1.25}",
        "{\"model\":\"m\",\"input\":\"oops\",\"voice\":\"nobody\"}",
    };
    static atomic_int k;
    int i = atomic_fetch_add(&k, 1);
    if (i % 6 == 5) { /* drop a stream */
        http_conn *c = open_stream(s, i, 4000);
        char buf[4096];
        if (c) hc_read(c, buf, sizeof buf);
        hc_close(c);
        return NULL;
    }
    http_result r;
    post_json(s, bodies[i % 5], &r);
    http_result_free(&r);
    return NULL;
}

static void run_mixed(server *s, int n) {
    for (int i = 0; i < n; i += 5) { /* 5 at a time */
        pthread_t th[5];
        for (int j = 0; j < 5; j++) pthread_create(&th[j], NULL, mixed_one, s);
        for (int j = 0; j < 5; j++) pthread_join(th[j], NULL);
    }
}

static void memory(server *s) {
    run_mixed(s, 20); /* warm: caches, arenas, encoder tables */
    wait_metric(s, "qtts_active_slots", 0, SETTLE_MS);
    const long r0 = rss_kib();
    run_mixed(s, 50);
    wait_metric(s, "qtts_active_slots", 0, SETTLE_MS);
    const long r1 = rss_kib();
    if (UNDER_ASAN)
        test_skip("memory/rss_flat", "under AddressSanitizer RSS measures its quarantine (%ld -> %ld KiB); "
                                     "LeakSanitizer checks leaks at exit instead", r0, r1);
    else
        CHECK("memory/rss_flat", r0 > 0 && r1 - r0 < 16 * 1024, "VmRSS %ld -> %ld KiB over 50 requests", r0, r1);
    CHECK("memory/slots_free", metric(s, "qtts_active_slots") == 0 && metric(s, "qtts_queue_depth") == 0, "busy");
}

int main(void) {
    qtts_model *m = load_model(test_path("golden/data/e2e_string"));
    if (!m) return test_finish();
    server_config cfg = test_config();
    cfg.n_slots = 4;
    cfg.queue_depth = 8;
    server *s = start_server(m, &cfg);
    if (s) {
        double t = tool_now_s();
        overload(s);
        printf("# overload %.1f s\n", tool_now_s() - t);
        t = tool_now_s();
        disconnects(s);
        printf("# disconnects %.1f s\n", tool_now_s() - t);
        t = tool_now_s();
        memory(s);
        printf("# memory %.1f s\n", tool_now_s() - t);
        http_result r;
        req(s, "GET", "/health", NULL, NULL, &r);
        CHECK("load/still_healthy", r.status == 200, "%d", r.status);
        http_result_free(&r);
        server_stop(s);
    }
    timeouts(m);
    decode_modes(m, test_path("golden/data/e2e_string"));
    connection_limit(m);
    qtts_model_free(m);
    return test_finish();
}
