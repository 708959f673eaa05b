/* Fuzz target: the text tokenizer (src/model/text_tokenizer.c) on arbitrary
 * bytes, with the Qwen2 vocabulary and merges of the e2e_string test
 * checkpoint (its added tokens included). Input: byte 0 bit 0 picks the
 * alternative split regex; the rest is the text. Checks: text that passes the
 * UTF-8 check is never refused as bad input; pre-split pieces and the decoded
 * ids of ASCII text (which NFC leaves alone) give back the text exactly. */
#include "fuzz.h"
#include "model/text_tokenizer.h"

static text_tokenizer *tok[2];

static const text_tokenizer *get(int alt) {
    if (!tok[alt]) {
        qtts_error e;
        memset(&e, 0, sizeof e);
        if (tok_load(&tok[alt], fuzz_repo_path("tests/golden/data/e2e_string"), alt, &e)) {
            fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root or set QTTS_REPO)\n", e.msg);
            abort();
        }
    }
    return tok[alt];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const text_tokenizer *t = get(data[0] & 1);
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    int ascii = 1;
    for (size_t i = 0; i < n; i++) ascii &= data[1 + i] < 0x80;
    qtts_error e;
    memset(&e, 0, sizeof e);
    const int valid = tok_check_utf8(text, n, "text", &e) == QTTS_OK;
    int32_t *ids = NULL;
    int n_ids = -1;
    qtts_status s = tok_encode(t, text, n, &ids, &n_ids, &e);
    if (valid) FUZZ_CHECK(s != QTTS_ERR_INPUT);
    else FUZZ_CHECK(s != QTTS_OK);
    if (s == QTTS_OK) {
        FUZZ_CHECK(ids != NULL && n_ids >= 0);
        for (int i = 0; i < n_ids; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < tok_vocab_size(t));
        char *out = NULL;
        size_t out_len = 0;
        FUZZ_CHECK(tok_decode(t, ids, n_ids, &out, &out_len, &e) == QTTS_OK);
        if (ascii) FUZZ_CHECK(out_len == n && !memcmp(out, text, n));
        free(out);
    }
    free(ids);
    char **pieces = NULL;
    int n_pieces = 0;
    s = tok_pretokenize(t, text, n, &pieces, &n_pieces, &e);
    if (s == QTTS_OK && ascii && !memchr(text, 0, n)) {
        size_t k = 0;
        for (int i = 0; i < n_pieces; i++) {
            const size_t l = strlen(pieces[i]);
            FUZZ_CHECK(k + l <= n && !memcmp(text + k, pieces[i], l));
            k += l;
        }
        FUZZ_CHECK(k == n);
    }
    tok_free_pieces(pieces, n_pieces);
    return 0;
}
