/* Incremental text of one request (see text_stream.h). */
#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

#include "text/split.h"

static const char head[] = "<|im_start|>assistant\n", tail[] = "<|im_end|>\n<|im_start|>assistant\n";
enum { N_TAIL_IDS = 5 }; /* <|im_end|> \n <|im_start|> assistant \n */

void text_stream_init(text_stream *s, const text_tokenizer *t, int split, int sentence_pause_ms,
                      int paragraph_pause_ms) {
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->split = split;
    s->sentence_pause_ms = sentence_pause_ms;
    s->paragraph_pause_ms = paragraph_pause_ms;
    tok_stream_init(&s->ts, t);
}

void text_stream_free(text_stream *s) {
    if (!s) return;
    free(s->in);
    free(s->text);
    tok_stream_free(&s->ts);
    memset(s, 0, sizeof *s);
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *v = realloc(*buf, c);
    if (!v) return -1;
    *buf = v;
    *cap = c;
    return 0;
}

qtts_status text_stream_input(text_stream *s, const char *text, size_t n, int end, qtts_error *e) {
    if (s->in_end) return err_set(e, QTTS_ERR_INVALID_ARG, "text sent after its end");
    if (n && !text) return err_set(e, QTTS_ERR_INVALID_ARG, "NULL text");
    if (s->in_n + n > TEXT_STREAM_MAX_PENDING)
        return err_set(e, QTTS_ERR_LIMIT, "more than %d bytes of text wait to be spoken", TEXT_STREAM_MAX_PENDING);
    if (grow(&s->in, &s->in_cap, s->in_n + n + 1)) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    if (n) memcpy(s->in + s->in_n, text, n);
    s->in_n += n;
    if (end) s->in_end = 1;
    return QTTS_OK;
}

int text_stream_pending(const text_stream *s) { return s->in_n > 0 || (s->in_end && !s->ended); }

qtts_status text_stream_take(text_stream *s, qtts_error *e) {
    if (grow(&s->text, &s->cap, s->n + s->in_n + 1)) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    if (s->in_n) memcpy(s->text + s->n, s->in, s->in_n);
    s->n += s->in_n;
    s->text[s->n] = 0;
    s->in_n = 0;
    s->ended = s->in_end;
    return QTTS_OK;
}

void text_stream_close_segment(text_stream *s) {
    s->open = s->final = 0;
    tok_stream_free(&s->ts);
    tok_stream_init(&s->ts, s->tok);
}

qtts_status text_stream_advance(text_stream *s, int may_open, qtts_error *e) {
    qtts_status st;
    if (!s->open) {
        if (s->done || !may_open) return QTTS_OK;
        const size_t b = text_trim_begin(s->text, s->next, s->n);
        if (b == s->n) {
            if (s->ended) s->done = 1;
            return QTTS_OK;
        }
        s->open = 1;
        s->final = 0;
        s->b = b;
        s->pause_before = s->n_segs == 0                                             ? 0
                          : text_gap_is_paragraph(s->text + s->prev_e, b - s->prev_e) ? s->paragraph_pause_ms
                                                                                       : s->sentence_pause_ms;
        s->n_segs++;
        if ((st = tok_stream_push(&s->ts, head, sizeof head - 1, e))) return st;
    }
    if (s->final) return QTTS_OK;
    size_t end = 0, next = 0;
    const size_t len = s->n - s->b;
    int found;
    if (s->split) found = text_sentence_end(s->text + s->b, len, s->ended, &end, &next);
    else if ((found = s->ended)) end = next = len;
    const size_t pushed = s->ts.n_pushed - (sizeof head - 1);
    if (!found) {
        if (len > pushed) return tok_stream_push(&s->ts, s->text + s->b + pushed, len - pushed, e);
        return QTTS_OK;
    }
    const size_t eb = text_trim_end(s->text, s->b, s->b + end);
    if (eb - s->b > pushed && (st = tok_stream_push(&s->ts, s->text + s->b + pushed, eb - s->b - pushed, e)))
        return st;
    if ((st = tok_stream_end(&s->ts, sizeof head - 1 + (eb - s->b), tail, sizeof tail - 1, e))) return st;
    s->final = 1;
    s->e = eb;
    s->prev_e = eb;
    s->next = s->b + next;
    return QTTS_OK;
}

const int32_t *text_stream_ids(const text_stream *s, int *n_open) {
    *n_open = s->ts.n_ids - (s->final ? N_TAIL_IDS : 0);
    return s->ts.ids;
}
