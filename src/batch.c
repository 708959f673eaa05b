/* Continuous batching (see qtts.h): a set of contexts stepped one frame at a
 * time through gen_step, which reads each weight once per step for all of
 * them. Joining runs the newcomer's prefill on its own; leaving is just
 * dropping the context from the set between steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"

struct qtts_batch {
    const qtts_model *model;
    int max;
    int n;
    qtts_context *slots[QTTS_MAX_BATCH];
    step_scratch ss;
};

qtts_status qtts_batch_new(const qtts_model *m, int max_streams, qtts_batch **out) {
    if (!m || !out || max_streams < 1 || max_streams > QTTS_MAX_BATCH) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_batch *b = calloc(1, sizeof *b);
    if (!b) return QTTS_ERR_NOMEM;
    b->model = m;
    b->max = max_streams;
    qtts_error e;
    qtts_status s = step_scratch_init(&b->ss, m, max_streams, &e);
    if (s) {
        free(b);
        return s;
    }
    *out = b;
    return QTTS_OK;
}

static void drop(qtts_batch *b, int i) {
    memmove(&b->slots[i], &b->slots[i + 1], sizeof(b->slots[0]) * (b->n - i - 1));
    b->n--;
}

void qtts_batch_free(qtts_batch *b) {
    if (!b) return;
    while (b->n) qtts_batch_remove(b, b->slots[0]);
    step_scratch_free(&b->ss);
    free(b);
}

qtts_status qtts_batch_add(qtts_batch *b, qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame,
                           void *user) {
    if (!b || !c || !p || c->model != b->model) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    qtts_status s;
    if (c->gs.active) s = err_set(&e, QTTS_ERR_INVALID_ARG, "the context already has a generation in progress");
    else if (b->n == b->max) s = err_set(&e, QTTS_ERR_LIMIT, "the batch is full (%d streams)", b->max);
    else s = gen_begin(c, p, on_frame, user, 0, &e);
    snprintf(c->err, sizeof c->err, "%s", s ? e.msg : "");
    if (s) return s;
    b->slots[b->n++] = c;
    return QTTS_OK;
}

int qtts_batch_step(qtts_batch *b) {
    if (!b || !b->n) return 0;
    gen_step(b->slots, b->n, &b->ss);
    for (int i = b->n - 1; i >= 0; i--)
        if (!b->slots[i]->gs.active) drop(b, i);
    return b->n;
}

void qtts_batch_remove(qtts_batch *b, qtts_context *c) {
    if (!b || !c) return;
    for (int i = 0; i < b->n; i++)
        if (b->slots[i] == c) {
            if (c->gs.active) {
                err_set(&c->gs.err, QTTS_ERR_CANCELLED, "removed from the batch after %d frames", c->gs.n_out);
                c->gs.status = QTTS_ERR_CANCELLED;
                c->gs.active = 0;
                c->stop_reason = QTTS_STOP_CANCELLED;
            }
            drop(b, i);
            return;
        }
}

int qtts_batch_size(const qtts_batch *b) { return b ? b->n : 0; }

int qtts_context_is_generating(const qtts_context *c) { return c && c->gs.active; }

qtts_status qtts_context_finish(qtts_context *c, int *n_frames) {
    if (!c) return QTTS_ERR_INVALID_ARG;
    if (c->gs.active) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    qtts_status s = gen_end(c, NULL, n_frames, &e);
    snprintf(c->err, sizeof c->err, "%s", s ? e.msg : "");
    return s;
}
