/* Fuzz target: the WebSocket frame parser of the streaming-text endpoint
 * (tools/server/ws.c, ws_parse_frame, as api_ws.c's read loop calls it).
 * Input: byte 0 picks the largest payload accepted (125, 126, 65535, 65536
 * or the server's 1 MiB); the rest is the byte stream a client sent, parsed
 * frame after frame. Checks, per frame: every shorter prefix of the bytes
 * it takes parses as "not all there yet" or as the same protocol error (a
 * frame split across reads is read the same); an accepted frame's header
 * is 2 + 0/2/8 length bytes + a 4-byte mask, its payload follows it and is
 * the sent bytes unmasked (RFC 6455 5.3), its opcode is a known one, a
 * control frame is final and at most 125 bytes, the payload is within the
 * limit; the same frame written again as a masked client frame (FIN set,
 * ws_frame_header's minimal length) parses to the same payload. */
#include "fuzz.h"
#include "ws.h"

static const size_t limits[5] = {125, 126, 65535, 65536, 1 << 20};

static void check_frame(const uint8_t *orig, size_t n, size_t max) {
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return;
    memcpy(buf, orig, n);
    ws_frame f;
    memset(&f, 0, sizeof f);
    const long k = ws_parse_frame(buf, n, max, &f);
    free(buf);
    if (k <= 0) return;
    const size_t h = (size_t)k - f.len;
    const int l7 = orig[1] & 127;
    FUZZ_CHECK(h == (l7 < 126 ? 6u : l7 == 126 ? 8u : 14u));
    FUZZ_CHECK(f.len <= max && (orig[1] & 0x80) && !(orig[0] & 0x70));
    FUZZ_CHECK(f.opcode == WS_CONT || f.opcode == WS_TEXT || f.opcode == WS_BINARY || f.opcode == WS_CLOSE ||
               f.opcode == WS_PING || f.opcode == WS_PONG);
    FUZZ_CHECK(f.fin == orig[0] >> 7 && f.opcode == (orig[0] & 15));
    if (f.opcode >= 8) FUZZ_CHECK(f.fin && f.len <= 125);
    /* every prefix: incomplete, or the same error */
    uint8_t *pre = malloc((size_t)k);
    for (size_t m = 0; pre && m < (size_t)k; m += m < 16 ? 1 : 1 + (size_t)k / 64) {
        memcpy(pre, orig, m);
        ws_frame g;
        const long r = ws_parse_frame(pre, m, max, &g);
        FUZZ_CHECK(r == 0);
    }
    free(pre);
    /* payload: the sent bytes unmasked */
    uint8_t *again = malloc((size_t)k);
    if (!again) return;
    memcpy(again, orig, (size_t)k);
    ws_frame g;
    FUZZ_CHECK(ws_parse_frame(again, (size_t)k, max, &g) == k && g.len == f.len && g.payload == again + h);
    const uint8_t *mask = orig + h - 4;
    for (size_t i = 0; i < g.len; i++) FUZZ_CHECK(g.payload[i] == (orig[h + i] ^ mask[i & 3]));
    /* written again as a final masked client frame */
    if (f.fin) {
        uint8_t *w = malloc(14 + g.len);
        if (w) {
            size_t wh = ws_frame_header(w, f.opcode, g.len);
            FUZZ_CHECK(wh == (g.len < 126 ? 2u : g.len < 65536 ? 4u : 10u));
            w[1] |= 0x80;
            memcpy(w + wh, mask, 4);
            for (size_t i = 0; i < g.len; i++) w[wh + 4 + i] = g.payload[i] ^ mask[i & 3];
            ws_frame x;
            FUZZ_CHECK(ws_parse_frame(w, wh + 4 + g.len, max, &x) == (long)(wh + 4 + g.len));
            FUZZ_CHECK(x.fin && x.opcode == f.opcode && x.len == g.len && !memcmp(x.payload, g.payload, g.len));
            free(w);
        }
    }
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t max = limits[data[0] % 5];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return 0;
    memcpy(buf, p, n);
    size_t off = 0;
    for (int frames = 0; frames < 4096; frames++) {
        check_frame(p + off, n - off, max);
        ws_frame f;
        const long k = ws_parse_frame(buf + off, n - off, max, &f);
        if (k <= 0) {
            FUZZ_CHECK(k == 0 || k == -WS_CLOSE_PROTOCOL || k == -WS_CLOSE_TOO_BIG);
            if (k == 0) FUZZ_CHECK(n - off < 14 + 4 + max); /* a frame within the limit would be whole */
            break;
        }
        FUZZ_CHECK((size_t)k <= n - off && f.payload >= buf + off && f.payload + f.len == buf + off + k);
        off += (size_t)k;
    }
    char key[29];
    char in[64];
    const size_t kl = n < sizeof in - 1 ? n : sizeof in - 1;
    memcpy(in, p, kl);
    in[kl] = 0;
    ws_accept_key(in, key);
    FUZZ_CHECK(strlen(key) == 28 && key[27] == '=');
    free(buf);
    return 0;
}
