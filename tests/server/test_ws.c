/* WebSocket framing (tools/server/ws.c): the handshake's accept key (RFC
 * 6455's example), masked client frames of every length encoding parsed and
 * unmasked, frames split anywhere wait for the rest, and the protocol's
 * errors: unmasked, reserved bits, unknown opcodes, fragmented or long
 * control frames, oversized payloads; server frame headers. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "ws.h"

/* A masked client frame of payload p[n] into out; returns its size. */
static size_t client_frame(uint8_t *out, int fin, int op, const uint8_t *p, size_t n) {
    size_t h = 0;
    out[h++] = (uint8_t)((fin ? 0x80 : 0) | op);
    if (n < 126) out[h++] = (uint8_t)(0x80 | n);
    else if (n < 65536) {
        out[h++] = 0x80 | 126;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    } else {
        out[h++] = 0x80 | 127;
        for (int i = 0; i < 8; i++) out[h++] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
    }
    const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    memcpy(out + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++) out[h + i] = p[i] ^ mask[i & 3];
    return h + n;
}

int main(void) {
    char acc[29];
    ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", acc);
    test_report("ws/accept_key_rfc6455", !strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "got %s", acc);

    const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 200000};
    int bad = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        uint8_t *p = malloc(n + 1), *buf = malloc(n + 16);
        for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + 3);
        const size_t fl = client_frame(buf, 1, WS_TEXT, p, n);
        /* every prefix is incomplete */
        for (size_t cut = 0; cut < fl && cut < 20; cut++) {
            ws_frame f;
            if (ws_parse_frame(buf, cut, 1 << 20, &f) != 0) bad++;
        }
        ws_frame f;
        const long r = ws_parse_frame(buf, fl, 1 << 20, &f);
        if (r != (long)fl || f.len != n || f.opcode != WS_TEXT || !f.fin || (n && memcmp(f.payload, p, n))) bad++;
        free(p);
        free(buf);
    }
    test_report("ws/parse_every_length_encoding", bad == 0, "%d checks failed", bad);

    uint8_t buf[300], p[200] = {0};
    ws_frame f;
    size_t fl = client_frame(buf, 1, WS_TEXT, p, 10);
    buf[1] &= 0x7f; /* unmasked */
    const long unmasked = ws_parse_frame(buf, fl, 1 << 20, &f);
    fl = client_frame(buf, 1, WS_TEXT, p, 10);
    buf[0] |= 0x40; /* RSV1 */
    const long rsv = ws_parse_frame(buf, fl, 1 << 20, &f);
    fl = client_frame(buf, 1, 3, p, 10);
    const long op = ws_parse_frame(buf, fl, 1 << 20, &f);
    fl = client_frame(buf, 0, WS_PING, p, 10);
    const long frag_ping = ws_parse_frame(buf, fl, 1 << 20, &f);
    fl = client_frame(buf, 1, WS_PING, p, 126);
    const long long_ping = ws_parse_frame(buf, fl, 1 << 20, &f);
    fl = client_frame(buf, 1, WS_TEXT, p, 200);
    const long big = ws_parse_frame(buf, 4, 100, &f); /* the header alone tells */
    test_report("ws/protocol_errors", unmasked == -WS_CLOSE_PROTOCOL && rsv == -WS_CLOSE_PROTOCOL &&
                    op == -WS_CLOSE_PROTOCOL && frag_ping == -WS_CLOSE_PROTOCOL && long_ping == -WS_CLOSE_PROTOCOL &&
                    big == -WS_CLOSE_TOO_BIG,
                "%ld %ld %ld %ld %ld %ld", unmasked, rsv, op, frag_ping, long_ping, big);

    uint8_t h[10];
    const size_t h1 = ws_frame_header(h, WS_BINARY, 5), h2 = ws_frame_header(h, WS_BINARY, 300);
    const int ok2 = h[0] == 0x82 && h[1] == 126 && h[2] == 1 && h[3] == 44;
    const size_t h3 = ws_frame_header(h, WS_TEXT, 70000);
    test_report("ws/server_headers", h1 == 2 && h2 == 4 && ok2 && h3 == 10 && h[0] == 0x81 && h[1] == 127,
                "%zu %zu %zu", h1, h2, h3);
    return test_finish();
}
