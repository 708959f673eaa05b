/* codec_stream_prime: priming a stream with reference frames leaves the same
 * state, bit for bit, as decoding them (codec_stream_decode), on each golden
 * speech tokenizer, for lengths below, at and above the convolutions' reach
 * (where the shortcut starts) and across the decoder's chunk cap; the last
 * sample is the one decode writes, and the frames decoded next are the same. */
#include "model/codec_decoder.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CASES[] = {"custom_voice", "base_clone", "e2e_string", "voice_design"};

static void check(const codec_decoder *d, const char *cas, int n) {
    enum { NEXT = 5 };
    const int Q = codec_decoder_n_codebooks(d), K = codec_decoder_codebook_size(d);
    const int spf = codec_decoder_samples_per_frame(d);
    int32_t *codes = malloc(sizeof(int32_t) * (size_t)(n + NEXT) * Q);
    float *pa = malloc(sizeof(float) * (size_t)(n + NEXT) * spf), *pb = malloc(sizeof(float) * NEXT * spf);
    codec_stream *a = NULL, *b = NULL;
    qtts_error e = {0};
    for (int i = 0; i < (n + NEXT) * Q; i++) codes[i] = (int32_t)(((unsigned)i * 2654435761u >> 7) % (unsigned)K);
    float last = -9.0f;
    codec_snapshot sa = {0}, sb = {0};
    int ok = codes && pa && pb && codec_stream_new(d, &a, &e) == QTTS_OK && codec_stream_new(d, &b, &e) == QTTS_OK &&
             codec_stream_decode(a, codes, n, pa, &e) == QTTS_OK && codec_stream_prime(b, codes, n, &last, &e) == QTTS_OK &&
             codec_stream_save(a, &sa, &e) == QTTS_OK && codec_stream_save(b, &sb, &e) == QTTS_OK;
    char name[96];
    snprintf(name, sizeof name, "%s/prime_%d/state", cas, n);
    CHECK(name,
          ok && sa.n == sb.n && sa.pos == sb.pos && sa.kv_len == sb.kv_len && !memcmp(sa.state, sb.state, sizeof(float) * sa.n),
          "%s", ok ? "the primed state differs from the decoded one" : e.msg);
    snprintf(name, sizeof name, "%s/prime_%d/last_sample", cas, n);
    CHECK(name, ok && !memcmp(&last, &pa[(size_t)n * spf - 1], sizeof last), "%g vs %g", last,
          ok ? pa[(size_t)n * spf - 1] : 0.0f);
    ok = ok && codec_stream_decode(a, codes + (size_t)n * Q, NEXT, pa + (size_t)n * spf, &e) == QTTS_OK &&
         codec_stream_decode(b, codes + (size_t)n * Q, NEXT, pb, &e) == QTTS_OK;
    snprintf(name, sizeof name, "%s/prime_%d/next_frames", cas, n);
    CHECK(name, ok && !memcmp(pa + (size_t)n * spf, pb, sizeof(float) * NEXT * spf), "%s",
          ok ? "the frames after the primed reference differ" : e.msg);
    codec_snapshot_free(&sa);
    codec_snapshot_free(&sb);
    codec_stream_free(a);
    codec_stream_free(b);
    free(codes), free(pa), free(pb);
}

int main(void) {
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        codec_decoder *d = NULL;
        qtts_error e = {0};
        if (codec_decoder_load(&d, test_path("golden/data/%s/speech_tokenizer", CASES[ci]), 1, &e) != QTTS_OK) {
            test_skip(CASES[ci], "%s", e.msg);
            continue;
        }
        static const int lens[] = {1, 11, 12, 13, 14, 40, 150};
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) check(d, CASES[ci], lens[k]);
        codec_decoder_free(d);
    }
    return test_finish();
}
