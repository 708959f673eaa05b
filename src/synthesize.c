/* qtts_synthesize: the pipeline (src/pipeline.c) with one stream, on the
 * caller's context, driven by the calling thread; its chunks go to the
 * caller's callback and, when asked, into one waveform. Also the audio
 * defaults and qtts_decode_codes (saved codes -> audio in one pass). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "text/split.h"

qtts_split_params qtts_split_default_params(void) {
    const text_split_params tp = text_split_default_params(); /* one source for the split defaults */
    qtts_split_params p = {1, tp.max_chars, tp.sentence_pause_ms, tp.paragraph_pause_ms};
    return p;
}

qtts_audio_params qtts_audio_default_params(void) {
    qtts_audio_params p;
    memset(&p, 0, sizeof p);
    p.first_chunk_frames = 1;
    p.chunk_frames = 4;
    p.overlap = -1;
    p.split = qtts_split_default_params();
    return p;
}

typedef struct synth {
    qtts_audio_fn on_audio;
    void *user;
    int collect;
    float *out;
    size_t n_out, cap_out;
    int oom;
    int done;
    qtts_request_result res;
    char err[QTTS_ERROR_MSG_MAX];
} synth;

static int on_chunk(const qtts_chunk *c, void *u) {
    synth *s = u;
    if (s->collect) {
        if (s->n_out + c->n_samples + 1 > s->cap_out) { /* + 1: room for an ICL lead sample */
            size_t cap = s->cap_out ? s->cap_out : 1 << 16;
            while (cap < s->n_out + c->n_samples + 1) cap *= 2;
            float *o = realloc(s->out, sizeof(float) * cap);
            if (!o) {
                s->oom = 1;
                return 1;
            }
            s->out = o;
            s->cap_out = cap;
        }
        memcpy(s->out + s->n_out, c->pcm, sizeof(float) * c->n_samples);
        s->n_out += c->n_samples;
    }
    return s->on_audio && s->on_audio(c->pcm, c->n_samples, s->user);
}

static void on_done(const qtts_request_result *r, void *u) {
    synth *s = u;
    s->res = *r;
    snprintf(s->err, sizeof s->err, "%s", r->error);
    s->res.error = s->err;
    s->done = 1;
}

qtts_status qtts_synthesize(qtts_context *ctx, const qtts_gen_params *gp, const qtts_audio_params *audio,
                            qtts_audio_fn on_audio, void *user, float **pcm_out, size_t *n_samples) {
    if (!ctx || !gp) return QTTS_ERR_INVALID_ARG;
    if (pcm_out) *pcm_out = NULL;
    if (n_samples) *n_samples = 0;
    const qtts_model *m = ctx->model;
    qtts_audio_params ap = audio ? *audio : qtts_audio_default_params();
    qtts_error e;
    err_clear(&e);
    memset(&ctx->stats, 0, sizeof ctx->stats);
    ctx->n_capped = 0;
    ctx->stop_reason = QTTS_STOP_NONE;
    synth s;
    memset(&s, 0, sizeof s);
    s.on_audio = on_audio;
    s.user = user;
    s.collect = pcm_out != NULL;
    qtts_pipeline *p = NULL;
    qtts_status st = audio_params_validate(&ap, &e);
    if (!st) {
        qtts_pipeline_params pp = qtts_pipeline_default_params();
        pp.decode_threads = ap.overlap < 0 ? m->ops.n_threads > 1 : ap.overlap;
        pp.decode_share_cores = 1;
        pp.reuse_voice_prefix = ctx->params.reuse_voice_prefix;
        st = pipeline_new_on_context(ctx, &pp, &p, &e);
    }
    if (!st) {
        const qtts_request rq = {gp, &ap, on_chunk, on_done, &s, 0};
        st = qtts_pipeline_add(p, &rq, NULL, e.msg, sizeof e.msg);
    }
    if (!st) {
        while (qtts_pipeline_n_requests(p) > 0) {
            if (qtts_pipeline_busy(p)) qtts_pipeline_step(p);
            else qtts_pipeline_wait(p, 1000);
        }
        st = s.res.status;
        if (s.oom && (!st || st == QTTS_ERR_CANCELLED)) st = err_set(&e, QTTS_ERR_NOMEM, "out of memory collecting audio");
        else if (st) snprintf(e.msg, sizeof e.msg, "%s", s.err);
    }
    qtts_pipeline_free(p);
    if (s.done) {
        ctx->stats = s.res.stats;
        ctx->stop_reason = s.res.stop_reason;
        ctx->n_capped = s.res.n_capped;
    }
    if (!st && s.collect && s.res.has_lead_sample) { /* the extra sample goes to the returned waveform only */
        memmove(s.out + 1, s.out, sizeof(float) * s.n_out);
        s.out[0] = s.res.lead_sample;
        s.n_out++;
    }
    if (!st || st == QTTS_ERR_CANCELLED) {
        if (pcm_out) {
            *pcm_out = s.out;
            s.out = NULL;
        }
        if (n_samples) *n_samples = s.collect ? s.n_out : s.res.n_samples;
    }
    free(s.out);
    snprintf(ctx->err, sizeof ctx->err, "%s", st ? e.msg : "");
    return st;
}

qtts_status qtts_decode_codes(qtts_context *ctx, const int32_t *codes, int n_frames, float **pcm, size_t *n_samples) {
    if (!ctx || !pcm || !n_samples || (!codes && n_frames)) return QTTS_ERR_INVALID_ARG;
    *pcm = NULL;
    *n_samples = 0;
    qtts_error e;
    err_clear(&e);
    qtts_status st = QTTS_OK;
    if (!ctx->codec) {
        st = err_set(&e, QTTS_ERR_UNSUPPORTED, "the model was loaded without its speech_tokenizer/ decoder");
    } else if (n_frames < 0) {
        st = err_set(&e, QTTS_ERR_INVALID_ARG, "n_frames must be >= 0");
    } else {
        const size_t n = (size_t)n_frames * codec_decoder_samples_per_frame(ctx->model->codec);
        float *out = malloc(sizeof(float) * (n ? n : 1));
        if (!out) st = err_set(&e, QTTS_ERR_NOMEM, "out of memory for %zu samples", n);
        else {
            codec_stream_reset(ctx->codec);
            codec_stream_set_ops(ctx->codec, &ctx->model->ops); /* nothing else runs: all threads */
            st = codec_stream_decode(ctx->codec, codes, n_frames, out, &e);
            codec_stream_set_ops(ctx->codec, NULL);
            if (st) free(out);
            else {
                *pcm = out;
                *n_samples = n;
            }
        }
    }
    snprintf(ctx->err, sizeof ctx->err, "%s", st ? e.msg : "");
    return st;
}
