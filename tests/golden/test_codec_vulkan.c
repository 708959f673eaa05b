/* The codec decoder on the Vulkan device (src/model/codec_vulkan.c) against
 * the official waveform and the CPU decoder, and streamed against whole:
 *  - golden: the device's PCM of the first frames of a golden run's codes
 *    (every op is causal, so a prefix of the codes gives a prefix of the
 *    waveform) within TOL_GOLDEN of the official waveform, the tolerance of
 *    tests/golden/test_codec_decoder.c;
 *  - device vs CPU: reported (the sums run in other orders and sin, exp and
 *    erf are the device's), within the same bound;
 *  - streamed == whole: the same codes cut into chunks of 1, 3, 4, 7, 16 and
 *    25 frames (16 is the recorded maximum: 25 goes in two pieces) give the
 *    whole pass's samples bit for bit, also after a reset;
 *  - codes from a generating stream's ring on the device (cdv_stream_link,
 *    cdv_stream_decode_ring): chunks of 5 frames numbered across the ring's
 *    end and 2^32 give the whole pass bit for bit; frames not yet made or
 *    too old for the ring are refused (the caller then uploads its copy)
 *    and leave the stream where it was.
 * Needs a Vulkan device (lavapipe in CI) and the golden data; skips without. */
#include "model/codec_decoder.h"
#include "model/codec_vulkan.h"
#include "npy.h"
#include "test.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"

#define TOL_GOLDEN 1e-4
#define MAX_FRAMES 120 /* lavapipe runs the decoder on the CPU: keep the test short */

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static int32_t *load_codes(const char *path, int *n_frames) {
    npy_array a;
    char err[256];
    if (npy_load(path, &a, err, sizeof err) != 0) return NULL;
    if (!a.is_int || a.ndim != 2 || a.shape[1] != 16) {
        npy_free(&a);
        return NULL;
    }
    int32_t *c = malloc((size_t)a.n * sizeof *c + 1);
    for (long i = 0; i < a.n; i++) c[i] = (int32_t)a.i64[i];
    *n_frames = (int)a.shape[0];
    npy_free(&a);
    return c;
}

/* Codes read from a ring on the device: frame number f in slot f % RING,
 * numbers from 2^32 - 7 (the ring's end and the 32-bit wrap inside the
 * first chunk); `whole`: the host-codes pass of the same T frames. */
#define RING 128
static void check_ring(vk_dev *dev, cdv_stream *s, const int32_t *codes, int T, const float *whole, size_t spf,
                       const char *tag) {
    qtts_error e = {0};
    char name[128];
    vk_buf ring = {0};
    _Atomic int64_t made = 0;
    const int64_t base = ((int64_t)1 << 32) - 7;
    float *pcm = malloc((size_t)T * spf * sizeof(float));
    qtts_status st = vk_buf_alloc(dev, &ring, sizeof(int32_t) * RING * 16, 0, &e);
    const cdv_code_ring cr = {&ring, RING, &made};
    if (!st) st = cdv_stream_link(s, &cr, &e);
    if (!st) st = cdv_stream_reset(s, &e);
    int refused_ok = 1, used = 0, n_used = 0;
    for (int t = 0; t < T && !st; t += 5) {
        const int n = T - t < 5 ? T - t : 5;
        for (int i = 0; i < n && !st; i++) { /* the generating stream pushes frame base + t + i */
            const int64_t f = base + t + i;
            st = vk_buf_upload(dev, &ring, sizeof(int32_t) * 16 * (size_t)(f % RING), codes + (size_t)(t + i) * 16,
                               sizeof(int32_t) * 16, &e);
            atomic_store(&made, f + (i < n - 1 ? 1 : 0)); /* the chunk's last frame not made yet */
        }
        if (st) break;
        /* not made yet: refused */
        st = cdv_stream_decode_ring(s, base + t, n, pcm + (size_t)t * spf, &used, &e);
        refused_ok &= !st && !used && cdv_stream_position_frames(s) == t;
        atomic_store(&made, base + t + n);
        if (!st) st = cdv_stream_decode_ring(s, base + t, n, pcm + (size_t)t * spf, &used, &e);
        n_used += used ? n : 0;
    }
    snprintf(name, sizeof name, "%s/ring_equals_whole", tag);
    CHECK(name, st == QTTS_OK && n_used == T && memcmp(pcm, whole, (size_t)T * spf * sizeof(float)) == 0,
          "%s; %d of %d frames from the ring, max diff %.3g", e.msg, n_used, T,
          max_abs_diff(pcm, whole, (size_t)T * spf));
    /* too old: more than the ring's slack behind the newest frame */
    atomic_store(&made, base + RING);
    const int64_t pos = cdv_stream_position_frames(s);
    if (!st) st = cdv_stream_decode_ring(s, base, 1, pcm, &used, &e);
    refused_ok &= !st && !used && cdv_stream_position_frames(s) == pos;
    snprintf(name, sizeof name, "%s/ring_refuses_unmade_and_old", tag);
    CHECK(name, st == QTTS_OK && refused_ok, "%s", e.msg);
    cdv_stream_link(s, NULL, &e);
    vk_buf_free(dev, &ring);
    free(pcm);
}

/* Decode the first max_frames frames of dir/codes.npy on the device and check them. */
static void check_run(vk_dev *dev, const codec_decoder *d, const char *tag, const char *dir, const char *wav_name,
                      int max_frames) {
    qtts_error e = {0};
    int T = 0;
    int32_t *codes = load_codes(test_path("%s/codes.npy", dir), &T);
    npy_array wav;
    char err[256];
    const int have_wav = npy_load(test_path("%s/%s", dir, wav_name), &wav, err, sizeof err) == 0 && !wav.is_int;
    if (!codes || !have_wav) {
        test_skip(tag, "no golden codes or waveform in %s", dir);
        free(codes);
        if (have_wav) npy_free(&wav);
        return;
    }
    if (T > max_frames) T = max_frames;
    const size_t spf = (size_t)codec_decoder_samples_per_frame(d), ns = (size_t)T * spf;
    float *cpu = malloc(ns * sizeof(float)), *gpu = malloc(ns * sizeof(float)), *chunked = malloc(ns * sizeof(float));
    float *ref = calloc(ns, sizeof(float));
    for (size_t i = 0; i < ns && i < (size_t)wav.n; i++) ref[i] = wav.f32[i];
    char name[128];
    cdv_model *v = NULL;
    cdv_stream *s = NULL;
    qtts_status st = cdv_create(&v, d, dev, &e);
    if (!st) st = cdv_stream_new(v, &s, &e);
    snprintf(name, sizeof name, "%s/create", tag);
    CHECK(name, st == QTTS_OK, "%s", e.msg);
    if (!st) {
        snprintf(name, sizeof name, "%s/cpu", tag);
        CHECK(name, codec_decode(d, codes, T, cpu, &e) == QTTS_OK, "%s", e.msg);
        st = cdv_stream_decode(s, codes, T, gpu, &e);
        snprintf(name, sizeof name, "%s/decode", tag);
        CHECK(name, st == QTTS_OK, "%s", e.msg);
        const double eg = max_abs_diff(gpu, ref, ns), ec = max_abs_diff(gpu, cpu, ns), cg = max_abs_diff(cpu, ref, ns);
        printf("# %s, %d frames: max|device - golden| %.3g, max|device - cpu| %.3g, max|cpu - golden| %.3g\n", tag, T,
               eg, ec, cg);
        snprintf(name, sizeof name, "%s/golden", tag);
        CHECK(name, eg <= TOL_GOLDEN, "max abs error %.3g > %.1g", eg, TOL_GOLDEN);
        snprintf(name, sizeof name, "%s/vs_cpu", tag);
        CHECK(name, ec <= TOL_GOLDEN, "max abs difference %.3g > %.1g", ec, TOL_GOLDEN);
        static const int sizes[] = {1, 3, 4, 7, 16, 25};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            st = cdv_stream_reset(s, &e);
            for (int t = 0; t < T && !st; t += sizes[k]) {
                const int n = T - t < sizes[k] ? T - t : sizes[k];
                st = cdv_stream_decode(s, codes + (size_t)t * 16, n, chunked + (size_t)t * spf, &e);
            }
            snprintf(name, sizeof name, "%s/streamed_%d_equals_whole", tag, sizes[k]);
            CHECK(name, st == QTTS_OK && memcmp(chunked, gpu, ns * sizeof(float)) == 0,
                  "chunks of %d: %s max diff %.3g", sizes[k], e.msg, max_abs_diff(chunked, gpu, ns));
        }
        check_ring(dev, s, codes, T, gpu, spf, tag);
    }
    cdv_stream_free(s);
    cdv_free(v);
    free(cpu), free(gpu), free(chunked), free(ref), free(codes);
    npy_free(&wav);
}

int main(void) {
    const char *cas = "custom_voice";
    vk_dev *dev = NULL;
    qtts_error e = {0};
    if (vk_dev_create(&dev, 0, &e) != QTTS_OK) {
        test_skip("codec_vulkan", "no Vulkan device: %s", e.msg);
        return test_finish();
    }
    codec_decoder *d = NULL;
    if (codec_decoder_load(&d, test_path("golden/data/%s/speech_tokenizer", cas), 0, &e) != QTTS_OK) {
        test_skip("codec_vulkan", "no golden codec: %s", e.msg);
        vk_dev_free(dev);
        return test_finish();
    }
    check_run(dev, d, "codec_vulkan/auto_aiden_rp105", "golden/data/custom_voice/golden/auto_aiden_rp105",
              "waveform.npy", MAX_FRAMES);
    /* past the attention window (72) and the ring (window - 1 + 16 chunk frames) */
    check_run(dev, d, "codec_vulkan/codec_long", "golden/data/custom_voice/golden/codec_long", "waveform_full.npy",
              MAX_FRAMES);
    codec_decoder_free(d);
    vk_dev_free(dev);
    return test_finish();
}

#else
int main(void) {
    test_skip("codec_vulkan", "this build has no Vulkan backend");
    return test_finish();
}
#endif
