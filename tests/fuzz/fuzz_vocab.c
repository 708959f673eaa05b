/* Fuzz target: the flat vocab.json reader (src/model/text_tokenizer.c's fast
 * path, which bypasses jansson) against jansson's parse of the same bytes.
 * Input: a vocab.json. Checks: whatever the fast reader accepts, jansson
 * accepts too, with the same entries (strings, lengths, ids) in the same
 * order; a file the fast reader leaves alone is jansson's to accept or
 * refuse, and a file both read is read the same. */
#include "fuzz.h"
#include "model/text_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qtts_error e;
    memset(&e, 0, sizeof e);
    text_tokenizer *fast = NULL, *slow = NULL;
    const qtts_status sf = tok_vocab_parse((const char *)data, size, 0, &fast, &e);
    const qtts_status sj = tok_vocab_parse((const char *)data, size, 1, &slow, &e);
    FUZZ_CHECK(sf == QTTS_OK || sf == QTTS_ERR_FORMAT);
    FUZZ_CHECK(sj == QTTS_OK || sj == QTTS_ERR_FORMAT);
    FUZZ_CHECK((sf == QTTS_OK) == (fast != NULL) && (sj == QTTS_OK) == (slow != NULL));
    if (sf == QTTS_OK) {
        FUZZ_CHECK(sj == QTTS_OK);
        for (int k = 0;; k++) {
            const char *a = NULL, *b = NULL;
            size_t la = 0, lb = 0;
            const int32_t ia = tok_vocab_entry(fast, k, &a, &la), ib = tok_vocab_entry(slow, k, &b, &lb);
            FUZZ_CHECK(ia == ib);
            if (ia < 0) break;
            FUZZ_CHECK(la == lb && la > 0 && !memcmp(a, b, la) && a[la] == 0);
            FUZZ_CHECK(tok_token_id(fast, a) == ia || memchr(a, 0, la) != NULL);
        }
        FUZZ_CHECK(tok_vocab_size(fast) == tok_vocab_size(slow));
    }
    tok_free(fast);
    tok_free(slow);
    return 0;
}
