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

#endif
