/* Fuzz target: the long-text splitter (src/text/split.c). Input: byte 0 sets
 * max_chars (16 + byte), the rest is the text; like its callers, only text
 * that passes the UTF-8 check is split. Checks: pieces are in order, inside
 * the text, cut at character boundaries, trimmed, at most max_chars code
 * points, and only whitespace lies between them; the last has no pause. */
#include "fuzz.h"
#include "model/text_tokenizer.h"
#include "text/split.h"

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Only whitespace in t[b, e): ASCII, or the Unicode spaces split.c trims
 * (U+00A0, U+2000-U+200A, U+202F, U+205F, U+3000), or NUL. */
static int only_space(const unsigned char *t, size_t b, size_t e) {
    for (size_t k = b; k < e;) {
        unsigned c = t[k];
        int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        unsigned v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        for (int i = 1; i < n && k + i < e; i++) v = (v << 6) | (t[k + i] & 0x3f);
        if (!(v == 0 || (v < 0x80 && is_space((unsigned char)v)) || v == 0xa0 || v == 0x3000 ||
              (v >= 0x2000 && v <= 0x200a) || v == 0x202f || v == 0x205f))
            return 0;
        k += (size_t)n;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    text_split_params p = text_split_default_params();
    p.max_chars = 16 + data[0];
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    qtts_error e;
    memset(&e, 0, sizeof e);
    if (tok_check_utf8(text, n, "text", &e)) return 0;
    text_piece *pc = NULL;
    int np = -1;
    if (text_split(text, n, &p, &pc, &np, &e) == QTTS_OK) {
        FUZZ_CHECK(np >= 0);
        size_t prev = 0;
        for (int i = 0; i < np; i++) {
            const size_t b = pc[i].begin, en = pc[i].end;
            FUZZ_CHECK(b >= prev && b < en && en <= n);
            FUZZ_CHECK(only_space((const unsigned char *)text, prev, b));
            FUZZ_CHECK(tok_check_utf8(text + b, en - b, "piece", &e) == QTTS_OK);
            size_t cps = 0;
            for (size_t k = b; k < en; k++) cps += ((unsigned char)text[k] & 0xC0) != 0x80;
            FUZZ_CHECK(cps <= (size_t)p.max_chars);
            FUZZ_CHECK(!is_space((unsigned char)text[b]) && !is_space((unsigned char)text[en - 1]));
            FUZZ_CHECK(pc[i].pause_after_ms >= 0);
            prev = en;
        }
        FUZZ_CHECK(only_space((const unsigned char *)text, prev, n));
        if (np) FUZZ_CHECK(pc[np - 1].pause_after_ms == 0);
    }
    free(pc);
    return 0;
}
