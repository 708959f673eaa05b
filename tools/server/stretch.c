/* Time stretch through the Rubber Band library (see stretch.h): real-time
 * mode, finer (R3) engine, formants and pitch kept, no threads of its own.
 * The start is padded as the library asks and its start delay dropped, so the
 * output lines up with the input and is about len / speed samples long. */
#include "stretch.h"

#include <rubberband/rubberband-c.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 1024

struct stretcher {
    RubberBandState rb;
    double speed;
    size_t to_drop;  /* output samples still to drop (start delay) */
    size_t n_in;     /* input samples fed (pad excluded) */
    size_t n_out;    /* output samples given back */
    float *out;
    size_t cap;
};

stretcher *stretch_new(double speed, int rate) {
    if (!(speed >= STRETCH_MIN_SPEED && speed <= STRETCH_MAX_SPEED)) return NULL;
    stretcher *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->speed = speed;
    RubberBandOptions opt = RubberBandOptionProcessRealTime | RubberBandOptionEngineFiner |
                            RubberBandOptionThreadingNever | RubberBandOptionFormantPreserved |
                            RubberBandOptionPitchHighConsistency;
    st->rb = rubberband_new((unsigned)rate, 1, opt, 1.0 / speed, 1.0);
    if (!st->rb) {
        free(st);
        return NULL;
    }
    rubberband_set_max_process_size(st->rb, BLOCK);
    const unsigned pad = rubberband_get_preferred_start_pad(st->rb);
    st->to_drop = rubberband_get_start_delay(st->rb);
    float zeros[BLOCK] = {0};
    for (unsigned done = 0; done < pad;) {
        unsigned k = pad - done < BLOCK ? pad - done : BLOCK;
        const float *ch[1] = {zeros};
        rubberband_process(st->rb, ch, k, 0);
        done += k;
    }
    return st;
}

/* Move what the library has ready into st->out after *n. */
static int collect(stretcher *st, size_t *n) {
    for (;;) {
        int avail = rubberband_available(st->rb);
        if (avail <= 0) return 0;
        if (*n + (size_t)avail > st->cap) {
            size_t cap = st->cap ? st->cap : 8192;
            while (cap < *n + (size_t)avail) cap *= 2;
            float *o = realloc(st->out, sizeof(float) * cap);
            if (!o) return -1;
            st->out = o;
            st->cap = cap;
        }
        float *ch[1] = {st->out + *n};
        size_t got = rubberband_retrieve(st->rb, ch, (unsigned)avail);
        if (st->to_drop) {
            size_t d = got < st->to_drop ? got : st->to_drop;
            memmove(st->out + *n, st->out + *n + d, sizeof(float) * (got - d));
            got -= d;
            st->to_drop -= d;
        }
        *n += got;
    }
}

int stretch_process(stretcher *st, const float *in, size_t n, int final, const float **out, size_t *n_out) {
    size_t have = 0;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < BLOCK ? n - done : BLOCK;
        const float *ch[1] = {in + done};
        rubberband_process(st->rb, ch, (unsigned)k, 0);
        done += k;
        if (collect(st, &have)) return -1;
    }
    st->n_in += n;
    if (final) {
        /* the library holds back about its latency: push silence through
         * until the output reaches len / speed, then cut it there */
        const size_t want = (size_t)((double)st->n_in / st->speed + 0.5);
        float zeros[BLOCK] = {0};
        const float *ch[1] = {zeros};
        for (int guard = 0; st->n_out + have < want && guard < 4096; guard++) {
            rubberband_process(st->rb, ch, BLOCK, 0);
            if (collect(st, &have)) return -1;
        }
        if (st->n_out + have > want) have = want > st->n_out ? want - st->n_out : 0;
    }
    st->n_out += have;
    *out = st->out;
    *n_out = have;
    return 0;
}

void stretch_free(stretcher *st) {
    if (!st) return;
    if (st->rb) rubberband_delete(st->rb);
    free(st->out);
    free(st);
}

const char *stretch_library(void) { return "Rubber Band (real-time, R3 engine)"; }
