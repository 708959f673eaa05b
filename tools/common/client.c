/* Minimal HTTP/1.1 client (see client.h). Blocking sockets with send/receive
 * timeouts; MSG_NOSIGNAL so a closed peer is an error, not a SIGPIPE. */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

struct http_conn {
    int fd;
    int status;
    char *headers;    /* raw block after the status line */
    char buf[16384];  /* bytes read but not yet consumed */
    size_t b0, b1;
    int chunked;
    long long left;   /* fixed length: bytes left; chunked: bytes left in the chunk; -1 = to close */
    int eof;          /* body ended */
    int error;
};

static int fill(http_conn *c) {
    if (c->b0 == c->b1) c->b0 = c->b1 = 0;
    if (c->b1 == sizeof c->buf) {
        if (c->b0 == 0) return -1;
        memmove(c->buf, c->buf + c->b0, c->b1 - c->b0);
        c->b1 -= c->b0;
        c->b0 = 0;
    }
    ssize_t k;
    do k = recv(c->fd, c->buf + c->b1, sizeof c->buf - c->b1, 0);
    while (k < 0 && errno == EINTR);
    if (k < 0) return -1;
    c->b1 += (size_t)k;
    return (int)(k > 0); /* 0 = peer closed */
}

/* A line ending in \r\n from the buffer into out (without it). 0 ok. */
static int read_line(http_conn *c, char *out, size_t n) {
    for (;;) {
        char *p = memchr(c->buf + c->b0, '\n', c->b1 - c->b0);
        if (p) {
            size_t l = (size_t)(p - (c->buf + c->b0));
            size_t k = l && c->buf[c->b0 + l - 1] == '\r' ? l - 1 : l;
            if (k >= n) return -1;
            memcpy(out, c->buf + c->b0, k);
            out[k] = 0;
            c->b0 += l + 1;
            return 0;
        }
        if (fill(c) <= 0) return -1;
    }
}

http_conn *hc_open(const char *host, int port, const char *method, const char *path, const char *headers,
                   const void *body, size_t n_body, int timeout_ms, char *err, size_t en) {
    http_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, en, "out of memory");
        return NULL;
    }
    c->fd = -1;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) || !ai) {
        snprintf(err, en, "cannot resolve %s", host);
        free(c);
        return NULL;
    }
    c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (c->fd >= 0) {
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen)) {
        snprintf(err, en, "cannot connect to %s:%d: %s", host, port, strerror(errno));
        freeaddrinfo(ai);
        hc_close(c);
        return NULL;
    }
    freeaddrinfo(ai);
    char head[4096];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\nUser-Agent: qtts-client\r\n%s"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, host, port, headers ? headers : "", n_body);
    if (hl < 0 || (size_t)hl >= sizeof head) {
        snprintf(err, en, "request head too long");
        hc_close(c);
        return NULL;
    }
    const char *parts[2] = {head, body};
    size_t lens[2] = {(size_t)hl, body ? n_body : 0};
    for (int i = 0; i < 2; i++)
        for (size_t off = 0; off < lens[i];) {
            ssize_t k = send(c->fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) { /* the server may answer early (413) and close: read what it said */
                i = 2;
                break;
            }
            off += (size_t)k;
        }
    char line[8192];
    if (read_line(c, line, sizeof line) || sscanf(line, "HTTP/%*d.%*d %d", &c->status) != 1) {
        snprintf(err, en, "no HTTP response from %s:%d", host, port);
        hc_close(c);
        return NULL;
    }
    size_t hn = 0, hcap = 1024;
    c->headers = malloc(hcap);
    if (!c->headers) {
        hc_close(c);
        return NULL;
    }
    c->headers[0] = 0;
    c->left = -1;
    for (;;) {
        if (read_line(c, line, sizeof line)) {
            snprintf(err, en, "truncated response headers");
            hc_close(c);
            return NULL;
        }
        if (!line[0]) break;
        size_t l = strlen(line);
        if (hn + l + 3 > hcap) {
            while (hn + l + 3 > hcap) hcap *= 2;
            char *h = realloc(c->headers, hcap);
            if (!h) {
                hc_close(c);
                return NULL;
            }
            c->headers = h;
        }
        memcpy(c->headers + hn, line, l);
        memcpy(c->headers + hn + l, "\r\n", 3);
        hn += l + 2;
        if (!strncasecmp(line, "Transfer-Encoding:", 18) && strstr(line + 18, "chunked")) c->chunked = 1;
        if (!strncasecmp(line, "Content-Length:", 15)) c->left = atoll(line + 15);
    }
    if (c->chunked) c->left = 0; /* read a chunk size first */
    if (!strcmp(method, "HEAD") || c->status == 204 || c->status == 304) c->eof = 1;
    return c;
}

int hc_status(const http_conn *c) { return c->status; }

int hc_find_header(const char *h, const char *name, char *out, size_t n) {
    const size_t nl = strlen(name);
    for (const char *p = h; p && *p;) {
        if (!strncasecmp(p, name, nl) && p[nl] == ':') {
            p += nl + 1;
            while (*p == ' ') p++;
            const char *e = strstr(p, "\r\n");
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l >= n) l = n - 1;
            memcpy(out, p, l);
            out[l] = 0;
            return 0;
        }
        p = strstr(p, "\r\n");
        if (p) p += 2;
    }
    return -1;
}

const char *hc_header(const http_conn *c, const char *name) {
    static _Thread_local char v[1024];
    return hc_find_header(c->headers, name, v, sizeof v) ? NULL : v;
}

long hc_read(http_conn *c, void *out, size_t max) {
    if (c->error) return -1;
    if (c->eof) return 0;
    if (c->chunked && c->left == 0) {
        char line[256];
        if (read_line(c, line, sizeof line)) {
            c->error = 1;
            return -1;
        }
        c->left = strtoll(line, NULL, 16);
        if (c->left == 0) { /* last chunk: skip trailers */
            do
                if (read_line(c, line, sizeof line)) break;
            while (line[0]);
            c->eof = 1;
            return 0;
        }
    }
    if (!c->chunked && c->left == 0) {
        c->eof = 1;
        return 0;
    }
    if (c->b0 == c->b1) {
        int k = fill(c);
        if (k < 0 || (k == 0 && c->left >= 0)) {
            c->error = 1;
            return -1;
        }
        if (k == 0) {
            c->eof = 1;
            return 0;
        }
    }
    size_t k = c->b1 - c->b0;
    if (k > max) k = max;
    if (c->left >= 0 && (long long)k > c->left) k = (size_t)c->left;
    memcpy(out, c->buf + c->b0, k);
    c->b0 += k;
    if (c->left > 0) c->left -= (long long)k;
    if (c->chunked && c->left == 0) { /* the CRLF after the chunk */
        char line[8];
        if (read_line(c, line, sizeof line)) c->error = 1;
    }
    return (long)k;
}

void hc_close(http_conn *c) {
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c->headers);
    free(c);
}

int hc_request(const char *host, int port, const char *method, const char *path, const char *headers,
               const void *body, size_t n_body, int timeout_ms, http_result *out) {
    memset(out, 0, sizeof *out);
    out->t_first_s = -1;
    const double t0 = tool_now_s();
    http_conn *c = hc_open(host, port, method, path, headers, body, n_body, timeout_ms, out->err, sizeof out->err);
    if (!c) return -1;
    out->status = c->status;
    out->headers = strdup(c->headers);
    size_t cap = 65536;
    out->body = malloc(cap);
    int rc = out->headers && out->body ? 0 : -1;
    while (!rc) {
        if (out->n + 16384 + 1 > cap) {
            cap *= 2;
            char *b = realloc(out->body, cap);
            if (!b) {
                rc = -1;
                break;
            }
            out->body = b;
        }
        long k = hc_read(c, out->body + out->n, 16384);
        if (k < 0) {
            snprintf(out->err, sizeof out->err, "the body ended early or timed out");
            rc = -1;
        }
        if (k <= 0) break;
        if (out->t_first_s < 0) out->t_first_s = tool_now_s() - t0;
        out->n += (size_t)k;
    }
    if (out->body) out->body[out->n] = 0;
    out->complete = rc == 0;
    out->t_total_s = tool_now_s() - t0;
    hc_close(c);
    return rc;
}

void http_result_free(http_result *r) {
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}
