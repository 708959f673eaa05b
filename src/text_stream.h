/* Incremental text of one request: pieces of UTF-8 text as they arrive ->
 * segments (a sentence each, by text_split's sentence rules, when splitting
 * is on; else the whole text) -> for the current segment, the ids of
 * "<|im_start|>assistant\n{segment}" committed so far (tok_stream), and
 * the template's tail once the segment's end is certain.
 *
 * Threads: text_stream_input is called by whoever receives the text, under
 * the owner's lock; text_stream_take (same lock) hands it to the driver;
 * everything else runs on the driver alone. */
#ifndef QTTS_TEXT_STREAM_H
#define QTTS_TEXT_STREAM_H

#include <stddef.h>

#include "model/tok_stream.h"

#define TEXT_STREAM_MAX_PENDING (1 << 20) /* bytes received and not yet taken, at most */

typedef struct text_stream {
    const text_tokenizer *tok;
    int split;                /* 1: a segment per sentence */
    int sentence_pause_ms, paragraph_pause_ms;
    /* received, not yet taken (the owner's lock) */
    char *in;
    size_t in_n, in_cap;
    int in_end;
    /* the driver's */
    char *text;               /* [n] all the text taken */
    size_t n, cap;
    int ended;                /* the end was taken */
    size_t next;              /* where the next segment is looked for */
    size_t prev_e;            /* end of the last segment */
    int n_segs;               /* segments opened so far */
    int open;                 /* a segment is current: it begins at b */
    int final;                /* its end e is certain; ts holds all its ids */
    size_t b, e;
    int pause_before;         /* ms of silence before the current segment (0 for the first) */
    tok_stream ts;
    int done;                 /* the text ended and no segment is left */
} text_stream;

void text_stream_init(text_stream *s, const text_tokenizer *t, int split, int sentence_pause_ms,
                      int paragraph_pause_ms);
void text_stream_free(text_stream *s); /* accepts a zeroed s */
/* Receive n bytes and, with end, the end of the text. QTTS_ERR_INVALID_ARG
 * after the end, QTTS_ERR_LIMIT over TEXT_STREAM_MAX_PENDING untaken bytes. */
qtts_status text_stream_input(text_stream *s, const char *text, size_t n, int end, qtts_error *e);
/* 1 when text or the end was received since the last take. */
int text_stream_pending(const text_stream *s);
/* Hand what was received to the driver's copy. */
qtts_status text_stream_take(text_stream *s, qtts_error *e);
/* Advance the current segment over the text taken: push it to the
 * tokenizer, and find its end. When no segment is current, open the next
 * one if its first character has arrived (may_open: the last one's
 * generation is over), or set done at the end of the text. */
qtts_status text_stream_advance(text_stream *s, int may_open, qtts_error *e);
/* Close the current segment (final) so the next can open. */
void text_stream_close_segment(text_stream *s);
/* The current segment's committed template ids ("<|im_start|>assistant\n"
 * + text, without the tail) and, final, the whole template's. */
const int32_t *text_stream_ids(const text_stream *s, int *n_open);

#endif
