/* Fuzz target: whole HTTP requests to qtts-server (tools/server: routing,
 * headers, Authorization, Content-Length, query strings, the speech JSON body,
 * the multipart voice upload and its fields, voice names in DELETE paths), as
 * raw bytes on a loopback connection to an in-process server on the tiny Base
 * checkpoint (base_clone with the tiny tokenizer; uploads run its encoders).
 * libmicrohttpd parses the request line and headers; everything past that is
 * the server's code. Requests are bounded so that each input costs little:
 * 2 frames per speech request, 64 KiB uploads, a 2 s connection timeout.
 * Check: whatever comes back starts with an HTTP/1.x status line; the server
 * still answers /health afterwards. */
#include <arpa/inet.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "fuzz.h"
#include "qtts.h"
#include "server.h"

static server *srv;
static qtts_model *model;

static void link_dir(const char *rel) {
    char abs[PATH_MAX];
    if (!realpath(fuzz_repo_path(rel), abs)) {
        fprintf(stderr, "fuzz_http: %s is missing (run from the repository root or set QTTS_REPO)\n", rel);
        abort();
    }
    DIR *d = opendir(abs);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char from[PATH_MAX * 2], to[PATH_MAX * 2];
        snprintf(from, sizeof from, "%s/%s", abs, de->d_name);
        snprintf(to, sizeof to, "%s/%s", fuzz_dir(), de->d_name);
        unlink(to);
        if (symlink(from, to)) abort();
    }
    if (d) closedir(d);
}

/* 1 when buf[n] holds a whole response: its head and then Content-Length
 * bytes, or a chunked body up to its last chunk. An interim 100 Continue is
 * skipped. */
static int complete(const char *buf, size_t n) {
    for (;;) {
        const char *end = memmem(buf, n, "\r\n\r\n", 4);
        if (!end) return 0;
        const size_t head = (size_t)(end - buf) + 4;
        if (n >= 12 && !strncmp(buf + 9, "100", 3)) {
            buf += head;
            n -= head;
            continue;
        }
        char h[8192];
        const size_t hn = head < sizeof h - 1 ? head : sizeof h - 1;
        for (size_t i = 0; i < hn; i++) h[i] = (char)(buf[i] >= 'A' && buf[i] <= 'Z' ? buf[i] + 32 : buf[i]);
        h[hn] = 0;
        const char *cl = strstr(h, "\r\ncontent-length:");
        if (cl) return n - head >= strtoull(cl + 17, NULL, 10);
        if (strstr(h, "\r\ntransfer-encoding: chunked")) return n >= 5 && !memcmp(buf + n - 5, "0\r\n\r\n", 5);
        return 0; /* to the close */
    }
}

/* Send data[size] on a new connection and read the first response (or until
 * the server closes, or 5 s without a byte); its first bytes go to head.
 * Returns the bytes received, -1 when no connection could be made. The write
 * side stays open while a reply may come (the server takes a half-closed
 * connection for a client gone); after 300 ms without any reply it is shut,
 * so that a request the server still waits on (cut short, or a body shorter
 * than its Content-Length) ends at once instead of at the server's 2 s
 * connection timeout, most of the time such inputs cost. */
static int exchange(const uint8_t *data, size_t size, char *head, size_t n_head) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)server_port(srv));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {0, 20000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t k = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (k <= 0) break; /* answered and closed early: fine */
        off += (size_t)k;
    }
    size_t got = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) abort();
    int shut = 0;
    for (int idle = 0; idle < 250;) { /* 250 x 20 ms without a byte */
        if (got == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) abort();
            buf = nb;
        }
        ssize_t k = recv(fd, buf + got, cap - got, 0);
        if (k == 0) break;
        if (k < 0) {
            if (++idle >= 15 && !got && !shut) {
                shutdown(fd, SHUT_WR);
                shut = 1;
            }
            continue;
        }
        idle = 0;
        got += (size_t)k;
        if (complete(buf, got)) break;
    }
    const size_t c = got < n_head - 1 ? got : n_head - 1;
    memcpy(head, buf, c);
    head[c] = 0;
    free(buf);
    close(fd);
    return (int)(got > INT_MAX ? INT_MAX : got);
}

static void start(void) {
    link_dir("tests/golden/data/base_clone");
    link_dir("tests/golden/tiny_tokenizer");
    char voices[512];
    snprintf(voices, sizeof voices, "%s/voices", fuzz_dir());
    mkdir(voices, 0755);
    qtts_model_params mp = qtts_model_default_params();
    char err[1024];
    if (qtts_model_load(&model, fuzz_dir(), &mp, err, sizeof err)) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    server_config c = server_default_config();
    c.port = 0;
    c.voices_dir = strdup(voices);
    c.n_slots = 2;
    c.queue_depth = 2;
    c.max_body_bytes = 16384;
    c.max_upload_bytes = 65536;
    c.max_input_chars = 500;
    c.conn_timeout_s = 2;
    c.request_timeout_s = 10;
    c.max_frames = 2;
    c.warmup = 0;
    c.drain_s = 0;
    c.api_key = NULL;
    c.verbose = 0;
    if (server_start(&srv, model, &c, err, sizeof err)) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    for (int i = 0; i < 3000 && !server_ready(srv); i++) usleep(10000);
    FUZZ_CHECK(server_ready(srv));
    /* the voice "v1" that the speech seeds name: 0.4 s of a 300 Hz tone */
    const int n = 9600;
    static const char pre[] = "--QTTSB\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nv1\r\n"
                              "--QTTSB\r\nContent-Disposition: form-data; name=\"audio\"; filename=\"a.wav\"\r\n\r\n";
    static const char post[] = "\r\n--QTTSB--\r\n";
    unsigned char wav[44 + 2 * 9600];
    memcpy(wav, "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\xc0\x5d\0\0\x80\xbb\0\0\x02\0\x10\0data", 40);
    const uint32_t riff = 36 + 2 * n, dlen = 2 * n;
    memcpy(wav + 4, &riff, 4);
    memcpy(wav + 40, &dlen, 4);
    for (int i = 0; i < n; i++) {
        const int16_t v = (int16_t)(8000 * sin(2 * 3.14159265 * 300 * i / 24000.0));
        memcpy(wav + 44 + 2 * i, &v, 2);
    }
    const size_t body = sizeof pre - 1 + sizeof wav + sizeof post - 1;
    char hdr[256];
    const int hn = snprintf(hdr, sizeof hdr, "POST /v1/audio/voices HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            "multipart/form-data; boundary=QTTSB\r\nContent-Length: %zu\r\n\r\n", body);
    uint8_t *req = malloc((size_t)hn + body);
    if (!req) abort();
    memcpy(req, hdr, (size_t)hn);
    memcpy(req + hn, pre, sizeof pre - 1);
    memcpy(req + hn + sizeof pre - 1, wav, sizeof wav);
    memcpy(req + hn + sizeof pre - 1 + sizeof wav, post, sizeof post - 1);
    char head[1024];
    exchange(req, (size_t)hn + body, head, sizeof head);
    free(req);
    if (strncmp(head, "HTTP/1.1 201", 12)) fprintf(stderr, "fuzz_http: the voice upload got: %s\n", head);
    FUZZ_CHECK(!strncmp(head, "HTTP/1.1 201", 12));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv) start();
    char head[512];
    int n = exchange(data, size, head, sizeof head);
    if (getenv("FUZZ_HTTP_VERBOSE")) fprintf(stderr, "%d bytes: %.400s\n", n, head);
    if (n > 0) FUZZ_CHECK(!strncmp(head, "HTTP/1.", 7) || n < 7);
    static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    n = exchange((const uint8_t *)health, sizeof health - 1, head, sizeof head);
    FUZZ_CHECK(n > 12 && !strncmp(head + 9, "200", 3));
    return 0;
}
