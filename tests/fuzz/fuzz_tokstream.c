/* Fuzz target: incremental tokenization (src/model/tok_stream.c) against the
 * whole text tokenized at once (tok_encode), with the Qwen2 vocabulary,
 * merges and added tokens of the e2e_string test checkpoint. Input: byte 0
 * bit 0 picks the alternative split regex, bit 1 wraps the text in the chat
 * template (a head pushed first, a tail given at the end), bits 2-7 seed the
 * piece sizes (1 to 1 + (byte 1 % 64) bytes, splits inside UTF-8 characters
 * included); then the text. Checks: after every push the committed ids are a
 * prefix of tok_encode's ids of the whole text; the end gives exactly those
 * ids; text tok_encode refuses as invalid UTF-8 is refused by a push or the
 * end, and text it accepts is never refused. */
#include "fuzz.h"
#include "model/tok_stream.h"

static text_tokenizer *tok[2];

static const text_tokenizer *get(int alt) {
    if (!tok[alt]) {
        qtts_error e;
        memset(&e, 0, sizeof e);
        if (tok_load(&tok[alt], fuzz_repo_path("tests/golden/data/e2e_string"), alt, &e)) {
            fprintf(stderr, "fuzz_tokstream: %s (run from the repository root or set QTTS_REPO)\n", e.msg);
            abort();
        }
    }
    return tok[alt];
}

static const char head[] = "<|im_start|>assistant\n";
static const char tail[] = "<|im_end|>\n<|im_start|>assistant\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const text_tokenizer *t = get(data[0] & 1);
    const int tmpl = data[0] >> 1 & 1;
    uint32_t rng = (uint32_t)(data[0] >> 2) * 2654435761u + 1;
    const size_t maxp = 1 + data[1] % 64;
    const char *text = (const char *)data + 2;
    const size_t n = size - 2;
    /* the reference: the whole text at once */
    const size_t hl = tmpl ? strlen(head) : 0, tl = tmpl ? strlen(tail) : 0;
    char *whole = malloc(hl + n + tl + 1);
    if (!whole) return 0;
    memcpy(whole, head, hl);
    memcpy(whole + hl, text, n);
    memcpy(whole + hl + n, tail, tl);
    qtts_error e;
    memset(&e, 0, sizeof e);
    int32_t *want = NULL;
    int n_want = 0;
    const qtts_status sw = tok_encode(t, whole, hl + n + tl, &want, &n_want, &e);
    free(whole);
    FUZZ_CHECK(sw == QTTS_OK || sw == QTTS_ERR_INPUT);
    tok_stream s;
    tok_stream_init(&s, t);
    qtts_status st = tmpl ? tok_stream_push(&s, head, hl, &e) : QTTS_OK;
    for (size_t i = 0; !st && i < n;) {
        rng = rng * 1103515245u + 12345u;
        size_t k = 1 + (rng >> 16) % maxp;
        if (k > n - i) k = n - i;
        st = tok_stream_push(&s, text + i, k, &e);
        i += k;
        if (!st && sw == QTTS_OK) {
            FUZZ_CHECK(s.n_ids <= n_want);
            FUZZ_CHECK(s.n_ids == 0 || !memcmp(s.ids, want, sizeof(int32_t) * (size_t)s.n_ids));
        }
    }
    if (!st) st = tok_stream_end(&s, s.n_pushed, tmpl ? tail : NULL, tl, &e);
    if (sw == QTTS_OK) {
        FUZZ_CHECK(st == QTTS_OK);
        FUZZ_CHECK(s.n_ids == n_want && (n_want == 0 || !memcmp(s.ids, want, sizeof(int32_t) * (size_t)n_want)));
    } else {
        FUZZ_CHECK(st == QTTS_ERR_INPUT);
    }
    tok_stream_free(&s);
    free(want);
    return 0;
}
