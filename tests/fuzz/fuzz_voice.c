/* Fuzz target: saved voice files, QTTSVOIC (src/model/voice_file.c), read
 * versions 1 and 2 (with the primed decoder state), read from memory and
 * from a file. A voice that loads must be within the documented limits (a
 * primed state only on an ICL voice, its floats finite), save to exactly as
 * many bytes as were read, and load again to the same bytes. */
#include <math.h>

#include "fuzz.h"
#include "model/voice_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    voice_data v;
    qtts_error e;
    memset(&e, 0, sizeof e);
    const qtts_status s = voice_load_mem(data, size, "fuzz", &v, &e);
    if (s != QTTS_OK) {
        FUZZ_CHECK(v.xvector == NULL && v.ref_codes == NULL && v.ref_text == NULL);
        return 0;
    }
    FUZZ_CHECK(v.xvector_len >= 1 && v.xvector_len <= VOICE_MAX_XVECTOR);
    for (int i = 0; i < v.xvector_len; i++) FUZZ_CHECK(isfinite(v.xvector[i]));
    FUZZ_CHECK(v.n_codebooks >= 1 && v.n_codebooks <= VOICE_MAX_CODEBOOKS);
    for (long i = 0; i < (long)v.n_ref_frames * v.n_codebooks; i++)
        FUZZ_CHECK(v.ref_codes[i] >= 0 && v.ref_codes[i] < v.codebook_size);
    FUZZ_CHECK(v.icl ? v.n_ref_frames >= 1 && v.n_ref_text_ids >= 1 : v.n_ref_frames == 0);
    if (v.primed_state) { /* version 2: the primed decoder state of an ICL voice */
        FUZZ_CHECK(v.icl && v.primed_n >= 1 && v.primed_n <= VOICE_MAX_PRIMED_FLOATS && v.primed_pos >= 0);
        FUZZ_CHECK(isfinite(v.primed_ref_last));
        for (size_t i = 0; i < v.primed_n; i++) FUZZ_CHECK(isfinite(v.primed_state[i]));
    } else {
        FUZZ_CHECK(v.primed_n == 0);
    }
    unsigned char *buf = NULL;
    size_t n = 0;
    FUZZ_CHECK(voice_save_mem(&v, &buf, &n, &e) == QTTS_OK);
    FUZZ_CHECK(n == size);
    voice_data w;
    FUZZ_CHECK(voice_load(fuzz_file("v.qvoice", buf, n), &w, &e) == QTTS_OK);
    unsigned char *buf2 = NULL;
    size_t n2 = 0;
    FUZZ_CHECK(voice_save_mem(&w, &buf2, &n2, &e) == QTTS_OK);
    FUZZ_CHECK(n2 == n && !memcmp(buf, buf2, n));
    voice_check_compatible(&v, "base", "0b6", 1024, 16, 2048, &e);
    free(buf);
    free(buf2);
    voice_free(&w);
    voice_free(&v);
    return 0;
}
