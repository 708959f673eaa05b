/* The synthesis pipeline: text -> pieces (text/split.c) -> frames
 * (generate.c) -> audio (codec decoder). Per piece, the generating thread
 * appends each frame to a queue; chunks of first_chunk_frames, then
 * chunk_frames, are decoded on the context's codec stream, either on the
 * generating thread between frames with all the model's threads (overlap = 0)
 * or beside generation (overlap = 1), and the PCM goes to the sink (caller
 * callback and/or the collected waveform). Overlap on a model with worker
 * threads lends one of them to the decoder (ops_async) whenever a chunk is
 * ready: it decodes queued chunks on its own while generation goes on with
 * the other threads, then rejoins generation; so no core is oversubscribed,
 * and the memory-bound generation and the compute-bound decoder share the
 * cores instead of taking turns. The first chunk (earliest audio) and the
 * chunks left when generation ends are decoded on all threads. Without
 * worker threads, overlap runs the decoder in a thread of its own (on the
 * decoder's own pool). The codec stream is exact,
 * so the chunking never changes a sample. For ICL voice cloning the stream is
 * first primed with the reference frames (their audio is not delivered): the
 * official "decode reference + generated, then cut" without decoding twice. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "text/split.h"

qtts_audio_params qtts_audio_default_params(void) {
    qtts_audio_params p;
    memset(&p, 0, sizeof p);
    p.first_chunk_frames = 1;
    p.chunk_frames = 4;
    p.overlap = -1;
    p.split_text = 1;
    const text_split_params tp = text_split_default_params(); /* one source for the split defaults */
    p.max_piece_chars = tp.max_chars;
    p.sentence_pause_ms = tp.sentence_pause_ms;
    p.paragraph_pause_ms = tp.paragraph_pause_ms;
    return p;
}

/* Where audio goes: the caller's callback and/or a growing buffer. Used by one
 * thread at a time (the worker during a piece, the caller between pieces). */
typedef struct sink {
    qtts_stats *stats;    /* first_audio_ms, n_chunks */
    double t0;            /* call start, ms */
    qtts_audio_fn on_audio;
    void *user;
    int collect;
    float *out;
    size_t n_out, cap_out;
    size_t n_delivered;   /* samples given to on_audio */
} sink;

static qtts_status sink_put(sink *k, const float *pcm, size_t n, qtts_error *e) {
    if (k->collect) {
        if (k->n_out + n > k->cap_out) {
            size_t cap = k->cap_out ? k->cap_out : 1 << 16;
            while (cap < k->n_out + n) cap *= 2;
            float *o = realloc(k->out, sizeof(float) * cap);
            if (!o) return err_set(e, QTTS_ERR_NOMEM, "out of memory collecting audio");
            k->out = o;
            k->cap_out = cap;
        }
        memcpy(k->out + k->n_out, pcm, sizeof(float) * n);
        k->n_out += n;
    }
    if (n && k->stats) {
        if (k->stats->n_chunks++ == 0) k->stats->first_audio_ms = now_ms() - k->t0;
    }
    k->n_delivered += n;
    if (k->on_audio && n && k->on_audio(pcm, n, k->user))
        return err_set(e, QTTS_ERR_CANCELLED, "stopped by the audio callback after %.2f s of audio",
                       k->n_delivered / 24000.0);
    return QTTS_OK;
}

typedef struct synth {
    qtts_context *ctx;
    const qtts_audio_params *ap;
    sink *snk;
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
    qtts_status st;           /* consumer status */
    qtts_error err;           /* consumer error (written by the consumer only) */
    qtts_status pst;          /* producer-side status (frame callback, queue) */
    qtts_error perr;          /* producer-side error (written by the producer only) */
    int async;                /* overlap on a worker lent by the model's pool (decode_async) */
    int dec_running;          /* decode_async holds the codec stream (guarded) */
    ops_ctx serial;           /* one thread, the model's kernels: decode_async's compute */
} synth;

/* Decode and deliver k frames already copied to s->chunk, computing on ops
 * (NULL: the decoder's own). */
static qtts_status deliver(synth *s, int k, const ops_ctx *ops) {
    const double t = now_ms();
    codec_stream_set_ops(s->ctx->codec, ops);
    qtts_status st = codec_stream_decode(s->ctx->codec, s->chunk, k, s->pcm, &s->err);
    s->ctx->stats.decode_ms += now_ms() - t;
    if (st) return st;
    s->n_decoded += k;
    return sink_put(s->snk, s->pcm, (size_t)k * s->spf, &s->err);
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
            qtts_status st = deliver(s, k, NULL);
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

/* The decoder on a worker lent by the model's pool (overlap with worker
 * threads): decode the full chunks queued, one after another on this thread,
 * then give the worker back. Past the chunk it was lent for it takes none
 * once generation is done (the generating thread then decodes the rest on
 * all threads). */
static void decode_async(void *arg) {
    synth *s = arg;
    for (int first = 1;; first = 0) {
        pthread_mutex_lock(&s->mu);
        const int want = next_chunk_size(s);
        if (s->stop || (s->done && !first) || s->n_frames - s->n_decoded < want) {
            s->dec_running = 0;
            pthread_cond_signal(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return;
        }
        memcpy(s->chunk, s->frames + (size_t)s->n_decoded * s->G, sizeof(int32_t) * want * s->G);
        pthread_mutex_unlock(&s->mu);
        const qtts_status st = deliver(s, want, &s->serial);
        if (st) {
            pthread_mutex_lock(&s->mu);
            s->st = st;
            s->stop = 1;
            s->dec_running = 0;
            pthread_cond_signal(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return;
        }
    }
}

/* Overlap with a lent worker, on the generating thread after a frame was
 * queued: decode the first chunk here on all threads (the earliest first
 * audio), lend the worker for a later one. 1 = stop generating. */
static int on_frame_async(synth *s) {
    const qtts_model *m = s->ctx->model;
    pthread_mutex_lock(&s->mu);
    int k = 0, lend = 0;
    const int stop = s->stop;
    if (!stop && !s->dec_running && s->n_frames - s->n_decoded >= next_chunk_size(s)) {
        k = next_chunk_size(s);
        if (s->n_decoded > 0) lend = s->dec_running = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (stop) return 1;
    if (lend) {
        if (ops_async(&m->ops, decode_async, s)) return 0;
        pthread_mutex_lock(&s->mu); /* the worker is lent elsewhere (qtts_model_lend_thread): decode here */
        s->dec_running = 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (k) {
        memcpy(s->chunk, s->frames + (size_t)s->n_decoded * s->G, sizeof(int32_t) * k * s->G);
        if ((s->st = deliver(s, k, &m->ops))) return 1;
    }
    return 0;
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
    if (s->async) return on_frame_async(s);
    if (stop || s->ap->overlap) return stop;
    /* inline decoding (overlap = 0): same chunking, same thread */
    int want = next_chunk_size(s);
    if (s->n_frames - s->n_decoded >= want) {
        memcpy(s->chunk, s->frames + (size_t)s->n_decoded * s->G, sizeof(int32_t) * want * s->G);
        s->st = deliver(s, want, &s->ctx->model->ops);
        if (s->st) return 1;
    }
    return 0;
}

/* Reset the context's codec stream for an utterance and, for ICL, prime it
 * with the reference frames (their audio is dropped). *ref_last gets the
 * reference's last sample (for the official cut). */
static qtts_status audio_prime(qtts_context *ctx, const qtts_gen_params *gp, const qtts_voice *voice, float *ref_last,
                               qtts_error *e) {
    const qtts_model *m = ctx->model;
    if (!ctx->codec)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
    codec_stream_reset(ctx->codec);
    if (!(gp->ref_codes && gp->n_ref_frames > 0 && m->cfg.type == QTTS_MODEL_BASE)) return QTTS_OK;
    if (voice && qtts_voice_is_icl(voice)) return voice_prime(voice, ctx->codec, ref_last, e);
    const int spf = codec_decoder_samples_per_frame(m->codec);
    float *tmp = malloc(sizeof(float) * (size_t)gp->n_ref_frames * spf);
    if (!tmp) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    qtts_status st = codec_stream_decode(ctx->codec, gp->ref_codes, gp->n_ref_frames, tmp, e);
    if (!st && ref_last) *ref_last = tmp[(size_t)gp->n_ref_frames * spf - 1];
    free(tmp);
    return st;
}

qtts_status qtts_context_audio_begin(qtts_context *ctx, const qtts_gen_params *gp) {
    if (!ctx || !gp) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    qtts_gen_params v = *gp;
    if (gp->voice) voice_apply(gp->voice, &v);
    if (ctx->params.decode_on_model_threads) codec_stream_set_ops(ctx->codec, &ctx->model->ops);
    qtts_status st = audio_prime(ctx, &v, gp->voice, NULL, &e);
    codec_stream_set_ops(ctx->codec, NULL);
    snprintf(ctx->err, sizeof ctx->err, "%s", st ? e.msg : "");
    return st;
}

qtts_status qtts_context_audio_decode(qtts_context *ctx, const int32_t *codes, int n_frames, float *pcm) {
    if (!ctx || (!codes && n_frames) || (!pcm && n_frames) || n_frames < 0) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    if (ctx->params.decode_on_model_threads) codec_stream_set_ops(ctx->codec, &ctx->model->ops);
    qtts_status st = ctx->codec ? codec_stream_decode(ctx->codec, codes, n_frames, pcm, &e)
                                : err_set(&e, QTTS_ERR_UNSUPPORTED, "the model was loaded without its codec decoder");
    codec_stream_set_ops(ctx->codec, NULL);
    snprintf(ctx->err, sizeof ctx->err, "%s", st ? e.msg : "");
    return st;
}

/* One piece: prime (ICL), generate with overlapped decoding, flush. Sets
 * *ref_last to the last reference sample (ICL) for the official cut. */
static qtts_status synth_piece(qtts_context *ctx, const qtts_gen_params *gp, const qtts_voice *voice,
                               const qtts_audio_params *ap, sink *snk, int *n_frames_out, float *ref_last,
                               qtts_error *e) {
    const qtts_model *m = ctx->model;
    synth s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.ap = ap;
    s.snk = snk;
    s.G = m->cfg.n_code_groups;
    s.spf = codec_decoder_samples_per_frame(m->codec);
    s.cap = 256;
    s.max_chunk = ap->first_chunk_frames > ap->chunk_frames ? ap->first_chunk_frames : ap->chunk_frames;
    s.frames = malloc(sizeof(int32_t) * s.cap * s.G);
    s.chunk = malloc(sizeof(int32_t) * s.max_chunk * s.G);
    s.pcm = malloc(sizeof(float) * (size_t)s.max_chunk * s.spf);
    qtts_status st = QTTS_OK;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    if (!s.frames || !s.chunk || !s.pcm) {
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Priming, and decoding between frames (overlap = 0), run on this thread
     * while generation waits: they get all the model's threads. With overlap
     * a worker of the model's pool is lent to the decoder (decode_async), or,
     * when the model has no workers, a thread of its own runs it on the
     * decoder's own pool (consumer). */
    codec_stream_set_ops(ctx->codec, &m->ops);
    if ((st = audio_prime(ctx, gp, voice, ref_last, e))) goto done;
    qtts_audio_params local = *ap;
    if (local.overlap < 0) local.overlap = m->ops.n_threads > 1;
    s.ap = &local;
    pthread_t th;
    int have_thread = 0;
    if (local.overlap && m->ops.n_threads > 1) {
        s.async = 1;
        s.serial = m->ops;
        s.serial.n_threads = 1;
        s.serial.rt = NULL;
    } else if (local.overlap) {
        if (pthread_create(&th, NULL, consumer, &s) != 0) local.overlap = 0;
        else have_thread = 1;
    }
    int n_frames = 0;
    qtts_status gst = qtts_generate_codes(ctx, gp, on_frame, &s, NULL, &n_frames);
    pthread_mutex_lock(&s.mu);
    s.done = 1;
    pthread_cond_signal(&s.cv);
    while (s.dec_running) pthread_cond_wait(&s.cv, &s.mu); /* decode_async touches s no more */
    pthread_mutex_unlock(&s.mu);
    if (have_thread) pthread_join(th, NULL);
    else
        while (!s.st && s.n_frames > s.n_decoded) {
            int c = next_chunk_size(&s), k = s.n_frames - s.n_decoded;
            if (c > k) c = k;
            memcpy(s.chunk, s.frames + (size_t)s.n_decoded * s.G, sizeof(int32_t) * c * s.G);
            s.st = deliver(&s, c, &m->ops);
        }
    if (s.st) { /* the consumer's own failure or stop wins over the generator's cancel */
        st = s.st;
        *e = s.err;
    } else if (s.pst) {
        st = s.pst;
        *e = s.perr;
    } else if (gst) {
        st = gst;
        snprintf(e->msg, sizeof e->msg, "%s", ctx->err);
    }
    if (n_frames_out) *n_frames_out = s.n_frames;
done:
    codec_stream_set_ops(ctx->codec, NULL);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    free(s.frames);
    free(s.chunk);
    free(s.pcm);
    return st;
}

static qtts_status validate_audio(const qtts_audio_params *ap, qtts_error *e) {
    if (ap->first_chunk_frames < 1 || ap->chunk_frames < 1 || ap->first_chunk_frames > 4096 || ap->chunk_frames > 4096)
        return err_set(e, QTTS_ERR_INVALID_ARG, "chunk sizes must be in [1, 4096] frames (got first %d, then %d)",
                       ap->first_chunk_frames, ap->chunk_frames);
    if (ap->overlap < -1 || ap->overlap > 1)
        return err_set(e, QTTS_ERR_INVALID_ARG, "overlap must be -1 (auto), 0 or 1 (got %d)", ap->overlap);
    if (ap->split_text && ap->max_piece_chars < 16)
        return err_set(e, QTTS_ERR_INVALID_ARG, "max_piece_chars must be >= 16 (got %d)", ap->max_piece_chars);
    if (ap->sentence_pause_ms < 0 || ap->paragraph_pause_ms < 0 || ap->sentence_pause_ms > 10000 ||
        ap->paragraph_pause_ms > 10000)
        return err_set(e, QTTS_ERR_INVALID_ARG, "pauses must be in [0, 10000] ms");
    return QTTS_OK;
}

static qtts_status put_silence(sink *k, int ms, qtts_error *e) {
    static const float zeros[1024];
    size_t n = (size_t)ms * 24;
    while (n) {
        size_t c = n < 1024 ? n : 1024;
        qtts_status st = sink_put(k, zeros, c, e);
        if (st) return st;
        n -= c;
    }
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
    memset(&ctx->stats, 0, sizeof ctx->stats);
    sink snk = {&ctx->stats, now_ms(), on_audio, user, pcm_out != NULL, NULL, 0, 0, 0};
    text_piece *pieces = NULL;
    int n_pieces = 1;
    char *piece_text = NULL;
    ctx->n_capped = 0;
    ctx->stop_reason = QTTS_STOP_NONE;
    if (!ctx->codec) {
        st = err_set(&e, QTTS_ERR_UNSUPPORTED,
                     "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
        goto out;
    }
    if ((st = validate_audio(&ap, &e))) goto out;
    qtts_gen_params vgp;
    const qtts_voice *voice = gp->voice;
    if (gp->voice) { /* resolve the voice here so ICL priming sees its reference codes */
        if (gp->xvector || gp->ref_codes) {
            st = err_set(&e, QTTS_ERR_INVALID_ARG, "give a voice or its parts (x-vector, reference codes), not both");
            goto out;
        }
        vgp = *gp;
        voice_apply(gp->voice, &vgp);
        vgp.voice = NULL;
        gp = &vgp;
    }
    if (gp->text && !gp->text_ids && ap.split_text) {
        text_split_params tp = {ap.max_piece_chars, ap.sentence_pause_ms, ap.paragraph_pause_ms};
        if ((st = text_split(gp->text, strlen(gp->text), &tp, &pieces, &n_pieces, &e))) goto out;
        if (n_pieces == 0) {
            st = err_set(&e, QTTS_ERR_INPUT, "empty text: nothing to say");
            goto out;
        }
        piece_text = malloc(strlen(gp->text) + 1);
        if (!piece_text) {
            st = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    float ref_last = 0.0f;
    int n_frames = 0;
    for (int i = 0; i < n_pieces && !st; i++) {
        qtts_gen_params pp = *gp;
        if (pieces) {
            size_t l = pieces[i].end - pieces[i].begin;
            memcpy(piece_text, gp->text + pieces[i].begin, l);
            piece_text[l] = 0;
            pp.text = piece_text;
            pp.seed = gp->seed + (uint64_t)i;
            if (n_pieces > 1) model_log(m, QTTS_LOG_DEBUG, "piece %d/%d: %s", i + 1, n_pieces, piece_text);
        }
        if (ap.on_piece && ap.on_piece(i, n_pieces, pp.text ? pp.text : "", ap.piece_user)) {
            st = err_set(&e, QTTS_ERR_CANCELLED, "stopped by the piece callback before piece %d", i + 1);
            ctx->stop_reason = QTTS_STOP_CANCELLED;
            break;
        }
        ctx->keep_stats = 1;
        st = synth_piece(ctx, &pp, voice, &ap, &snk, &n_frames, &ref_last, &e);
        ctx->keep_stats = 0;
        if (ctx->stop_reason == QTTS_STOP_LENGTH_CAP) ctx->n_capped++;
        if (!st && pieces && pieces[i].pause_after_ms > 0 && i + 1 < n_pieces)
            st = put_silence(&snk, pieces[i].pause_after_ms, &e);
    }
    if (st == QTTS_ERR_CANCELLED) ctx->stop_reason = QTTS_STOP_CANCELLED;
    if (!st && snk.collect && n_pieces == 1 && gp->ref_codes && gp->n_ref_frames > 0 && m->cfg.type == QTTS_MODEL_BASE) {
        /* official cut: int(ref / total * n_total) may fall one sample before the reference end */
        const int spf = codec_decoder_samples_per_frame(m->codec);
        const int total = gp->n_ref_frames + n_frames;
        const size_t ref_n = (size_t)gp->n_ref_frames * spf;
        const size_t cut = codec_icl_cut_samples(gp->n_ref_frames, total, (size_t)total * spf);
        if (cut < ref_n) {
            snk.on_audio = NULL; /* the extra sample goes to the returned waveform only */
            snk.stats = NULL;
            if ((st = sink_put(&snk, &ref_last, 1, &e)) == QTTS_OK) {
                memmove(snk.out + 1, snk.out, sizeof(float) * (snk.n_out - 1));
                snk.out[0] = ref_last;
            }
        }
    }
    if (!st || st == QTTS_ERR_CANCELLED) {
        if (pcm_out) {
            *pcm_out = snk.out;
            snk.out = NULL;
        }
        if (n_samples) *n_samples = snk.collect ? snk.n_out : snk.n_delivered;
    }
out:
    free(snk.out);
    free(pieces);
    free(piece_text);
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
