/* .npy reader for tests (see npy.h). */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int npy_load(const char *path, npy_array *a, char *err, int err_size) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "cannot open %s", path);
        return -1;
    }
    unsigned char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        snprintf(err, err_size, "%s: not a .npy file", path);
        fclose(f);
        return -1;
    }
    unsigned hlen;
    if (magic[6] == 1) {
        unsigned char l[2];
        if (fread(l, 1, 2, f) != 2) goto bad;
        hlen = l[0] | (l[1] << 8);
    } else {
        unsigned char l[4];
        if (fread(l, 1, 4, f) != 4) goto bad;
        hlen = l[0] | (l[1] << 8) | (l[2] << 16) | ((unsigned)l[3] << 24);
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
        free(hdr);
        goto bad;
    }
    hdr[hlen] = 0;
    const char *d = strstr(hdr, "'descr':");
    const char *fo = strstr(hdr, "'fortran_order':");
    const char *sh = strstr(hdr, "'shape':");
    if (!d || !fo || !sh || strstr(fo, "True") == fo + 17) {
        free(hdr);
        goto bad;
    }
    int esize = 0, kind = 0; /* kind: 0 f4, 1 f8, 2 i8, 3 i4 */
    if (strstr(d, "'<f4'")) esize = 4, kind = 0;
    else if (strstr(d, "'<f8'")) esize = 8, kind = 1;
    else if (strstr(d, "'<i8'")) esize = 8, kind = 2;
    else if (strstr(d, "'<i4'")) esize = 4, kind = 3;
    else {
        snprintf(err, err_size, "%s: unsupported dtype", path);
        free(hdr);
        fclose(f);
        return -1;
    }
    const char *p = strchr(sh, '(');
    a->n = 1;
    a->ndim = 0;
    if (p) {
        p++;
        while (*p && *p != ')') {
            while (*p == ' ' || *p == ',') p++;
            if (*p == ')') break;
            long v = strtol(p, (char **)&p, 10);
            if (a->ndim < 8) a->shape[a->ndim++] = v;
            a->n *= v;
        }
    }
    free(hdr);
    void *raw = malloc((size_t)a->n * esize + 1);
    if (!raw || fread(raw, esize, a->n, f) != (size_t)a->n) {
        free(raw);
        goto bad;
    }
    fclose(f);
    if (kind <= 1) {
        a->f32 = malloc(sizeof(float) * (a->n + 1));
        for (long i = 0; i < a->n; i++)
            a->f32[i] = kind == 0 ? ((float *)raw)[i] : (float)((double *)raw)[i];
    } else {
        a->is_int = 1;
        a->i64 = malloc(sizeof(int64_t) * (a->n + 1));
        for (long i = 0; i < a->n; i++)
            a->i64[i] = kind == 2 ? ((int64_t *)raw)[i] : ((int32_t *)raw)[i];
    }
    free(raw);
    return 0;
bad:
    snprintf(err, err_size, "%s: truncated or malformed .npy", path);
    fclose(f);
    return -1;
}

void npy_free(npy_array *a) {
    free(a->f32);
    free(a->i64);
    memset(a, 0, sizeof *a);
}
