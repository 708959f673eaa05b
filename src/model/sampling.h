/* Token selection exactly as HF transformers 4.57 generate does it for
 * Qwen3-TTS: logits processors (repetition penalty, min-new-tokens EOS ban,
 * suppression of control ids) and, when sampling, the warpers temperature ->
 * top-k -> top-p, then softmax and a multinomial draw; greedy = argmax with
 * ties to the lowest index. The RNG (xoshiro256**, seeded through splitmix64)
 * is per stream, so the same seed gives the same output on the same build. */
#ifndef QTTS_MODEL_SAMPLING_H
#define QTTS_MODEL_SAMPLING_H

#include <stdint.h>

#include "qtts.h"
#include "util/error.h"

typedef struct sampler {
    uint64_t s[4];  /* xoshiro256** state */
    int cap;        /* scratch capacity (entries) */
    float *vals;    /* [cap] scratch */
    int *order;     /* [cap] scratch */
    double *ex;     /* [cap] scratch */
} sampler;

qtts_status sampler_init(sampler *r, int max_vocab, uint64_t seed, qtts_error *e);
void sampler_seed(sampler *r, uint64_t seed);
void sampler_free(sampler *r);
/* Uniform double in [0, 1) with 53 random bits. */
double sampler_uniform(sampler *r);

/* HF RepetitionPenaltyLogitsProcessor: for each distinct id in hist,
 * logit = logit > 0 ? logit / penalty : logit * penalty. */
void logits_repetition_penalty(float *logits, int n, const int32_t *hist, int n_hist, float penalty);

/* Choose a token from logits[n] (modified in place by the warpers). */
int sample_token(sampler *r, float *logits, int n, const qtts_sampling *sp);

/* Validate a sampling struct; names the offending field. */
qtts_status sampling_validate(const qtts_sampling *sp, const char *who, qtts_error *e);

#endif
