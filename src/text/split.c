/* Long-text splitting (see split.h). */
#include "text/split.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

text_split_params text_split_default_params(void) {
    text_split_params p;
    p.max_chars = 300;
    p.sentence_pause_ms = 300;
    p.paragraph_pause_ms = 700;
    return p;
}

/* Decode one code point at s[i] (input is valid UTF-8); returns its length. */
static int cp_at(const unsigned char *s, size_t len, size_t i, unsigned *cp) {
    unsigned c = s[i];
    int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (i + n > len) n = 1;
    unsigned v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; k++) v = (v << 6) | (s[i + k] & 0x3f);
    *cp = v;
    return n;
}

static int is_space_cp(unsigned c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == 0xa0 || c == 0x3000 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x202f || c == 0x205f;
}
/* Marks that end a sentence wherever they stand (full-width CJK). */
static int is_cjk_end(unsigned c) { return c == 0x3002 || c == 0xff01 || c == 0xff1f || c == 0xff1b || c == 0xff0e; }
/* Marks that end a sentence when followed by a space or the end. */
static int is_latin_end(unsigned c) { return c == '.' || c == '!' || c == '?' || c == 0x2026 || c == ';'; }
/* Closers that stay with the sentence before them. */
static int is_closer(unsigned c) {
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}' || c == 0x201d || c == 0x2019 || c == 0x300d ||
           c == 0x300f || c == 0xff09 || c == 0x300b || c == 0x00bb;
}
/* Clause marks for cutting over-long sentences. */
static int is_clause(unsigned c) {
    return c == ',' || c == ';' || c == ':' || c == 0x3001 || c == 0xff0c || c == 0xff1b || c == 0xff1a || c == 0x2014 ||
           c == 0x2013;
}

static const char *const abbrevs[] = {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e",
                                      "no", "inc", "ltd", "mt", "fig", "approx", "dept", "gen", "gov", "sgt", "capt",
                                      "col", "lt", "rev", "hon", "est", "vol", "ca", "cf", "al", NULL};

/* Is the '.' at byte i an abbreviation or a decimal point, not a sentence end? */
static int dot_is_not_end(const unsigned char *s, size_t len, size_t i) {
    if (i + 1 < len && isdigit(s[i + 1]) && i > 0 && isdigit(s[i - 1])) return 1; /* 3.14 */
    size_t b = i;
    while (b > 0 && (isalpha(s[b - 1]) || s[b - 1] == '.')) b--;
    size_t wl = i - b;
    if (wl == 0 || wl > 6) return 0;
    if (wl == 1 && isupper(s[b])) return 1; /* an initial: "J. K. Rowling" */
    char w[8];
    for (size_t k = 0; k < wl; k++) w[k] = (char)tolower(s[b + k]);
    w[wl] = 0;
    for (int k = 0; abbrevs[k]; k++)
        if (!strcmp(w, abbrevs[k])) return 1;
    return 0;
}

typedef struct seg { size_t b, e; int para_end; } seg;

static size_t trim_b(const unsigned char *s, size_t b, size_t e) {
    while (b < e) {
        unsigned c;
        int n = cp_at(s, e, b, &c);
        if (!is_space_cp(c)) break;
        b += n;
    }
    return b;
}
static size_t trim_e(const unsigned char *s, size_t b, size_t e) {
    while (e > b) {
        size_t k = e - 1;
        while (k > b && (s[k] & 0xc0) == 0x80) k--;
        unsigned c;
        cp_at(s, e, k, &c);
        if (!is_space_cp(c)) break;
        e = k;
    }
    return e;
}

static size_t count_cps(const unsigned char *s, size_t b, size_t e) {
    size_t n = 0;
    for (size_t i = b; i < e; i++) n += (s[i] & 0xc0) != 0x80;
    return n;
}

/* Byte offset after max_chars code points from b (or e). */
static size_t advance_cps(const unsigned char *s, size_t b, size_t e, int max_chars) {
    size_t i = b;
    int k = 0;
    while (i < e && k < max_chars) {
        unsigned c;
        i += cp_at(s, e, i, &c);
        k++;
    }
    return i;
}

typedef struct out { text_piece *v; int n, cap; } out;

static int push(out *o, const unsigned char *s, size_t b, size_t e, int pause) {
    b = trim_b(s, b, e);
    e = trim_e(s, b, e);
    if (b >= e) {
        if (o->n > 0 && pause > o->v[o->n - 1].pause_after_ms) o->v[o->n - 1].pause_after_ms = pause;
        return 0;
    }
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 16;
        text_piece *v = realloc(o->v, sizeof *v * cap);
        if (!v) return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = (text_piece){b, e, pause};
    return 0;
}

/* Cut one over-long sentence [b, e) into pieces of at most max_chars. */
static int cut_long(out *o, const unsigned char *s, size_t b, size_t e, const text_split_params *p, int last_pause) {
    while (b < e) {
        b = trim_b(s, b, e);
        if (b >= e) break;
        if ((int)count_cps(s, b, e) <= p->max_chars) return push(o, s, b, e, last_pause);
        size_t lim = advance_cps(s, b, e, p->max_chars);
        size_t cut = 0, space = 0;
        for (size_t i = b; i < lim;) {
            unsigned c;
            int n = cp_at(s, e, i, &c);
            if (is_clause(c) && i + n > b + 1) cut = i + n;
            if (is_space_cp(c) && i > b) space = i;
            i += n;
        }
        size_t at = cut > b ? cut : space > b ? space : lim;
        if (push(o, s, b, at, p->sentence_pause_ms / 2)) return -1;
        b = at;
    }
    return 0;
}

qtts_status text_split(const char *text, size_t len, const text_split_params *pp, text_piece **pieces, int *n,
                       qtts_error *e) {
    text_split_params p = pp ? *pp : text_split_default_params();
    *pieces = NULL;
    *n = 0;
    if (p.max_chars < 16) return err_set(e, QTTS_ERR_INVALID_ARG, "text split: max_chars must be >= 16 (got %d)", p.max_chars);
    const unsigned char *s = (const unsigned char *)text;
    /* 1. sentences */
    seg *sent = NULL;
    int ns = 0, cs = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len;) {
        unsigned c = 0;
        int w = i < len ? cp_at(s, len, i, &c) : 1;
        size_t end = 0;
        int para = 0, found = 0;
        if (i == len) {
            end = len;
            found = 1;
        } else if (c == '\n') {
            end = i;
            found = 1;
            size_t j = i + 1;
            while (j < len && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) j++;
            para = j < len && s[j] == '\n';
        } else if (is_cjk_end(c) || (is_latin_end(c) && !(c == '.' && dot_is_not_end(s, len, i)))) {
            size_t j = i + w;
            while (j < len) { /* repeated marks and closers stay with the sentence: ?!", …) */
                unsigned d;
                int dw = cp_at(s, len, j, &d);
                if (!(is_latin_end(d) || is_cjk_end(d) || is_closer(d))) break;
                j += dw;
            }
            unsigned d = 0;
            if (j < len) cp_at(s, len, j, &d);
            if (is_cjk_end(c) || j == len || is_space_cp(d)) {
                end = j;
                found = 1;
                w = (int)(j - i);
            }
        }
        if (found) {
            if (ns == cs) {
                cs = cs ? cs * 2 : 32;
                seg *ns_ = realloc(sent, sizeof *sent * cs);
                if (!ns_) {
                    free(sent);
                    return err_set(e, QTTS_ERR_NOMEM, "out of memory splitting text");
                }
                sent = ns_;
            }
            sent[ns++] = (seg){start, end, para};
            start = end;
            if (i == len) break;
        }
        i += w;
    }
    /* 2. group sentences up to max_chars; paragraph ends always close a piece */
    out o = {0};
    size_t gb = 0, ge = 0;
    int have = 0, rc = 0;
    for (int k = 0; k < ns && !rc; k++) {
        size_t b = trim_b(s, sent[k].b, sent[k].e), en = trim_e(s, b, sent[k].e);
        size_t nc = count_cps(s, b, en);
        if (b >= en) {
            if (sent[k].para_end && have) {
                rc = push(&o, s, gb, ge, p.paragraph_pause_ms);
                have = 0;
            } else if (sent[k].para_end && o.n) {
                if (o.v[o.n - 1].pause_after_ms < p.paragraph_pause_ms) o.v[o.n - 1].pause_after_ms = p.paragraph_pause_ms;
            }
            continue;
        }
        /* the group's real length: the whitespace between its sentences counts too */
        if (have && count_cps(s, gb, en) > (size_t)p.max_chars) {
            rc = push(&o, s, gb, ge, p.sentence_pause_ms);
            have = 0;
        }
        if (!rc && nc > (size_t)p.max_chars) {
            rc = cut_long(&o, s, b, en, &p, sent[k].para_end ? p.paragraph_pause_ms : p.sentence_pause_ms);
            continue;
        }
        if (!have) {
            gb = b;
            have = 1;
        }
        ge = en;
        if (sent[k].para_end) {
            rc = push(&o, s, gb, ge, p.paragraph_pause_ms);
            have = 0;
        }
    }
    if (!rc && have) rc = push(&o, s, gb, ge, 0);
    free(sent);
    if (rc) {
        free(o.v);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory splitting text");
    }
    if (o.n) o.v[o.n - 1].pause_after_ms = 0;
    *pieces = o.v;
    *n = o.n;
    return QTTS_OK;
}

/* ---------------------------------------------------------------- incremental text */

size_t text_trim_begin(const char *text, size_t b, size_t e) { return trim_b((const unsigned char *)text, b, e); }
size_t text_trim_end(const char *text, size_t b, size_t e) { return trim_e((const unsigned char *)text, b, e); }

int text_sentence_end(const char *text, size_t len, int final, size_t *end, size_t *next) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        unsigned c = 0;
        int w = cp_at(s, len, i, &c);
        if (i + w > len) return final ? (*end = *next = len, 1) : 0; /* a character still arriving */
        if (c == '\n') {
            *end = *next = i;
            return 1;
        }
        if (is_cjk_end(c) || is_latin_end(c)) {
            if (c == '.' && i + 1 == len && !final) return 0; /* 3. may become 3.14 */
            if (!(c == '.' && dot_is_not_end(s, len, i))) {
                size_t j = i + w;
                while (j < len) {
                    unsigned d;
                    int dw = cp_at(s, len, j, &d);
                    if (!(is_latin_end(d) || is_cjk_end(d) || is_closer(d))) break;
                    j += dw;
                }
                if (j == len && !final) return 0; /* more marks or closers may follow */
                unsigned d = 0;
                if (j < len) cp_at(s, len, j, &d);
                if (is_cjk_end(c) || j == len || is_space_cp(d)) {
                    *end = *next = j;
                    return 1;
                }
            }
        }
        i += w;
    }
    if (!final) return 0;
    *end = *next = len;
    return 1;
}

int text_gap_is_paragraph(const char *gap, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (gap[i] != '\n') continue;
        size_t j = i + 1;
        while (j < len && (gap[j] == ' ' || gap[j] == '\t' || gap[j] == '\r')) j++;
        if (j < len && gap[j] == '\n') return 1;
    }
    return 0;
}
