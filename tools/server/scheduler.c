/* The engine thread and the decode workers (see scheduler.h).
 * Engine iteration: run pending tasks -> admit queued jobs into free slots
 * (audio_begin + batch_add: the prefill; one job at a time, until the
 * prefill budget of this boundary is spent) -> remove cancelled slots ->
 * qtts_batch_step (one frame for every slot, each weight read once) -> hand
 * each slot's frames to its decode worker once a chunk is full, and a
 * finished slot's rest with a "final" mark. The frame callback only queues
 * codes, so the step time measures generation alone.
 * Decode worker: first chunks and cancellations first (a stream waiting for
 * its first audio, a slot to free), then chunks in order, decoded frame by
 * frame so a waiting first chunk never waits for more than one frame (inline
 * on the engine thread, a chunk in one call); an urgent task run between two
 * frames decodes into its own buffer, and a chunk whose job was cancelled
 * meanwhile stops there. The final task finishes the context and the job and
 * frees the slot; a slot's final task is part of the slot, so the worker
 * touches nothing of it once the slot is free. tests/server/test_sched.c forces
 * each of these interleavings through sched_params.hooks.
 * Thread safety: the engine steps a context (generation state) while its
 * worker decodes (codec state): disjoint parts of the context, as in
 * qtts_synthesize's overlapped decoding; calls that touch the rest
 * (audio_begin, batch_add, context_finish) happen only while the other
 * thread leaves that context alone (a slot is free, or drained). The model's
 * kernels fall back to the calling thread when another thread holds their
 * pool, so concurrent calls are safe. */
#include "scheduler.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHUNK 64 /* frames per decoded chunk at most */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- jobs */

static void job_retain(job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

job *job_new(void) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&j->cancel, 0);
    j->refs = 1;
    j->first_chunk_frames = 1;
    j->chunk_frames = 4;
    return j;
}

void job_release(job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->instruct);
    free(j->speaker);
    free(j->language);
    free(j->xvector);
    voice_ref_release(j->voice);
    free(j->pcm);
    free(j);
}

void job_cancel(job *j) {
    if (j) atomic_store(&j->cancel, 1);
}

static void deadline(struct timespec *ts, int timeout_ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

job_state job_wait_started(job *j, int timeout_ms) {
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_RUNNING && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    job_state st = j->state;
    pthread_mutex_unlock(&j->mu);
    return st;
}

size_t job_read(job *j, float *out, size_t max, int timeout_ms, int *done) {
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (j->r_pcm == j->n_pcm && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    size_t k = j->n_pcm - j->r_pcm;
    if (k > max) k = max;
    if (k) memcpy(out, j->pcm + j->r_pcm, sizeof(float) * k);
    j->r_pcm += k;
    if (j->r_pcm == j->n_pcm) j->r_pcm = j->n_pcm = 0;
    *done = j->state == JOB_DONE && j->n_pcm == 0;
    pthread_mutex_unlock(&j->mu);
    return k;
}

/* Engine side: append samples (compacting what was read). 0 ok, -1 no memory. */
static int job_push(job *j, const float *pcm, size_t n) {
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    if (j->r_pcm > 0) {
        memmove(j->pcm, j->pcm + j->r_pcm, sizeof(float) * (j->n_pcm - j->r_pcm));
        j->n_pcm -= j->r_pcm;
        j->r_pcm = 0;
    }
    if (j->n_pcm + n > j->cap_pcm) {
        size_t cap = j->cap_pcm ? j->cap_pcm : 1 << 15;
        while (cap < j->n_pcm + n) cap *= 2;
        float *p = realloc(j->pcm, sizeof(float) * cap);
        if (!p) rc = -1;
        else {
            j->pcm = p;
            j->cap_pcm = cap;
        }
    }
    if (!rc) {
        memcpy(j->pcm + j->n_pcm, pcm, sizeof(float) * n);
        j->n_pcm += n;
        j->total_samples += n;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

static void job_set_state(job *j, job_state st) {
    pthread_mutex_lock(&j->mu);
    j->state = st;
    if (st == JOB_RUNNING) j->t_started_s = now_s();
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void job_finish(job *j, qtts_status st, const char *msg, int n_frames, qtts_stop_reason stop) {
    pthread_mutex_lock(&j->mu);
    j->status = st;
    snprintf(j->err, sizeof j->err, "%s", st ? msg : "");
    j->n_frames = n_frames;
    j->stop = stop;
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ---------------------------------------------------------------- engine */

enum { SLOT_FREE = 0, SLOT_ACTIVE, SLOT_DRAINING };

typedef struct dtask {
    struct slot *sl;
    job *j;              /* a reference of its own */
    int32_t *codes;      /* [n][G] */
    int n;
    int final;           /* the stream has left the batch: finish the job, free the slot */
    struct dtask *next;
} dtask;

typedef struct slot {
    struct sched *s;
    int index;
    qtts_context *ctx;
    job *j;              /* set while not free */
    atomic_int state;    /* SLOT_*: FREE->ACTIVE and ACTIVE->DRAINING by the engine, DRAINING->FREE by the worker */
    int32_t *pending;    /* [MAX_CHUNK][G] frames not yet handed to the worker (engine) */
    int n_pending;
    int n_sent;          /* frames handed to the worker for this job (engine) */
    int n_new;           /* frames made in the current step (engine) */
    atomic_int failed;   /* a decode failed: the stream stops, the job ends with the error */
    qtts_status fail_st; /* worker */
    char fail_msg[256];  /* worker */
    struct dtask final_task; /* the slot's last task, never allocated */
    uint64_t voice_key;  /* voice_key of the last job admitted here (0: none); engine */
    unsigned long long last_admit; /* admission counter value of that job; engine */
} slot;

typedef struct dworker {
    struct sched *s;
    pthread_t th;
    int have_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dtask *hi, *hi_tail; /* first chunks, cancelled slots */
    dtask *lo, *lo_tail; /* later chunks, in order */
    atomic_int n_hi;     /* tasks in hi (peeked between frames) */
    int stop;            /* finish the queue, then exit */
    float *pcm;          /* [MAX_CHUNK * spf] a chunk's samples until they are all decoded */
    float *pcm_urgent;   /* [MAX_CHUNK * spf] the same for an urgent task run between two frames */
} dworker;

typedef struct task {
    void (*fn)(void *);
    void *arg;
    int done;            /* 1 ran, -1 refused (stopping) */
    struct task *next;
} task;

struct sched {
    qtts_model *model;
    sched_params p;
    metrics *mx;
    int G, spf;
    qtts_batch *batch;
    slot *slots;
    dworker *workers;
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu;   /* guards the queue, n_busy, tasks, stop */
    pthread_cond_t cv;    /* engine wake-up */
    pthread_cond_t task_cv;
    job **queue;          /* ring of queued jobs */
    int q_cap, q_head, q_len;
    int n_busy;           /* slots not free */
    unsigned long long n_admitted; /* jobs given a slot so far (engine) */
    task *tasks, *tasks_tail;
    int stop;
    job *warm;            /* the warm-up job until it is done */
    atomic_int ready;
    double cb_decode_s;   /* engine thread: first chunks decoded inside the current step's frame callbacks */
    char warm_err[600];
};

static void update_gauges(sched *s) { metrics_set_gauges(s->mx, s->q_len, s->n_busy); }

/* ---------------------------------------------------------------- decode workers */

/* decode_threads 0: one worker structure, no thread: tasks run inline on the engine thread */
static int n_workers(const sched *s) { return s->p.decode_threads > 0 ? s->p.decode_threads : 1; }
static dworker *worker_of(const slot *sl) { return &sl->s->workers[sl->index % n_workers(sl->s)]; }

static void run_task(dworker *w, struct dtask *t, int nested);

/* Queue the slot's pending frames (copied) for its worker; hi = ahead of the
 * chunks. A final task always gets through (it is the slot's own). */
static void send_frames(slot *sl, int final, int hi) {
    dworker *w = worker_of(sl);
    dtask *t = final ? &sl->final_task : calloc(1, sizeof *t);
    int32_t *codes = t && sl->n_pending ? malloc(sizeof(int32_t) * (size_t)sl->n_pending * sl->s->G) : NULL;
    if (!t || (sl->n_pending && !codes)) { /* out of memory: the stream ends with it */
        atomic_store(&sl->failed, 1);
        if (!final) {
            free(t);
            sl->n_pending = 0;
            return;
        }
    }
    memset(t, 0, sizeof *t);
    if (codes) memcpy(codes, sl->pending, sizeof(int32_t) * (size_t)sl->n_pending * sl->s->G);
    t->sl = sl;
    t->j = sl->j;
    job_retain(t->j);
    t->codes = codes;
    t->n = codes ? sl->n_pending : 0;
    t->final = final;
    sl->n_sent += t->n;
    sl->n_pending = 0;
    if (sl->s->p.decode_threads == 0) { /* inline: decode now, on the engine thread */
        run_task(w, t, 0);
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
 * free) goes first, nested in the chunk's task (so into its own buffer). */
static void run_urgent(dworker *w) {
    for (;;) {
        pthread_mutex_lock(&w->mu);
        dtask *u = pop(w, 1);
        pthread_mutex_unlock(&w->mu);
        if (!u) return;
        run_task(w, u, 1);
    }
}

static int slot_is_mine(sched *s, const slot *sl, const job *j) {
    pthread_mutex_lock(&s->mu);
    const int mine = sl->j == j;
    pthread_mutex_unlock(&s->mu);
    return mine;
}

/* nested: run between two frames of another task (run_urgent): decodes into
 * w->pcm_urgent, never nests further. */
static void run_task(dworker *w, dtask *t, int nested) {
    slot *sl = t->sl;
    sched *s = sl->s;
    job *j = t->j;
    const int slot_index = sl->index;
    float *pcm = nested ? w->pcm_urgent : w->pcm;
    const int mine = slot_is_mine(s, sl, j); /* a task of a job that has left (cancelled) may linger */
    const int live = mine && !atomic_load(&j->cancel) && !atomic_load(&sl->failed);
    int done = 0;
    if (live && t->n) {
        /* A worker decodes frame by frame so that an urgent task waits at most
         * one frame; inline (decode_threads 0) nothing can arrive while the
         * engine thread decodes, so the chunk goes in one call, which costs
         * less per frame (the decoder's early stages are a few steps long per
         * frame, its pre-transformer reads its weights once per call). */
        const int per_call = s->p.decode_threads == 0 ? t->n : 1;
        const double t0 = now_s();
        while (done < t->n) {
            if (done > 0 && !nested && atomic_load(&w->n_hi) > 0) {
                run_urgent(w);
                /* one of them may have been this job's last task (it was
                 * cancelled): then the slot is free, perhaps already the next
                 * job's, and its context is not ours to decode into */
                if (atomic_load(&j->cancel) || !slot_is_mine(s, sl, j)) break;
            }
            const int k = t->n - done < per_call ? t->n - done : per_call;
            qtts_status st = qtts_context_audio_decode(sl->ctx, t->codes + (size_t)done * s->G, k,
                                                       pcm + (size_t)done * s->spf);
            if (st) {
                sl->fail_st = st;
                snprintf(sl->fail_msg, sizeof sl->fail_msg, "decoding audio failed: %s",
                         qtts_context_last_error(sl->ctx));
                atomic_store(&sl->failed, 1);
                break;
            }
            done += k;
            if (per_call < t->n && s->p.hooks.frame_decoded)
                s->p.hooks.frame_decoded(s->p.hooks.arg, slot_index, done, t->n);
        }
        metrics_decode(s->mx, now_s() - t0);
        if (done == t->n && job_push(j, pcm, (size_t)t->n * s->spf)) {
            sl->fail_st = QTTS_ERR_NOMEM;
            snprintf(sl->fail_msg, sizeof sl->fail_msg, "out of memory buffering audio");
            atomic_store(&sl->failed, 1);
        }
    }
    /* A final task lives in its slot (sl->final_task): once the slot is free
     * the engine may admit the next job and write that job's final task into
     * it, so nothing of t may be touched after the slot is released. */
    const int allocated = t != &sl->final_task;
    free(t->codes);
    t->codes = NULL;
    if (t->final && mine) { /* the stream left the batch: nobody else touches the context now */
        int nf = 0;
        qtts_status st = qtts_context_finish(sl->ctx, &nf);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", st ? qtts_context_last_error(sl->ctx) : "");
        if (!st && atomic_load(&sl->failed)) {
            st = sl->fail_st ? sl->fail_st : QTTS_ERR_NOMEM;
            snprintf(msg, sizeof msg, "%s", sl->fail_msg[0] ? sl->fail_msg : "out of memory");
        }
        job_finish(j, st, msg, nf, qtts_context_stop_reason(sl->ctx));
        pthread_mutex_lock(&s->mu);
        sl->j = NULL;
        atomic_store(&sl->state, SLOT_FREE);
        s->n_busy--;
        update_gauges(s);
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (s->p.hooks.slot_freed) s->p.hooks.slot_freed(s->p.hooks.arg, slot_index);
        job_release(j); /* the slot's reference */
    }
    job_release(j); /* the task's */
    if (allocated) free(t);
}

/* With lend_thread, a worker that has chunks to decode holds one of the
 * model's pool threads (parked) until its queue is empty, so the engine's
 * steps and this thread share the cores instead of oversubscribing them. */
static void *worker_main(void *arg) {
    dworker *w = arg;
    qtts_model *m = w->s->model;
    int lent = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        dtask *t = pop(w, 0);
        if (!t && lent) { /* nothing queued: give the thread back before waiting */
            pthread_mutex_unlock(&w->mu);
            qtts_model_return_thread(m);
            lent = 0;
            continue;
        }
        while (!t && !w->stop) {
            pthread_cond_wait(&w->cv, &w->mu);
            t = pop(w, 0);
        }
        pthread_mutex_unlock(&w->mu);
        if (!t) break; /* stopping and nothing left */
        if (w->s->p.lend_thread && !lent) lent = qtts_model_lend_thread(m);
        run_task(w, t, 0);
    }
    if (lent) qtts_model_return_thread(m);
    return NULL;
}

/* ---------------------------------------------------------------- engine */

static int chunk_want(const slot *sl) { return sl->n_sent == 0 ? sl->j->first_chunk_frames : sl->j->chunk_frames; }

static int on_frame(const int32_t *codes, int idx, void *u) {
    slot *sl = u;
    sched *s = sl->s;
    (void)idx;
    if (atomic_load(&sl->j->cancel) || atomic_load(&sl->failed)) return 1;
    if (sl->n_pending == MAX_CHUNK) { /* cannot happen: chunks leave after every step */
        atomic_store(&sl->failed, 1);
        return 1;
    }
    memcpy(sl->pending + (size_t)sl->n_pending * s->G, codes, sizeof(int32_t) * s->G);
    sl->n_pending++;
    sl->n_new++;
    /* Decoding on the engine thread: a stream's first chunk is decoded here,
     * as soon as its frames exist, not after the step's talker pass (the
     * next frame's input, ~11-16 ms here): the first audio comes that much
     * sooner, as in qtts_synthesize. The pool is idle between the step's
     * phases; the time is taken out of the step's (cb_decode_s). */
    if (s->p.decode_threads == 0 && sl->n_sent == 0 && sl->n_pending >= chunk_want(sl)) {
        const double t = now_s();
        send_frames(sl, 0, 1);
        s->cb_decode_s += now_s() - t;
    }
    return 0;
}

static void free_slot(sched *s, slot *sl) {
    pthread_mutex_lock(&s->mu);
    sl->j = NULL;
    atomic_store(&sl->state, SLOT_FREE);
    s->n_busy--;
    update_gauges(s);
    pthread_mutex_unlock(&s->mu);
}

/* What a prompt's voice prefix depends on (MODEL.md, "voice prefix reuse"):
 * the speaker, the cloned voice, the instruction, the language and the text
 * mode. Equal keys mean the slot's context very likely holds the K/V of this
 * job's voice prefix; the library compares the actual rows, so a collision
 * or a stale pointer costs only a missed reuse, never a wrong result. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t fnv_str(uint64_t h, const char *str, int fold) { /* fold: names the library matches in any case */
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

/* The free slot for a job with voice key k: one whose context last served the
 * same voice (its prefix is reused), else the one unused longest (keeping the
 * prefixes of recent voices); NULL if none is free. */
static slot *pick_slot(sched *s, uint64_t k) {
    slot *best = NULL;
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (atomic_load(&sl->state) != SLOT_FREE) continue;
        if (sl->voice_key == k) return sl;
        if (!best || sl->last_admit < best->last_admit) best = sl;
    }
    return best;
}

/* Prefill job j in slot sl (reserved ACTIVE by the caller) and join the batch. */
static void admit(sched *s, slot *sl, job *j) {
    sl->n_pending = sl->n_sent = 0;
    atomic_store(&sl->failed, 0);
    sl->fail_st = QTTS_OK;
    sl->fail_msg[0] = 0;
    const double t = now_s();
    qtts_status st;
    if (atomic_load(&j->cancel)) {
        st = QTTS_ERR_CANCELLED;
        job_finish(j, st, "cancelled before it started", 0, QTTS_STOP_CANCELLED);
    } else {
        st = qtts_context_audio_begin(sl->ctx, &j->gp);
        if (!st) st = qtts_batch_add(s->batch, sl->ctx, &j->gp, on_frame, sl);
        if (st) job_finish(j, st, qtts_context_last_error(sl->ctx), 0, QTTS_STOP_NONE);
    }
    if (st) {
        free_slot(s, sl);
        job_release(j);
        return;
    }
    qtts_stats qs;
    qtts_context_get_stats(sl->ctx, &qs);
    metrics_prefill(s->mx, now_s() - t, qs.n_prompt, qs.n_prompt_reused);
    job_set_state(j, JOB_RUNNING);
}

static void warmup_job(sched *s) {
    qtts_model_info info;
    qtts_model_get_info(s->model, &info);
    job *j = job_new();
    if (!j) {
        snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: out of memory");
        return;
    }
    qtts_gen_params gp = qtts_gen_default_params(s->model);
    gp.text = "Hello.";
    gp.force_frames = 4;
    if (info.type == QTTS_MODEL_CUSTOM_VOICE && qtts_model_n_speakers(s->model) > 0)
        gp.speaker = qtts_model_speaker(s->model, 0);
    else if (info.type == QTTS_MODEL_VOICE_DESIGN)
        gp.instruct = "A calm, clear voice.";
    else if (info.type == QTTS_MODEL_BASE) {
        j->xvector = calloc((size_t)info.hidden_size, sizeof(float)); /* a zero x-vector, freed with the job */
        gp.xvector = j->xvector;
    }
    j->gp = gp;
    j->first_chunk_frames = 1;
    j->chunk_frames = 4;
    j->refs = 2; /* ours (s->warm) and the engine's */
    j->state = JOB_QUEUED;
    s->queue[s->q_head] = j;
    s->q_len = 1;
    s->warm = j;
}

/* Every slot's context once through a typical prompt, one frame and a 1- and
 * a 4-frame chunk decode, on the engine thread before the warm-up job and the
 * first client: a context's first request pays for first use (its KV cache
 * reserved and its pages faulted in, scratch grown, the codec stream's
 * buffers). A fresh context's first prefill took 75-119 ms against 57-72 ms
 * warm (0.6B int8, this project's 2-vCPU guest, docs/BENCH.md), so without
 * this each slot's first client was slower than the rest. */
static void warm_slots(sched *s) {
    qtts_gen_params gp = s->warm->gp; /* its voice */
    gp.text = "Hello. This sentence warms up every slot of the server before it says that it is ready.";
    gp.force_frames = 1; /* the prompt is what a first request pays for; its frame, 4 times, warms a 4-frame chunk */
    float *pcm = malloc(sizeof(float) * 4 * (size_t)s->spf);
    int32_t *four = malloc(sizeof(int32_t) * 4 * (size_t)s->G);
    int warmed = 0;
    for (int i = 0; i < s->p.n_slots && !s->warm_err[0]; i++) {
        qtts_context *c = s->slots[i].ctx;
        int32_t *codes = NULL;
        int nf = 0;
        qtts_status st = pcm && four ? qtts_generate_codes(c, &gp, NULL, NULL, &codes, &nf) : QTTS_ERR_NOMEM;
        if (!st && nf != 1) st = QTTS_ERR_INTERNAL;
        for (int k = 0; !st && k < 4; k++) memcpy(four + (size_t)k * s->G, codes, sizeof(int32_t) * s->G);
        if (!st) st = qtts_context_audio_begin(c, &gp);
        if (!st) st = qtts_context_audio_decode(c, codes, 1, pcm);
        if (!st) st = qtts_context_audio_decode(c, four, 4, pcm);
        if (st)
            snprintf(s->warm_err, sizeof s->warm_err, "warm-up of slot %d failed: %s", i,
                     !pcm || !four ? "out of memory" : nf != 1 ? "no frame" : qtts_context_last_error(c));
        else {
            warmed++;
            s->slots[i].voice_key = voice_key(&gp); /* its context holds this voice's prefix */
        }
        free(codes);
    }
    free(pcm);
    free(four);
    metrics_set_warm_slots(s->mx, warmed);
}

static int job_done(job *j) {
    pthread_mutex_lock(&j->mu);
    const int done = j->state == JOB_DONE;
    pthread_mutex_unlock(&j->mu);
    return done;
}

static void check_warm(sched *s) {
    job *j = s->warm;
    if (!job_done(j)) return;
    if (j->status) snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: %s", j->err);
    else if (!s->warm_err[0]) { /* and every slot warmed (warm_slots) */
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
    s->warm = NULL;
    job_release(j);
}

static void *engine(void *arg) {
    sched *s = arg;
    if (s->warm) warm_slots(s);
    if (!s->warm) {
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        for (;;) {
            int active = 0, free_slots = 0;
            for (int i = 0; i < s->p.n_slots; i++) {
                const int st = atomic_load(&s->slots[i].state);
                active += st == SLOT_ACTIVE;
                free_slots += st == SLOT_FREE;
            }
            if (s->stop || active || (s->q_len && free_slots) || s->tasks || (s->warm && job_done(s->warm))) break;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        pthread_mutex_unlock(&s->mu);
        if (s->warm) check_warm(s);
        pthread_mutex_lock(&s->mu);
        task *tk = s->tasks;
        s->tasks = s->tasks_tail = NULL;
        pthread_mutex_unlock(&s->mu);

        while (tk) { /* tasks (voice cloning ...) */
            task *next = tk->next;
            tk->fn(tk->arg);
            pthread_mutex_lock(&s->mu);
            tk->done = 1;
            pthread_cond_broadcast(&s->task_cv);
            pthread_mutex_unlock(&s->mu);
            tk = next;
        }
        /* joiners: prefill now, join at this frame boundary; one at a time,
         * taking jobs that arrived during the last prefill too, until the
         * prefills have used this boundary's budget. Why a budget: every
         * prefill here delays the next frame of every running stream (all
         * of them at once used to run: 8 arrivals stalled the others by 8
         * prefills), and of a burst the first joiners reach their first
         * audio sooner when the rest wait for the next boundary (BENCH.md,
         * "Server", twelfth pass: 4 simultaneous requests). */
        const double t_adm = now_s();
        for (;;) {
            slot *sl = NULL;
            job *j = NULL;
            pthread_mutex_lock(&s->mu);
            const uint64_t key = s->q_len > 0 && !s->stop ? voice_key(&s->queue[s->q_head]->gp) : 0;
            if (key) sl = pick_slot(s, key);
            if (sl) {
                sl->voice_key = key;
                sl->last_admit = ++s->n_admitted;
                j = s->queue[s->q_head];
                s->q_head = (s->q_head + 1) % s->q_cap;
                s->q_len--;
                sl->j = j;
                atomic_store(&sl->state, SLOT_ACTIVE);
                s->n_busy++;
                update_gauges(s);
            }
            pthread_mutex_unlock(&s->mu);
            if (!sl) break;
            admit(s, sl, j);
            if ((now_s() - t_adm) * 1000.0 >= s->p.prefill_budget_ms) break;
        }
        /* leavers: clients gone */
        for (int i = 0; i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            if (atomic_load(&sl->state) == SLOT_ACTIVE && atomic_load(&sl->j->cancel) &&
                qtts_context_is_generating(sl->ctx))
                qtts_batch_remove(s->batch, sl->ctx);
        }
        /* one frame for everyone */
        const int n = qtts_batch_size(s->batch);
        double step_s = 0;
        int n_frames = 0;
        if (n > 0) {
            for (int i = 0; i < s->p.n_slots; i++) s->slots[i].n_new = 0;
            const double t = now_s();
            s->cb_decode_s = 0;
            qtts_batch_step(s->batch);
            step_s = now_s() - t - s->cb_decode_s; /* generation alone */
            for (int i = 0; i < s->p.n_slots; i++) n_frames += s->slots[i].n_new;
            metrics_step(s->mx, n, n_frames, step_s, 0);
            if (s->p.hooks.stepped) s->p.hooks.stepped(s->p.hooks.arg, n);
        }
        /* frames to the decode workers, finished streams to be drained; first
         * chunks and cancellations first (the order they run in inline) */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < s->p.n_slots; i++) {
                slot *sl = &s->slots[i];
                if (atomic_load(&sl->state) != SLOT_ACTIVE) continue;
                const int urgent = sl->n_sent == 0 || atomic_load(&sl->j->cancel);
                if (urgent != (pass == 0)) continue;
                if (!qtts_context_is_generating(sl->ctx)) {
                    atomic_store(&sl->state, SLOT_DRAINING);
                    send_frames(sl, 1, urgent);
                } else if (sl->n_pending >= chunk_want(sl)) {
                    send_frames(sl, 0, urgent);
                }
            }
    }
    /* stopping: running streams end, queued jobs are refused */
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (atomic_load(&sl->state) != SLOT_ACTIVE) continue;
        job_cancel(sl->j);
        if (qtts_context_is_generating(sl->ctx)) qtts_batch_remove(s->batch, sl->ctx);
        atomic_store(&sl->state, SLOT_DRAINING);
        send_frames(sl, 1, 1);
    }
    pthread_mutex_lock(&s->mu);
    while (s->q_len > 0) {
        job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        job_finish(j, QTTS_ERR_CANCELLED, "the server is stopping", 0, QTTS_STOP_CANCELLED);
        job_release(j);
    }
    for (task *tk = s->tasks; tk; tk = tk->next) tk->done = -1;
    s->tasks = s->tasks_tail = NULL;
    update_gauges(s);
    pthread_cond_broadcast(&s->task_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->warm) {
        job_release(s->warm);
        s->warm = NULL;
    }
    return NULL;
}

/* ---------------------------------------------------------------- API */

int sched_new(sched **out, qtts_model *m, const sched_params *p, metrics *mx, char *err, size_t n) {
    *out = NULL;
    if (p->n_slots < 1 || p->n_slots > QTTS_MAX_BATCH || p->queue_depth < 0 || p->decode_threads < 0 ||
        p->decode_threads > 64 || p->prefill_budget_ms < 0) {
        snprintf(err, n,
                 "slots must be in [1, %d], the queue depth >= 0, decode threads in [0, 64] and the prefill "
                 "budget >= 0 ms",
                 QTTS_MAX_BATCH);
        return -1;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    s->model = m;
    s->p = *p;
    if (s->p.decode_threads > s->p.n_slots) s->p.decode_threads = s->p.n_slots;
    s->mx = mx;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    s->G = info.n_code_groups;
    s->spf = info.samples_per_frame;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->task_cv, NULL);
    atomic_init(&s->ready, 0);
    s->q_cap = p->queue_depth + p->n_slots + 1;
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->slots = calloc((size_t)p->n_slots, sizeof *s->slots);
    s->workers = calloc((size_t)n_workers(s), sizeof *s->workers);
    int rc = s->queue && s->slots && s->workers ? 0 : -1;
    if (rc) snprintf(err, n, "out of memory");
    qtts_status st;
    if (!rc && (st = qtts_batch_new(m, p->n_slots, &s->batch))) {
        snprintf(err, n, "cannot make a batch of %d streams: %s", p->n_slots, qtts_status_str(st));
        rc = -1;
    }
    qtts_context_params cp = qtts_context_default_params();
    cp.n_ctx = p->n_ctx;
    cp.decode_on_model_threads = p->decode_threads == 0; /* decoded on the engine thread between steps */
    for (int i = 0; !rc && i < p->n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->s = s;
        sl->index = i;
        atomic_init(&sl->state, SLOT_FREE);
        atomic_init(&sl->failed, 0);
        char why[1024];
        if ((st = qtts_context_new(m, &cp, &sl->ctx, why, sizeof why))) {
            snprintf(err, n, "cannot make context %d: %s", i, why);
            rc = -1;
            break;
        }
        sl->pending = malloc(sizeof(int32_t) * MAX_CHUNK * (size_t)s->G);
        if (!sl->pending) {
            snprintf(err, n, "out of memory");
            rc = -1;
        }
    }
    for (int i = 0; !rc && i < n_workers(s); i++) {
        dworker *w = &s->workers[i];
        w->s = s;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        atomic_init(&w->n_hi, 0);
        w->pcm = malloc(sizeof(float) * MAX_CHUNK * (size_t)s->spf);
        w->pcm_urgent = malloc(sizeof(float) * MAX_CHUNK * (size_t)s->spf);
        if (!w->pcm || !w->pcm_urgent) {
            snprintf(err, n, "out of memory");
            rc = -1;
        } else if (s->p.decode_threads == 0) {
            continue; /* inline */
        } else if (pthread_create(&w->th, NULL, worker_main, w)) {
            snprintf(err, n, "cannot start decode worker %d", i);
            rc = -1;
        } else {
            w->have_thread = 1;
        }
    }
    metrics_set_slots(mx, p->n_slots);
    if (!rc && p->warmup) warmup_job(s);
    if (!rc) {
        if (pthread_create(&s->thread, NULL, engine, s)) {
            snprintf(err, n, "cannot start the engine thread");
            rc = -1;
        } else {
            s->have_thread = 1;
        }
    }
    if (rc) {
        sched_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void sched_stop(sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->have_thread) {
        pthread_join(s->thread, NULL);
        s->have_thread = 0;
    }
    for (int i = 0; s->workers && i < n_workers(s); i++) { /* they finish their queues first */
        dworker *w = &s->workers[i];
        if (!w->have_thread) continue;
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
        w->have_thread = 0;
    }
    if (s->warm) { /* the engine never ran */
        job_release(s->warm);
        job_release(s->warm);
        s->warm = NULL;
        s->q_len = 0;
    }
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    qtts_batch_free(s->batch);
    for (int i = 0; s->slots && i < s->p.n_slots; i++) {
        qtts_context_free(s->slots[i].ctx);
        free(s->slots[i].pending);
    }
    for (int i = 0; s->workers && i < n_workers(s); i++) {
        if (!s->workers[i].s) continue;
        free(s->workers[i].pcm);
        free(s->workers[i].pcm_urgent);
        pthread_mutex_destroy(&s->workers[i].mu);
        pthread_cond_destroy(&s->workers[i].cv);
    }
    free(s->workers);
    free(s->slots);
    free(s->queue);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->task_cv);
    free(s);
}

int sched_ready(const sched *s) { return s && atomic_load(&((sched *)s)->ready); }

const char *sched_warmup_error(const sched *s) { return s ? s->warm_err : ""; }

int sched_submit(sched *s, job *j) {
    if (j->first_chunk_frames < 1) j->first_chunk_frames = 1;
    if (j->first_chunk_frames > MAX_CHUNK) j->first_chunk_frames = MAX_CHUNK;
    if (j->chunk_frames < 1) j->chunk_frames = 1;
    if (j->chunk_frames > MAX_CHUNK) j->chunk_frames = MAX_CHUNK;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (s->stop) rc = -2;
    else if (s->q_len >= s->p.queue_depth + (s->p.n_slots - s->n_busy) || s->q_len >= s->q_cap) rc = -1;
    else {
        pthread_mutex_lock(&j->mu);
        j->refs++; /* the engine's */
        j->state = JOB_QUEUED;
        pthread_mutex_unlock(&j->mu);
        s->queue[(s->q_head + s->q_len) % s->q_cap] = j;
        s->q_len++;
        update_gauges(s);
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int sched_active(sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_busy + s->q_len;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sched_run_task(sched *s, void (*fn)(void *), void *arg) {
    task tk = {fn, arg, 0, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return -2;
    }
    if (s->tasks_tail) s->tasks_tail->next = &tk;
    else s->tasks = &tk;
    s->tasks_tail = &tk;
    pthread_cond_signal(&s->cv);
    while (!tk.done) pthread_cond_wait(&s->task_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return tk.done == 1 ? 0 : -2;
}
