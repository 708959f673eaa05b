/* Incremental tokenization: text that arrives in pieces (a language model's
 * output) -> the ids no later text can change, as soon as they are known.
 *
 * The ids committed, followed by those of the end, are always exactly
 * tok_encode of the whole text, whatever the pieces. A pre-tokenizer piece
 * is committed only when a later piece begins and, after that, a character
 * that is surely not whitespace has arrived (the pieces before it can no
 * longer change: every alternative of the split regex decides on characters
 * up to the first non-space after the piece), the text after the cut starts
 * with a character NFC never composes with what precedes it, and no added
 * token could still begin before the cut (a prefix of one, e.g. "<|im_", is
 * held back). CJK text without spaces is one regex piece up to its
 * punctuation, so it commits at the punctuation. */
#ifndef QTTS_MODEL_TOK_STREAM_H
#define QTTS_MODEL_TOK_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "model/text_tokenizer.h"

typedef struct tok_stream {
    const text_tokenizer *t;
    char *buf;          /* [n] text pushed and not yet committed */
    size_t n, cap;
    size_t n_pushed;    /* bytes pushed, all told */
    size_t n_committed; /* of those, bytes whose ids are committed */
    int32_t *ids;       /* [n_ids] committed ids */
    int n_ids, cap_ids;
    int ended;
} tok_stream;

void tok_stream_init(tok_stream *s, const text_tokenizer *t);
/* Free what s holds; accepts a zeroed or freed s. */
void tok_stream_free(tok_stream *s);
/* Append n bytes (any split, even inside a UTF-8 character) and commit the
 * ids that became final. QTTS_ERR_INPUT for invalid UTF-8 (the offset is
 * counted from the first byte pushed), QTTS_ERR_NOMEM. */
qtts_status tok_stream_push(tok_stream *s, const char *text, size_t n, qtts_error *e);
/* The end: the text is the first `keep` bytes pushed (keep >= n_committed:
 * only uncommitted text, e.g. trailing spaces, can be dropped), then tail[n]
 * (may be NULL); every id is committed. */
qtts_status tok_stream_end(tok_stream *s, size_t keep, const char *tail, size_t n, qtts_error *e);

#endif
