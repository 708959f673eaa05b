/* Long-text splitting: sentence ends in Latin and CJK scripts, abbreviations
 * and decimals kept whole, paragraphs, over-long sentences cut at clauses,
 * spaces or characters, and no text lost or duplicated. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/split.h"

/* Split and return the pieces joined with '|' in a static buffer. */
static const char *split_str(const char *t, int max_chars, int *n_out, text_piece **keep) {
    static char buf[65536];
    text_split_params p = text_split_default_params();
    p.max_chars = max_chars;
    text_piece *v = NULL;
    int n = 0;
    qtts_error e;
    if (text_split(t, strlen(t), &p, &v, &n, &e)) return "ERROR";
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < sizeof buf - 2; i++) {
        if (i) buf[k++] = '|';
        size_t l = v[i].end - v[i].begin;
        if (k + l >= sizeof buf - 1) break;
        memcpy(buf + k, t + v[i].begin, l);
        k += l;
        buf[k] = 0;
    }
    if (n_out) *n_out = n;
    if (keep) *keep = v;
    else free(v);
    return buf;
}

static void expect(const char *name, const char *text, int max_chars, const char *want) {
    const char *got = split_str(text, max_chars, NULL, NULL);
    test_report(name, !strcmp(got, want), "got \"%s\", want \"%s\"", got, want);
}

static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (int j = 1; j < k; j++)
            if (((unsigned char)s[i + j] >> 6) != 2) return 0;
        i += k;
    }
    return 1;
}

/* No text lost: the non-space bytes of the pieces, in order, equal the input's. */
static int conserves(const char *t, const text_piece *v, int n) {
    size_t i = 0;
    for (int k = 0; k < n; k++)
        for (size_t j = v[k].begin; j < v[k].end; j++) {
            if (t[j] == ' ' || t[j] == '\n') continue;
            while (t[i] == ' ' || t[i] == '\n') i++;
            if (t[i++] != t[j]) return 0;
        }
    while (t[i] == ' ' || t[i] == '\n') i++;
    return t[i] == 0;
}

int main(void) {
    expect("split/short_one_piece", "Hello world. How are you? I'm fine!", 300, "Hello world. How are you? I'm fine!");
    expect("split/sentences", "Hello world. How are you? I'm fine!", 20, "Hello world.|How are you?|I'm fine!");
    expect("split/abbrev_decimal", "Dr. Smith paid $3.50 at 5 p.m. today. Then he left.", 40,
           "Dr. Smith paid $3.50 at 5 p.m. today.|Then he left.");
    expect("split/initials", "J. K. Rowling wrote it. Mrs. Dalloway did not.", 26, "J. K. Rowling wrote it.|Mrs. Dalloway did not.");
    expect("split/quotes", "He said \"Stop!\" She ran. Why?", 16, "He said \"Stop!\"|She ran. Why?");
    expect("split/chinese", "你好。今天天气很好！我们去公园吧？", 16, "你好。今天天气很好！|我们去公园吧？");
    expect("split/japanese", "こんにちは。元気ですか？はい、元気です。", 16, "こんにちは。元気ですか？|はい、元気です。");
    expect("split/korean", "안녕하세요. 반갑습니다! 잘 지내세요?", 16, "안녕하세요. 반갑습니다!|잘 지내세요?");
    expect("split/ellipsis", "Well… maybe. Or not.", 16, "Well… maybe.|Or not.");
    expect("split/whitespace_only", " \n\t ", 300, "");
    expect("split/punct_only", "?!...", 300, "?!...");
    {
        int n = 0;
        text_piece *v = NULL;
        const char *t = "First paragraph.\n\nSecond one.\nA new line.";
        split_str(t, 300, &n, &v);
        test_report("split/paragraph_pause", n == 2 && v[0].pause_after_ms == 700 && v[1].pause_after_ms == 0,
                    "%d pieces, pauses %d/%d", n, n > 0 ? v[0].pause_after_ms : -1, n > 1 ? v[1].pause_after_ms : -1);
        free(v);
    }
    {
        /* 1000 chars of words without punctuation: cut at spaces, never inside a word */
        char t[1200];
        size_t k = 0;
        while (k < 1000) k += (size_t)snprintf(t + k, sizeof t - k, "word%zu ", k % 97);
        int n = 0;
        text_piece *v = NULL;
        split_str(t, 64, &n, &v);
        int ok = n >= 16 && conserves(t, v, n);
        for (int i = 0; i < n && ok; i++) {
            ok = v[i].end - v[i].begin <= 64 && t[v[i].end] == ' ';
            if (v[i].end == strlen(t)) ok = 1;
        }
        test_report("split/long_words", ok, "%d pieces; a piece is too long, cut a word, or text was lost", n);
        free(v);
    }
    {
        /* clause marks are preferred over spaces */
        const char *t = "one two three four, five six seven eight nine ten eleven twelve";
        const char *got = split_str(t, 30, NULL, NULL);
        test_report("split/clause_first", !strncmp(got, "one two three four,|", 20), "got \"%s\"", got);
    }
    {
        /* 500 CJK characters without punctuation: cut between characters, valid UTF-8 */
        char t[2000];
        size_t k = 0;
        for (int i = 0; i < 500; i++) k += (size_t)snprintf(t + k, sizeof t - k, "%s", i % 2 ? "语" : "言");
        int n = 0;
        text_piece *v = NULL;
        split_str(t, 100, &n, &v);
        int ok = n == 5 && conserves(t, v, n);
        for (int i = 0; i < n && ok; i++) ok = utf8_ok(t + v[i].begin, v[i].end - v[i].begin);
        test_report("split/cjk_no_punct", ok, "%d pieces", n);
        free(v);
    }
    {
        /* random mixes: nothing lost, all pieces within bounds and valid UTF-8 */
        const char *parts[] = {"Hello", " ", ".", "!", "?", "，", "。", "word", "\n", "\n\n", "3.5", "Dr.", "你好",
                               "…", ",", "\"", "Ünïcödé", "  "};
        srand(1234);
        int ok = 1;
        for (int it = 0; it < 300 && ok; it++) {
            char t[4000];
            size_t k = 0;
            int len = rand() % 200;
            for (int i = 0; i < len; i++) k += (size_t)snprintf(t + k, sizeof t - k, "%s", parts[rand() % 18]);
            int n = 0;
            text_piece *v = NULL;
            const char *r = split_str(t, 16 + rand() % 40, &n, &v);
            ok = strcmp(r, "ERROR") && conserves(t, v, n);
            for (int i = 0; i < n && ok; i++) ok = utf8_ok(t + v[i].begin, v[i].end - v[i].begin) && v[i].end > v[i].begin;
            free(v);
        }
        test_report("split/random_conservation", ok, "a random text lost or garbled characters");
    }
    return test_finish();
}
