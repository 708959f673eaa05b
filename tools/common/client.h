/* A small HTTP/1.1 client over TCP (one request per connection,
 * "Connection: close"): fixed-length, chunked and read-to-close bodies. Used
 * by the load generator (qtts-server --loadgen) and the server tests. */
#ifndef QTTS_SERVER_CLIENT_H
#define QTTS_SERVER_CLIENT_H

#include <stddef.h>

typedef struct http_conn http_conn;

/* Connect, send "METHOD path" with optional extra header lines (each ending
 * in \r\n) and body, read the status line and headers. timeout_ms bounds each
 * wait on the socket. NULL on failure with err filled. */
http_conn *hc_open(const char *host, int port, const char *method, const char *path, const char *headers,
                   const void *body, size_t n_body, int timeout_ms, char *err, size_t err_size);
int hc_status(const http_conn *c);
/* Value of a response header (case-insensitive name), or NULL. */
const char *hc_header(const http_conn *c, const char *name);
/* Next body bytes (de-chunked): > 0 bytes, 0 at the end, -1 on error or timeout. */
long hc_read(http_conn *c, void *buf, size_t max);
/* Close the socket (abruptly if the body was not read to its end) and free. */
void hc_close(http_conn *c);

typedef struct http_result {
    int status;        /* 0 when no response came */
    char *headers;     /* raw header block, NUL-terminated */
    char *body;        /* NUL-terminated (not counted in n) */
    size_t n;
    double t_first_s;  /* from the call to the first body byte (-1 if none) */
    double t_total_s;  /* from the call to the end of the body */
    int complete;      /* 1 when the body ended properly */
    char err[256];
} http_result;

/* The whole exchange. Returns 0 when a complete response came, -1 otherwise
 * (out->err says why; out->status may still be set). Free with http_result_free. */
int hc_request(const char *host, int port, const char *method, const char *path, const char *headers,
               const void *body, size_t n_body, int timeout_ms, http_result *out);
void http_result_free(http_result *r);
/* Header value from a raw block (case-insensitive), copied into out; 0 if found. */
int hc_find_header(const char *headers, const char *name, char *out, size_t n);

#endif
