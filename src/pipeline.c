/* The synthesis pipeline: text -> frames (generate.c) -> audio (codec decoder),
 * with generation and decoding overlapped. Dataflow: the generating thread
 * appends each frame to a shared queue; a worker thread takes chunks of
 * first_chunk_frames, then chunk_frames, decodes them on the context's codec
 * stream and hands the PCM to the caller. The codec stream is exact, so the
 * chunking never changes a sample. For ICL voice cloning the stream is first
 * primed with the reference frames (their audio is not delivered), which is
 * the official "decode reference + generated, then cut" without re-decoding. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"

qtts_audio_params qtts_audio_default_params(void) {
    qtts_audio_params p;
    p.first_chunk_frames = 1;
    p.chunk_frames = 4;
    p.overlap = 1;
    p.on_frame = NULL;
    p.frame_user = NULL;
    return p;
}

typedef struct synth {
    qtts_context *ctx;
    const qtts_audio_params *ap;
    qtts_audio_fn on_audio;
    void *user;
    int G, spf;               /* codes per frame, samples per frame */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t *frames;          /* [cap][G] produced frames (guarded by mu) */
    int n_frames, cap;
    int done;                 /* generation finished (guarded) */
    int stop;                 /* consumer asked to stop (guarded) */
    int n_decoded;            /* frames decoded so far (consumer only) */
    int32_t *chunk;           /* [max chunk][G] consumer copy */
    float *pcm;               /* [max chunk * spf] consumer scratch */
    int max_chunk;
    float *out;               /* whole waveform (optional) */
    size_t n_out, cap_out;
    int want_out;
    qtts_status st;           /* consumer status */
    qtts_error err;           /* consumer error (written by the consumer only) */
    qtts_status pst;          /* producer-side status (frame callback, queue) */
    qtts_error perr;          /* producer-side error (written by the producer only) */
} synth;

static qtts_status append_out(synth *s, const float *pcm, size_t n) {
    if (s->n_out + n > s->cap_out) {
        size_t cap = s->cap_out ? s->cap_out : 1 << 16;
        while (cap < s->n_out + n) cap *= 2;
        float *o = realloc(s->out, sizeof(float) * cap);
        if (!o) return err_set(&s->err, QTTS_ERR_NOMEM, "out of memory collecting audio");
        s->out = o;
        s->cap_out = cap;
    }
    memcpy(s->out + s->n_out, pcm, sizeof(float) * n);
    s->n_out += n;
    return QTTS_OK;
}

/* Decode and deliver k frames already copied to s->chunk. */
static qtts_status deliver(synth *s, int k) {
    qtts_status st = codec_stream_decode(s->ctx->codec, s->chunk, k, s->pcm, &s->err);
    if (st) return st;
    const size_t n = (size_t)k * s->spf;
    s->n_decoded += k;
    if (s->want_out && (st = append_out(s, s->pcm, n))) return st;
    if (s->on_audio && s->on_audio(s->pcm, n, s->user))
        return err_set(&s->err, QTTS_ERR_CANCELLED, "stopped by the audio callback after %d frames", s->n_decoded);
    return QTTS_OK;
}

static int next_chunk_size(const synth *s) {
    return s->n_decoded == 0 ? s->ap->first_chunk_frames : s->ap->chunk_frames;
}

/* Worker: wait for a full chunk (or the end), copy it out, decode it. */
static void *consumer(void *arg) {
    synth *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int want = next_chunk_size(s);
        while (!s->done && s->n_frames - s->n_decoded < want) pthread_cond_wait(&s->cv, &s->mu);
        int avail = s->n_frames - s->n_decoded;
        int k = avail < want ? avail : want;
        if (k > 0) memcpy(s->chunk, s->frames + (size_t)s->n_decoded * s->G, sizeof(int32_t) * k * s->G);
        const int finished = s->done && avail == k;
        pthread_mutex_unlock(&s->mu);
        if (k > 0) {
            qtts_status st = deliver(s, k);
            if (st) {
                pthread_mutex_lock(&s->mu);
                s->st = st;
                s->stop = 1;
                pthread_mutex_unlock(&s->mu);
                return NULL;
            }
        }
        if (finished) return NULL;
    }
}

static int on_frame(const int32_t *codes, int idx, void *arg) {
    synth *s = arg;
    if (s->ap->on_frame && s->ap->on_frame(codes, idx, s->ap->frame_user)) {
        s->pst = err_set(&s->perr, QTTS_ERR_CANCELLED, "stopped by the frame callback after %d frames", idx);
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n_frames == s->cap) {
        int cap = s->cap * 2;
        int32_t *f = realloc(s->frames, sizeof(int32_t) * cap * s->G);
        if (!f) {
            pthread_mutex_unlock(&s->mu);
            s->pst = err_set(&s->perr, QTTS_ERR_NOMEM, "out of memory queueing frames");
            return 1;
        }
        s->frames = f;
        s->cap = cap;
    }
    memcpy(s->frames + (size_t)s->n_frames * s->G, codes, sizeof(int32_t) * s->G);
    s->n_frames++;
    int stop = s->stop;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (stop || s->ap->overlap) return stop;
    /* inline decoding (overlap = 0): same chunking, same thread */
    int want = next_chunk_size(s);
    if (s->n_frames - s->n_decoded >= want) {
        memcpy(s->chunk, s->frames + (size_t)s->n_decoded * s->G, sizeof(int32_t) * want * s->G);
        s->st = deliver(s, want);
        if (s->st) return 1;
    }
    return 0;
}

static qtts_status validate_audio(const qtts_audio_params *ap, qtts_error *e) {
    if (ap->first_chunk_frames < 1 || ap->chunk_frames < 1 || ap->first_chunk_frames > 4096 || ap->chunk_frames > 4096)
        return err_set(e, QTTS_ERR_INVALID_ARG, "chunk sizes must be in [1, 4096] frames (got first %d, then %d)",
                       ap->first_chunk_frames, ap->chunk_frames);
    return QTTS_OK;
}

qtts_status qtts_synthesize(qtts_context *ctx, const qtts_gen_params *gp, const qtts_audio_params *audio,
                            qtts_audio_fn on_audio, void *user, float **pcm_out, size_t *n_samples) {
    if (!ctx || !gp) return QTTS_ERR_INVALID_ARG;
    if (pcm_out) *pcm_out = NULL;
    if (n_samples) *n_samples = 0;
    qtts_audio_params ap = audio ? *audio : qtts_audio_default_params();
    qtts_error e;
    err_clear(&e);
    qtts_status st = QTTS_OK;
    const qtts_model *m = ctx->model;
    if (!ctx->codec) {
        st = err_set(&e, QTTS_ERR_UNSUPPORTED,
                     "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
        goto out_err;
    }
    if ((st = validate_audio(&ap, &e))) goto out_err;
    synth s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.ap = &ap;
    s.on_audio = on_audio;
    s.user = user;
    s.G = m->cfg.n_code_groups;
    s.spf = codec_decoder_samples_per_frame(m->codec);
    s.want_out = pcm_out != NULL;
    s.cap = 256;
    s.max_chunk = ap.first_chunk_frames > ap.chunk_frames ? ap.first_chunk_frames : ap.chunk_frames;
    s.frames = malloc(sizeof(int32_t) * s.cap * s.G);
    s.chunk = malloc(sizeof(int32_t) * s.max_chunk * s.G);
    s.pcm = malloc(sizeof(float) * (size_t)s.max_chunk * s.spf);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    float ref_last = 0.0f; /* last sample of the reference span (ICL) */
    if (!s.frames || !s.chunk || !s.pcm) {
        st = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
        goto done;
    }
    codec_stream_reset(ctx->codec);
    if (gp->ref_codes && gp->n_ref_frames > 0 && m->cfg.type == QTTS_MODEL_BASE) {
        /* prime the decoder with the reference frames; their audio is not delivered */
        float *tmp = malloc(sizeof(float) * (size_t)gp->n_ref_frames * s.spf);
        if (!tmp) {
            st = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
            goto done;
        }
        st = codec_stream_decode(ctx->codec, gp->ref_codes, gp->n_ref_frames, tmp, &e);
        if (!st) ref_last = tmp[(size_t)gp->n_ref_frames * s.spf - 1];
        free(tmp);
        if (st) goto done;
    }
    pthread_t th;
    int have_thread = 0;
    if (ap.overlap) {
        if (pthread_create(&th, NULL, consumer, &s) != 0) ap.overlap = 0;
        else have_thread = 1;
    }
    int n_frames = 0;
    qtts_status gst = qtts_generate_codes(ctx, gp, on_frame, &s, NULL, &n_frames);
    pthread_mutex_lock(&s.mu);
    s.done = 1;
    pthread_cond_signal(&s.cv);
    pthread_mutex_unlock(&s.mu);
    if (have_thread) pthread_join(th, NULL);
    else if (!s.st && gst == QTTS_OK && s.n_frames > s.n_decoded) {
        int k = s.n_frames - s.n_decoded;
        while (k > 0 && !s.st) {
            int c = next_chunk_size(&s);
            if (c > k) c = k;
            memcpy(s.chunk, s.frames + (size_t)s.n_decoded * s.G, sizeof(int32_t) * c * s.G);
            s.st = deliver(&s, c);
            k -= c;
        }
    }
    if (s.st) { /* the consumer's own failure or stop wins over the generator's cancel */
        st = s.st;
        e = s.err;
    } else if (s.pst) {
        st = s.pst;
        e = s.perr;
    } else if (gst) {
        st = gst;
        snprintf(e.msg, sizeof e.msg, "%s", ctx->err);
    }
    if (!st && s.want_out && gp->ref_codes && gp->n_ref_frames > 0 && m->cfg.type == QTTS_MODEL_BASE) {
        /* official cut: int(ref / total * n_total) may fall one sample before the reference end */
        const int total = gp->n_ref_frames + s.n_frames;
        const size_t ref_n = (size_t)gp->n_ref_frames * s.spf;
        const size_t cut = codec_icl_cut_samples(gp->n_ref_frames, total, (size_t)total * s.spf);
        if (cut < ref_n) {
            float one = ref_last;
            if ((st = append_out(&s, &one, 1)) == QTTS_OK) {
                memmove(s.out + 1, s.out, sizeof(float) * (s.n_out - 1));
                s.out[0] = one;
            } else e = s.err;
        }
    }
    if (!st || st == QTTS_ERR_CANCELLED) {
        if (pcm_out) {
            *pcm_out = s.out;
            s.out = NULL;
        }
        if (n_samples) *n_samples = s.want_out ? s.n_out : (size_t)s.n_decoded * s.spf;
    }
done:
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    free(s.frames);
    free(s.chunk);
    free(s.pcm);
    free(s.out);
out_err:
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
            st = codec_stream_decode(ctx->codec, codes, n_frames, out, &e);
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
