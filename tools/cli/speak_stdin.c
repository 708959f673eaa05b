/* qtts speak --text - with --stdout or --stream: standard input is spoken as
 * it arrives (an incremental-text request on a one-stream pipeline), so that
 * `llm ... | qtts --text - --stdout | aplay ...` starts speaking before the
 * language model has finished. One thread: it polls standard input, hands
 * what arrived to the pipeline (qtts_pipeline_push_text; its end at EOF)
 * and steps the pipeline; audio is decoded beside it and written as it
 * comes. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct sink {
    qtts_audio_fn on_audio;
    void *user;
    size_t n_samples;
    qtts_status st;
    char err[1024];
    int done;
} sink;

static int on_chunk(const qtts_chunk *c, void *u) {
    sink *s = u;
    s->n_samples += c->n_samples;
    return s->on_audio ? s->on_audio(c->pcm, c->n_samples, s->user) : 0;
}

static void on_done(const qtts_request_result *res, void *u) {
    sink *s = u;
    s->st = res->status;
    snprintf(s->err, sizeof s->err, "%s", res->error ? res->error : "");
    s->done = 1;
}

qtts_status cli_speak_stdin(const qtts_model *m, const qtts_gen_params *gp, const qtts_audio_params *ap,
                            qtts_audio_fn on_audio, void *user, size_t *n_samples, char *err, size_t n_err) {
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    qtts_pipeline *p = NULL;
    qtts_status st = qtts_pipeline_new(m, &pp, &p, err, n_err);
    if (st) return st;
    sink s = {on_audio, user, 0, QTTS_OK, "", 0};
    qtts_gen_params g = *gp;
    g.text = NULL;
    const qtts_request rq = {&g, ap, on_chunk, on_done, &s, 1};
    uint64_t id = 0;
    if ((st = qtts_pipeline_add(p, &rq, &id, err, n_err))) {
        qtts_pipeline_free(p);
        return st;
    }
    int eof = 0;
    char buf[4096];
    while (qtts_pipeline_n_requests(p) > 0) {
        const int busy = qtts_pipeline_busy(p);
        if (!eof) {
            struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
            const int pr = poll(&pf, 1, busy ? 0 : 10);
            if (pr > 0) {
                const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
                if (n > 0) qtts_pipeline_push_text(p, id, buf, (size_t)n);
                else if (n == 0 || errno != EINTR) {
                    qtts_pipeline_end_text(p, id);
                    eof = 1;
                }
            }
        }
        if (busy) qtts_pipeline_step(p);
        else if (eof) qtts_pipeline_wait(p, 100);
    }
    qtts_pipeline_free(p);
    *n_samples = s.n_samples;
    if (s.st) snprintf(err, n_err, "%s", s.err);
    return s.st;
}
