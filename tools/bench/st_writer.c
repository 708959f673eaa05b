/* Streaming safetensors writer for make-model.
 * Dataflow: stw_declare (names, dtypes, shapes) -> header JSON written at the
 * first data write -> stw_write_f32 converts and appends through a 4 MiB buffer.
 * Format: u64 little-endian header length, the JSON header (padded with spaces
 * to a multiple of 8), then the tensors' bytes in declaration order. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct st_tensor {
    char *name;
    st_dtype dt;
    int n_dims;
    int64_t shape[4];
    uint64_t n_elem, begin, end;
} st_tensor;

struct stw_writer {
    FILE *f;
    st_tensor *t;
    int n, cap;
    char **meta; /* key, value, key, value ... */
    int n_meta;
    int cur;          /* tensor being filled */
    uint64_t filled;  /* elements of cur written */
    int header_done;
    unsigned char *buf;
    size_t nbuf;
    int failed;
};

#define ST_BUF (4u << 20)

uint16_t stw_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

stw_writer *stw_open(const char *path, char *err, size_t err_size) {
    stw_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->f = fopen(path, "wb");
    w->buf = malloc(ST_BUF);
    if (!w->f || !w->buf) {
        snprintf(err, err_size, "cannot create %s", path);
        if (w->f) fclose(w->f);
        free(w->buf);
        free(w);
        return NULL;
    }
    return w;
}

int stw_declare(stw_writer *w, const char *name, st_dtype dt, int n_dims, const int64_t *shape) {
    if (w->header_done || n_dims < 1 || n_dims > 4) return -1;
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 256;
        st_tensor *t = realloc(w->t, sizeof *t * (size_t)cap);
        if (!t) return -1;
        w->t = t;
        w->cap = cap;
    }
    st_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->dt = dt;
    t->n_dims = n_dims;
    t->n_elem = 1;
    for (int i = 0; i < n_dims; i++) {
        t->shape[i] = shape[i];
        t->n_elem *= (uint64_t)shape[i];
    }
    const uint64_t start = w->n ? w->t[w->n - 1].end : 0;
    t->begin = start;
    t->end = start + t->n_elem * (dt == ST_F32 ? 4u : 2u);
    return w->n++;
}

int stw_metadata(stw_writer *w, const char *key, const char *value) {
    char **m = realloc(w->meta, sizeof *m * (size_t)(w->n_meta + 2));
    if (!m) return -1;
    w->meta = m;
    m[w->n_meta++] = strdup(key);
    m[w->n_meta++] = strdup(value);
    return 0;
}

static int write_header(stw_writer *w) {
    size_t cap = 256 + (size_t)w->n * 160, len = 0;
    for (int i = 0; i < w->n; i++) cap += strlen(w->t[i].name);
    for (int i = 0; i < w->n_meta; i++) cap += strlen(w->meta[i]) + 8;
    char *h = malloc(cap + 8);
    if (!h) return -1;
    len += (size_t)snprintf(h + len, cap - len, "{");
    if (w->n_meta) {
        len += (size_t)snprintf(h + len, cap - len, "\"__metadata__\":{");
        for (int i = 0; i < w->n_meta; i += 2)
            len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":\"%s\"", i ? "," : "", w->meta[i], w->meta[i + 1]);
        len += (size_t)snprintf(h + len, cap - len, "}%s", w->n ? "," : "");
    }
    for (int i = 0; i < w->n; i++) {
        const st_tensor *t = &w->t[i];
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t->name,
                                t->dt == ST_F32 ? "F32" : "BF16");
        for (int d = 0; d < t->n_dims; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                                (unsigned long long)t->end);
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' ';
    unsigned char n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int ok = fwrite(n8, 1, 8, w->f) == 8 && fwrite(h, 1, len, w->f) == len;
    free(h);
    w->header_done = 1;
    return ok ? 0 : -1;
}

static int flush_buf(stw_writer *w) {
    if (w->nbuf && fwrite(w->buf, 1, w->nbuf, w->f) != w->nbuf) return -1;
    w->nbuf = 0;
    return 0;
}

int stw_write_f32(stw_writer *w, const float *v, size_t n) {
    if (w->failed) return -1;
    if (!w->header_done && write_header(w)) return w->failed = 1, -1;
    while (n > 0) {
        while (w->cur < w->n && w->filled == w->t[w->cur].n_elem) {
            w->cur++;
            w->filled = 0;
        }
        if (w->cur >= w->n) return w->failed = 1, -1;
        st_tensor *t = &w->t[w->cur];
        const size_t es = t->dt == ST_F32 ? 4 : 2;
        size_t k = (size_t)(t->n_elem - w->filled);
        if (k > n) k = n;
        size_t room = (ST_BUF - w->nbuf) / es;
        if (room == 0) {
            if (flush_buf(w)) return w->failed = 1, -1;
            continue;
        }
        if (k > room) k = room;
        unsigned char *p = w->buf + w->nbuf;
        if (t->dt == ST_F32) {
            memcpy(p, v, k * 4); /* little-endian host (x86-64, aarch64) */
        } else {
            for (size_t i = 0; i < k; i++) {
                uint16_t b = stw_f32_to_bf16(v[i]);
                p[2 * i] = (unsigned char)b;
                p[2 * i + 1] = (unsigned char)(b >> 8);
            }
        }
        w->nbuf += k * es;
        w->filled += k;
        v += k;
        n -= k;
    }
    return 0;
}

int stw_close(stw_writer *w, char *err, size_t err_size) {
    if (!w) return -1;
    int rc = 0;
    if (!w->header_done && write_header(w)) rc = -1;
    while (w->cur < w->n && w->filled == w->t[w->cur].n_elem) {
        w->cur++;
        w->filled = 0;
    }
    if (w->failed) rc = -1, snprintf(err, err_size, "write error");
    else if (w->cur < w->n && !(w->t[w->cur].n_elem == 0)) {
        rc = -1;
        snprintf(err, err_size, "tensor %s not filled", w->t[w->cur].name);
    }
    if (flush_buf(w)) rc = -1, snprintf(err, err_size, "write error");
    if (fclose(w->f)) rc = -1, snprintf(err, err_size, "write error (disk full?)");
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (int i = 0; i < w->n_meta; i++) free(w->meta[i]);
    free(w->meta);
    free(w->t);
    free(w->buf);
    free(w);
    return rc;
}
