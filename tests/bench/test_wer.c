/* Unit tests of the WER text normalisation and edit distance
 * (tools/bench/wer.c), the order statistics (stats.c) and the signal metrics
 * of the quality arm (quality.c). No model needed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "test.h"

static void norm_is(const char *name, const char *in, const char *want) {
    char *got = wer_normalize(in);
    CHECK(name, got && strcmp(got, want) == 0, "normalise(\"%s\") = \"%s\", want \"%s\"", in, got ? got : "(null)",
          want);
    free(got);
}

static void number_is(const char *digits, const char *want) {
    char out[512];
    wer_number_words(digits, strlen(digits), out, sizeof out);
    char name[64];
    snprintf(name, sizeof name, "number %s", digits);
    CHECK(name, strcmp(out, want) == 0, "got \"%s\", want \"%s\"", out, want);
}

static void wer_is(const char *name, const char *ref, const char *hyp, int want_err, int want_n) {
    int n = -1, e = -1;
    const double w = wer_compute(ref, hyp, &n, &e);
    const double want = want_n ? (double)want_err / want_n : (want_err ? 1.0 : 0.0);
    CHECK(name, n == want_n && e == want_err && fabs(w - want) < 1e-12, "WER %.4f (%d/%d), want %d/%d", w, e, n,
          want_err, want_n);
}

int main(void) {
    /* numbers */
    number_is("0", "zero");
    number_is("7", "seven");
    number_is("13", "thirteen");
    number_is("40", "forty");
    number_is("42", "forty two");
    number_is("100", "one hundred");
    number_is("250", "two hundred fifty");
    number_is("1998", "one thousand nine hundred ninety eight");
    number_is("12000", "twelve thousand");
    number_is("1000001", "one million one");
    number_is("007", "zero zero seven");
    /* normalisation */
    norm_is("case and punctuation", "Hello, World!  How are YOU?", "hello world how are you");
    norm_is("digits in text", "Meet me at 3 o'clock.", "meet me at three o'clock");
    norm_is("thousands separator", "It costs 12,000 dollars.", "it costs twelve thousand dollars");
    norm_is("list commas stay separators", "1,2,3", "one two three");
    norm_is("decimal and percent", "up by 3.5%", "up by three point five percent");
    norm_is("ordinals", "the 21st and 2nd and 3rd and 12th", "the twenty first and second and third and twelfth");
    norm_is("ordinal -ieth", "her 40th birthday", "her fortieth birthday");
    norm_is("sentence end after a number", "He is 40. She is 41?", "he is forty she is forty one");
    norm_is("hyphen and dash split", "well-known — really", "well known really");
    norm_is("curly apostrophe", "don\xe2\x80\x99t stop", "don't stop");
    norm_is("quotes removed", "\"Quoted\" 'single'", "quoted single");
    norm_is("ampersand", "Tom & Jerry", "tom and jerry");
    norm_is("abbreviations", "Dr. Smith met Mr. Jones and Mrs. Hale", "doctor smith met mister jones and missus hale");
    norm_is("accents kept, case folded", "Frau MÜLLER fährt", "frau müller fährt");
    norm_is("german sharp s folds", "Straße", "strasse");
    norm_is("fullwidth digits (NFKC)", "\xef\xbc\x91\xef\xbc\x92", "twelve");
    norm_is("CJK one token per character", "王先生，你好！", "王 先 生 你 好");
    norm_is("kana one token per character", "田中さん", "田 中 さ ん");
    norm_is("mixed CJK and digits", "三点7时", "三 点 seven 时");
    norm_is("empty", "", "");
    norm_is("only punctuation", "?!...", "");
    /* WER */
    wer_is("identical", "the cat sat", "The cat sat.", 0, 3);
    wer_is("one substitution", "the cat sat", "the bat sat", 1, 3);
    wer_is("one deletion", "the cat sat", "the sat", 1, 3);
    wer_is("one insertion", "the cat sat", "the cat sat down", 1, 3);
    wer_is("numbers normalised both sides", "at 3 pm", "at three pm", 0, 3);
    wer_is("empty hypothesis", "one two three four", "", 4, 4);
    wer_is("empty reference, empty hypothesis", "", "", 0, 0);
    wer_is("CJK character error rate", "王先生你好", "王先生您好", 1, 5);
    {
        int n, e;
        const double w = wer_compute("", "something", &n, &e);
        CHECK("empty reference, words in hypothesis", w == 1.0 && n == 0, "WER %.3f n %d", w, n);
    }
    /* order statistics */
    {
        const double v[5] = {5, 1, 4, 2, 3};
        const bench_summary s = bench_summarize(v, 5);
        CHECK("summary median", s.median == 3, "median %g", s.median);
        CHECK("summary p95 type 7", fabs(s.p95 - 4.8) < 1e-12, "p95 %g, want 4.8", s.p95);
        CHECK("summary min/max", s.min == 1 && s.max == 5 && s.n == 5, "min %g max %g n %d", s.min, s.max, s.n);
        const double w[4] = {NAN, 2, NAN, 4};
        const bench_summary t = bench_summarize(w, 4);
        CHECK("summary skips NaN", t.n == 2 && t.median == 3, "n %d median %g", t.n, t.median);
        const bench_summary u = bench_summarize(w, 0);
        CHECK("summary of nothing is NaN", u.n == 0 && isnan(u.median), "n %d", u.n);
    }
    /* signal metrics */
    {
        const size_t n = 24000;
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
        uint32_t s = 1;
        for (size_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            const double noise = (s >> 8) / 16777216.0 - 0.5;
            s = s * 1664525u + 1013904223u;
            const double noise2 = (s >> 8) / 16777216.0 - 0.5;
            a[i] = (float)(0.3 * sin(2 * 3.14159265 * 220 * i / 24000.0) + 0.3 * sin(2 * 3.14159265 * 1375 * i / 24000.0) +
                           0.05 * noise);
            b[i] = a[i] + 0.005f * (float)noise2;
            c[i] = (float)(0.3 * sin(2 * 3.14159265 * 3000 * i / 24000.0) + 0.05 * noise2);
        }
        CHECK("SNR identical is infinite", isinf(quality_snr_db(a, a, n)), "%g", quality_snr_db(a, a, n));
        const double snr = quality_snr_db(a, b, n);
        CHECK("SNR of small noise", snr > 40 && snr < 60, "%.1f dB", snr);
        const double r1 = quality_logmel_corr(a, a, n), r2 = quality_logmel_corr(a, b, n),
                     r3 = quality_logmel_corr(a, c, n);
        CHECK("log-mel corr identical", fabs(r1 - 1) < 1e-12, "%g", r1);
        CHECK("log-mel corr near-identical", r2 > 0.99, "%g", r2);
        CHECK("log-mel corr different tone lower", r3 < r2 - 0.05, "%g vs %g", r3, r2);
        const float x[3] = {1, 2, 3}, y[3] = {2, 4, 6}, z[3] = {-1, -2, -3};
        CHECK("cosine", fabs(quality_cosine(x, y, 3) - 1) < 1e-12 && fabs(quality_cosine(x, z, 3) + 1) < 1e-12, "%g",
              quality_cosine(x, y, 3));
        free(a), free(b), free(c);
    }
    return test_finish();
}
