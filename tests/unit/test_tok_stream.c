/* Incremental tokenization (src/model/tok_stream.c): every one of the 330
 * golden strings of the Qwen2 tokenizer, fed in random pieces (down to one
 * byte at a time, splits inside UTF-8 characters included), commits ids that
 * are always a prefix of the whole string's ids and ends with exactly the
 * golden ids; the same inside the chat template (head, text, tail) and with
 * the alternative split regex; a prefix of an added token is held back; the
 * hold-back still commits early (most of a long text before its end);
 * invalid UTF-8 is reported at its offset; trailing spaces can be dropped at
 * the end. */
#include "model/tok_stream.h"
#include "test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct gcase {
    const char *text;
    size_t len;
} gcase;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

/* Feed head + text (in pieces: mode 0 random sizes 1..8, 1 one byte at a
 * time, 2 random sizes 1..40) + tail; 1 when the result equals want and every
 * commit was a prefix of it. *early gets the ids committed before the end. */
static int feed(const text_tokenizer *t, const char *head, const char *text, size_t len, const char *tail,
                const int32_t *want, int n_want, int mode, int *early, char *why, size_t nwhy) {
    tok_stream s;
    tok_stream_init(&s, t);
    qtts_error e;
    err_clear(&e);
    int ok = 1;
    qtts_status st = head ? tok_stream_push(&s, head, strlen(head), &e) : QTTS_OK;
    for (size_t i = 0; !st && i < len;) {
        size_t k = mode == 1 ? 1 : 1 + rnd() % (mode == 0 ? 8 : 40);
        if (k > len - i) k = len - i;
        st = tok_stream_push(&s, text + i, k, &e);
        i += k;
        if (!st && (s.n_ids > n_want || (s.n_ids && memcmp(s.ids, want, sizeof(int32_t) * (size_t)s.n_ids)))) {
            snprintf(why, nwhy, "after %zu bytes, committed ids are not a prefix of the whole text's", i);
            ok = 0;
            break;
        }
    }
    *early = s.n_ids;
    if (ok && !st) st = tok_stream_end(&s, s.n_pushed, tail, tail ? strlen(tail) : 0, &e);
    if (st) {
        snprintf(why, nwhy, "status %d: %s", st, e.msg);
        ok = 0;
    } else if (ok && (s.n_ids != n_want || (n_want && memcmp(s.ids, want, sizeof(int32_t) * (size_t)n_want)))) {
        snprintf(why, nwhy, "%d ids, want %d", s.n_ids, n_want);
        ok = 0;
    }
    tok_stream_free(&s);
    return ok;
}

static void golden_splits(const text_tokenizer *t, const gcase *cs, int n, const char *name, const char *head,
                          const char *tail) {
    int bad = 0, n_early = 0, n_multi = 0;
    char first[1600] = "";
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        /* the whole string's ids, the reference */
        const size_t hl = head ? strlen(head) : 0, tl = tail ? strlen(tail) : 0, L = hl + cs[i].len + tl;
        if (L + 1 > cap) {
            cap = 2 * (L + 1);
            buf = realloc(buf, cap);
        }
        memcpy(buf, head ? head : "", hl);
        memcpy(buf + hl, cs[i].text, cs[i].len);
        memcpy(buf + hl + cs[i].len, tail ? tail : "", tl);
        int32_t *want = NULL;
        int n_want = 0;
        qtts_error e;
        if (tok_encode(t, buf, L, &want, &n_want, &e)) continue;
        for (int mode = 0; mode < 3; mode++)
            for (int rep = 0; rep < (mode == 1 ? 1 : 3); rep++) {
                char why[1400];
                int early = 0;
                if (!feed(t, head, cs[i].text, cs[i].len, tail, want, n_want, mode, &early, why, sizeof why)) {
                    if (!bad++) snprintf(first, sizeof first, "case %d (mode %d): %s", i, mode, why);
                }
                if (mode == 1 && n_want > 6) {
                    n_multi++;
                    n_early += early > 0;
                }
            }
        free(want);
    }
    free(buf);
    char nm[128];
    snprintf(nm, sizeof nm, "%s: random splits give the whole string's ids", name);
    test_report(nm, bad == 0, "%d runs differ; first: %s", bad, first);
    /* the hold-back must not hold everything back */
    snprintf(nm, sizeof nm, "%s: ids committed before the end", name);
    test_report(nm, n_multi > 0 && n_early * 10 >= n_multi * 7, "only %d of %d strings of more than 6 ids committed any",
                n_early, n_multi);
}

static void test_added_prefix(const text_tokenizer *t) {
    tok_stream s;
    tok_stream_init(&s, t);
    qtts_error e;
    const char *a = "Say <|im_";
    tok_stream_push(&s, a, strlen(a), &e);
    const int before = s.n_ids;
    tok_stream_push(&s, "end|> now", 9, &e);
    tok_stream_end(&s, s.n_pushed, NULL, 0, &e);
    int32_t *want = NULL;
    int n_want = 0;
    tok_encode(t, "Say <|im_end|> now", 18, &want, &n_want, &e);
    const int im_end = tok_token_id(t, "<|im_end|>");
    int has = 0;
    for (int i = 0; i < s.n_ids; i++) has |= s.ids[i] == im_end;
    test_report("prefix of an added token is held back", has && s.n_ids == n_want &&
                    !memcmp(s.ids, want, sizeof(int32_t) * (size_t)n_want) && before <= 1,
                "%d ids (want %d), %d committed before, im_end seen %d", s.n_ids, n_want, before, has);
    free(want);
    tok_stream_free(&s);
}

static void test_long_commits(const text_tokenizer *t) {
    tok_stream s;
    tok_stream_init(&s, t);
    qtts_error e;
    const char *w = "streaming text arrives a few tokens at a time, ";
    for (int i = 0; i < 50; i++) tok_stream_push(&s, w, strlen(w), &e);
    const size_t held = s.n;
    test_report("a long text commits as it goes", held < 40 && s.n_ids > 400, "%zu bytes held back, %d ids committed",
                held, s.n_ids);
    tok_stream_free(&s);
    /* CJK: one regex piece up to the punctuation */
    tok_stream_init(&s, t);
    const char *c1 = "今天天气很好", *c2 = "。我们去公园吧";
    tok_stream_push(&s, c1, strlen(c1), &e);
    const int n1 = s.n_ids;
    tok_stream_push(&s, c2, strlen(c2), &e);
    /* the full stop opens the next piece ([^\r\n\p{L}\p{N}]?\p{L}+) */
    test_report("CJK commits at its punctuation", n1 == 0 && s.n_ids > 0 && s.n_committed == strlen(c1),
                "%d ids before the full stop, %d after, %zu bytes committed", n1, s.n_ids, s.n_committed);
    tok_stream_free(&s);
}

static void test_errors_and_keep(const text_tokenizer *t) {
    tok_stream s;
    tok_stream_init(&s, t);
    qtts_error e;
    err_clear(&e);
    tok_stream_push(&s, "caf\xc3", 4, &e); /* split inside é: fine */
    qtts_status st = tok_stream_push(&s, "\xa9 ok \xff", 6, &e);
    test_report("invalid UTF-8 is reported at its offset", st == QTTS_ERR_INPUT && strstr(e.msg, "offset 9"),
                "status %d: %s", st, e.msg);
    tok_stream_free(&s);
    tok_stream_init(&s, t);
    tok_stream_push(&s, "Hello world.\n  ", 15, &e);
    st = tok_stream_end(&s, 12, "<|im_end|>", 10, &e);
    int32_t *want = NULL;
    int n_want = 0;
    tok_encode(t, "Hello world.<|im_end|>", 22, &want, &n_want, &e);
    test_report("trailing spaces dropped at the end", !st && s.n_ids == n_want &&
                    !memcmp(s.ids, want, sizeof(int32_t) * (size_t)n_want), "status %d, %d ids (want %d)", st, s.n_ids,
                n_want);
    free(want);
    tok_stream_free(&s);
}

int main(void) {
    const char *dir = test_path("golden/data/e2e_string");
    text_tokenizer *t = NULL, *alt = NULL;
    qtts_error e;
    if (tok_load(&t, dir, 0, &e) || tok_load(&alt, dir, 1, &e)) {
        test_report("load the Qwen2 tokenizer", 0, "%s: %s", dir, e.msg);
        return test_finish();
    }
    json_error_t je;
    json_t *root = json_load_file(test_path("unit/data/tokenizer/tok_golden.json"), 0, &je);
    json_t *cases = root ? json_object_get(root, "cases") : NULL;
    const int n = (int)json_array_size(cases);
    test_report("golden strings", n == 330, "expected 330, found %d", n);
    gcase *cs = calloc((size_t)n + 1, sizeof *cs);
    for (int i = 0; i < n; i++) {
        json_t *s = json_object_get(json_array_get(cases, (size_t)i), "text");
        cs[i].text = json_string_value(s);
        cs[i].len = json_string_length(s);
    }
    golden_splits(t, cs, n, "golden", NULL, NULL);
    golden_splits(t, cs, n, "golden in the chat template", "<|im_start|>assistant\n",
                  "<|im_end|>\n<|im_start|>assistant\n");
    golden_splits(alt, cs, n, "golden, alternative regex", NULL, NULL);
    test_added_prefix(t);
    test_long_commits(t);
    test_errors_and_keep(t);
    free(cs);
    json_decref(root);
    tok_free(t);
    tok_free(alt);
    return test_finish();
}
