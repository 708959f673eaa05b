/* Incremental tokenization (see tok_stream.h). */
#include "model/tok_stream.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void tok_stream_init(tok_stream *s, const text_tokenizer *t) {
    memset(s, 0, sizeof *s);
    s->t = t;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s->ids);
    const text_tokenizer *t = s->t;
    memset(s, 0, sizeof *s);
    s->t = t;
}

static qtts_status add_ids(tok_stream *s, const int32_t *ids, int n, qtts_error *e) {
    if (s->n_ids + n > s->cap_ids) {
        int cap = s->cap_ids ? s->cap_ids : 64;
        while (cap < s->n_ids + n) cap *= 2;
        int32_t *v = realloc(s->ids, sizeof(int32_t) * (size_t)cap);
        if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory tokenizing text");
        s->ids = v;
        s->cap_ids = cap;
    }
    if (n) memcpy(s->ids + s->n_ids, ids, sizeof(int32_t) * (size_t)n);
    s->n_ids += n;
    return QTTS_OK;
}

/* Bytes of buf[0, n) that end on a character boundary: a trailing
 * incomplete (so far valid) UTF-8 sequence is left out. */
static size_t complete_len(const unsigned char *b, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        const unsigned char c = b[n - k];
        if ((c & 0xc0) == 0x80) continue; /* continuation byte: look further back */
        const size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > k ? n - k : n;
    }
    return n;
}

static int decode_at(const unsigned char *b, size_t n, size_t i, int32_t *cp) {
    utf8proc_ssize_t l = utf8proc_iterate(b + i, (utf8proc_ssize_t)(n - i), cp);
    return l > 0 ? (int)l : 1;
}

/* Surely not whitespace for the split regex: a letter, number, punctuation or symbol. */
static int solid(int32_t cp) {
    if (cp < 0x80) return cp > 0x20 && cp < 0x7f;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO: case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK: case UTF8PROC_CATEGORY_SO: return 1;
    default: return 0;
    }
}

/* NFC never composes cp with what precedes it: a starter that is no mark
 * and no Hangul jamo. */
static int seals(int32_t cp) {
    if (cp < 0x80) return 1;
    if ((cp >= 0x1100 && cp <= 0x11ff) || (cp >= 0xa960 && cp <= 0xa97f) || (cp >= 0xd7b0 && cp <= 0xd7ff)) return 0;
    const utf8proc_property_t *pr = utf8proc_get_property(cp);
    if (pr->combining_class != 0) return 0;
    const int c = pr->category;
    return c != UTF8PROC_CATEGORY_MN && c != UTF8PROC_CATEGORY_MC && c != UTF8PROC_CATEGORY_ME;
}

/* The pieces of text[0, n) as tok_pretokenize makes them, with 1 when they
 * spell the text byte for byte (no normalisation or stripping moved it). */
static qtts_status pieces_of(const text_tokenizer *t, const char *text, size_t n, char ***pc, int *np, int *exact,
                             qtts_error *e) {
    qtts_status st = tok_pretokenize(t, text, n, pc, np, e);
    if (st) return st;
    size_t off = 0;
    *exact = 1;
    for (int i = 0; i < *np && *exact; i++) {
        const size_t l = strlen((*pc)[i]);
        if (off + l > n || memcmp(text + off, (*pc)[i], l)) *exact = 0;
        off += l;
    }
    if (off != n) *exact = 0;
    return QTTS_OK;
}

/* Commit the ids of buf[0, v) that no later text can change. */
static qtts_status commit(tok_stream *s, size_t v, qtts_error *e) {
    const unsigned char *b = (const unsigned char *)s->buf;
    /* where an added token may begin: the text before it is split on its own,
     * as if it ended there (so "  " before "<tool_response>" is one piece of
     * two spaces, not a space and a piece that starts with one) */
    const size_t p = tok_added_prefix_at(s->t, s->buf, v);
    /* the last character before p that is surely not whitespace */
    size_t q = v, i = 0;
    while (i < p) {
        int32_t cp;
        const int l = decode_at(b, v, i, &cp);
        if (solid(cp)) q = i;
        i += (size_t)l;
    }
    if (q == v) return QTTS_OK;
    const size_t limit = q;
    if (limit == 0) return QTTS_OK;
    char **pc = NULL;
    int np = 0, exact = 0;
    qtts_status st = pieces_of(s->t, s->buf, v, &pc, &np, &exact, e);
    if (st) return st;
    /* piece starts, from the last one at or before limit down */
    size_t *starts = malloc(sizeof(size_t) * (size_t)(np + 1));
    if (!starts) {
        tok_free_pieces(pc, np);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory tokenizing text");
    }
    size_t off = 0;
    for (int k = 0; k < np; k++) {
        starts[k] = off;
        off += strlen(pc[k]);
    }
    size_t cut = 0;
    for (int k = np - 1; exact && k > 0 && !cut; k--) {
        const size_t c = starts[k];
        if (c > limit) continue;
        int32_t cp;
        decode_at(b, v, c, &cp);
        if (!seals(cp)) continue;
        /* the prefix alone splits into the same first k pieces */
        char **pp = NULL;
        int npp = 0, ex2 = 0;
        if ((st = pieces_of(s->t, s->buf, c, &pp, &npp, &ex2, e))) break;
        int same = ex2 && npp == k;
        for (int j = 0; same && j < k; j++) same = !strcmp(pp[j], pc[j]);
        tok_free_pieces(pp, npp);
        if (same) cut = c;
    }
    free(starts);
    tok_free_pieces(pc, np);
    if (st || !cut) return st;
    int32_t *ids = NULL;
    int n_ids = 0;
    if ((st = tok_encode(s->t, s->buf, cut, &ids, &n_ids, e))) return st;
    st = add_ids(s, ids, n_ids, e);
    free(ids);
    if (st) return st;
    memmove(s->buf, s->buf + cut, s->n - cut);
    s->n -= cut;
    s->n_committed += cut;
    return QTTS_OK;
}

static qtts_status append(tok_stream *s, const char *text, size_t n, qtts_error *e) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->n + n + 1) cap *= 2;
        char *v = realloc(s->buf, cap);
        if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory tokenizing text");
        s->buf = v;
        s->cap = cap;
    }
    if (n) memcpy(s->buf + s->n, text, n);
    s->n += n;
    return QTTS_OK;
}

qtts_status tok_stream_push(tok_stream *s, const char *text, size_t n, qtts_error *e) {
    if (s->ended) return err_set(e, QTTS_ERR_INVALID_ARG, "text pushed after its end");
    if (n && !text) return err_set(e, QTTS_ERR_INVALID_ARG, "tok_stream_push: NULL text");
    qtts_status st = append(s, text, n, e);
    if (st) return st;
    s->n_pushed += n;
    const size_t v = complete_len((const unsigned char *)s->buf, s->n);
    qtts_error e2;
    err_clear(&e2);
    if ((st = tok_check_utf8(s->buf, v, "text", &e2))) {
        /* the offset as the caller counts it: from the first byte pushed */
        const char *at = strstr(e2.msg, "byte offset ");
        const size_t off = at ? strtoull(at + 12, NULL, 10) : 0;
        const char *why = at ? strchr(at, '(') : NULL;
        return err_set(e, st, "text is not valid UTF-8 at byte offset %zu %s", s->n_committed + off, why ? why : "");
    }
    return commit(s, v, e);
}

qtts_status tok_stream_end(tok_stream *s, size_t keep, const char *tail, size_t n, qtts_error *e) {
    if (s->ended) return err_set(e, QTTS_ERR_INVALID_ARG, "text ended twice");
    if (keep < s->n_committed || keep > s->n_pushed)
        return err_set(e, QTTS_ERR_INTERNAL, "text end at byte %zu: bytes [%zu, %zu) are committed or pushed", keep,
                       s->n_committed, s->n_pushed);
    s->n = keep - s->n_committed;
    qtts_status st = append(s, tail, n, e);
    if (st) return st;
    s->ended = 1;
    int32_t *ids = NULL;
    int n_ids = 0;
    if ((st = tok_encode(s->t, s->buf, s->n, &ids, &n_ids, e))) return st;
    st = add_ids(s, ids, n_ids, e);
    free(ids);
    s->n_committed += keep - s->n_committed;
    s->n = 0;
    return st;
}
