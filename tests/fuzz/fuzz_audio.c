/* Fuzz target: the reference-audio reader (src/io/audio_reader.c) on bytes
 * in memory: WAV, FLAC, OGG, MP3 or anything else libsndfile is handed
 * through its virtual I/O, as an upload reaches it. The limit is 10 s so a
 * header that claims a long clip costs little. What it returns must be as
 * long as librosa's length rule says, and finite. */
#include <math.h>

#include "fuzz.h"
#include "io/audio_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    audio_read_params p = audio_read_default_params();
    p.max_seconds = 10;
    float *pcm = NULL;
    size_t n = 0;
    audio_read_info info;
    qtts_error e;
    memset(&e, 0, sizeof e);
    if (audio_decode_24k_mem(data, size, "fuzz", &p, &pcm, &n, &info, &e) == QTTS_OK) {
        FUZZ_CHECK(info.rate_hz > 0 && info.channels > 0 && info.frames > 0);
        FUZZ_CHECK(n == audio_resampled_length((size_t)info.frames, info.rate_hz));
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(isfinite(pcm[i]));
    } else {
        FUZZ_CHECK(pcm == NULL && n == 0);
    }
    free(pcm);
    return 0;
}
