/* safetensors reader (see safetensors.h): mmap + validated header table.
 * Checks, in order: header length inside the file, JSON object, per tensor a
 * known dtype, a shape of non-negative dims whose element count times the
 * dtype size does not overflow and equals the byte span, offsets inside the
 * data section, no two tensors overlapping, no duplicate names (also across
 * shards). */
#include "io/safetensors.h"
#include "util/huge_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER (256u << 20) /* 256 MiB of JSON is far beyond any real checkpoint */

static int parse_dtype(const char *s, qtts_dtype *out) {
    static const struct { const char *n; qtts_dtype t; } tab[] = {
        {"F32", DT_F32}, {"F16", DT_F16}, {"BF16", DT_BF16}, {"F64", DT_F64},
        {"I64", DT_I64}, {"I32", DT_I32}, {"I16", DT_I16},   {"I8", DT_I8},
        {"U8", DT_U8},   {"BOOL", DT_BOOL},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].n) == 0) {
            *out = tab[i].t;
            return 1;
        }
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

typedef struct span { uint64_t begin, end; const char *name; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Parse one mapped file's header and append its tensors to s. */
static qtts_status parse_file(st_set *s, int fi, qtts_error *e) {
    const char *path = s->paths[fi];
    const unsigned char *base = s->maps[fi];
    const size_t size = s->map_sizes[fi];
    if (size < 8)
        return err_set(e, QTTS_ERR_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", path, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | base[i];
    if (hlen > size - 8 || hlen > ST_MAX_HEADER)
        return err_set(e, QTTS_ERR_FORMAT,
                       "%s: header length %llu runs past the end of the file (%zu bytes); the file is truncated or not safetensors",
                       path, (unsigned long long)hlen, size);
    const unsigned char *data = base + 8 + hlen;
    const uint64_t data_size = size - 8 - hlen;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)base + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return err_set(e, QTTS_ERR_FORMAT, "%s: header JSON is malformed: %s", path, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: header is not a JSON object", path);
    }
    size_t n_new = json_object_size(root);
    st_tensor *grown = realloc(s->tensors, sizeof(st_tensor) * (s->n_tensors + n_new + 1));
    span *spans = malloc(sizeof(span) * (n_new + 1));
    if (!grown || !spans) {
        if (grown) s->tensors = grown;
        free(spans);
        json_decref(root);
        return err_set(e, QTTS_ERR_NOMEM, "%s: out of memory reading the header", path);
    }
    s->tensors = grown;
    int n_spans = 0;
    qtts_status st = QTTS_OK;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        if (!json_is_object(val)) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s': entry is not an object", path, key);
            break;
        }
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        st_tensor t;
        memset(&t, 0, sizeof t);
        if (!json_is_string(jd) || !parse_dtype(json_string_value(jd), &t.dtype)) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s': missing or unknown dtype", path, key);
            break;
        }
        if (!json_is_array(js) || json_array_size(js) > ST_MAX_DIMS) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s': shape must be an array of at most %d dims",
                         path, key, ST_MAX_DIMS);
            break;
        }
        t.ndim = (int)json_array_size(js);
        uint64_t n_el = 1;
        int bad = 0;
        for (int d = 0; d < t.ndim; d++) {
            json_t *x = json_array_get(js, d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1LL << 40)) {
                bad = 1;
                break;
            }
            t.shape[d] = json_integer_value(x);
            if (t.shape[d] && n_el > (UINT64_MAX / 16) / (uint64_t)t.shape[d]) {
                bad = 1;
                break;
            }
            n_el *= (uint64_t)t.shape[d];
        }
        if (bad) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s': shape has a negative, non-integer or huge dimension",
                         path, key);
            break;
        }
        t.n_elems = (int64_t)n_el;
        if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
            !json_is_integer(json_array_get(jo, 1))) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end]", path, key);
            break;
        }
        json_int_t b = json_integer_value(json_array_get(jo, 0)), en = json_integer_value(json_array_get(jo, 1));
        if (b < 0 || en < b || (uint64_t)en > data_size) {
            st = err_set(e, QTTS_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets [%lld, %lld] lie outside the %llu-byte data section (truncated file?)",
                         path, key, (long long)b, (long long)en, (unsigned long long)data_size);
            break;
        }
        if ((uint64_t)(en - b) != n_el * dtype_size(t.dtype)) {
            st = err_set(e, QTTS_ERR_FORMAT,
                         "%s: tensor '%s': %lld bytes of data but shape x %s needs %llu", path, key,
                         (long long)(en - b), dtype_name(t.dtype),
                         (unsigned long long)(n_el * dtype_size(t.dtype)));
            break;
        }
        t.data = data + b;
        t.nbytes = (size_t)(en - b);
        t.file_index = fi;
        t.name = strdup(key);
        if (!t.name) {
            st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
            break;
        }
        s->tensors[s->n_tensors++] = t;
        if (en > b) spans[n_spans++] = (span){(uint64_t)b, (uint64_t)en, s->tensors[s->n_tensors - 1].name};
    }
    if (st == QTTS_OK) {
        qsort(spans, n_spans, sizeof(span), cmp_span);
        for (int i = 1; i < n_spans; i++)
            if (spans[i].begin < spans[i - 1].end) {
                st = err_set(e, QTTS_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", path,
                             spans[i - 1].name, spans[i].name);
                break;
            }
    }
    free(spans);
    json_decref(root);
    return st;
}

static qtts_status map_file(st_set *s, const char *file, qtts_error *e) {
    int fd = open(file, O_RDONLY);
    if (fd < 0) return err_set(e, QTTS_ERR_IO, "%s: cannot open: %s", file, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(e, QTTS_ERR_IO, "%s: not a regular file", file);
    }
    void *m = NULL;
    if (sb.st_size > 0) {
        m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return err_set(e, QTTS_ERR_IO, "%s: mmap failed: %s", file, strerror(errno));
        }
    }
    close(fd);
    int i = s->n_files;
    char **p = realloc(s->paths, sizeof(char *) * (i + 1));
    if (p) s->paths = p;
    void **mp = realloc(s->maps, sizeof(void *) * (i + 1));
    if (mp) s->maps = mp;
    size_t *ms = realloc(s->map_sizes, sizeof(size_t) * (i + 1));
    if (ms) s->map_sizes = ms;
    char *dup = strdup(file);
    if (!p || !mp || !ms || !dup) {
        free(dup);
        if (m) munmap(m, (size_t)sb.st_size);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    s->paths[i] = dup;
    s->maps[i] = m;
    s->map_sizes[i] = (size_t)sb.st_size;
    s->n_files++;
    return parse_file(s, i, e);
}

static qtts_status finish(st_set *s, qtts_error *e) {
    if (s->n_tensors > 1) /* an index with an empty weight_map has no tensors: s->tensors is NULL */
        qsort(s->tensors, (size_t)s->n_tensors, sizeof(st_tensor), cmp_tensor_name);
    for (int i = 1; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i].name, s->tensors[i - 1].name) == 0)
            return err_set(e, QTTS_ERR_FORMAT, "tensor '%s' appears in both %s and %s", s->tensors[i].name,
                           s->paths[s->tensors[i - 1].file_index], s->paths[s->tensors[i].file_index]);
    return QTTS_OK;
}

qtts_status st_open_file(st_set *s, const char *file, qtts_error *e) {
    memset(s, 0, sizeof *s);
    qtts_status st = map_file(s, file, e);
    if (st == QTTS_OK) st = finish(s, e);
    if (st != QTTS_OK) st_close(s);
    return st;
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static qtts_status open_index(st_set *s, const char *dir, const char *index, qtts_error *e) {
    json_error_t jerr;
    json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return err_set(e, QTTS_ERR_FORMAT, "%s: line %d: %s", index, jerr.line, jerr.text);
    json_t *wm = json_object_get(root, "weight_map");
    qtts_status st = QTTS_OK;
    if (!json_is_object(wm)) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: no \"weight_map\" object", index);
        goto done;
    }
    /* open each distinct shard once */
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        const char *f = json_string_value(val);
        if (!f || !*f || strchr(f, '/') || strcmp(f, "..") == 0) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s' maps to an invalid shard file name", index, key);
            goto done;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, f);
        int seen = 0;
        for (int i = 0; i < s->n_files; i++)
            if (strcmp(s->paths[i], path) == 0) seen = 1;
        if (seen) continue;
        if ((st = map_file(s, path, e)) != QTTS_OK) goto done;
    }
    if ((st = finish(s, e)) != QTTS_OK) goto done;
    /* every tensor the index names must be in the shard it names */
    json_object_foreach(wm, key, val) {
        const st_tensor *t = st_find(s, key);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(val));
        if (!t || strcmp(s->paths[t->file_index], path) != 0) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: tensor '%s' is listed in %s but not found there", index, key,
                         json_string_value(val));
            goto done;
        }
    }
done:
    json_decref(root);
    return st;
}

qtts_status st_open(st_set *s, const char *path, qtts_error *e) {
    memset(s, 0, sizeof *s);
    struct stat sb;
    if (stat(path, &sb) != 0) return err_set(e, QTTS_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return st_open_file(s, path, e);
    char single[4096], index[4096];
    snprintf(single, sizeof single, "%s/model.safetensors", path);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", path);
    if (file_exists(single)) return st_open_file(s, single, e);
    if (file_exists(index)) {
        memset(s, 0, sizeof *s);
        qtts_status st = open_index(s, path, index, e);
        if (st != QTTS_OK) st_close(s);
        return st;
    }
    return err_set(e, QTTS_ERR_IO, "%s: neither model.safetensors nor model.safetensors.index.json found", path);
}

void st_close(st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_tensors; i++) free(s->tensors[i].name);
    free(s->tensors);
    for (int i = 0; i < s->n_files; i++) {
        if (s->maps && s->maps[i]) munmap(s->maps[i], s->map_sizes[i]);
        if (s->paths) free(s->paths[i]);
    }
    free(s->paths);
    free(s->maps);
    free(s->map_sizes);
    memset(s, 0, sizeof *s);
}

void st_release(const st_set *s, const void *data, size_t n) {
    if (!data || !n) return;
    for (int i = 0; i < s->n_files; i++) {
        const char *base = s->maps[i];
        if (!base || (const char *)data < base || (const char *)data + n > base + s->map_sizes[i]) continue;
        pages_drop(data, n);
        return;
    }
}

void st_advise_huge(const st_set *s) {
    for (int i = 0; i < s->n_files; i++) huge_advise(s->maps[i], s->map_sizes[i]);
}

const st_tensor *st_find(const st_set *s, const char *name) {
    int lo = 0, hi = s->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

qtts_status st_get_float(const st_set *s, const char *name, int ndim, const int64_t *shape,
                         const st_tensor **out, qtts_error *e) {
    const st_tensor *t = st_find(s, name);
    const char *file = s->n_files ? s->paths[0] : "?";
    if (!t) return err_set(e, QTTS_ERR_MODEL, "%s: missing tensor '%s'", file, name);
    file = s->paths[t->file_index];
    if (!dtype_is_float(t->dtype))
        return err_set(e, QTTS_ERR_MODEL, "%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", file, name,
                       dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
    if (!ok) {
        char want[128] = "", got[128] = "";
        size_t wl = 0, gl = 0;
        for (int d = 0; d < ndim; d++)
            wl += snprintf(want + wl, wl < sizeof want ? sizeof want - wl : 0, "%s%lld", d ? ", " : "",
                           (long long)shape[d]);
        for (int d = 0; d < t->ndim; d++)
            gl += snprintf(got + gl, gl < sizeof got ? sizeof got - gl : 0, "%s%lld", d ? ", " : "",
                           (long long)t->shape[d]);
        return err_set(e, QTTS_ERR_MODEL, "%s: tensor '%s' has shape [%s], the config implies [%s]", file, name,
                       got, want);
    }
    const size_t align = dtype_size(t->dtype);
    if (((uintptr_t)t->data) % align != 0)
        return err_set(e, QTTS_ERR_MODEL, "%s: tensor '%s' data is not %zu-byte aligned", file, name, align);
    *out = t;
    return QTTS_OK;
}
