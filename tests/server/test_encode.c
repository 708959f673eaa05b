/* The server's encoders, time stretch and helpers, without a model: each
 * format decodes back (libsndfile reads wav, flac, mp3 and ogg/opus from
 * memory) to the right length, lossless formats to the exact s16 samples;
 * the bytes are deterministic and do not depend on how the PCM was chunked;
 * streamed wav/flac headers say "unknown length"; the stretch keeps the pitch
 * and gives len / speed samples; base64, UTF-8 length and metrics parsing. */
#include <math.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "encode.h"
#include "metrics.h"
#include "stretch.h"
#include "test.h"

#define RATE 24000

typedef struct mem {
    const unsigned char *p;
    sf_count_t n, pos;
} mem;

static sf_count_t m_len(void *u) { return ((mem *)u)->n; }
static sf_count_t m_seek(sf_count_t off, int whence, void *u) {
    mem *m = u;
    sf_count_t p = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->pos + off : m->n + off;
    if (p < 0 || p > m->n) return -1;
    return m->pos = p;
}
static sf_count_t m_read(void *ptr, sf_count_t k, void *u) {
    mem *m = u;
    if (k > m->n - m->pos) k = m->n - m->pos;
    memcpy(ptr, m->p + m->pos, (size_t)k);
    m->pos += k;
    return k;
}
static sf_count_t m_write(const void *p, sf_count_t k, void *u) {
    (void)p;
    (void)k;
    (void)u;
    return 0;
}
static sf_count_t m_tell(void *u) { return ((mem *)u)->pos; }

/* Decode a file in memory; returns samples (malloc'ed) and count, or NULL. */
static short *decode(const unsigned char *p, size_t n, sf_count_t *frames, int *rate, char *why, size_t wn) {
    SF_VIRTUAL_IO io = {m_len, m_seek, m_read, m_write, m_tell};
    mem m = {p, (sf_count_t)n, 0};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &info, &m);
    if (!sf) {
        snprintf(why, wn, "libsndfile: %s", sf_strerror(NULL));
        return NULL;
    }
    size_t cap = 1 << 16, k = 0;
    short *out = malloc(sizeof(short) * cap);
    for (;;) {
        if (k + 4096 > cap) out = realloc(out, sizeof(short) * (cap *= 2));
        sf_count_t r = sf_read_short(sf, out + k, 4096);
        if (r <= 0) break;
        k += (size_t)r;
    }
    *rate = info.samplerate;
    *frames = (sf_count_t)k;
    sf_close(sf);
    return out;
}

/* Encode pcm[n] in chunks of `chunk` samples (0 = one call). */
static int encode_all(audio_format f, int streaming, const float *pcm, size_t n, size_t chunk, bytebuf *out) {
    encoder *e = NULL;
    char err[256];
    memset(out, 0, sizeof *out);
    if (encoder_new(&e, f, RATE, streaming, err, sizeof err)) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t k = chunk && n - i > chunk ? chunk : n - i;
        rc = encoder_write(e, pcm + i, k);
        i += k;
        if (streaming) { /* drain as the server does */
            bytebuf *b = encoder_output(e);
            if (bytebuf_put(out, b->p, b->n)) rc = -1;
            bytebuf_consume(b, b->n);
        }
    }
    if (!rc) rc = encoder_finish(e);
    bytebuf *b = encoder_output(e);
    if (!rc && bytebuf_put(out, b->p, b->n)) rc = -1;
    encoder_free(e);
    return rc;
}

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_formats(void) {
    const size_t n = RATE; /* 1 s: a chirp with some noise, clipped peaks included */
    float *pcm = malloc(sizeof(float) * n);
    uint32_t seed = 1;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        double t = (double)i / RATE;
        pcm[i] = (float)(0.6 * sin(2 * M_PI * (200 + 300 * t) * t) + 0.05 * ((seed >> 8) / 16777216.0 - 0.5));
    }
    pcm[100] = 1.5f; /* clipped */
    pcm[101] = -2.0f;
    short *ref = malloc(sizeof(short) * n);
    for (size_t i = 0; i < n; i++) ref[i] = pcm_to_s16(pcm[i]);
    CHECK("encode/s16_rounding", pcm_to_s16(1.5f) == 32767 && pcm_to_s16(-2.0f) == -32767 && pcm_to_s16(0.5f) == 16384 &&
                                     pcm_to_s16(NAN) == 0,
          "got %d %d %d", pcm_to_s16(1.5f), pcm_to_s16(-2.0f), pcm_to_s16(0.5f));
    for (int f = 0; f < AF_COUNT; f++) {
        const char *name = audio_format_name((audio_format)f);
        char tn[128], why[256] = "";
        for (int streaming = 0; streaming < 2; streaming++) {
            bytebuf a, b, c;
            int ra = encode_all((audio_format)f, streaming, pcm, n, 0, &a);
            int rb = encode_all((audio_format)f, streaming, pcm, n, 0, &b);
            int rc = encode_all((audio_format)f, streaming, pcm, n, 1920, &c); /* frame by frame */
            snprintf(tn, sizeof tn, "encode/%s%s/deterministic", name, streaming ? "_stream" : "");
            CHECK(tn, !ra && !rb && a.n == b.n && !memcmp(a.p, b.p, a.n), "rc %d %d, %zu vs %zu bytes", ra, rb, a.n, b.n);
            snprintf(tn, sizeof tn, "encode/%s%s/chunking_invariant", name, streaming ? "_stream" : "");
            CHECK(tn, !rc && a.n == c.n && !memcmp(a.p, c.p, a.n), "%zu bytes whole vs %zu frame by frame", a.n, c.n);
            if (f == AF_PCM) {
                int same = a.n == 2 * n;
                for (size_t i = 0; same && i < n; i++) same = (short)(a.p[2 * i] | a.p[2 * i + 1] << 8) == ref[i];
                snprintf(tn, sizeof tn, "encode/pcm%s/s16le", streaming ? "_stream" : "");
                CHECK(tn, same, "%zu bytes", a.n);
            } else {
                sf_count_t frames = 0;
                int rate = 0;
                short *d = decode(a.p, a.n, &frames, &rate, why, sizeof why);
                snprintf(tn, sizeof tn, "encode/%s%s/decodes", name, streaming ? "_stream" : "");
                const int lossless = f == AF_WAV || f == AF_FLAC;
                /* lossy codecs: decoders add or drop up to a frame of priming */
                const sf_count_t tol = lossless ? 0 : 2400;
                CHECK(tn, d && rate == RATE && llabs((long long)frames - (long long)n) <= tol, "%s: %lld samples at %d Hz",
                      d ? "decoded" : why, (long long)frames, rate);
                if (d && lossless) {
                    snprintf(tn, sizeof tn, "encode/%s%s/lossless", name, streaming ? "_stream" : "");
                    CHECK(tn, frames == (sf_count_t)n && !memcmp(d, ref, sizeof(short) * n), "samples differ");
                }
                if (d && !lossless) { /* lossy: the decoded signal correlates with the input */
                    double best = 0;
                    for (int lag = -1200; lag <= 1200; lag += 1) {
                        double xy = 0, xx = 0, yy = 0;
                        for (size_t i = 2400; i + 2400 < n; i += 3) {
                            long j = (long)i + lag;
                            if (j < 0 || j >= frames) continue;
                            xy += (double)ref[i] * d[j];
                            xx += (double)ref[i] * ref[i];
                            yy += (double)d[j] * d[j];
                        }
                        double r = xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : 0;
                        if (r > best) best = r;
                    }
                    snprintf(tn, sizeof tn, "encode/%s%s/similar", name, streaming ? "_stream" : "");
                    CHECK(tn, best > 0.9, "correlation %.3f", best);
                }
                free(d);
            }
            if (f == AF_WAV) {
                snprintf(tn, sizeof tn, "encode/wav%s/header", streaming ? "_stream" : "");
                const uint32_t riff = rd32(a.p + 4), data = rd32(a.p + 40);
                CHECK(tn, !memcmp(a.p, "RIFF", 4) && !memcmp(a.p + 36, "data", 4) &&
                              (streaming ? riff == 0xFFFFFFFFu && data == 0xFFFFFFFFu
                                         : riff == 36 + 2 * n && data == 2 * n && a.n == 44 + 2 * n),
                      "riff %u data %u, %zu bytes", riff, data, a.n);
            }
            if (f == AF_FLAC) { /* STREAMINFO total samples: 36 bits at byte 8 + 13.5 of the block */
                const unsigned char *si = a.p + 8;
                uint64_t total = ((uint64_t)(si[13] & 0x0F) << 32) | rd32((const unsigned char[]){si[17], si[16], si[15], si[14]});
                snprintf(tn, sizeof tn, "encode/flac%s/streaminfo_length", streaming ? "_stream" : "");
                CHECK(tn, !memcmp(a.p, "fLaC", 4) && total == (streaming ? 0 : n), "total samples %llu",
                      (unsigned long long)total);
            }
            if (f == AF_OPUS) {
                snprintf(tn, sizeof tn, "encode/opus%s/ogg_opus", streaming ? "_stream" : "");
                CHECK(tn, a.n > 64 && !memcmp(a.p, "OggS", 4) && !memcmp(a.p + 28, "OpusHead", 8), "not Ogg Opus");
            }
            if (f == AF_MP3) {
                snprintf(tn, sizeof tn, "encode/mp3%s/frame_sync", streaming ? "_stream" : "");
                CHECK(tn, a.n > 4 && a.p[0] == 0xFF && (a.p[1] & 0xE0) == 0xE0, "no MPEG frame sync at the start");
            }
            bytebuf_free(&a);
            bytebuf_free(&b);
            bytebuf_free(&c);
        }
    }
    /* streamed output arrives before the end */
    encoder *e = NULL;
    char err[256];
    for (int f = 0; f < AF_COUNT; f++) {
        if (encoder_new(&e, (audio_format)f, RATE, 1, err, sizeof err)) continue;
        size_t got = 0;
        for (int k = 0; k < 10; k++) { /* 10 chunks of 320 ms */
            encoder_write(e, pcm + k * 1920, 1920);
            got += encoder_output(e)->n;
        }
        char tn[96];
        snprintf(tn, sizeof tn, "encode/%s_stream/bytes_before_the_end", audio_format_name((audio_format)f));
        CHECK(tn, got > 0, "nothing came out of 10 chunks");
        encoder_free(e);
    }
    CHECK("encode/format_names", audio_format_parse("mp3") == AF_MP3 && audio_format_parse("opus") == AF_OPUS &&
                                     audio_format_parse("aac") == -1 && audio_format_parse(NULL) == -1 &&
                                     !strcmp(audio_format_mime(AF_WAV), "audio/wav"),
          "parse/mime mismatch");
    free(pcm);
    free(ref);
}

/* Dominant frequency by zero crossings of a sine. */
static double zc_freq(const float *x, size_t n) {
    size_t z = 0;
    for (size_t i = 1; i < n; i++) z += (x[i - 1] < 0) != (x[i] < 0);
    return z / 2.0 / ((double)n / RATE);
}

static void test_stretch(void) {
    const size_t n = RATE * 2;
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.5 * sin(2 * M_PI * 440.0 * i / RATE));
    const double speeds[] = {0.25, 0.5, 1.5, 2.0, 4.0};
    for (size_t si = 0; si < sizeof speeds / sizeof speeds[0]; si++) {
        const double sp = speeds[si];
        stretcher *st = stretch_new(sp, RATE);
        size_t cap = (size_t)(n / sp) + 8192, m = 0;
        float *y = malloc(sizeof(float) * cap);
        int rc = st ? 0 : -1;
        for (size_t i = 0; i < n && !rc; i += 1920) { /* chunk by chunk, as streamed */
            const float *o;
            size_t no;
            size_t k = n - i < 1920 ? n - i : 1920;
            rc = stretch_process(st, x + i, k, 0, &o, &no);
            if (!rc && m + no <= cap) memcpy(y + m, o, sizeof(float) * no);
            m += no;
        }
        const float *o;
        size_t no = 0;
        if (!rc) rc = stretch_process(st, NULL, 0, 1, &o, &no);
        if (!rc && m + no <= cap) memcpy(y + m, o, sizeof(float) * no);
        m += no;
        const size_t want = (size_t)(n / sp + 0.5);
        char tn[64];
        snprintf(tn, sizeof tn, "stretch/speed_%.2f/length", sp);
        CHECK(tn, !rc && m == want, "%zu samples, want %zu", m, want);
        /* the middle keeps its pitch (440 Hz) */
        const double f = m >= 8192 ? zc_freq(y + m / 4, m / 2) : 0;
        snprintf(tn, sizeof tn, "stretch/speed_%.2f/pitch_kept", sp);
        CHECK(tn, fabs(f - 440.0) < 440.0 * 0.03, "%.1f Hz", f);
        free(y);
        stretch_free(st);
    }
    CHECK("stretch/out_of_range_refused", stretch_new(0.2, RATE) == NULL && stretch_new(4.5, RATE) == NULL, "accepted");
    free(x);
}

static void test_helpers(void) {
    bytebuf b = {0};
    base64_append(&b, (const unsigned char *)"", 0);
    base64_append(&b, (const unsigned char *)"f", 1);
    bytebuf_put(&b, "|", 1);
    base64_append(&b, (const unsigned char *)"fo", 2);
    bytebuf_put(&b, "|", 1);
    base64_append(&b, (const unsigned char *)"foo", 3);
    bytebuf_put(&b, "|", 1);
    base64_append(&b, (const unsigned char *)"foobar", 6);
    bytebuf_put(&b, "", 1);
    CHECK("helpers/base64_rfc4648", !strcmp((char *)b.p, "Zg==|Zm8=|Zm9v|Zm9vYmFy"), "got %s", (char *)b.p);
    bytebuf_free(&b);
    unsigned char big[3000];
    for (int i = 0; i < 3000; i++) big[i] = (unsigned char)(i * 7);
    base64_append(&b, big, sizeof big);
    CHECK("helpers/base64_long", b.n == 4000, "%zu chars", b.n);
    bytebuf_free(&b);
    CHECK("helpers/utf8_length", utf8_length("abc") == 3 && utf8_length("h\xc3\xa9llo \xe4\xbd\xa0\xe5\xa5\xbd") == 8 &&
                                     utf8_length("\xf0\x9f\x98\x80") == 1,
          "wrong count");
    metrics *m = metrics_new();
    metrics_request(m, "speech", 200);
    metrics_request(m, "speech", 200);
    metrics_request(m, "speech", 429);
    metrics_speech(m, 2.5, 0.12, 0.4);
    metrics_set_gauges(m, 3, 2);
    metrics_step(m, 4, 3, 0.01, 0.002);
    char *t = metrics_render(m);
    CHECK("metrics/render_and_parse",
          t && metrics_value(t, "qtts_requests_total{endpoint=\"speech\",status=\"200\"}") == 2 &&
              metrics_value(t, "qtts_requests_total{endpoint=\"speech\",status=\"429\"}") == 1 &&
              metrics_value(t, "qtts_queue_depth") == 3 && metrics_value(t, "qtts_active_slots") == 2 &&
              metrics_value(t, "qtts_audio_seconds_total") == 2.5 &&
              metrics_value(t, "qtts_frames_generated_total") == 3 &&
              metrics_value(t, "qtts_engine_stream_steps_total") == 4 &&
              metrics_value(t, "qtts_ttfa_seconds_bucket{le=\"0.2\"}") == 1 &&
              metrics_value(t, "qtts_ttfa_seconds_bucket{le=\"0.1\"}") == 0 && metrics_value(t, "qtts_rtf_count") == 1 &&
              metrics_value(t, "qtts_nothing") == -1,
          "%s", t ? t : "(null)");
    CHECK("metrics/prometheus_types", t && strstr(t, "# TYPE qtts_ttfa_seconds histogram") &&
                                          strstr(t, "# TYPE qtts_requests_total counter") &&
                                          strstr(t, "# TYPE qtts_queue_depth gauge"),
          "missing TYPE lines");
    free(t);
    t = metrics_render(m);
    CHECK("metrics/device_zero_by_default", t && metrics_value(t, "qtts_device_bytes_allocated") == 0 &&
                                                metrics_value(t, "qtts_device_bytes_reserved") == 0 &&
                                                !strstr(t, "qtts_backend_info"),
          "%s", t ? t : "(null)");
    free(t);
    metrics_set_backend(m, "vulkan", "GPU \"x\" 1");
    metrics_set_device_bytes(m, 3000000000LL, 4294967296LL);
    t = metrics_render(m);
    CHECK("metrics/backend_and_device_bytes",
          t && metrics_value(t, "qtts_backend_info{backend=\"vulkan\",device=\"GPU \\\"x\\\" 1\"}") == 1 &&
              metrics_value(t, "qtts_device_bytes_allocated") == 3000000000.0 &&
              metrics_value(t, "qtts_device_bytes_reserved") == 4294967296.0 &&
              strstr(t, "# HELP qtts_backend_info ") && strstr(t, "# TYPE qtts_backend_info gauge") &&
              strstr(t, "# TYPE qtts_device_bytes_allocated gauge") && strstr(t, "# TYPE qtts_device_bytes_reserved gauge"),
          "%s", t ? t : "(null)");
    free(t);
    metrics_free(m);
}

int main(void) {
    test_formats();
    test_stretch();
    test_helpers();
    return test_finish();
}
