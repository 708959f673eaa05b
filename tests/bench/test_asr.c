/* Integration test of the WER pipeline with a real speech recogniser from
 * Debian: pocketsphinx (en-us model) through tools/bench/asr-pocketsphinx.sh,
 * driven by asr_transcribe as qtts-bench --asr-cmd drives it. Inputs:
 * recorded speech shipped by pocketsphinx-testdata ("go forward ten meters"),
 * written as a 24 kHz WAV by qtts's own writer like the quality arm does,
 * and espeak-ng speech. Each part says SKIP with the package to install when
 * a tool is missing (scripts/install-bench-deps.sh installs them all). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "test.h"

static int have(const char *prog) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

static const char *script(void) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/../tools/bench/asr-pocketsphinx.sh", test_dir());
    return p;
}

/* 16 kHz s16 raw -> 24 kHz float (linear interpolation) -> WAV via qtts. */
static int raw16_to_wav24(const char *raw, const char *wav) {
    FILE *f = fopen(raw, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    const long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    const size_t n = (size_t)bytes / 2;
    int16_t *in = malloc(n * 2 + 2);
    const size_t m = n * 3 / 2;
    float *out = malloc(m * sizeof(float) + 4);
    int rc = -1;
    if (in && out && fread(in, 2, n, f) == n) {
        for (size_t i = 0; i < m; i++) {
            const double t = i * 2.0 / 3.0;
            const size_t k = (size_t)t;
            const double fr = t - k, a = in[k], b = k + 1 < n ? in[k + 1] : in[k];
            out[i] = (float)((a + fr * (b - a)) / 32768.0);
        }
        qtts_audio_writer *w = NULL;
        char err[256];
        if (qtts_audio_writer_open(&w, wav, QTTS_FILE_WAV, QTTS_SAMPLE_S16, 24000, err, sizeof err) == QTTS_OK) {
            rc = qtts_audio_writer_write(w, out, m) == QTTS_OK ? 0 : -1;
            if (qtts_audio_writer_close(w) != QTTS_OK) rc = -1;
        }
    }
    fclose(f);
    free(in);
    free(out);
    return rc;
}

int main(void) {
    const char *missing = !have("pocketsphinx_continuous") ? "pocketsphinx"
                          : access("/usr/share/pocketsphinx/model/en-us/en-us.lm.bin", R_OK) ? "pocketsphinx-en-us"
                          : !have("sox")                                                     ? "sox"
                                                                                             : NULL;
    if (missing) {
        test_skip("ASR integration", "%s is not installed (apt-get install %s, or scripts/install-bench-deps.sh)",
                  missing, missing);
        return test_finish();
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "sh '%s' {wav}", script());
    char wav[64];
    snprintf(wav, sizeof wav, "/tmp/qtts-test-asr-%d.wav", (int)getpid());
    const char *raw = "/usr/share/pocketsphinx/test/data/goforward.raw";
    if (access(raw, R_OK)) {
        test_skip("ASR on recorded speech", "no recording (apt-get install pocketsphinx-testdata)");
    } else if (raw16_to_wav24(raw, wav)) {
        test_report("ASR on recorded speech", 0, "cannot write %s", wav);
    } else {
        char err[256] = "";
        char *t = asr_transcribe(cmd, wav, err, sizeof err);
        int n = 0, e = 0;
        /* the reference written as a person would: digits, capitals, punctuation */
        const double w = t ? wer_compute("Go forward 10 meters.", t, &n, &e) : 1.0;
        CHECK("ASR on recorded speech: WER <= 0.25", t && w <= 0.25, "transcript \"%s\" (%s), WER %.3f", t ? t : "",
              err, w);
        printf("# recorded: \"%s\", WER %.3f\n", t ? t : "", w);
        free(t);
    }
    if (!have("espeak-ng")) {
        test_skip("ASR on espeak-ng speech", "espeak-ng is not installed (apt-get install espeak-ng)");
    } else {
        char sh[512];
        snprintf(sh, sizeof sh, "espeak-ng -v en-us+m1 -s 160 -p 40 -w '%s' 'I want to go home.'", wav);
        if (system(sh) != 0) {
            test_report("ASR on espeak-ng speech", 0, "espeak-ng failed");
        } else {
            char err[256] = "";
            char *t = asr_transcribe(cmd, wav, err, sizeof err);
            const double w = t ? wer_compute("I want to go home.", t, NULL, NULL) : 1.0;
            /* pocketsphinx's en-us model recognises espeak-ng's formant voice
             * poorly (this phrase and voice: "i want to go go", WER 0.2; most
             * phrases score worse), against 0 on the recording above. The
             * wrapper resamples without dither (sox -D), so it is repeatable. */
            CHECK("ASR on espeak-ng speech: WER <= 0.5", t && w <= 0.5, "transcript \"%s\" (%s), WER %.3f", t ? t : "",
                  err, w);
            printf("# espeak-ng: \"%s\", WER %.3f\n", t ? t : "", w);
            free(t);
        }
    }
    unlink(wav);
    return test_finish();
}
