/* Word error rate for the quality arm: text normalisation (documented in
 * docs/BENCH.md, "WER") and a token-level Levenshtein distance.
 * Dataflow: UTF-8 text -> NFKC + case fold (utf8proc) -> numbers spelled out
 * in English words -> punctuation and symbols removed, CJK characters split
 * into single tokens -> tokens; WER = (S + D + I) / reference tokens. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "bench.h"

/* ---------------------------------------------------------------- numbers */

static const char *const ones[20] = {"zero",    "one",     "two",       "three",    "four",
                                     "five",    "six",     "seven",     "eight",    "nine",
                                     "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                                     "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
static const char *const tens[10] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                                     "ninety"};
static const char *const scales[7] = {"", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion"};

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_word(sbuf *b, const char *w) {
    if (b->n && b->p[b->n - 1] != ' ') sb_add(b, " ", 1);
    sb_add(b, w, strlen(w));
}

static void below_1000(sbuf *b, int v) {
    if (v >= 100) {
        sb_word(b, ones[v / 100]);
        sb_word(b, "hundred");
        v %= 100;
        if (!v) return;
    }
    if (v < 20) sb_word(b, ones[v]);
    else {
        sb_word(b, tens[v / 10]);
        if (v % 10) sb_word(b, ones[v % 10]);
    }
}

static void digits_words(sbuf *b, const char *d, size_t n) {
    for (size_t i = 0; i < n; i++) sb_word(b, ones[d[i] - '0']);
}

static void integer_words(sbuf *b, const char *d, size_t n) {
    if (n == 0) return;
    if ((n > 1 && d[0] == '0') || n > 18) { /* "007", very long numbers: digit by digit */
        digits_words(b, d, n);
        return;
    }
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (unsigned)(d[i] - '0');
    if (v == 0) {
        sb_word(b, "zero");
        return;
    }
    int groups[7], ng = 0;
    while (v > 0) groups[ng++] = (int)(v % 1000), v /= 1000;
    for (int g = ng - 1; g >= 0; g--) {
        if (!groups[g]) continue;
        below_1000(b, groups[g]);
        if (g) sb_word(b, scales[g]);
    }
}

void wer_number_words(const char *digits, size_t n, char *out, size_t out_size) {
    sbuf b = {0};
    integer_words(&b, digits, n);
    snprintf(out, out_size, "%s", b.p ? b.p : "");
    free(b.p);
}

/* Turn the last word of b into its ordinal ("three" -> "third"). */
static void make_ordinal(sbuf *b) {
    if (!b->n) return;
    size_t s = b->n;
    while (s > 0 && b->p[s - 1] != ' ') s--;
    char last[32];
    snprintf(last, sizeof last, "%s", b->p + s);
    static const char *const irregular[][2] = {{"one", "first"}, {"two", "second"}, {"three", "third"},
                                               {"five", "fifth"}, {"eight", "eighth"}, {"nine", "ninth"},
                                               {"twelve", "twelfth"}};
    b->n = s;
    b->p[s] = 0;
    for (size_t i = 0; i < sizeof irregular / sizeof irregular[0]; i++)
        if (strcmp(last, irregular[i][0]) == 0) {
            sb_add(b, irregular[i][1], strlen(irregular[i][1]));
            return;
        }
    const size_t l = strlen(last);
    if (l && last[l - 1] == 'y') {
        sb_add(b, last, l - 1);
        sb_add(b, "ieth", 4);
    } else {
        sb_add(b, last, l);
        sb_add(b, "th", 2);
    }
}

/* ---------------------------------------------------------------- normalise */

static int is_cjk(utf8proc_int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x3040 && c <= 0x30FF) || (c >= 0x31F0 && c <= 0x31FF);
}

static int is_wordchar(utf8proc_int32_t c) {
    const utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* English titles and a few common abbreviations, as whole tokens, spelled as
 * a recogniser writes them. */
static char *expand_abbreviations(char *s) {
    static const char *const ab[][2] = {{"dr", "doctor"}, {"mr", "mister"}, {"mrs", "missus"},
                                        {"jr", "junior"}, {"vs", "versus"}, {"etc", "et cetera"}};
    if (!s) return s;
    sbuf b = {0};
    sb_add(&b, "", 0);
    for (char *save = NULL, *t = strtok_r(s, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        const char *w = t;
        for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
            if (strcmp(t, ab[i][0]) == 0) w = ab[i][1];
        sb_word(&b, w);
    }
    free(s);
    return b.p ? b.p : strdup("");
}

char *wer_normalize(const char *text) {
    utf8proc_uint8_t *folded = NULL;
    if (!text) text = "";
    utf8proc_ssize_t fl = utf8proc_map((const utf8proc_uint8_t *)text, 0, &folded,
                                       UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                           UTF8PROC_CASEFOLD);
    if (fl < 0) return strdup("");
    sbuf b = {0};
    sb_add(&b, "", 0);
    const char *s = (const char *)folded;
    size_t i = 0, n = (size_t)fl;
    int in_word = 0;
    while (i < n) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch >= '0' && ch <= '9') {
            /* a number: digits with thousands commas, an optional decimal part,
             * an optional ordinal suffix */
            char dig[64];
            size_t nd = 0, j = i;
            while (j < n && nd < sizeof dig - 1) {
                if (s[j] >= '0' && s[j] <= '9') dig[nd++] = s[j++];
                else if (s[j] == ',' && j + 3 < n + 0 && s[j + 1] >= '0' && s[j + 1] <= '9' && s[j + 2] >= '0' &&
                         s[j + 2] <= '9' && s[j + 3] >= '0' && s[j + 3] <= '9' &&
                         !(j + 4 < n && s[j + 4] >= '0' && s[j + 4] <= '9'))
                    j++;
                else break;
            }
            if (in_word) sb_add(&b, " ", 1);
            integer_words(&b, dig, nd);
            if (j + 1 < n && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
                sb_word(&b, "point");
                j++;
                size_t f0 = j;
                while (j < n && s[j] >= '0' && s[j] <= '9') j++;
                digits_words(&b, s + f0, j - f0);
            } else if (j + 1 < n && ((s[j] == 's' && s[j + 1] == 't') || (s[j] == 'n' && s[j + 1] == 'd') ||
                                     (s[j] == 'r' && s[j + 1] == 'd') || (s[j] == 't' && s[j + 1] == 'h')) &&
                       !(j + 2 < n && is_wordchar((unsigned char)s[j + 2]))) {
                make_ordinal(&b);
                j += 2;
            }
            sb_add(&b, " ", 1);
            in_word = 0;
            i = j;
            continue;
        }
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) {
            i++;
            continue;
        }
        if (c == '%') {
            sb_word(&b, "percent");
            sb_add(&b, " ", 1);
            in_word = 0;
        } else if (c == '&') {
            sb_word(&b, "and");
            sb_add(&b, " ", 1);
            in_word = 0;
        } else if ((c == '\'' || c == 0x2019) && in_word && i + (size_t)k < n &&
                   is_wordchar((unsigned char)s[i + (size_t)k]) && (unsigned char)s[i + (size_t)k] < 0x80) {
            sb_add(&b, "'", 1); /* apostrophe inside a word: don't, o'clock */
        } else if (is_cjk(c)) {
            if (b.n && b.p[b.n - 1] != ' ') sb_add(&b, " ", 1);
            sb_add(&b, s + i, (size_t)k);
            sb_add(&b, " ", 1);
            in_word = 0;
        } else if (is_wordchar(c)) {
            sb_add(&b, s + i, (size_t)k);
            in_word = 1;
        } else {
            if (b.n && b.p[b.n - 1] != ' ') sb_add(&b, " ", 1);
            in_word = 0;
        }
        i += (size_t)k;
    }
    free(folded);
    /* collapse and trim spaces */
    char *o = b.p ? b.p : strdup("");
    size_t w = 0;
    for (size_t r = 0; o && o[r]; r++) {
        if (o[r] == ' ' && (w == 0 || o[w - 1] == ' ')) continue;
        o[w++] = o[r];
    }
    if (o) {
        while (w > 0 && o[w - 1] == ' ') w--;
        o[w] = 0;
    }
    return expand_abbreviations(o);
}

/* ---------------------------------------------------------------- distance */

static int tokenize(char *s, char ***out) {
    int n = 0, cap = 16;
    char **t = malloc(sizeof *t * (size_t)cap);
    if (!t) return -1;
    for (char *save = NULL, *w = strtok_r(s, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (n == cap) {
            cap *= 2;
            char **q = realloc(t, sizeof *t * (size_t)cap);
            if (!q) {
                free(t);
                return -1;
            }
            t = q;
        }
        t[n++] = w;
    }
    *out = t;
    return n;
}

double wer_compute(const char *ref, const char *hyp, int *n_ref, int *n_err) {
    char *r = wer_normalize(ref), *h = wer_normalize(hyp);
    char **rt = NULL, **ht = NULL;
    const int nr = r ? tokenize(r, &rt) : -1, nh = h ? tokenize(h, &ht) : -1;
    double w = 1.0;
    int err = 0;
    if (nr >= 0 && nh >= 0) {
        int *prev = malloc(sizeof(int) * (size_t)(nh + 1)), *cur = malloc(sizeof(int) * (size_t)(nh + 1));
        if (prev && cur) {
            for (int j = 0; j <= nh; j++) prev[j] = j;
            for (int i = 1; i <= nr; i++) {
                cur[0] = i;
                for (int j = 1; j <= nh; j++) {
                    const int sub = prev[j - 1] + (strcmp(rt[i - 1], ht[j - 1]) != 0);
                    const int del = prev[j] + 1, ins = cur[j - 1] + 1;
                    cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
                }
                int *t = prev;
                prev = cur;
                cur = t;
            }
            err = prev[nh];
            w = nr > 0 ? (double)err / nr : (nh > 0 ? 1.0 : 0.0);
        }
        free(prev);
        free(cur);
    }
    if (n_ref) *n_ref = nr > 0 ? nr : 0;
    if (n_err) *n_err = err;
    free(rt);
    free(ht);
    free(r);
    free(h);
    return w;
}

int cmd_wer(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: qtts-bench wer REFERENCE HYPOTHESIS\n");
        return 2;
    }
    char *a = wer_normalize(argv[1]), *b = wer_normalize(argv[2]);
    int nr, ne;
    const double w = wer_compute(argv[1], argv[2], &nr, &ne);
    printf("ref: %s\nhyp: %s\nWER %.4f (%d errors / %d words)\n", a, b, w, ne, nr);
    free(a);
    free(b);
    return 0;
}
