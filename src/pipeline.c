/* The synthesis pipeline (qtts_pipeline_*, see qtts.h): requests -> text
 * segments (text/split.c) -> one batched frame step for every generating
 * stream (generate.c) -> chunks of codes -> codec decoder -> PCM to each
 * request's callback, segments joined by their pauses.
 *
 * Each stream is a slot with a context of its own. A slot's life per
 * segment: WAITING (a new request, or the next segment of its request) ->
 * prefilled by qtts_pipeline_step, oldest first, within the prefill budget:
 * voice priming of its codec stream + gen_begin -> ACTIVE: stepped with the
 * others; its frames are queued by the frame callback and handed to its
 * decode thread (slot i -> thread i mod n) once a chunk is full -> DRAINING
 * when its generation ends: its last task decodes the rest, then either puts
 * the pause and makes the slot WAITING for the next segment, or ends the
 * request (on_done) and frees the slot.
 *
 * Decode threads: first chunks and cancellations first (a stream waiting for
 * its first audio, a slot to free), then chunks in order, decoded frame by
 * frame so a waiting first chunk never waits more than one frame; an urgent
 * task run between two frames decodes into its own buffer, and a chunk whose
 * request was cancelled meanwhile stops there. A slot's last task is part of
 * the slot (never allocated), so a thread touches nothing of it once it let
 * the slot go. A decode thread computes on one core; with decode_share_cores
 * it parks one of the model's workers while it has chunks (backend/cpu/lend.h).
 * Without decode threads, chunks are decoded on the driving thread after each
 * step on all of the model's threads. A stream's first chunk is decoded on
 * the driving thread inside the step, as soon as its frames exist, when there
 * are no decode threads or it is the only stream stepped: the earliest first
 * audio, and nothing else waits for it. For qtts_synthesize's one stream
 * (solo) a decode thread takes each chunk in one call, and when a segment's
 * generation ends its rest is decoded on the driving thread on all threads
 * once the decode thread is done with the chunks before it; the chunks it
 * still has then (a decoder slower than generation on one core falls
 * behind) it decodes on all of the model's threads, as the pool's caller.
 *
 * Thread safety: the driving thread steps a context (generation state) while
 * its decode thread decodes (codec state): disjoint parts of the context.
 * Calls that touch the rest (priming, gen_begin, gen_end) happen only while
 * the other thread leaves that context alone (the slot is WAITING, or
 * DRAINING and its last task runs). The codec stream is exact, so which
 * thread decodes and how the chunks fall never changes a sample. */
#include "pipeline.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/lend.h"
#include "model/voice.h"
#include "text/split.h"
#include "text_stream.h"
#include "util/clock.h"

#define MAX_CHUNK 64 /* frames per chunk at most (qtts_audio_params) */

enum { SLOT_FREE = 0, SLOT_WAITING, SLOT_ACTIVE, SLOT_DRAINING };

/* A request in the pipeline. Its stages run on one thread at a time (the
 * driving thread while it prefills and steps, the decode side while a
 * segment drains); the outcome fields are handed over with the slot. */
typedef struct preq {
    uint64_t id;
    qtts_gen_params gp;       /* the caller's (its pointers borrowed until on_done) */
    qtts_audio_params ap;
    int (*on_audio)(const qtts_chunk *chunk, void *user);
    void (*on_done)(const qtts_request_result *result, void *user);
    void *user;
    text_piece *segs;         /* the segments; NULL when the request is one (ids, or splitting off) */
    int n_segs;
    char *seg_text;           /* the current segment's text, borrowed by its generation */
    int seg;                  /* current segment */
    atomic_int cancel;
    atomic_int refs;          /* the slot's and each queued task's */
    qtts_status st;           /* first failure (guarded by the pipeline's mu) */
    char err[QTTS_ERROR_MSG_MAX];
    int n_frames, n_capped, n_chunks;
    qtts_stop_reason stop;
    size_t n_samples;
    double t0, first_audio_ms, decode_ms;
    int n_device_codes;       /* frames decoded from the device's code ring */
    int n_ref_frames;         /* ICL reference frames of the voice (0 without ICL) */
    float ref_last;           /* ICL: the reference's last sample */
    /* incremental text (qtts_request.incremental_text): NULL otherwise */
    text_stream *it;          /* input under the pipeline's mu, the rest the driver's */
    atomic_int it_dirty;      /* text or its end arrived since the driver looked */
    int it_streaming;         /* the text mode is streaming: a segment starts before its end */
    int it_started;           /* the current segment's generation began (open or whole) */
    int it_open_gen;          /* ... with its text still open (gen_begin_open) */
    int it_fed;               /* its template ids handed to the generation */
    int it_need;              /* text ids its open prefill waits for */
    int it_announced;         /* on_segment called for the current segment */
    int it_drop;              /* the current segment's generation is over: its text is skipped to its end */
} preq;

typedef struct dtask {
    struct slot *sl;
    preq *r;                  /* a reference of its own */
    unsigned epoch;           /* the slot's segment it belongs to */
    int32_t *codes;           /* [n][G] */
    int64_t serial0;          /* the device code ring's number of codes[0] (lmv_code_ring); -1: none */
    int n;
    int final;                /* the segment's generation ended: finish it */
    struct dtask *next;
} dtask;

typedef struct slot {
    struct qtts_pipeline *p;
    int index;
    qtts_context *ctx;
    preq *r;                  /* set while not free; changed under the pipeline's mu */
    atomic_int state;         /* SLOT_*: WAITING->ACTIVE->DRAINING by the driver, DRAINING->WAITING|FREE by the decode side */
    atomic_uint epoch;        /* segments admitted into this slot so far */
    unsigned long long wait_seq; /* order it became WAITING (guarded) */
    int32_t *pending;         /* [MAX_CHUNK][G] frames not yet handed over (driver) */
    int n_pending;
    int64_t pending_serial0;  /* the device code ring's number of pending[0]; -1: not all in one run */
    int n_sent;               /* frames handed over in this segment (driver) */
    int n_new;                /* frames made in the current step (driver) */
    atomic_int failed;        /* decoding failed: the stream stops, the request ends with it */
    qtts_status fail_st;
    char fail_msg[QTTS_ERROR_MSG_MAX];
    dtask final_task;         /* the segment's last task, never allocated */
    uint64_t voice_key;       /* voice of the last request admitted here (0: none); driver */
    unsigned long long last_admit;
} slot;

typedef struct dworker {
    struct qtts_pipeline *p;
    pthread_t th;
    int have_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dtask *hi, *hi_tail;      /* first chunks, cancelled slots */
    dtask *lo, *lo_tail;      /* later chunks, in order */
    atomic_int n_hi;
    int stop;
    int idle;                 /* waiting for tasks with no pool worker parked (guarded) */
    pthread_cond_t idle_cv;   /* signalled when idle becomes 1 */
    int drain;                /* the driver waits for this thread's queue with the model idle (solo, a
                                 segment's end): its chunks run on all the model's threads (guarded) */
    float *pcm;               /* [MAX_CHUNK * spf] */
    float *pcm_urgent;        /* [MAX_CHUNK * spf] an urgent task run between two frames */
    pool_lend lend;
    int lend_init;
} dworker;

struct qtts_pipeline {
    const qtts_model *m;
    qtts_pipeline_params p;
    qtts_pipeline_debug dbg;
    int G, spf;
    int n_slots;
    slot *slots;
    int borrowed;             /* slots[0].ctx is the caller's */
    int solo;                 /* qtts_synthesize's one stream: decode threads take whole chunks, and a
                                 segment's rest is decoded on the driving thread on all threads */
    step_scratch ss;          /* own streams' step scratch */
    step_scratch *step_ss;
    qtts_context **cs;        /* [n_slots] streams of a step */
    int n_workers;            /* decode threads (0: decode on the driving thread) */
    dworker *workers;
    int share;                /* decode threads park a model worker while busy */
    ops_ctx serial;           /* one core, the model's kernels: a decode thread's compute */
    float *pcm_inline;        /* [MAX_CHUNK * spf] chunks decoded on the driving thread */
    pthread_mutex_t mu;       /* slot hand-overs, request failures, wait */
    pthread_cond_t cv;
    unsigned long long seq, n_admitted;
    uint64_t next_id;
    qtts_step_info last;
    double cb_decode_ms;      /* first chunks decoded inside the current step */
};

qtts_pipeline_params qtts_pipeline_default_params(void) {
    qtts_pipeline_params p;
    memset(&p, 0, sizeof p);
    p.max_streams = 1;
    p.decode_threads = -1;
    p.decode_share_cores = -1;
    p.prefill_budget_ms = 100;
    p.reuse_voice_prefix = 1;
    return p;
}

/* ---------------------------------------------------------------- requests */

static void req_release(preq *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    free(r->segs);
    free(r->seg_text);
    if (r->it) text_stream_free(r->it);
    free(r->it);
    free(r);
}

/* Record the request's first failure. */
static void req_fail(qtts_pipeline *p, preq *r, qtts_status st, const char *fmt, ...) {
    pthread_mutex_lock(&p->mu);
    if (!r->st) {
        r->st = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, sizeof r->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&p->mu);
}

static qtts_status req_status(qtts_pipeline *p, preq *r) {
    pthread_mutex_lock(&p->mu);
    const qtts_status st = r->st;
    pthread_mutex_unlock(&p->mu);
    return st;
}

/* Samples to the request's callback. Returns 0, or 1 when the request stops. */
static int put_audio(qtts_pipeline *p, preq *r, const float *pcm, size_t n, int pause, double decode_ms) {
    r->decode_ms += decode_ms;
    if (!n) return 0;
    if (!pause && r->n_chunks++ == 0) r->first_audio_ms = now_ms() - r->t0;
    r->n_samples += n;
    qtts_chunk c = {pcm, n, r->seg, r->n_segs, pause, decode_ms};
    if (r->on_audio && r->on_audio(&c, r->user)) {
        atomic_store(&r->cancel, 1);
        req_fail(p, r, QTTS_ERR_CANCELLED, "stopped by the audio callback after %.2f s of audio",
                 r->n_samples / (double)codec_decoder_sample_rate_hz(p->m->codec));
        return 1;
    }
    return 0;
}

static int put_pause(qtts_pipeline *p, preq *r, int ms) {
    static const float zeros[1024];
    size_t n = (size_t)ms * (size_t)codec_decoder_sample_rate_hz(p->m->codec) / 1000;
    while (n) {
        const size_t c = n < 1024 ? n : 1024;
        if (put_audio(p, r, zeros, c, 1, 0.0)) return 1;
        n -= c;
    }
    return 0;
}

static void free_slot(qtts_pipeline *p, slot *sl) {
    const int index = sl->index;
    pthread_mutex_lock(&p->mu);
    sl->r = NULL;
    atomic_store(&sl->state, SLOT_FREE);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->p.on_wake) p->p.on_wake(p->p.wake_user);
    if (p->dbg.slot_freed) p->dbg.slot_freed(p->dbg.arg, index);
}

/* The request leaves: its outcome to on_done, its slot freed. */
static void request_end(qtts_pipeline *p, slot *sl, preq *r) {
    qtts_request_result res;
    memset(&res, 0, sizeof res);
    pthread_mutex_lock(&p->mu);
    res.status = r->st;
    pthread_mutex_unlock(&p->mu);
    res.error = res.status ? r->err : "";
    res.stop_reason = res.status == QTTS_ERR_CANCELLED ? QTTS_STOP_CANCELLED : r->stop;
    res.n_frames = r->n_frames;
    res.n_segments = r->n_segs;
    res.n_capped = r->n_capped;
    res.n_samples = r->n_samples;
    if (r->n_ref_frames > 0 && r->n_segs == 1) { /* official cut: int(ref / total * n_total) may fall one sample early */
        const int total = r->n_ref_frames + r->n_frames;
        const size_t ref_n = (size_t)r->n_ref_frames * p->spf;
        res.has_lead_sample = codec_icl_cut_samples(r->n_ref_frames, total, (size_t)total * p->spf) < ref_n;
        res.lead_sample = r->ref_last;
    }
    res.stats = sl->ctx->stats;
    res.stats.decode_ms = r->decode_ms;
    res.stats.first_audio_ms = r->first_audio_ms;
    res.stats.n_chunks = r->n_chunks;
    res.stats.n_device_codes = r->n_device_codes;
    sl->ctx->stop_reason = res.stop_reason;
    sl->ctx->n_capped = r->n_capped;
    if (r->on_done) r->on_done(&res, r->user);
    free_slot(p, sl);
    req_release(r); /* the slot's */
}

/* ---------------------------------------------------------------- decoding */

static dworker *worker_of(const qtts_pipeline *p, const slot *sl) { return &p->workers[sl->index % p->n_workers]; }

static int slot_is_mine(qtts_pipeline *p, const slot *sl, const preq *r, unsigned epoch) {
    pthread_mutex_lock(&p->mu);
    const int mine = sl->r == r && atomic_load(&sl->epoch) == epoch;
    pthread_mutex_unlock(&p->mu);
    return mine;
}

static void run_task(qtts_pipeline *p, dworker *w, dtask *t, float *pcm, const ops_ctx *ops, int nested);

static dtask *pop(dworker *w, int hi_only) {
    dtask *t = w->hi;
    if (t) {
        w->hi = t->next;
        if (!w->hi) w->hi_tail = NULL;
        atomic_fetch_sub(&w->n_hi, 1);
    } else if (!hi_only && (t = w->lo)) {
        w->lo = t->next;
        if (!w->lo) w->lo_tail = NULL;
    }
    return t;
}

/* Between two frames of a chunk: anything urgent (a first chunk, a slot to
 * free) goes first, into its own buffer. */
static void run_urgent(qtts_pipeline *p, dworker *w) {
    for (;;) {
        pthread_mutex_lock(&w->mu);
        dtask *u = pop(w, 1);
        pthread_mutex_unlock(&w->mu);
        if (!u) return;
        run_task(p, w, u, w->pcm_urgent, &p->serial, 1);
    }
}

/* The slot waits for the request's next segment (the driver admits it). */
static void next_segment(qtts_pipeline *p, slot *sl, preq *r) {
    pthread_mutex_lock(&p->mu);
    r->seg++;
    sl->wait_seq = ++p->seq;
    atomic_store(&sl->state, SLOT_WAITING);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->p.on_wake) p->p.on_wake(p->p.wake_user);
}

/* The end of a segment, on the decode side once its last chunk is out:
 * collect its generation, then the next segment (after its pause) or the
 * request's end. */
static void segment_end(qtts_pipeline *p, slot *sl, preq *r) {
    qtts_error e;
    err_clear(&e);
    int nf = 0;
    const qtts_status st = gen_end(sl->ctx, NULL, &nf, &e);
    r->n_frames += nf;
    r->stop = sl->ctx->stop_reason;
    if (r->stop == QTTS_STOP_LENGTH_CAP) r->n_capped++;
    if (atomic_load(&sl->failed)) req_fail(p, r, sl->fail_st ? sl->fail_st : QTTS_ERR_NOMEM, "%s", sl->fail_msg);
    if (st) req_fail(p, r, st, "%s", e.msg);
    if (atomic_load(&r->cancel)) req_fail(p, r, QTTS_ERR_CANCELLED, "cancelled after %d frames", r->n_frames);
    if (r->it && !req_status(p, r)) { /* incremental text: the driver opens the next segment or ends the request */
        next_segment(p, sl, r);
        return;
    }
    if (!req_status(p, r) && r->seg + 1 < r->n_segs && !put_pause(p, r, r->segs[r->seg].pause_after_ms)) {
        next_segment(p, sl, r);
        return;
    }
    request_end(p, sl, r);
}

/* Decode a task's frames into pcm on ops and deliver them; a final task then
 * ends its segment. nested: run between two frames of another task (no
 * further nesting). */
static void run_task(qtts_pipeline *p, dworker *w, dtask *t, float *pcm, const ops_ctx *ops, int nested) {
    slot *sl = t->sl;
    preq *r = t->r;
    const int mine = slot_is_mine(p, sl, r, t->epoch); /* a task of a cancelled request may linger */
    const int live = mine && !atomic_load(&r->cancel) && !atomic_load(&sl->failed);
    if (live && t->n) {
        /* A decode thread decodes frame by frame so that an urgent task
         * waits at most one frame; on the driving thread, or for
         * qtts_synthesize's one stream, nothing can arrive meanwhile, so the
         * chunk goes in one call (the decoder's early stages are a few steps
         * long per frame, its pre-transformer reads its weights once per
         * call). */
        const int per_call = w && !p->solo ? 1 : t->n;
        const double t0 = now_ms();
        int done = 0, lost = 0;
        codec_stream_set_ops(sl->ctx->codec, ops);
        while (done < t->n) {
            if (done > 0 && w && !nested && atomic_load(&w->n_hi) > 0) {
                run_urgent(p, w);
                /* one of them may have been this request's last task (it was
                 * cancelled): then the slot is free, perhaps another's, and its
                 * context (its codec stream too) is not ours to touch */
                if (!slot_is_mine(p, sl, r, t->epoch)) {
                    lost = 1;
                    break;
                }
                if (atomic_load(&r->cancel)) break;
                codec_stream_set_ops(sl->ctx->codec, ops);
            }
            const int k = t->n - done < per_call ? t->n - done : per_call;
            qtts_error e;
            err_clear(&e);
            int on_dev = 0;
            qtts_status st = codec_stream_decode_at(sl->ctx->codec, t->codes + (size_t)done * p->G, k,
                                                    t->serial0 < 0 ? -1 : t->serial0 + done,
                                                    pcm + (size_t)done * p->spf, &on_dev, &e);
            if (on_dev) r->n_device_codes += k;
            if (st) {
                sl->fail_st = st;
                snprintf(sl->fail_msg, sizeof sl->fail_msg, "decoding audio failed: %.900s", e.msg);
                atomic_store(&sl->failed, 1);
                break;
            }
            done += k;
            if (w && p->dbg.frame_decoded) p->dbg.frame_decoded(p->dbg.arg, sl->index, done, t->n);
        }
        if (!lost) codec_stream_set_ops(sl->ctx->codec, NULL);
        if (done == t->n) {
            if (put_audio(p, r, pcm, (size_t)t->n * p->spf, 0, now_ms() - t0)) atomic_store(&sl->failed, 1);
        }
    }
    /* A final task lives in its slot (sl->final_task): once the slot is let
     * go the driver may admit the next segment and write its final task
     * there, so nothing of t is touched after segment_end. */
    const int allocated = t != &sl->final_task;
    const int final = t->final;
    free(t->codes);
    t->codes = NULL;
    if (allocated) free(t);
    if (final && mine) segment_end(p, sl, r);
    req_release(r); /* the task's */
}

/* Hand the slot's pending frames (copied) to decoding; hi = ahead of the
 * chunks. A final task always gets through (it is the slot's own). On the
 * driving thread (no decode threads, or inline) it runs at once. */
static void send_frames(qtts_pipeline *p, slot *sl, int final, int hi, int inline_now) {
    dtask *t = final ? &sl->final_task : calloc(1, sizeof *t);
    int32_t *codes = t && sl->n_pending ? malloc(sizeof(int32_t) * (size_t)sl->n_pending * p->G) : NULL;
    if (!t || (sl->n_pending && !codes)) { /* out of memory: the stream ends with it */
        sl->fail_st = QTTS_ERR_NOMEM;
        snprintf(sl->fail_msg, sizeof sl->fail_msg, "out of memory queueing frames");
        atomic_store(&sl->failed, 1);
        if (!final) {
            free(t);
            sl->n_pending = 0;
            return;
        }
    }
    memset(t, 0, sizeof *t);
    if (codes) memcpy(codes, sl->pending, sizeof(int32_t) * (size_t)sl->n_pending * p->G);
    t->sl = sl;
    t->r = sl->r;
    t->epoch = atomic_load(&sl->epoch);
    atomic_fetch_add(&t->r->refs, 1);
    t->codes = codes;
    t->serial0 = sl->pending_serial0;
    t->n = codes ? sl->n_pending : 0;
    t->final = final;
    sl->n_sent += t->n;
    sl->n_pending = 0;
    dworker *w = p->n_workers ? worker_of(p, sl) : NULL;
    if (w && final && p->solo) { /* the rest goes on all threads once the chunks before it are out */
        pthread_mutex_lock(&w->mu);
        w->drain = 1;
        while (!w->idle || w->hi || w->lo) pthread_cond_wait(&w->idle_cv, &w->mu);
        w->drain = 0;
        pthread_mutex_unlock(&w->mu);
        inline_now = 1;
    }
    if (!w || inline_now) {
        run_task(p, NULL, t, p->pcm_inline, &p->m->ops, 0);
        return;
    }
    pthread_mutex_lock(&w->mu);
    dtask **head = hi ? &w->hi : &w->lo, **tail = hi ? &w->hi_tail : &w->lo_tail;
    if (*tail) (*tail)->next = t;
    else *head = t;
    *tail = t;
    if (hi) atomic_fetch_add(&w->n_hi, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg) {
    dworker *w = arg;
    qtts_pipeline *p = w->p;
    int lent = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        dtask *t = pop(w, 0);
        if (!t && lent) { /* nothing queued: give the worker back before waiting */
            pthread_mutex_unlock(&w->mu);
            pool_lend_give_back(&w->lend);
            lent = 0;
            continue;
        }
        if (!t) {
            w->idle = 1;
            pthread_cond_broadcast(&w->idle_cv);
        }
        while (!t && !w->stop) {
            pthread_cond_wait(&w->cv, &w->mu);
            t = pop(w, 0);
        }
        w->idle = 0;
        /* The driver waits for this queue and generates nothing meanwhile
         * (a decoder slower than generation on one core leaves chunks queued
         * when generation ends): the chunks go on all the model's threads,
         * this thread the pool's caller, with the parked worker given back. */
        const int all = w->drain;
        pthread_mutex_unlock(&w->mu);
        if (!t) break; /* stopping and nothing left */
        if (all && lent) {
            pool_lend_give_back(&w->lend);
            lent = 0;
        }
        if (p->share && !lent && !all) lent = pool_lend_take(&w->lend, &p->m->ops);
        const ops_ctx *ops = all ? &p->m->ops : &p->serial;
        if (p->dbg.chunk_begun) p->dbg.chunk_begun(p->dbg.arg, t->sl->index, t->n, ops->n_threads);
        run_task(p, w, t, w->pcm, ops, 0);
    }
    if (lent) pool_lend_give_back(&w->lend);
    return NULL;
}

/* ---------------------------------------------------------------- the step */

static int chunk_want(const slot *sl) {
    return sl->n_sent == 0 ? sl->r->ap.first_chunk_frames : sl->r->ap.chunk_frames;
}

static int on_frame(const int32_t *codes, int idx, void *u) {
    slot *sl = u;
    qtts_pipeline *p = sl->p;
    preq *r = sl->r;
    if (r->ap.on_frame && r->ap.on_frame(codes, idx, r->ap.frame_user)) {
        req_fail(p, r, QTTS_ERR_CANCELLED, "stopped by the frame callback after %d frames", r->n_frames + idx);
        atomic_store(&r->cancel, 1);
    }
    if (atomic_load(&r->cancel) || atomic_load(&sl->failed)) return 1;
    const int64_t serial = gen_frame_serial(sl->ctx);
    if (sl->n_pending == 0) sl->pending_serial0 = serial;
    else if (sl->pending_serial0 >= 0 && sl->pending_serial0 + sl->n_pending != serial) sl->pending_serial0 = -1;
    memcpy(sl->pending + (size_t)sl->n_pending * p->G, codes, sizeof(int32_t) * p->G);
    sl->n_pending++;
    sl->n_new++;
    /* A stream's first chunk is decoded here, as soon as its frames exist,
     * not after the rest of the step: its first audio comes that much
     * sooner. The model's pool is idle between the step's phases; the time
     * is taken out of the step's (cb_decode_ms). */
    if (sl->n_sent == 0 && sl->n_pending >= chunk_want(sl) && (p->n_workers == 0 || p->last.n_streams == 1)) {
        const double t = now_ms();
        send_frames(p, sl, 0, 1, 1);
        p->cb_decode_ms += now_ms() - t;
    }
    return 0;
}

/* Prefill the current segment of the request in slot sl (WAITING, taken by
 * the caller) and start its generation. */
/* ---------------------------------------------------------------- incremental text */

/* An incremental request's WAITING slot can be admitted now: it ends, or its
 * current segment's prefill has what it needs (driver). */
static int it_ready(const preq *r) {
    const text_stream *it = r->it;
    if (atomic_load(&r->cancel) || it->done) return 1;
    if (!it->open || r->it_drop || r->it_started) return 0;
    int n;
    text_stream_ids(it, &n);
    return it->final || (r->it_streaming && n - 3 >= r->it_need);
}

/* The driver's turn with an incremental request in a WAITING or ACTIVE
 * slot: take the text received, advance its segments, hand the ids
 * committed to the generation of the current segment. */
static void it_pump(qtts_pipeline *p, slot *sl) {
    preq *r = sl->r;
    text_stream *it = r->it;
    qtts_error e;
    err_clear(&e);
    qtts_status st = QTTS_OK;
    if (atomic_exchange(&r->it_dirty, 0)) {
        pthread_mutex_lock(&p->mu);
        st = text_stream_take(it, &e);
        pthread_mutex_unlock(&p->mu);
    }
    const int waiting = atomic_load(&sl->state) == SLOT_WAITING;
    if (waiting && r->it_started) { /* its generation is over; the rest of its text is skipped */
        r->it_started = r->it_open_gen = 0;
        r->it_drop = 1;
    }
    for (int pass = 0; pass < 2 && !st; pass++) {
        if (r->it_drop && it->final) {
            text_stream_close_segment(it);
            r->it_drop = r->it_fed = r->it_announced = 0;
            r->it_need = 1;
        }
        st = text_stream_advance(it, waiting && !r->it_drop, &e);
    }
    gen_state *g = &sl->ctx->gs;
    if (!st && !waiting && r->it_open_gen && g->active && g->open) {
        int n;
        const int32_t *ids = text_stream_ids(it, &n);
        if (n > r->it_fed) st = gen_text_append(sl->ctx, ids + r->it_fed, n - r->it_fed, &e);
        r->it_fed = n;
        if (!st && it->final) st = gen_text_close(sl->ctx, &e);
    }
    if (st) {
        req_fail(p, r, st, "%s", e.msg);
        atomic_store(&r->cancel, 1);
    }
}

static qtts_status text_in(qtts_pipeline *p, uint64_t id, const char *text, size_t n, int end) {
    if (!p) return QTTS_ERR_INVALID_ARG;
    qtts_status st = QTTS_ERR_INVALID_ARG; /* no such request (it ended), or not incremental */
    qtts_error e;
    err_clear(&e);
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_slots; i++) {
        preq *r = p->slots[i].r;
        if (!r || r->id != id) continue;
        if (r->it && !(st = text_stream_input(r->it, text, n, end, &e))) atomic_store(&r->it_dirty, 1);
        break;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (!st && p->p.on_wake) p->p.on_wake(p->p.wake_user);
    return st;
}

qtts_status qtts_pipeline_push_text(qtts_pipeline *p, uint64_t id, const char *text, size_t n) {
    return text_in(p, id, text, n, 0);
}

qtts_status qtts_pipeline_end_text(qtts_pipeline *p, uint64_t id) { return text_in(p, id, NULL, 0, 1); }

/* Start the current segment of an incremental request (admit): its whole
 * text when its end is known (as a request with that text would), else its
 * open prompt; *wait = 1 when the prefill needs more text. */
static qtts_status it_begin(qtts_pipeline *p, slot *sl, qtts_gen_params *gp, int *wait, qtts_error *e) {
    preq *r = sl->r;
    text_stream *it = r->it;
    *wait = 0;
    if (it->final) {
        const size_t l = it->e - it->b;
        char *t = realloc(r->seg_text, l + 1);
        if (!t) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
        memcpy(t, it->text + it->b, l);
        t[l] = 0;
        r->seg_text = t;
        gp->text = t;
        qtts_status st = gen_begin(sl->ctx, gp, on_frame, sl, 0, e);
        if (!st) r->it_fed = 0;
        return st;
    }
    int n, need = 0;
    const int32_t *ids = text_stream_ids(it, &n);
    gp->text = NULL;
    qtts_status st = gen_begin_open(sl->ctx, gp, ids, n, on_frame, sl, &need, e);
    if (!st && need) {
        r->it_need = need;
        *wait = 1;
    } else if (!st) {
        r->it_open_gen = 1;
        r->it_fed = n;
    }
    return st;
}

/* Prefill the current segment of the request in slot sl (WAITING, taken by
 * the caller) and start its generation. */
static void admit(qtts_pipeline *p, slot *sl) {
    preq *r = sl->r;
    qtts_context *c = sl->ctx;
    const qtts_model *m = p->m;
    qtts_error e;
    err_clear(&e);
    if (r->it && !atomic_load(&r->cancel) && r->it->done) { /* the text ended: so does the request */
        if (r->it->n_segs == 0) req_fail(p, r, QTTS_ERR_INPUT, "empty text: nothing to say");
        request_end(p, sl, r);
        return;
    }
    sl->n_pending = sl->n_sent = 0;
    atomic_store(&sl->failed, 0);
    sl->fail_st = QTTS_OK;
    sl->fail_msg[0] = 0;
    atomic_fetch_add(&sl->epoch, 1);
    qtts_gen_params gp = r->gp;
    if (r->segs) {
        const text_piece *sg = &r->segs[r->seg];
        const size_t l = sg->end - sg->begin;
        memcpy(r->seg_text, r->gp.text + sg->begin, l);
        r->seg_text[l] = 0;
        gp.text = r->seg_text;
        gp.seed = r->gp.seed + (uint64_t)r->seg;
        if (r->n_segs > 1) model_log(m, QTTS_LOG_DEBUG, "segment %d/%d: %s", r->seg + 1, r->n_segs, r->seg_text);
    }
    if (r->it) {
        gp.seed = r->gp.seed + (uint64_t)r->seg;
        r->n_segs = r->it->n_segs;
    }
    qtts_status st = QTTS_OK;
    char *seg_so_far = NULL; /* incremental text: the segment's text so far (all of it once its end is known) */
    if (r->it && r->ap.on_segment && !r->it_announced) {
        const size_t l = (r->it->final ? r->it->e : r->it->n) - r->it->b;
        if ((seg_so_far = malloc(l + 1))) {
            memcpy(seg_so_far, r->it->text + r->it->b, l);
            seg_so_far[l] = 0;
        }
    }
    if (atomic_load(&r->cancel)) st = QTTS_ERR_CANCELLED;
    else if (r->ap.on_segment && !(r->it && r->it_announced) &&
             r->ap.on_segment(r->seg, r->n_segs, r->it ? (seg_so_far ? seg_so_far : "") : gp.text ? gp.text : "",
                              r->ap.segment_user))
        st = err_set(&e, QTTS_ERR_CANCELLED, "stopped by the segment callback before segment %d", r->seg + 1);
    free(seg_so_far);
    if (r->it) r->it_announced = 1;
    if (!st) {
        if (r->seg == 0) memset(&c->stats, 0, sizeof c->stats);
        c->keep_stats = 1;
        const double t0 = now_ms();
        if (r->it) {
            int wait = 0;
            st = it_begin(p, sl, &gp, &wait, &e);
            if (!st && wait) return; /* its prefill waits for more text: the slot stays WAITING */
            if (!st && r->it->pause_before && put_pause(p, r, r->it->pause_before)) {
                qtts_error e2;
                c->gs.active = 0;
                gen_end(c, NULL, NULL, &e2);
                st = err_set(&e, QTTS_ERR_CANCELLED, "stopped by the audio callback");
            }
            if (!st) r->it_started = 1;
        } else
            st = gen_begin(c, &gp, on_frame, sl, 0, &e); /* checks the request, voice included, first */
        voice_spec vs;
        float ref_last = 0.0f;
        if (!st) st = voice_resolve(m, &gp, &vs, &e);
        if (!st) {
            codec_stream_set_ops(c->codec, &m->ops); /* generation waits: all threads */
            st = voice_prime(&vs, c->codec, &ref_last, &e);
            codec_stream_set_ops(c->codec, NULL);
            if (st) {
                c->gs.active = 0;
                qtts_error e2;
                gen_end(c, NULL, NULL, &e2);
            }
        }
        if (!st && r->seg == 0 && voice_is_icl(&vs)) {
            r->n_ref_frames = vs.n_ref_frames;
            r->ref_last = ref_last;
        }
        if (!st) {
            p->last.n_prefills++;
            p->last.prefill_ms += now_ms() - t0;
            p->last.n_prompt += c->stats.n_prompt;
            p->last.n_prompt_reused += c->stats.n_prompt_reused;
        }
    }
    if (st) {
        req_fail(p, r, st, "%s", st == QTTS_ERR_CANCELLED && !e.msg[0] ? "cancelled before it started" : e.msg);
        request_end(p, sl, r);
        return;
    }
    atomic_store(&sl->state, SLOT_ACTIVE);
}

/* The WAITING slot that waited longest, or NULL. */
static slot *next_waiting(qtts_pipeline *p) {
    slot *best = NULL;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        if (atomic_load(&sl->state) != SLOT_WAITING || (sl->r->it && !it_ready(sl->r))) continue;
        if (!best || sl->wait_seq < best->wait_seq) best = sl;
    }
    pthread_mutex_unlock(&p->mu);
    return best;
}

int qtts_pipeline_step(qtts_pipeline *p) {
    if (!p) return 0;
    memset(&p->last, 0, sizeof p->last);
    /* incremental text: what arrived goes to its segments and generations */
    for (int i = 0; i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        const int st = atomic_load(&sl->state);
        if ((st == SLOT_WAITING || st == SLOT_ACTIVE) && sl->r->it) it_pump(p, sl);
    }
    /* prefills: oldest waiting segment first, until the budget is spent */
    const double t_adm = now_ms();
    for (slot *sl; (sl = next_waiting(p));) {
        admit(p, sl);
        if (now_ms() - t_adm >= p->p.prefill_budget_ms) break;
    }
    /* leavers: cancelled requests stop generating */
    int n = 0;
    for (int i = 0; i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        if (atomic_load(&sl->state) != SLOT_ACTIVE) continue;
        gen_state *g = &sl->ctx->gs;
        if (g->active && atomic_load(&sl->r->cancel)) {
            err_set(&g->err, QTTS_ERR_CANCELLED, "cancelled after %d frames", g->n_out);
            g->status = QTTS_ERR_CANCELLED;
            g->active = 0;
            sl->ctx->stop_reason = QTTS_STOP_CANCELLED;
        }
        sl->n_new = 0;
        if (g->active && !gen_waits_for_text(sl->ctx)) p->cs[n++] = sl->ctx; /* else it waits for its text */
    }
    /* one frame for every generating stream */
    if (n > 0) {
        p->last.n_streams = n;
        p->cb_decode_ms = 0;
        const double t = now_ms();
        gen_step(p->cs, n, p->step_ss);
        p->last.step_ms = now_ms() - t - p->cb_decode_ms;
        for (int i = 0; i < p->n_slots; i++)
            if (atomic_load(&p->slots[i].state) == SLOT_ACTIVE) p->last.n_frames += p->slots[i].n_new;
        if (p->dbg.stepped) p->dbg.stepped(p->dbg.arg, n);
    }
    /* frames to decoding, finished segments drained; first chunks and
     * cancellations first */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->n_slots; i++) {
            slot *sl = &p->slots[i];
            if (atomic_load(&sl->state) != SLOT_ACTIVE) continue;
            const int urgent = sl->n_sent == 0 || atomic_load(&sl->r->cancel);
            if (urgent != (pass == 0)) continue;
            if (!sl->ctx->gs.active) {
                atomic_store(&sl->state, SLOT_DRAINING);
                send_frames(p, sl, 1, urgent, 0);
            } else if (sl->n_pending >= chunk_want(sl)) {
                send_frames(p, sl, 0, urgent, 0);
            }
        }
    return qtts_pipeline_n_requests(p);
}

int qtts_pipeline_busy(const qtts_pipeline *p) {
    if (!p) return 0;
    for (int i = 0; i < p->n_slots; i++) {
        const slot *sl = &p->slots[i];
        const int st = atomic_load(&sl->state);
        if (st != SLOT_WAITING && st != SLOT_ACTIVE) continue;
        const preq *r = sl->r;
        if (!r->it || atomic_load(&r->it_dirty) || atomic_load(&r->cancel)) return 1;
        /* incremental text: busy when it can go on without more text */
        if (st == SLOT_WAITING ? it_ready(r) || r->it_started : !gen_waits_for_text(sl->ctx)) return 1;
    }
    return 0;
}

int qtts_pipeline_n_free(const qtts_pipeline *p) {
    int n = 0;
    for (int i = 0; p && i < p->n_slots; i++) n += atomic_load(&p->slots[i].state) == SLOT_FREE;
    return n;
}

int qtts_pipeline_n_requests(const qtts_pipeline *p) { return p ? p->n_slots - qtts_pipeline_n_free(p) : 0; }

void qtts_pipeline_wait(qtts_pipeline *p, int timeout_ms) {
    if (!p) return;
    const struct timespec ts = deadline_after_ms(timeout_ms);
    pthread_mutex_lock(&p->mu);
    while (!qtts_pipeline_busy(p) && qtts_pipeline_n_requests(p) > 0)
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&p->mu);
}

void qtts_pipeline_cancel(qtts_pipeline *p, uint64_t id) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].r && p->slots[i].r->id == id) atomic_store(&p->slots[i].r->cancel, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void qtts_pipeline_last_step(const qtts_pipeline *p, qtts_step_info *info) {
    if (!info) return;
    if (p) *info = p->last;
    else memset(info, 0, sizeof *info);
}

/* ---------------------------------------------------------------- requests in */

/* What a prompt's voice prefix depends on (MODEL.md, "voice prefix reuse"):
 * the speaker, the cloned voice, the instruction, the language and the text
 * mode. Equal keys mean the slot's context very likely holds the K/V of this
 * request's voice prefix; generation compares the actual rows, so a collision
 * or a stale pointer costs only a missed reuse, never a wrong result. */
static uint64_t fnv(uint64_t h, const void *v, size_t n) {
    const unsigned char *b = v;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t fnv_str(uint64_t h, const char *str, int fold) { /* fold: names matched in any case */
    h = fnv(h, str ? "s" : "-", 1);
    for (; str && *str; str++) {
        const char c = fold ? (char)tolower((unsigned char)*str) : *str;
        h = fnv(h, &c, 1);
    }
    return fnv(h, "", 1);
}
static uint64_t voice_key(const qtts_gen_params *gp) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv_str(h, gp->speaker, 1);
    h = fnv_str(h, gp->instruct, 0);
    h = fnv_str(h, gp->language, 1);
    h = fnv(h, &gp->voice, sizeof gp->voice);
    h = fnv(h, &gp->xvector, sizeof gp->xvector);
    h = fnv(h, &gp->text_mode, sizeof gp->text_mode);
    return h ? h : 1;
}

/* The free slot for a request with voice key k: one whose context last served
 * the same voice (its prefix is reused), else the one unused longest. */
static slot *pick_slot(qtts_pipeline *p, uint64_t k) {
    slot *best = NULL;
    for (int i = 0; i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        if (atomic_load(&sl->state) != SLOT_FREE) continue;
        if (sl->voice_key == k) return sl;
        if (!best || sl->last_admit < best->last_admit) best = sl;
    }
    return best;
}

qtts_status audio_params_validate(const qtts_audio_params *ap, qtts_error *e) {
    if (ap->first_chunk_frames < 1 || ap->chunk_frames < 1 || ap->first_chunk_frames > MAX_CHUNK ||
        ap->chunk_frames > MAX_CHUNK)
        return err_set(e, QTTS_ERR_INVALID_ARG, "chunk sizes must be in [1, %d] frames (got first %d, then %d)",
                       MAX_CHUNK, ap->first_chunk_frames, ap->chunk_frames);
    if (ap->overlap < -1 || ap->overlap > 1)
        return err_set(e, QTTS_ERR_INVALID_ARG, "overlap must be -1 (auto), 0 or 1 (got %d)", ap->overlap);
    const qtts_split_params *sp = &ap->split;
    if (sp->enabled && sp->max_chars < 16)
        return err_set(e, QTTS_ERR_INVALID_ARG, "the longest segment must be >= 16 characters (got %d)", sp->max_chars);
    if (sp->sentence_pause_ms < 0 || sp->paragraph_pause_ms < 0 || sp->sentence_pause_ms > 10000 ||
        sp->paragraph_pause_ms > 10000)
        return err_set(e, QTTS_ERR_INVALID_ARG, "pauses must be in [0, 10000] ms (got %d and %d)", sp->sentence_pause_ms,
                       sp->paragraph_pause_ms);
    return QTTS_OK;
}

static qtts_status add(qtts_pipeline *p, const qtts_request *rq, uint64_t *id, qtts_error *e) {
    if (!rq || !rq->gen) return err_set(e, QTTS_ERR_INVALID_ARG, "a request needs its generation parameters");
    if (!p->m->codec)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
    const qtts_audio_params ap = rq->audio ? *rq->audio : qtts_audio_default_params();
    qtts_status st = audio_params_validate(&ap, e);
    if (st) return st;
    const qtts_gen_params *gp = rq->gen;
    text_piece *segs = NULL;
    int n_segs = 1;
    text_stream *it = NULL;
    if (rq->incremental_text) {
        if (gp->text_ids) return err_set(e, QTTS_ERR_INVALID_ARG, "incremental text comes as UTF-8, not as ids");
        if (!p->m->tok)
            return err_set(e, QTTS_ERR_UNSUPPORTED, "incremental text needs the model folder's tokenizer files");
        if (p->m->lmv && gen_is_streaming(p->m, gp))
            return err_set(e, QTTS_ERR_UNSUPPORTED,
                           "incremental text in the streaming text mode runs on the CPU backend only for now (the "
                           "Vulkan backend uploads the text queue once, at the prefill)");
        if ((st = sampling_validate(&gp->talker, "talker", e)) || (st = sampling_validate(&gp->predictor, "code predictor", e)))
            return st;
        it = calloc(1, sizeof *it);
        if (!it) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
        text_stream_init(it, p->m->tok, ap.split.enabled, ap.split.sentence_pause_ms, ap.split.paragraph_pause_ms);
        if (gp->text && (st = text_stream_input(it, gp->text, strlen(gp->text), 0, e))) {
            text_stream_free(it);
            free(it);
            return st;
        }
        n_segs = 0;
    } else if (gp->text && !gp->text_ids && ap.split.enabled) {
        text_split_params tp = {ap.split.max_chars, ap.split.sentence_pause_ms, ap.split.paragraph_pause_ms};
        if ((st = text_split(gp->text, strlen(gp->text), &tp, &segs, &n_segs, e))) return st;
        if (n_segs == 0) {
            free(segs);
            return err_set(e, QTTS_ERR_INPUT, "empty text: nothing to say");
        }
    }
    preq *r = calloc(1, sizeof *r);
    char *seg_text = segs ? malloc(strlen(gp->text) + 1) : NULL;
    if (!r || (segs && !seg_text)) {
        free(r);
        free(seg_text);
        free(segs);
        if (it) text_stream_free(it);
        free(it);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    r->it = it;
    atomic_init(&r->it_dirty, it && gp->text);
    r->it_streaming = gen_is_streaming(p->m, gp);
    r->it_need = 1;
    r->gp = *gp;
    r->ap = ap;
    r->on_audio = rq->on_audio;
    r->on_done = rq->on_done;
    r->user = rq->user;
    r->segs = segs;
    r->n_segs = n_segs;
    r->seg_text = seg_text;
    atomic_init(&r->cancel, 0);
    atomic_init(&r->refs, 1);
    r->t0 = now_ms();
    const uint64_t key = voice_key(gp);
    pthread_mutex_lock(&p->mu);
    slot *sl = pick_slot(p, key);
    if (sl) {
        r->id = ++p->next_id;
        sl->r = r;
        sl->voice_key = key;
        sl->last_admit = ++p->n_admitted;
        sl->wait_seq = ++p->seq;
        atomic_store(&sl->state, SLOT_WAITING);
    }
    pthread_mutex_unlock(&p->mu);
    if (!sl) {
        req_release(r);
        return err_set(e, QTTS_ERR_LIMIT, "the pipeline is full (%d requests)", p->n_slots);
    }
    if (id) *id = r->id;
    return QTTS_OK;
}

qtts_status qtts_pipeline_add(qtts_pipeline *p, const qtts_request *r, uint64_t *id, char *errbuf, size_t n) {
    if (!p) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    const qtts_status st = add(p, r, id, &e);
    if (st && errbuf && n) snprintf(errbuf, n, "%s", e.msg);
    return st;
}

/* ---------------------------------------------------------------- life cycle */

static void stop_workers(qtts_pipeline *p) {
    for (int i = 0; p->workers && i < p->n_workers; i++) { /* they finish their queues first */
        dworker *w = &p->workers[i];
        if (!w->have_thread) continue;
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
        w->have_thread = 0;
    }
}

void qtts_pipeline_free(qtts_pipeline *p) {
    if (!p) return;
    /* every request ends: generating ones drain, waiting ones end now (the
     * decode side never touches a WAITING or ACTIVE slot; a DRAINING one is
     * its own and ends when it sees the cancel) */
    pthread_mutex_lock(&p->mu);
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        preq *r = p->slots[i].r;
        if (!r) continue;
        atomic_store(&r->cancel, 1);
        if (!r->st) {
            r->st = QTTS_ERR_CANCELLED;
            snprintf(r->err, sizeof r->err, "the pipeline was freed");
        }
    }
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        const int st = atomic_load(&sl->state);
        if (st == SLOT_WAITING) {
            request_end(p, sl, sl->r);
        } else if (st == SLOT_ACTIVE) {
            gen_state *g = &sl->ctx->gs;
            if (g->active) {
                err_set(&g->err, QTTS_ERR_CANCELLED, "cancelled");
                g->status = QTTS_ERR_CANCELLED;
                g->active = 0;
            }
            atomic_store(&sl->state, SLOT_DRAINING);
            send_frames(p, sl, 1, 1, 0);
        }
    }
    stop_workers(p);
    /* a drained segment may have made its slot WAITING just before it saw the cancel */
    for (int i = 0; p->slots && i < p->n_slots; i++)
        if (atomic_load(&p->slots[i].state) == SLOT_WAITING) request_end(p, &p->slots[i], p->slots[i].r);
    for (int i = 0; p->workers && i < p->n_workers; i++) {
        dworker *w = &p->workers[i];
        if (w->lend_init) pool_lend_free(&w->lend);
        free(w->pcm);
        free(w->pcm_urgent);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        pthread_cond_destroy(&w->idle_cv);
    }
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        if (sl->ctx) sl->ctx->keep_stats = 0;
        if (!p->borrowed) qtts_context_free(sl->ctx);
        free(sl->pending);
    }
    if (!p->borrowed) step_scratch_free(&p->ss);
    free(p->workers);
    free(p->slots);
    free(p->cs);
    free(p->pcm_inline);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

static qtts_status create(const qtts_model *m, qtts_context *borrowed, const qtts_pipeline_params *params,
                          qtts_pipeline **out, qtts_error *e) {
    *out = NULL;
    qtts_pipeline_params pp = params ? *params : qtts_pipeline_default_params();
    if (pp.max_streams < 1 || pp.max_streams > QTTS_MAX_BATCH)
        return err_set(e, QTTS_ERR_INVALID_ARG, "max_streams must be in [1, %d] (got %d)", QTTS_MAX_BATCH,
                       pp.max_streams);
    if (pp.decode_threads < -1 || pp.decode_threads > 64 || pp.decode_share_cores < -1 || pp.decode_share_cores > 1 ||
        pp.prefill_budget_ms < 0 || pp.n_ctx < 0)
        return err_set(e, QTTS_ERR_INVALID_ARG,
                       "decode threads must be in [-1, 64], decode_share_cores -1, 0 or 1, the prefill budget >= 0 ms "
                       "and n_ctx >= 0");
    if (!m->codec)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
    qtts_pipeline *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    p->m = m;
    p->p = pp;
    if (pp.debug) p->dbg = *pp.debug;
    p->G = m->cfg.n_code_groups;
    p->spf = codec_decoder_samples_per_frame(m->codec);
    p->n_slots = pp.max_streams;
    const int n_threads = m->ops.n_threads;
    p->n_workers = pp.decode_threads < 0 ? n_threads > 1 : pp.decode_threads;
    if (p->n_workers > p->n_slots) p->n_workers = p->n_slots;
    const long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->share = p->n_workers > 0 &&
               (pp.decode_share_cores < 0 ? n_cpus > 0 && n_threads + p->n_workers > n_cpus : pp.decode_share_cores);
    p->serial = m->ops;
    p->serial.n_threads = 1;
    p->serial.rt = NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->slots = calloc((size_t)p->n_slots, sizeof *p->slots);
    p->cs = calloc((size_t)p->n_slots, sizeof *p->cs);
    p->pcm_inline = malloc(sizeof(float) * MAX_CHUNK * (size_t)p->spf);
    p->workers = p->n_workers ? calloc((size_t)p->n_workers, sizeof *p->workers) : NULL;
    qtts_status st = p->slots && p->cs && p->pcm_inline && (p->workers || !p->n_workers)
                         ? QTTS_OK
                         : err_set(e, QTTS_ERR_NOMEM, "out of memory");
    if (!st && borrowed) {
        p->borrowed = p->solo = 1;
        p->step_ss = &borrowed->ss;
    } else if (!st) {
        st = step_scratch_init(&p->ss, m, p->n_slots, e);
        p->step_ss = &p->ss;
    }
    qtts_context_params cp = qtts_context_default_params();
    cp.n_ctx = pp.n_ctx;
    cp.reuse_voice_prefix = pp.reuse_voice_prefix;
    for (int i = 0; !st && i < p->n_slots; i++) {
        slot *sl = &p->slots[i];
        sl->p = p;
        sl->index = i;
        atomic_init(&sl->state, SLOT_FREE);
        atomic_init(&sl->failed, 0);
        atomic_init(&sl->epoch, 0);
        if (borrowed) sl->ctx = borrowed;
        else {
            char msg[QTTS_ERROR_MSG_MAX - 64];
            if ((st = qtts_context_new(m, &cp, &sl->ctx, msg, sizeof msg)))
                err_set(e, st, "cannot make the context of stream %d: %s", i, msg);
        }
        sl->pending = malloc(sizeof(int32_t) * MAX_CHUNK * (size_t)p->G);
        if (!st && !sl->pending) st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; !st && i < p->n_workers; i++) {
        dworker *w = &p->workers[i];
        w->p = p;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        pthread_cond_init(&w->idle_cv, NULL);
        atomic_init(&w->n_hi, 0);
        w->pcm = malloc(sizeof(float) * MAX_CHUNK * (size_t)p->spf);
        w->pcm_urgent = malloc(sizeof(float) * MAX_CHUNK * (size_t)p->spf);
        if (!w->pcm || !w->pcm_urgent) {
            st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        } else if (pool_lend_init(&w->lend)) {
            st = err_set(e, QTTS_ERR_NOMEM, "cannot initialise a mutex");
        } else {
            w->lend_init = 1;
            if (pthread_create(&w->th, NULL, worker_main, w)) st = err_set(e, QTTS_ERR_NOMEM, "cannot start decode thread %d", i);
            else w->have_thread = 1;
        }
    }
    if (st) {
        /* workers never initialised are skipped by their zeroed p */
        for (int i = 0; p->workers && i < p->n_workers; i++)
            if (!p->workers[i].p) p->n_workers = i;
        qtts_pipeline_free(p);
        return st;
    }
    *out = p;
    return QTTS_OK;
}

qtts_status qtts_pipeline_new(const qtts_model *m, const qtts_pipeline_params *params, qtts_pipeline **out, char *errbuf,
                              size_t n) {
    if (!m || !out) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    const qtts_status st = create(m, NULL, params, out, &e);
    if (st && errbuf && n) snprintf(errbuf, n, "%s", e.msg);
    return st;
}

qtts_status pipeline_new_on_context(qtts_context *ctx, const qtts_pipeline_params *params, qtts_pipeline **out,
                                    qtts_error *e) {
    return create(ctx->model, ctx, params, out, e);
}
