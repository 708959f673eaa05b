/* Prepared-weights cache files (see weights_cache.h): key, name, validated
 * mapping, atomic writing (temporary file + rename), listing and clearing. */
#include "model/weights_cache.h"

#include "backend/cpu/quant.h"
#include "model/voice_file.h" /* voice_crc32 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "QTTSWCCH"
#define HDR 64
#define ENTRY 56
#define ALIGN 4096u

static uint64_t fnv64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int wcache_prefix(const char *cache_dir, const char *model_dir, char *out, size_t cap) {
    char rp[PATH_MAX];
    if (!realpath(model_dir, rp)) return -1;
    uint64_t h = fnv64(0xcbf29ce484222325ull, rp, strlen(rp));
    int n = snprintf(out, cap, "%s/%016llx", cache_dir, (unsigned long long)h);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int wcache_path(const char *cache_dir, const char *model_dir, const char *tfmt, const char *pfmt, const char *isa,
                char *out, size_t cap) {
    char pre[4096];
    if (wcache_prefix(cache_dir, model_dir, pre, sizeof pre)) return -1;
    int n = snprintf(out, cap, "%s-%s-%s-%s" WCACHE_EXT, pre, tfmt, pfmt, isa);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The checkpoint files' sizes, mtimes and safetensors headers. */
static uint64_t files_key(const st_set *st) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < st->n_files; i++) {
        struct stat sb;
        int64_t id[3] = {-1, -1, -1};
        if (stat(st->paths[i], &sb) == 0) {
            id[0] = (int64_t)sb.st_size;
            id[1] = (int64_t)sb.st_mtim.tv_sec;
            id[2] = (int64_t)sb.st_mtim.tv_nsec;
        }
        h = fnv64(h, id, sizeof id);
        /* the safetensors header: u64 length + JSON */
        const unsigned char *b = st->maps[i];
        uint64_t hl = 0;
        if (st->map_sizes[i] >= 8) memcpy(&hl, b, 8);
        if (hl <= st->map_sizes[i] - 8) h = fnv64(h, b, 8 + (size_t)hl);
    }
    return h;
}

uint64_t wcache_key(const st_set *st, const char *tfmt, const char *pfmt, const ops_kernels *k) {
    uint64_t h = files_key(st);
    const uint32_t v[3] = {WCACHE_LAYOUT, (uint32_t)k->prefer_x16, (uint32_t)k->x16_q8_signed};
    h = fnv64(h, tfmt, strlen(tfmt) + 1);
    h = fnv64(h, pfmt, strlen(pfmt) + 1);
    h = fnv64(h, k->name, strlen(k->name) + 1);
    h = fnv64(h, v, sizeof v);
    return h;
}

uint64_t wcache_key_tag(const st_set *st, const char *tag, uint32_t version) {
    const uint32_t v[2] = {WCACHE_LAYOUT, version};
    uint64_t h = fnv64(files_key(st), tag, strlen(tag) + 1);
    return fnv64(h, v, sizeof v);
}

static uint32_t rd32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int wcache_open(const char *path, uint64_t key, int n_mats, wcache_map *c, char *why, size_t why_cap) {
    memset(c, 0, sizeof *c);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_cap, "no cache file %s", path);
        return -1;
    }
    struct stat sb;
    const size_t table_end = HDR + (size_t)ENTRY * n_mats;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < table_end) {
        snprintf(why, why_cap, "cache file %s is truncated", path);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(why, why_cap, "cannot map cache file %s: %s", path, strerror(errno));
        return -1;
    }
    const unsigned char *b = map;
    const char *bad = NULL;
    if (memcmp(b, MAGIC, 8) != 0) bad = "is not a qtts weights cache";
    else if (rd32(b + 8) != WCACHE_LAYOUT) bad = "has another layout version";
    else if (rd32(b + 12) != (uint32_t)n_mats) bad = "holds another set of matrices";
    else if (rd32(b + 60) != voice_crc32(voice_crc32(0, b, 60), b + HDR, (size_t)ENTRY * n_mats))
        bad = "has a damaged header (CRC mismatch)";
    else if (rd64(b + 16) != key) bad = "is stale (the checkpoint, format or kernels changed)";
    else if (rd64(b + 24) != (uint64_t)sb.st_size) bad = "is truncated or has extra bytes (size mismatch)";
    if (!bad)
        for (int i = 0; i < n_mats && !bad; i++) {
            const unsigned char *t = b + HDR + (size_t)ENTRY * i;
            uint64_t off = rd64(t + 24), nb = rd64(t + 32), os = rd64(t + 40), om = rd64(t + 48);
            if (rd32(t) == 0) continue;
            if ((rd32(t) != 1 && rd32(t) != 2) || off % 64 || off < table_end || nb > (uint64_t)sb.st_size || off > (uint64_t)sb.st_size - nb ||
                os >= nb || os % 64 || (om != ~0ull && (om >= nb || om % 64)))
                bad = "has a damaged table";
        }
    if (bad) {
        snprintf(why, why_cap, "cache file %s %s", path, bad);
        munmap(map, (size_t)sb.st_size);
        return -1;
    }
    c->map = map;
    c->len = (size_t)sb.st_size;
    c->n_mats = n_mats;
    c->table = b + HDR;
    return 0;
}

/* A quantised matrix of rows x cols in format quant (quant.h's layouts): the
 * bytes of its data and of its scales (of its minima too when it has them);
 * 0 for a shape, or a dtype and format, that do not go together. */
static int quant_layout(uint32_t dtype, uint32_t quant, int rows, int cols, uint64_t *data, uint64_t *scales,
                        int *has_mins) {
    if (rows < 1 || cols < 1 || cols > (1 << 24)) return 0;
    const uint64_t kpad = (uint64_t)qt_kpad(cols), nb = kpad / QT_BLOCK, r = (uint64_t)rows, g = (r + 15) / 16;
    const uint32_t want = quant == QT_Q8_B32 || quant == QT_Q8_B32_X16 || quant == QT_Q8_B32_X16S ? DT_I8 : DT_U8;
    if (dtype != want) return 0;
    *has_mins = quant == QT_Q4M_B32 || quant == QT_Q4M_B32_X16;
    switch (quant) {
    case QT_Q8_B32: *data = r * kpad, *scales = r * nb * 2; return 1;
    case QT_Q4_B32: case QT_Q4M_B32: *data = r * kpad / 2, *scales = r * nb * 2; return 1;
    case QT_Q8_B32_X16: case QT_Q8_B32_X16S: *data = g * nb * 512, *scales = g * nb * 32; return 1;
    case QT_Q4M_B32_X16: *data = g * nb * 256, *scales = g * nb * 32; return 1;
    default: return 0;
    }
}

int wcache_get(const wcache_map *c, int i, qt_mat *w) {
    if (i < 0 || i >= c->n_mats) return -1;
    const unsigned char *t = c->table + (size_t)ENTRY * i;
    if ((int)rd32(t + 12) != w->rows || (int)rd32(t + 16) != w->cols) return -1;
    if (rd32(t) == 0) return qt_is_quant(w) ? -1 : 1;
    /* the format's data, scales and minima inside the entry's bytes (wcache_open
     * checked that those are inside the file and that os, om < nb) */
    uint64_t db, sb;
    int has_mins;
    const uint64_t nb = rd64(t + 32), os = rd64(t + 40), om = rd64(t + 48);
    if (rd32(t) != 1 || !quant_layout(rd32(t + 4), rd32(t + 8), w->rows, w->cols, &db, &sb, &has_mins) ||
        db > os || (om != ~0ull) != has_mins || (has_mins ? om < os || sb > om - os || sb > nb - om : sb > nb - os))
        return -1;
    const unsigned char *base = (const unsigned char *)c->map + rd64(t + 24);
    w->dtype = (qtts_dtype)rd32(t + 4);
    w->quant = (qt_quant)rd32(t + 8);
    w->data = base;
    w->scales = (const uint16_t *)(base + rd64(t + 40));
    w->mins = om == ~0ull ? NULL : (const uint16_t *)(base + om);
    w->owned = NULL;
    w->owned_bytes = 0;
    return 0;
}

const float *wcache_get_f32(const wcache_map *c, int i, size_t n) {
    if (!c->map || i < 0 || i >= c->n_mats) return NULL;
    const unsigned char *t = c->table + (size_t)ENTRY * i;
    if (rd32(t) != 2 || rd32(t + 4) != (uint32_t)DT_F32 || rd64(t + 32) != (uint64_t)n * sizeof(float)) return NULL;
    return (const float *)((const unsigned char *)c->map + rd64(t + 24));
}

void wcache_close(wcache_map *c) {
    if (c && c->map) munmap(c->map, c->len);
    if (c) memset(c, 0, sizeof *c);
}

/* mkdir -p */
static void make_dirs(const char *file) {
    char d[4096];
    snprintf(d, sizeof d, "%s", file);
    char *slash = strrchr(d, '/');
    if (!slash) return;
    *slash = 0;
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    mkdir(d, 0755);
}

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int wcache_begin(wcache_writer *w, const char *path, uint64_t key, int n_mats) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    make_dirs(path);
    snprintf(w->path, sizeof w->path, "%s", path);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)ts.tv_nsec);
    w->table = calloc((size_t)n_mats, ENTRY);
    if (!w->table) return -1;
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        free(w->table);
        w->table = NULL;
        return -1;
    }
    w->key = key;
    w->n_mats = n_mats;
    w->off = (HDR + (uint64_t)ENTRY * n_mats + ALIGN - 1) / ALIGN * ALIGN;
    return 0;
}

void wcache_put(wcache_writer *w, const qt_mat *m) {
    if (w->fd < 0) return;
    if (w->i >= w->n_mats) {
        wcache_abort(w);
        return;
    }
    unsigned char *t = w->table + (size_t)ENTRY * w->i++;
    uint32_t u[6] = {0, (uint32_t)m->dtype, (uint32_t)m->quant, (uint32_t)m->rows, (uint32_t)m->cols, 0};
    uint64_t q[4] = {0, 0, 0, ~0ull};
    if (qt_is_quant(m)) {
        const unsigned char *base = m->owned ? m->owned : m->data;
        size_t nb = m->owned_bytes;
        if (!m->owned || (const unsigned char *)m->data != base) {
            wcache_abort(w); /* only freshly prepared matrices (one buffer) are written */
            return;
        }
        u[0] = 1;
        q[0] = w->off;
        q[1] = nb;
        q[2] = (uint64_t)((const unsigned char *)m->scales - base);
        q[3] = m->mins ? (uint64_t)((const unsigned char *)m->mins - base) : ~0ull;
        if (pwrite(w->fd, base, nb, (off_t)w->off) != (ssize_t)nb) {
            wcache_abort(w);
            return;
        }
        w->off = (w->off + nb + ALIGN - 1) / ALIGN * ALIGN;
    }
    memcpy(t, u, sizeof u);
    memcpy(t + 24, q, sizeof q);
}

void wcache_put_f32(wcache_writer *w, const float *p, size_t n) {
    if (w->fd < 0) return;
    if (w->i >= w->n_mats || n == 0) {
        wcache_abort(w);
        return;
    }
    unsigned char *t = w->table + (size_t)ENTRY * w->i++;
    const uint32_t u[6] = {2, (uint32_t)DT_F32, 0, 1, n <= INT32_MAX ? (uint32_t)n : 0, 0};
    const uint64_t q[4] = {w->off, (uint64_t)n * sizeof(float), 0, ~0ull};
    if (pwrite(w->fd, p, n * sizeof(float), (off_t)w->off) != (ssize_t)(n * sizeof(float))) {
        wcache_abort(w);
        return;
    }
    w->off = (w->off + q[1] + ALIGN - 1) / ALIGN * ALIGN;
    memcpy(t, u, sizeof u);
    memcpy(t + 24, q, sizeof q);
}

int wcache_commit(wcache_writer *w) {
    if (w->fd < 0) return -1;
    if (w->i != w->n_mats) {
        wcache_abort(w);
        return -1;
    }
    unsigned char h[HDR];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    uint32_t v = WCACHE_LAYOUT, n = (uint32_t)w->n_mats;
    memcpy(h + 8, &v, 4);
    memcpy(h + 12, &n, 4);
    memcpy(h + 16, &w->key, 8);
    memcpy(h + 24, &w->off, 8);
    uint32_t crc = voice_crc32(voice_crc32(0, h, 60), w->table, (size_t)ENTRY * w->n_mats);
    memcpy(h + 60, &crc, 4);
    int ok = ftruncate(w->fd, (off_t)w->off) == 0 && lseek(w->fd, 0, SEEK_SET) == 0 && !write_all(w->fd, h, HDR) &&
             !write_all(w->fd, w->table, (size_t)ENTRY * w->n_mats);
    ok = close(w->fd) == 0 && ok;
    w->fd = -1;
    /* rename is atomic: a reader maps either the old file or this whole one */
    if (ok) ok = rename(w->tmp, w->path) == 0;
    if (!ok) unlink(w->tmp);
    free(w->table);
    w->table = NULL;
    return ok ? 0 : -1;
}

void wcache_abort(wcache_writer *w) {
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    w->fd = -1;
    free(w->table);
    w->table = NULL;
}

/* 1 when name is a cache file (of the checkpoint with prefix base, when given). */
static int is_ours(const char *name, const char *base) {
    size_t n = strlen(name), e = strlen(WCACHE_EXT);
    if (base && strncmp(name, base, strlen(base)) != 0) return 0;
    if (strstr(name, WCACHE_EXT ".tmp.")) return 1; /* a writer's leftover */
    return n > e && !strcmp(name + n - e, WCACHE_EXT);
}

static void walk(const char *cache_dir, const char *model_dir, int rm, void (*fn)(const char *, int64_t, void *),
                 void *u, int *count) {
    char pre[4096], base[64] = "";
    const char *bp = NULL;
    if (model_dir) {
        if (wcache_prefix(cache_dir, model_dir, pre, sizeof pre)) return;
        snprintf(base, sizeof base, "%s", strrchr(pre, '/') + 1);
        bp = base;
    }
    DIR *d = opendir(cache_dir);
    if (!d) {
        *count = -1;
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_ours(de->d_name, bp)) continue;
        char p[4096 + 256];
        snprintf(p, sizeof p, "%s/%s", cache_dir, de->d_name);
        struct stat sb;
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (rm) {
            if (unlink(p) == 0) ++*count;
        } else {
            fn(p, (int64_t)sb.st_size, u);
            ++*count;
        }
    }
    closedir(d);
}

int wcache_clear(const char *cache_dir, const char *model_dir) {
    int n = 0;
    walk(cache_dir, model_dir, 1, NULL, NULL, &n);
    return n;
}

int wcache_list(const char *cache_dir, const char *model_dir, void (*fn)(const char *path, int64_t bytes, void *u),
                void *u) {
    int n = 0;
    walk(cache_dir, model_dir, 0, fn, u, &n);
    return n;
}
