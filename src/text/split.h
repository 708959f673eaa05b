/* Long-text splitting: cuts UTF-8 text into pieces at sentence boundaries so
 * each piece is synthesised on its own (bounded memory, steady quality) and
 * the pieces are joined with a short pause. Dataflow: text -> sentence ends
 * (Latin . ! ? …, CJK 。！？；, line breaks) -> sentences grouped up to a
 * maximum length -> over-long sentences cut at clause marks (, ; : 、，；：),
 * then at spaces, then (text without spaces, e.g. CJK) between characters. */
#ifndef QTTS_TEXT_SPLIT_H
#define QTTS_TEXT_SPLIT_H

#include <stddef.h>

#include "util/error.h"

typedef struct text_piece {
    size_t begin, end;  /* byte range in the input, trimmed of surrounding whitespace */
    int pause_after_ms; /* silence to insert after this piece (0 after the last) */
} text_piece;

typedef struct text_split_params {
    int max_chars;         /* longest piece in code points (>= 16); default 300 */
    int sentence_pause_ms; /* pause between pieces inside a paragraph; default 300 */
    int paragraph_pause_ms;/* pause where a piece ends a paragraph (blank line); default 700 */
} text_split_params;

text_split_params text_split_default_params(void);

/* Split text[len] (valid UTF-8) into *n pieces (malloc'ed array, caller frees).
 * Whitespace-only text gives 0 pieces. */
qtts_status text_split(const char *text, size_t len, const text_split_params *p, text_piece **pieces, int *n,
                       qtts_error *e);

/* Incremental text (a sentence per segment as it arrives): where the first
 * sentence of text[len] ends, by text_split's sentence rules. Returns 1 when
 * the end is certain whatever text may follow (final: none follows), with
 * *end its end (before trimming) and *next where the text after it begins;
 * 0 when more text is needed to tell (a full stop at the end could be a
 * decimal point or be followed by closers; a line break's paragraph break). */
int text_sentence_end(const char *text, size_t len, int final, size_t *end, size_t *next);
/* 1 when the whitespace gap[len] between two sentences holds a paragraph
 * break (a blank line). */
int text_gap_is_paragraph(const char *gap, size_t len);
/* Offsets of text[b, e) trimmed of surrounding whitespace. */
size_t text_trim_begin(const char *text, size_t b, size_t e);
size_t text_trim_end(const char *text, size_t b, size_t e);

#endif
