/* Fuzz target: the tokenizer's files as tok_load reads them from a folder
 * (src/model/text_tokenizer.c): vocab.json (the flat fast reader, or
 * jansson), merges.txt and tokenizer_config.json's added tokens. Input: byte
 * 0 bit 0 picks the alternative split regex; then vocab.json
 * `\n==MERGES==\n` merges.txt, optionally `\n==CONFIG==\n`
 * tokenizer_config.json (absent: no file, which tok_load allows). Checks: a
 * loaded tokenizer encodes a fixed text (plain, added-token look-alikes,
 * non-ASCII) to ids inside its vocabulary, or refuses it with a status (a
 * byte with no token), and decodes those ids again. */
#include "fuzz.h"
#include "model/text_tokenizer.h"

static const char *texts[] = {"Hello world, 123!", "<|im_start|>assistant\nHi<|im_end|>\n", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                              "  spaces\tand\nlines  "};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *part[3];
    size_t len[3];
    const int np = fuzz_split(data + 1, size - 1, "\n==MERGES==\n", part, len, 2);
    if (np < 2) return 0;
    const uint8_t *cfg = NULL;
    size_t ncfg = 0;
    const uint8_t *sub[2];
    size_t sublen[2];
    if (fuzz_split(part[1], len[1], "\n==CONFIG==\n", sub, sublen, 2) == 2) {
        len[1] = sublen[0];
        cfg = sub[1];
        ncfg = sublen[1];
    }
    fuzz_file("vocab.json", part[0], len[0]);
    fuzz_file("merges.txt", part[1], len[1]);
    fuzz_file("tokenizer_config.json", cfg, cfg ? ncfg : SIZE_MAX);
    text_tokenizer *t = NULL;
    qtts_error e;
    memset(&e, 0, sizeof e);
    const qtts_status s = tok_load(&t, fuzz_dir(), data[0] & 1, &e);
    if (s != QTTS_OK) {
        FUZZ_CHECK(t == NULL && e.msg[0]);
        return 0;
    }
    const int nv = tok_vocab_size(t);
    FUZZ_CHECK(nv >= 0 && tok_n_merges(t) >= 0 && tok_n_added(t) >= 0);
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        int32_t *ids = NULL;
        int n = 0;
        if (tok_encode(t, texts[k], strlen(texts[k]), &ids, &n, &e) == QTTS_OK) {
            for (int i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < nv && tok_token_str(t, ids[i]) != NULL);
            char *out = NULL;
            size_t on = 0;
            FUZZ_CHECK(tok_decode(t, ids, n, &out, &on, &e) == QTTS_OK);
            free(out);
        }
        free(ids);
    }
    tok_free(t);
    return 0;
}
