/* Pitch-preserving time stretch for the "speed" parameter, through Rubber
 * Band's real-time engine fed chunk by chunk (so streamed responses stay
 * streamed). speed 2.0 = twice as fast = half the samples. */
#ifndef QTTS_SERVER_STRETCH_H
#define QTTS_SERVER_STRETCH_H

#include <stddef.h>

#define STRETCH_MIN_SPEED 0.25
#define STRETCH_MAX_SPEED 4.0

typedef struct stretcher stretcher;

/* NULL on failure (out of memory). speed in [0.25, 4]. */
stretcher *stretch_new(double speed, int sample_rate_hz);
/* Feed n samples (final = 1 on the last call, n may be 0 then) and get the
 * stretched samples that are ready in *out (owned by st, valid until the
 * next call), *n_out of them. 0 ok, -1 out of memory. */
int stretch_process(stretcher *st, const float *in, size_t n, int final, const float **out, size_t *n_out);
void stretch_free(stretcher *st); /* accepts NULL */
/* "Rubber Band x.y.z" or similar, for logs. */
const char *stretch_library(void);

#endif
