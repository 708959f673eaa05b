/* WebSocket framing (see ws.h). */
#include "ws.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------- SHA-1 (FIPS 180-4), for the handshake only */

typedef struct sha1 {
    uint32_t h[5];
    uint8_t block[64];
    size_t n;
    uint64_t total;
} sha1;

static uint32_t rol(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

static void sha1_block(sha1 *s, const uint8_t *b) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = s->h[0], bb = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) f = (bb & c) | (~bb & d), k = 0x5a827999;
        else if (i < 40) f = bb ^ c ^ d, k = 0x6ed9eba1;
        else if (i < 60) f = (bb & c) | (bb & d) | (c & d), k = 0x8f1bbcdc;
        else f = bb ^ c ^ d, k = 0xca62c1d6;
        const uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    s->h[0] += a;
    s->h[1] += bb;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
}

static void sha1_add(sha1 *s, const void *p, size_t n) {
    const uint8_t *b = p;
    s->total += n;
    while (n--) {
        s->block[s->n++] = *b++;
        if (s->n == 64) {
            sha1_block(s, s->block);
            s->n = 0;
        }
    }
}

static void sha1_digest(const void *p, size_t n, uint8_t out[20]) {
    sha1 s = {{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0}, {0}, 0, 0};
    sha1_add(&s, p, n);
    const uint64_t bits = s.total * 8;
    const uint8_t one = 0x80, zero = 0;
    sha1_add(&s, &one, 1);
    while (s.n != 56) sha1_add(&s, &zero, 1);
    for (int i = 7; i >= 0; i--) {
        const uint8_t c = (uint8_t)(bits >> (8 * i));
        sha1_add(&s, &c, 1);
    }
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)(s.h[i] >> (24 - 8 * k));
}

void ws_accept_key(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char buf[256];
    size_t kl = strlen(key);
    if (kl > sizeof buf - sizeof guid) kl = sizeof buf - sizeof guid;
    memcpy(buf, key, kl);
    memcpy(buf + kl, guid, sizeof guid - 1);
    uint8_t d[21] = {0};
    sha1_digest(buf, kl + sizeof guid - 1, d);
    int o = 0;
    for (int i = 0; i < 21; i += 3) { /* 20 bytes: 6 full groups and 2 bytes + '=' */
        const uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | (i + 2 < 20 ? d[i + 2] : 0);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = i + 2 < 20 ? b64[v & 63] : '=';
    }
    out[28] = 0;
}

/* ---------------------------------------------------------------- frames */

long ws_parse_frame(uint8_t *buf, size_t n, size_t max_payload, ws_frame *f) {
    if (n < 2) return 0;
    const int fin = buf[0] >> 7, rsv = buf[0] >> 4 & 7, op = buf[0] & 15, masked = buf[1] >> 7;
    uint64_t len = buf[1] & 127;
    size_t h = 2;
    if (rsv || !masked) return -WS_CLOSE_PROTOCOL;
    if (op != WS_CONT && op != WS_TEXT && op != WS_BINARY && op != WS_CLOSE && op != WS_PING && op != WS_PONG)
        return -WS_CLOSE_PROTOCOL;
    if (op >= 8 && (!fin || len > 125)) return -WS_CLOSE_PROTOCOL;
    if (len == 126) {
        if (n < 4) return 0;
        len = (uint64_t)buf[2] << 8 | buf[3];
        h = 4;
    } else if (len == 127) {
        if (n < 10) return 0;
        len = 0;
        for (int i = 0; i < 8; i++) len = len << 8 | buf[2 + i];
        h = 10;
    }
    if (len > max_payload) return -WS_CLOSE_TOO_BIG;
    if (n < h + 4 + len) return 0;
    const uint8_t *mask = buf + h;
    uint8_t *p = buf + h + 4;
    for (uint64_t i = 0; i < len; i++) p[i] ^= mask[i & 3];
    f->fin = fin;
    f->opcode = op;
    f->payload = p;
    f->len = (size_t)len;
    return (long)(h + 4 + len);
}

size_t ws_frame_header(uint8_t *hdr, int opcode, size_t len) {
    hdr[0] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        hdr[1] = (uint8_t)len;
        return 2;
    }
    if (len < 65536) {
        hdr[1] = 126;
        hdr[2] = (uint8_t)(len >> 8);
        hdr[3] = (uint8_t)len;
        return 4;
    }
    hdr[1] = 127;
    for (int i = 0; i < 8; i++) hdr[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    return 10;
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        const ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int ws_send_frame(int fd, int opcode, const void *payload, size_t len) {
    uint8_t hdr[10];
    const size_t h = ws_frame_header(hdr, opcode, len);
    return send_all(fd, hdr, h) || (len && send_all(fd, payload, len)) ? -1 : 0;
}
