/* The sentence set of the benchmark (../shared/BENCHMARKING.md, procedure 4):
 * short, medium and long texts in several languages, each with a number, a
 * name and a question mark, and a voice-cloning case that uses a fixed
 * reference clip. frames = the length at a typical speaking rate (about 15
 * Latin characters or 4.5 CJK characters per second at 12.5 frames/s), used
 * when the length is forced (--frames auto) because random checkpoints never
 * emit EOS reliably. */
#include <math.h>
#include <stdlib.h>

#include "bench.h"

const bench_case bench_cases[] = {
    {"short_en", "short", "english", "Hello Dr. Smith, is the meeting still at 3 o'clock?", 44, 0},
    {"short_zh", "short", "chinese", "王先生，你明天下午三点有空吗？", 42, 0},
    {"medium_en", "medium", "english",
     "On March 14, Alice Johnson ordered 250 copies of the annual report. Did anyone ask her why the price "
     "went up by 12 percent since last year?",
     118, 0},
    {"medium_de", "medium", "german",
     "Frau Müller fährt am Montag um 7 Uhr mit dem Zug nach Berlin. Kommt ihr Bruder Thomas auch mit, oder "
     "bleibt er mit den 3 Kindern zu Hause?",
     115, 0},
    {"medium_ja", "medium", "japanese", "田中さんは毎朝7時に起きて、駅まで15分歩きます。今日も雨が降っていますか？", 95,
     0},
    {"long_en", "long", "english",
     "The library on Baker Street opened in 1998 with only 40 shelves and one librarian, Margaret Hale. Twenty "
     "five years later it lends more than 12000 books a month, runs a reading club for children every "
     "Saturday, and keeps a small collection of maps that visitors from as far as Canada come to see. Why has "
     "it grown so much while others closed? Margaret says the answer is simple: people come back to places "
     "that remember their names.",
     385, 0},
    {"long_es", "long", "spanish",
     "El pasado 5 de mayo, Carlos Ramírez recorrió 42 kilómetros por las calles de Sevilla para terminar su "
     "primer maratón. Durante meses entrenó cada mañana antes del trabajo, aunque muchas veces pensó en "
     "abandonar. ¿Qué le hizo seguir adelante? Según él, fueron los mensajes de su hija Lucía, que le "
     "esperaba en la meta con una pancarta enorme.",
     300, 0},
    {"clone_en", "clone", "english", "This is the cloned voice speaking 2 short sentences. Does it sound like the reference?",
     72, 1},
};
const int bench_n_cases = (int)(sizeof bench_cases / sizeof bench_cases[0]);

/* 3 s of a deterministic voiced signal: a glottal pulse train (F0 gliding
 * between 105 and 135 Hz) through three formant resonators that move every
 * 250 ms, with a syllable envelope. Speech-like enough for the speaker and
 * codec encoders; the same samples on every machine. */
void bench_ref_clip(float **pcm, size_t *n, const char **transcript) {
    const int sr = 24000, len = 3 * sr;
    float *x = calloc((size_t)len, sizeof(float));
    *pcm = x;
    *n = x ? (size_t)len : 0;
    *transcript = "Please call Stella and ask her to bring these things.";
    if (!x) return;
    static const double formants[6][3] = {{730, 1090, 2440}, {270, 2290, 3010}, {530, 1840, 2480},
                                          {570, 840, 2410},  {300, 870, 2240},  {660, 1720, 2410}};
    double phase = 0, y1[3] = {0}, y2[3] = {0};
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < len; i++) {
        const double t = (double)i / sr;
        const double f0 = 120 + 15 * sin(2 * pi * 0.7 * t);
        phase += f0 / sr;
        double src = 0;
        if (phase >= 1) phase -= 1, src = 1; /* one pulse per period */
        src += 0.02 * (((i * 1103515245u + 12345u) >> 16) % 1000 / 1000.0 - 0.5); /* breath noise */
        const int seg = (int)(t / 0.25) % 6;
        double out = 0;
        for (int k = 0; k < 3; k++) {
            const double f = formants[seg][k], bw = 80 + 40 * k;
            const double r = exp(-pi * bw / sr), c = 2 * r * cos(2 * pi * f / sr);
            const double y = src + c * y1[k] - r * r * y2[k];
            y2[k] = y1[k], y1[k] = y;
            out += y / (k + 1);
        }
        const double syl = fmod(t, 0.25) / 0.25;
        const double env = sin(pi * syl) * (t < 2.8 ? 1.0 : (3.0 - t) / 0.2);
        x[i] = (float)(0.05 * out * env);
    }
    float peak = 0;
    for (int i = 0; i < len; i++) peak = fabsf(x[i]) > peak ? fabsf(x[i]) : peak;
    if (peak > 0)
        for (int i = 0; i < len; i++) x[i] *= 0.5f / peak;
}
