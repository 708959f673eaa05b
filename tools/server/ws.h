/* WebSocket framing (RFC 6455) for the upgraded sockets libmicrohttpd hands
 * over (MHD_create_response_for_upgrade): the handshake's accept key, and
 * frames parsed from and written to a byte stream. No I/O here beyond
 * ws_send_frame; the session (api_ws.c) owns the socket. */
#ifndef QTTS_SERVER_WS_H
#define QTTS_SERVER_WS_H

#include <stddef.h>
#include <stdint.h>

enum { WS_CONT = 0, WS_TEXT = 1, WS_BINARY = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

/* Close codes. */
enum {
    WS_CLOSE_NORMAL = 1000, WS_CLOSE_GOING_AWAY = 1001, WS_CLOSE_PROTOCOL = 1002, WS_CLOSE_UNSUPPORTED = 1003,
    WS_CLOSE_INVALID = 1007, WS_CLOSE_POLICY = 1008, WS_CLOSE_TOO_BIG = 1009, WS_CLOSE_ERROR = 1011
};

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + GUID)), 28 characters + NUL. */
void ws_accept_key(const char *key, char out[29]);

typedef struct ws_frame {
    int fin, opcode;
    uint8_t *payload; /* points into the parsed buffer, unmasked in place */
    size_t len;
} ws_frame;

/* Parse one client frame at buf[0, n): returns the bytes it takes (> 0), 0
 * when it is not all there yet, or -WS_CLOSE_* for a frame that breaks the
 * protocol (unmasked, reserved bits, an unknown opcode, a control frame that
 * is fragmented or over 125 bytes: -WS_CLOSE_PROTOCOL) or is larger than
 * max_payload (-WS_CLOSE_TOO_BIG). */
long ws_parse_frame(uint8_t *buf, size_t n, size_t max_payload, ws_frame *f);

/* The header of an unmasked server frame into hdr[10]; returns its length. */
size_t ws_frame_header(uint8_t *hdr, int opcode, size_t len);

/* Write one whole frame to fd (blocking, all of it). 0 or -1. */
int ws_send_frame(int fd, int opcode, const void *payload, size_t len);

#endif
