/* Log-mel spectrogram of the speaker encoder (see mel.h).
 * Dataflow: pcm -> reflect pad -> per frame: Hann window -> fp32 real FFT -> magnitude
 * -> mel basis -> log.
 * Must match `mel_spectrogram` (QwenLM/Qwen3-TTS modeling_qwen3_tts.py): torch.hann_window,
 * torch.stft and the magnitude in fp32, and librosa.filters.mel (float32 from float64).
 *
 * Why fp32 in torch's operation order rather than an exact (double) transform: on quiet
 * bins (mel energy ~1e-5, next to the clamp) the reference's own fp32 rounding moves the
 * log-mel by up to 1.8e-4, i.e. 1.55e-5 of max|ref|, above the 1e-5 golden tolerance; an
 * exact double FFT measured exactly that. Repeating the reference's arithmetic brings the
 * difference to 9.5e-7 (8e-8 relative). Two pieces are reproduced:
 *  - the window: torch computes cos(i * (float)(2 pi / win)) in fp32 with SLEEF's
 *    cosf_u10 (ATen's vectorised cos); cos_u10 below repeats that algorithm (checked
 *    bit-identical to Sleef_cosf8_u10avx2 on 1.4e8 arguments in (-120, 120));
 *  - the FFT: ATen's CPU r2c is pocketfft's rfftp (FFTPACK-style radix-4 passes, a radix-2
 *    pass for odd powers of two, twiddles from double products rounded to float,
 *    mreineck/pocketfft pocketfft_hdronly.h). rfft_* below is our own code performing the
 *    same operations in the same association order, so the fp32 results agree bit for bit.
 * The mel product is accumulated in double (the reference's sgemm order is unknown; the
 * difference is at float rounding). No FP contraction anywhere: an FMA would change bits.
 * Cost per frame: one n_fft-point real FFT plus an n_mels x (n_fft/2+1) dot product; 10 s
 * at 24 kHz (937 frames) takes about 10 ms of scalar work, nothing to tune. */
#include "model/mel.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* No a*b+c fused into an FMA here (bit-exactness above). GCC contracts nothing in ISO
 * mode (-std=c11 implies -ffp-contract=off); clang needs the pragma. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define MEL_LOG_CLAMP 1e-5f  /* dynamic_range_compression_torch clip_val */
#define MEL_MAG_EPS 1e-9f    /* added to re^2 + im^2 before the sqrt */

mel_params mel_speaker_default_params(void) {
    mel_params p = {
        .sample_rate = 24000,
        .n_fft = 1024,
        .hop = 256,
        .win = 1024,
        .n_mels = 128,
        .fmin = 0.0f,
        .fmax = 12000.0f,
    };
    return p;
}

qtts_status mel_params_validate(const mel_params *p, qtts_error *e) {
    if (!p) return err_set(e, QTTS_ERR_INVALID_ARG, "mel: params are NULL");
    if (p->sample_rate < 1000 || p->sample_rate > 384000)
        return err_set(e, QTTS_ERR_INVALID_ARG, "mel: sample_rate %d Hz outside [1000, 384000]",
                       p->sample_rate);
    if (p->n_fft < 16 || p->n_fft > 65536 || (p->n_fft & (p->n_fft - 1)) != 0)
        return err_set(e, QTTS_ERR_INVALID_ARG, "mel: n_fft %d is not a power of two in [16, 65536]",
                       p->n_fft);
    if (p->hop < 1 || p->hop > p->n_fft)
        return err_set(e, QTTS_ERR_INVALID_ARG, "mel: hop %d outside [1, n_fft=%d]", p->hop, p->n_fft);
    if (p->win < 1 || p->win > p->n_fft)
        return err_set(e, QTTS_ERR_INVALID_ARG, "mel: win %d outside [1, n_fft=%d]", p->win, p->n_fft);
    if (p->n_mels < 1 || p->n_mels > 4096)
        return err_set(e, QTTS_ERR_INVALID_ARG, "mel: n_mels %d outside [1, 4096]", p->n_mels);
    if (!(p->fmin >= 0.0f) || !(p->fmax > p->fmin) || p->fmax > 0.5f * (float)p->sample_rate)
        return err_set(e, QTTS_ERR_INVALID_ARG,
                       "mel: need 0 <= fmin (%g) < fmax (%g) <= sample_rate/2 (%g)", (double)p->fmin,
                       (double)p->fmax, 0.5 * p->sample_rate);
    return QTTS_OK;
}

static int mel_pad(const mel_params *p) { return (p->n_fft - p->hop) / 2; }

size_t mel_min_samples(const mel_params *p) {
    const long pad = mel_pad(p);
    long need = pad + 1;                      /* reflect padding needs pad < n */
    if (p->n_fft - 2 * pad > need) need = p->n_fft - 2 * pad; /* one whole frame */
    return (size_t)need;
}

int mel_n_frames(const mel_params *p, size_t n) {
    if (n < mel_min_samples(p)) return 0;
    const size_t padded = n + 2 * (size_t)mel_pad(p);
    const size_t f = (padded - (size_t)p->n_fft) / (size_t)p->hop + 1;
    return f > INT32_MAX ? 0 : (int)f;
}

/* ------------------------------------------------------------ filterbank */

/* librosa hz_to_mel / mel_to_hz with htk=False (Slaney): linear below 1 kHz,
 * logarithmic above. */
#define SLANEY_F_SP (200.0 / 3.0)
#define SLANEY_MIN_LOG_HZ 1000.0
#define SLANEY_MIN_LOG_MEL (SLANEY_MIN_LOG_HZ / SLANEY_F_SP)

static double slaney_logstep(void) { return log(6.4) / 27.0; }

static double hz_to_mel(double f) {
    if (f >= SLANEY_MIN_LOG_HZ) return SLANEY_MIN_LOG_MEL + log(f / SLANEY_MIN_LOG_HZ) / slaney_logstep();
    return f / SLANEY_F_SP;
}

static double mel_to_hz(double m) {
    if (m >= SLANEY_MIN_LOG_MEL) return SLANEY_MIN_LOG_HZ * exp(slaney_logstep() * (m - SLANEY_MIN_LOG_MEL));
    return SLANEY_F_SP * m;
}

qtts_status mel_filterbank(const mel_params *p, float **basis, qtts_error *e) {
    *basis = NULL;
    qtts_status st = mel_params_validate(p, e);
    if (st != QTTS_OK) return st;
    const int n_bins = p->n_fft / 2 + 1, n_pts = p->n_mels + 2;
    float *w = calloc((size_t)p->n_mels * n_bins, sizeof *w);
    double *mel_f = malloc((size_t)n_pts * sizeof *mel_f);
    double *fft_f = malloc((size_t)n_bins * sizeof *fft_f);
    if (!w || !mel_f || !fft_f) {
        free(w);
        free(mel_f);
        free(fft_f);
        return err_set(e, QTTS_ERR_NOMEM, "mel: out of memory for a %dx%d filterbank", p->n_mels, n_bins);
    }
    /* np.fft.rfftfreq(n_fft, 1/sr): k * (1 / (n_fft * (1/sr))) */
    const double bin_hz = 1.0 / ((double)p->n_fft * (1.0 / (double)p->sample_rate));
    for (int k = 0; k < n_bins; k++) fft_f[k] = (double)k * bin_hz;
    /* np.linspace(mel(fmin), mel(fmax), n_mels+2) (endpoint exact), back to Hz */
    const double m_lo = hz_to_mel((double)p->fmin), m_hi = hz_to_mel((double)p->fmax);
    const double step = (m_hi - m_lo) / (double)(n_pts - 1);
    for (int i = 0; i < n_pts; i++) {
        const double m = (i == n_pts - 1) ? m_hi : (double)i * step + m_lo;
        mel_f[i] = mel_to_hz(m);
    }
    /* Triangles max(0, min(rise, fall)), stored as float32 (librosa assigns into a
     * float32 array), then scaled in double by the Slaney area norm
     * 2/(f[i+2]-f[i]) and rounded to float32 again, as numpy's in-place multiply does. */
    for (int i = 0; i < p->n_mels; i++) {
        const double d_lo = mel_f[i + 1] - mel_f[i], d_hi = mel_f[i + 2] - mel_f[i + 1];
        const double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        float *row = w + (size_t)i * n_bins;
        for (int k = 0; k < n_bins; k++) {
            const double lower = -(mel_f[i] - fft_f[k]) / d_lo;
            const double upper = (mel_f[i + 2] - fft_f[k]) / d_hi;
            double v = lower < upper ? lower : upper;
            if (!(v > 0.0)) v = 0.0;
            const float v32 = (float)v;
            row[k] = (float)((double)v32 * enorm);
        }
    }
    free(mel_f);
    free(fft_f);
    *basis = w;
    return QTTS_OK;
}

/* ------------------------------------------------------------ window */

/* cos(d) for |d| < 125 as SLEEF's cosf_u10 (FMA flavour) computes it: Cody-Waite
 * reduction by pi/2 odd multiples in float-float, then a float-float polynomial.
 * Only used for window arguments in [0, 2 pi). */
typedef struct ff { float hi, lo; } ff; /* unevaluated sum hi + lo */

static ff ff_add2(float x, float y) { /* x + y, exact error term, any magnitudes */
    const float s = x + y, v = s - x;
    return (ff){s, (x - (s - v)) + (y - v)};
}

static ff ff_add2_ff(ff x, float y) {
    const float s = x.hi + y, v = s - x.hi;
    return (ff){s, ((x.hi - (s - v)) + (y - v)) + x.lo};
}

static ff ff_add(float x, float y) { /* |x| >= |y| */
    const float s = x + y;
    return (ff){s, (x - s) + y};
}

static ff ff_add_f_ff(float x, ff y) { /* |x| >= |y| */
    const float s = x + y.hi;
    return (ff){s, ((x - s) + y.hi) + y.lo};
}

static ff ff_mul(ff x, ff y) {
    const float s = x.hi * y.hi;
    return (ff){s, fmaf(x.hi, y.lo, fmaf(x.lo, y.hi, fmaf(x.hi, y.hi, -s)))};
}

static float ff_mul_f(ff x, ff y) { return fmaf(x.hi, y.hi, fmaf(x.lo, y.hi, x.hi * y.lo)); }

static ff ff_sqr(ff x) {
    const float s = x.hi * x.hi;
    return (ff){s, fmaf(x.hi + x.hi, x.lo, fmaf(x.hi, x.hi, -s))};
}

static float cos_u10(float d) {
    const float pi_a = 3.1414794921875f, pi_b = 0.00011315941810607910156f,
                pi_c = 1.9841872589410058936e-09f; /* pi split in three parts */
    /* dq = the odd multiple of pi/2 nearest to d */
    const float dq = fmaf(rintf(fmaf(d, (float)(1.0 / 3.14159265358979323846), -0.5f)), 2.0f, 1.0f);
    const int q = (int)rintf(dq);
    ff s = ff_add2(d, dq * (-pi_a * 0.5f));
    s = ff_add2_ff(s, dq * (-pi_b * 0.5f));
    s = ff_add2_ff(s, dq * (-pi_c * 0.5f));
    const ff t = s;
    s = ff_sqr(s);
    float u = 2.6083159809786593541503e-06f;
    u = fmaf(u, s.hi, -0.0001981069071916863322258f);
    u = fmaf(u, s.hi, 0.00833307858556509017944336f);
    const ff x = ff_add_f_ff(1.0f, ff_mul(ff_add(-0.166666597127914428710938f, u * s.hi), s));
    u = ff_mul_f(t, x); /* sin of the reduced argument */
    return (q & 2) == 0 ? -u : u;
}

/* torch.hann_window(win) (periodic) in fp32: w = cos(i * (float)(2 pi / win)) * -0.5 + 0.5. */
static void hann_window_f32(int win, float *w) {
    const float step = (float)(2.0 * 3.14159265358979323846 / (double)win);
    for (int i = 0; i < win; i++) w[i] = cos_u10((float)i * step) * -0.5f + 0.5f;
}

/* ------------------------------------------------------------ real FFT */

/* Plan of an n-point real forward FFT, n a power of two: passes of radix 4 and, for
 * odd powers, one radix-2 pass, in pocketfft's order (factor list [2?, 4, 4, ...],
 * executed last factor first). Output in FFTPACK half-complex order:
 * r0, re1, im1, ..., re(n/2-1), im(n/2-1), r(n/2). */
#define RFFT_MAX_FACTORS 16

typedef struct rfft_plan {
    int n;
    int n_fact;
    int fact[RFFT_MAX_FACTORS];   /* radix of each factor */
    float *tw[RFFT_MAX_FACTORS];  /* per factor: [(radix-1)][ido-1] interleaved re/im, or NULL */
    float *tw_mem;                /* owns every tw[] */
    float *work;                  /* [n] ping-pong buffer */
} rfft_plan;

/* One entry of pocketfft's exp(2 pi i x / 8n) tables (x in units of pi/(4n)), computed
 * per octant so the argument of cos/sin stays below pi/4. */
static void octant_sincos(size_t x, size_t n, double ang, double *re, double *im) {
    x <<= 3;
    if (x < 4 * n) {
        if (x < 2 * n) {
            if (x < n) { *re = cos((double)x * ang); *im = sin((double)x * ang); return; }
            *re = sin((double)(2 * n - x) * ang); *im = cos((double)(2 * n - x) * ang); return;
        }
        x -= 2 * n;
        if (x < n) { *re = -sin((double)x * ang); *im = cos((double)x * ang); return; }
        *re = -cos((double)(2 * n - x) * ang); *im = sin((double)(2 * n - x) * ang); return;
    }
    x = 8 * n - x;
    if (x < 2 * n) {
        if (x < n) { *re = cos((double)x * ang); *im = -sin((double)x * ang); return; }
        *re = sin((double)(2 * n - x) * ang); *im = -cos((double)(2 * n - x) * ang); return;
    }
    x -= 2 * n;
    if (x < n) { *re = -sin((double)x * ang); *im = -cos((double)x * ang); return; }
    *re = -cos((double)(2 * n - x) * ang); *im = -sin((double)(2 * n - x) * ang);
}

/* exp(2 pi i idx / n) rounded to float as pocketfft's sincos_2pibyn<float> does: the
 * product of a fine and a coarse double table entry, rounded once. */
typedef struct twiddle_src {
    size_t n, shift, mask;
    double *fine;   /* [mask+1][2] */
    double *coarse; /* [(n/2+1+mask)/(mask+1)][2] */
} twiddle_src;

static int twiddle_src_init(twiddle_src *t, size_t n) {
    const double ang = (double)(0.25L * 3.141592653589793238462643383279502884197L / (long double)n);
    const size_t nval = (n + 2) / 2;
    t->n = n;
    t->shift = 1;
    while (((size_t)1 << t->shift) * ((size_t)1 << t->shift) < nval) t->shift++;
    t->mask = ((size_t)1 << t->shift) - 1;
    const size_t n_coarse = (nval + t->mask) / (t->mask + 1);
    t->fine = malloc((t->mask + 1) * 2 * sizeof(double));
    t->coarse = malloc(n_coarse * 2 * sizeof(double));
    if (!t->fine || !t->coarse) return -1;
    t->fine[0] = 1.0;
    t->fine[1] = 0.0;
    for (size_t i = 1; i <= t->mask; i++) octant_sincos(i, n, ang, &t->fine[2 * i], &t->fine[2 * i + 1]);
    t->coarse[0] = 1.0;
    t->coarse[1] = 0.0;
    for (size_t i = 1; i < n_coarse; i++)
        octant_sincos(i * (t->mask + 1), n, ang, &t->coarse[2 * i], &t->coarse[2 * i + 1]);
    return 0;
}

static void twiddle(const twiddle_src *t, size_t idx, float *re, float *im) {
    const int upper = 2 * idx > t->n;
    if (upper) idx = t->n - idx;
    const double *a = t->fine + 2 * (idx & t->mask), *b = t->coarse + 2 * (idx >> t->shift);
    *re = (float)(a[0] * b[0] - a[1] * b[1]);
    const float s = (float)(a[0] * b[1] + a[1] * b[0]);
    *im = upper ? -s : s;
}

static void rfft_free(rfft_plan *p) {
    free(p->tw_mem);
    free(p->work);
    *p = (rfft_plan){0};
}

static int rfft_init(rfft_plan *p, int n) {
    *p = (rfft_plan){0};
    p->n = n;
    int len = n;
    while (len % 4 == 0) {
        p->fact[p->n_fact++] = 4;
        len /= 4;
    }
    if (len == 2) { /* the radix-2 factor goes first in the list (last pass) */
        p->fact[p->n_fact++] = p->fact[0];
        p->fact[0] = 2;
    }
    size_t tw_total = 0;
    for (int k = 0, l1 = 1; k < p->n_fact; k++) {
        const int ip = p->fact[k], ido = n / (l1 * ip);
        tw_total += (size_t)(ip - 1) * (size_t)(ido - 1);
        l1 *= ip;
    }
    p->tw_mem = malloc((tw_total ? tw_total : 1) * sizeof(float));
    p->work = malloc((size_t)n * sizeof(float));
    twiddle_src src = {0};
    const int ok = p->tw_mem && p->work && twiddle_src_init(&src, (size_t)n) == 0;
    if (ok) {
        float *ptr = p->tw_mem;
        for (int k = 0, l1 = 1; k < p->n_fact; k++) {
            const int ip = p->fact[k], ido = n / (l1 * ip);
            if (k < p->n_fact - 1) {
                p->tw[k] = ptr;
                ptr += (size_t)(ip - 1) * (size_t)(ido - 1);
                for (int j = 1; j < ip; j++)
                    for (int i = 1; i <= (ido - 1) / 2; i++)
                        twiddle(&src, (size_t)j * (size_t)l1 * (size_t)i,
                                &p->tw[k][(j - 1) * (ido - 1) + 2 * i - 2],
                                &p->tw[k][(j - 1) * (ido - 1) + 2 * i - 1]);
            }
            l1 *= ip;
        }
    }
    free(src.fine);
    free(src.coarse);
    if (!ok) {
        rfft_free(p);
        return -1;
    }
    return 0;
}

/* Index helpers of one pass: input cc[ido][l1][radix] (as cc[a + ido*(b + l1*c)]),
 * output ch[ido][radix][l1] (as ch[a + ido*(b + radix*c)]). */
#define CC(a, b, c) cc[(a) + ido * ((b) + l1 * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + RADIX * (c))]
#define WA(x, i) wa[(i) + (x) * (ido - 1)]

/* conj(w) * z for twiddle w = (wr, wi) and z = (zr, zi): (wr zr + wi zi, wr zi - wi zr) */
#define CONJ_MUL(outr, outi, wr, wi, zr, zi) \
    do {                                     \
        outr = (wr) * (zr) + (wi) * (zi);    \
        outi = (wr) * (zi) - (wi) * (zr);    \
    } while (0)

#define RADIX 2
static void rfft_pass2(int ido, int l1, const float *cc, float *ch, const float *wa) {
    for (int k = 0; k < l1; k++) {
        CH(0, 0, k) = CC(0, k, 0) + CC(0, k, 1);
        CH(ido - 1, 1, k) = CC(0, k, 0) - CC(0, k, 1);
    }
    if ((ido & 1) == 0)
        for (int k = 0; k < l1; k++) {
            CH(0, 1, k) = -CC(ido - 1, k, 1);
            CH(ido - 1, 0, k) = CC(ido - 1, k, 0);
        }
    if (ido <= 2) return;
    for (int k = 0; k < l1; k++)
        for (int i = 2; i < ido; i += 2) {
            const int ic = ido - i;
            float tr2, ti2;
            CONJ_MUL(tr2, ti2, WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1));
            CH(i - 1, 0, k) = CC(i - 1, k, 0) + tr2;
            CH(ic - 1, 1, k) = CC(i - 1, k, 0) - tr2;
            CH(i, 0, k) = ti2 + CC(i, k, 0);
            CH(ic, 1, k) = ti2 - CC(i, k, 0);
        }
}
#undef RADIX

#define RADIX 4
static void rfft_pass4(int ido, int l1, const float *cc, float *ch, const float *wa) {
    const float hsqt2 = 0.707106781186547524400844362104849f; /* sqrt(1/2) */
    for (int k = 0; k < l1; k++) {
        const float tr1 = CC(0, k, 3) + CC(0, k, 1);
        CH(0, 2, k) = CC(0, k, 3) - CC(0, k, 1);
        const float tr2 = CC(0, k, 0) + CC(0, k, 2);
        CH(ido - 1, 1, k) = CC(0, k, 0) - CC(0, k, 2);
        CH(0, 0, k) = tr2 + tr1;
        CH(ido - 1, 3, k) = tr2 - tr1;
    }
    if ((ido & 1) == 0)
        for (int k = 0; k < l1; k++) {
            const float ti1 = -hsqt2 * (CC(ido - 1, k, 1) + CC(ido - 1, k, 3));
            const float tr1 = hsqt2 * (CC(ido - 1, k, 1) - CC(ido - 1, k, 3));
            CH(ido - 1, 0, k) = CC(ido - 1, k, 0) + tr1;
            CH(ido - 1, 2, k) = CC(ido - 1, k, 0) - tr1;
            CH(0, 3, k) = ti1 + CC(ido - 1, k, 2);
            CH(0, 1, k) = ti1 - CC(ido - 1, k, 2);
        }
    if (ido <= 2) return;
    for (int k = 0; k < l1; k++)
        for (int i = 2; i < ido; i += 2) {
            const int ic = ido - i;
            float cr2, ci2, cr3, ci3, cr4, ci4;
            CONJ_MUL(cr2, ci2, WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1));
            CONJ_MUL(cr3, ci3, WA(1, i - 2), WA(1, i - 1), CC(i - 1, k, 2), CC(i, k, 2));
            CONJ_MUL(cr4, ci4, WA(2, i - 2), WA(2, i - 1), CC(i - 1, k, 3), CC(i, k, 3));
            const float tr1 = cr4 + cr2, tr4 = cr4 - cr2;
            const float ti1 = ci2 + ci4, ti4 = ci2 - ci4;
            const float tr2 = CC(i - 1, k, 0) + cr3, tr3 = CC(i - 1, k, 0) - cr3;
            const float ti2 = CC(i, k, 0) + ci3, ti3 = CC(i, k, 0) - ci3;
            CH(i - 1, 0, k) = tr2 + tr1;
            CH(ic - 1, 3, k) = tr2 - tr1;
            CH(i, 0, k) = ti1 + ti2;
            CH(ic, 3, k) = ti1 - ti2;
            CH(i - 1, 2, k) = tr3 + ti4;
            CH(ic - 1, 1, k) = tr3 - ti4;
            CH(i, 2, k) = tr4 + ti3;
            CH(ic, 1, k) = tr4 - ti3;
        }
}
#undef RADIX
#undef CC
#undef CH
#undef WA
#undef CONJ_MUL

/* In place: x[n] real -> half-complex spectrum (see rfft_plan). */
static void rfft_exec(rfft_plan *p, float *x) {
    float *p1 = x, *p2 = p->work;
    for (int k1 = 0, l1 = p->n; k1 < p->n_fact; k1++) {
        const int k = p->n_fact - 1 - k1, ip = p->fact[k], ido = p->n / l1;
        l1 /= ip;
        if (ip == 4) rfft_pass4(ido, l1, p1, p2, p->tw[k]);
        else rfft_pass2(ido, l1, p1, p2, p->tw[k]);
        float *t = p1;
        p1 = p2;
        p2 = t;
    }
    if (p1 != x) memcpy(x, p1, (size_t)p->n * sizeof *x);
}

/* ------------------------------------------------------------ spectrogram */

qtts_status mel_log_spectrogram(const mel_params *p, const float *basis, const float *pcm, size_t n,
                                float **mel, int *n_frames, qtts_error *e) {
    *mel = NULL;
    *n_frames = 0;
    qtts_status st = mel_params_validate(p, e);
    if (st != QTTS_OK) return st;
    if (!basis) return err_set(e, QTTS_ERR_INVALID_ARG, "mel: filterbank is NULL");
    const size_t min_n = mel_min_samples(p);
    if (!pcm || n < min_n)
        return err_set(e, QTTS_ERR_INPUT,
                       "audio too short: %zu samples, the mel front-end needs at least %zu "
                       "(%.1f ms at %d Hz); give a longer reference recording",
                       pcm ? n : (size_t)0, min_n, 1000.0 * (double)min_n / p->sample_rate,
                       p->sample_rate);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return err_set(e, QTTS_ERR_INPUT, "audio sample %zu is %s; the input must be finite PCM",
                           i, isnan(pcm[i]) ? "NaN" : "infinite");

    const int T = mel_n_frames(p, n);
    if (T < 1) return err_set(e, QTTS_ERR_INPUT, "audio of %zu samples is too long", n);
    const int n_fft = p->n_fft, n_bins = n_fft / 2 + 1, pad = mel_pad(p);
    const int win_off = (n_fft - p->win) / 2; /* torch.stft centres a short window */

    float *out = malloc((size_t)T * p->n_mels * sizeof *out);
    float *win = calloc((size_t)n_fft, sizeof *win);
    float *frame = malloc((size_t)n_fft * sizeof *frame);
    float *mag = malloc((size_t)n_bins * sizeof *mag);
    int *band = malloc((size_t)p->n_mels * 2 * sizeof *band); /* [n_mels][lo, hi) non-zero bins */
    rfft_plan plan = {0};
    if (!out || !win || !frame || !mag || !band || rfft_init(&plan, n_fft) != 0) {
        st = err_set(e, QTTS_ERR_NOMEM, "mel: out of memory for %d frames", T);
        goto done;
    }
    hann_window_f32(p->win, win + win_off);
    for (int b = 0; b < p->n_mels; b++) {
        const float *row = basis + (size_t)b * n_bins;
        int lo = 0, hi = n_bins;
        while (lo < n_bins && row[lo] == 0.0f) lo++;
        while (hi > lo && row[hi - 1] == 0.0f) hi--;
        band[2 * b] = lo;
        band[2 * b + 1] = hi;
    }

    const long long ln = (long long)n;
    for (int t = 0; t < T; t++) {
        const long long start = (long long)t * p->hop - pad; /* index into pcm */
        for (int i = 0; i < n_fft; i++) {
            long long j = start + i;
            if (j < 0) j = -j;                   /* reflect, edge sample excluded */
            else if (j >= ln) j = 2 * (ln - 1) - j;
            frame[i] = pcm[j] * win[i];
        }
        rfft_exec(&plan, frame);
        /* sqrt(re^2 + im^2 + 1e-9) in fp32; bins 0 and n/2 are real */
        mag[0] = sqrtf(frame[0] * frame[0] + MEL_MAG_EPS);
        for (int k = 1; k < n_bins - 1; k++) {
            const float re = frame[2 * k - 1], im = frame[2 * k];
            mag[k] = sqrtf(re * re + im * im + MEL_MAG_EPS);
        }
        mag[n_bins - 1] = sqrtf(frame[n_fft - 1] * frame[n_fft - 1] + MEL_MAG_EPS);
        float *o = out + (size_t)t * p->n_mels;
        for (int b = 0; b < p->n_mels; b++) {
            const float *row = basis + (size_t)b * n_bins;
            double acc = 0.0; /* the zeros outside [lo, hi) would add nothing */
            for (int k = band[2 * b]; k < band[2 * b + 1]; k++) acc += (double)row[k] * mag[k];
            const float m = (float)acc;
            o[b] = logf(m > MEL_LOG_CLAMP ? m : MEL_LOG_CLAMP);
        }
    }
    *mel = out;
    *n_frames = T;
    out = NULL;
    st = QTTS_OK;
done:
    free(out);
    free(win);
    free(frame);
    free(mag);
    free(band);
    rfft_free(&plan);
    return st;
}
