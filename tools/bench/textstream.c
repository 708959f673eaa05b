/* qtts-bench textstream: speech from text that arrives as a language model
 * writes it. A token stream is played back at a given rate (pieces the size
 * of BPE tokens: a word with its leading space, a number, a punctuation
 * mark) into an incremental-text request (qtts_pipeline_push_text), and set
 * against the same text given whole at once in the streaming text mode:
 * the first audio after the first text byte, and the stalls a player that
 * starts at the first chunk would hear (a chunk that arrives after the audio
 * delivered before it has finished playing; their count and total time).
 * A client without incremental text would wait for the whole text first:
 * its first audio is the text's duration plus the whole-text arm's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../common/clock.h"

typedef struct arm {
    double t0;          /* first text byte (ms) */
    double first_ms;    /* first audio after t0 */
    double play0;       /* playback start: the first chunk's arrival */
    double delivered_s; /* audio delivered so far */
    double stall_ms;    /* player waiting for audio, all told */
    int n_stalls;
    double end_ms;      /* last audio after t0 */
    int done;
    qtts_status st;
    char err[256];
} arm;

static int on_chunk(const qtts_chunk *c, void *u) {
    arm *a = u;
    const double t = tool_now_ms();
    if (a->first_ms < 0) {
        a->first_ms = t - a->t0;
        a->play0 = t;
    }
    /* the player has played until play0 + stalls + delivered: later arrival is a stall */
    const double due = a->play0 + a->stall_ms + a->delivered_s * 1e3;
    if (t > due + 1.0) {
        a->stall_ms += t - due;
        a->n_stalls++;
    }
    a->delivered_s += c->n_samples / 24000.0;
    a->end_ms = t - a->t0;
    return 0;
}

static void on_done(const qtts_request_result *r, void *u) {
    arm *a = u;
    a->st = r->status;
    snprintf(a->err, sizeof a->err, "%s", r->error ? r->error : "");
    a->done = 1;
}

/* The text as LLM-like tokens: offsets of piece starts, *n pieces. */
static size_t *tokens(const char *t, int *n) {
    const size_t len = strlen(t);
    size_t *at = malloc(sizeof(size_t) * (len + 1));
    int k = 0;
    for (size_t i = 0; i < len;) {
        at[k++] = i;
        size_t j = i;
        if (t[j] == ' ') j++;
        const unsigned char c = (unsigned char)t[j];
        if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\'') {
            int letters = 0;
            while (j < len && ((unsigned char)t[j] >= 0x80 || (t[j] >= 'a' && t[j] <= 'z') ||
                               (t[j] >= 'A' && t[j] <= 'Z') || t[j] == '\'') && letters < 8) {
                j++; /* long words are two tokens */
                letters++;
            }
            while (j < len && ((unsigned char)t[j] & 0xc0) == 0x80) j++;
        } else j++;
        i = j > i ? j : i + 1;
    }
    *n = k;
    at[k] = len;
    return at;
}

static int run_arm(qtts_pipeline *p, const qtts_gen_params *gp, const char *text, double rate, arm *a) {
    memset(a, 0, sizeof *a);
    a->first_ms = -1;
    qtts_gen_params g = *gp;
    g.text = rate > 0 ? NULL : text;
    qtts_audio_params ap = qtts_audio_default_params();
    ap.split.enabled = 0; /* one utterance in both arms: the whole text's streaming mode is the reference */
    const qtts_request rq = {&g, &ap, on_chunk, on_done, a, rate > 0};
    char err[512];
    uint64_t id = 0;
    a->t0 = tool_now_ms();
    if (qtts_pipeline_add(p, &rq, &id, err, sizeof err)) {
        fprintf(stderr, "qtts-bench: %s\n", err);
        return -1;
    }
    int n_tok = 0, next = 0;
    size_t *at = rate > 0 ? tokens(text, &n_tok) : NULL;
    while (!a->done) {
        const double now = tool_now_ms();
        while (at && next < n_tok && now >= a->t0 + next * 1e3 / rate) {
            qtts_pipeline_push_text(p, id, text + at[next], at[next + 1] - at[next]);
            if (++next == n_tok) qtts_pipeline_end_text(p, id);
        }
        if (qtts_pipeline_busy(p)) qtts_pipeline_step(p);
        else {
            const double wait = at && next < n_tok ? a->t0 + next * 1e3 / rate - now : 50;
            qtts_pipeline_wait(p, wait < 1 ? 1 : wait > 50 ? 50 : (int)wait);
        }
    }
    free(at);
    return a->st ? -1 : 0;
}

int cmd_textstream(int argc, char **argv) {
    const char *model = NULL, *speaker = "vivian", *language = "english", *weights = "native";
    const char *text = "Voice agents put a language model in front of speech synthesis, so the text arrives a few "
                       "tokens at a time. Every millisecond spent waiting for the whole sentence is latency the "
                       "listener hears, and streaming the text in removes it.";
    int threads = 2, frames = 0, reps = 3;
    double rates[8] = {30, 15, 60};
    int n_rates = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) model = argv[++i];
        else if (!strcmp(a, "-t") && v) threads = atoi(argv[++i]);
        else if (!strcmp(a, "-w") && v) weights = argv[++i];
        else if (!strcmp(a, "-r") && v) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--text") && v) text = argv[++i];
        else if (!strcmp(a, "--speaker") && v) speaker = argv[++i];
        else if (!strcmp(a, "--language") && v) language = argv[++i];
        else if (!strcmp(a, "--frames") && v) frames = atoi(argv[++i]);
        else if (!strcmp(a, "--rate") && v) {
            n_rates = 0;
            for (char *s = argv[++i]; s && *s && n_rates < 8;) {
                rates[n_rates++] = strtod(s, &s);
                if (*s == ',') s++;
                else break;
            }
        } else {
            fprintf(stderr, "usage: qtts-bench textstream -m DIR [-w native|q8|q4] [-t N] [-r N] [--rate R[,R...]] "
                            "[--frames N] [--text STR] [--speaker S] [--language L]\n");
            return 2;
        }
    }
    if (!model || threads < 1 || reps < 1) {
        fprintf(stderr, "qtts-bench textstream: -m DIR is required\n");
        return 2;
    }
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = threads;
    mp.backend = QTTS_BACKEND_CPU;
    mp.weights = !strcmp(weights, "q8") ? QTTS_WEIGHTS_Q8 : !strcmp(weights, "q4") ? QTTS_WEIGHTS_Q4 : QTTS_WEIGHTS_NATIVE;
    qtts_model *m = NULL;
    char err[1024];
    if (qtts_model_load(&m, model, &mp, err, sizeof err)) {
        fprintf(stderr, "qtts-bench: %s\n", err);
        return 1;
    }
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    qtts_pipeline *p = NULL;
    if (qtts_pipeline_new(m, &pp, &p, err, sizeof err)) {
        fprintf(stderr, "qtts-bench: %s\n", err);
        qtts_model_free(m);
        return 1;
    }
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.speaker = speaker;
    gp.language = language;
    gp.text_mode = QTTS_TEXT_MODE_STREAMING;
    gp.seed = 1;
    qtts_gen_debug dbg = qtts_gen_debug_default_params();
    if (frames > 0) { /* synthetic checkpoints never end by themselves: a fixed length per segment */
        dbg.force_frames = frames;
        gp.debug = &dbg;
    }
    int n_tok = 0;
    free(tokens(text, &n_tok));
    printf("# %s, %s weights, %d threads, %zu bytes of text in %d tokens, median of %d\n", model, weights, threads,
           strlen(text), n_tok, reps);
    printf("| text in | tokens/s | text ms | first audio ms | stalls | stall ms | last audio ms | audio s |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int r = -1; r < n_rates; r++) {
        const double rate = r < 0 ? 0 : rates[r];
        double f[16], sc[16], sm[16], e[16], au = 0;
        for (int k = 0; k < reps && k < 16; k++) {
            arm a;
            if (run_arm(p, &gp, text, rate, &a)) {
                fprintf(stderr, "qtts-bench: %s\n", a.err);
                break;
            }
            f[k] = a.first_ms;
            sc[k] = a.n_stalls;
            sm[k] = a.stall_ms;
            e[k] = a.end_ms;
            au = a.delivered_s;
        }
        const int n = reps < 16 ? reps : 16;
        const double text_ms = rate > 0 ? (n_tok - 1) * 1e3 / rate : 0;
        char rs[32];
        snprintf(rs, sizeof rs, rate > 0 ? "%.0f" : "-", rate);
        printf("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f |\n", rate > 0 ? "streamed" : "whole, at once", rs,
               text_ms, bench_summarize(f, n).median, bench_summarize(sc, n).median, bench_summarize(sm, n).median,
               bench_summarize(e, n).median, au);
        if (r < 0) printf("| whole, after the text (derived) | | | text ms + %.0f | | | | |\n", bench_summarize(f, n).median);
    }
    qtts_pipeline_free(p);
    qtts_model_free(m);
    return 0;
}
