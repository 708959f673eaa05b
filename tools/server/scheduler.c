/* The engine thread (see scheduler.h). One iteration: run pending tasks ->
 * admit queued jobs into free slots (audio_begin + batch_add: the prefill)
 * -> remove cancelled slots -> qtts_batch_step (one frame for every slot,
 * each weight read once) -> decode each slot's pending frames once a chunk is
 * full -> hand finished slots' results to their jobs. The frame callback only
 * queues codes, so the step time measures generation alone; decoding stays on
 * this thread because the model's kernels (and their thread pool) take one
 * caller at a time. */
#include "scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CHUNK 64 /* frames per decoded chunk at most */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- jobs */

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

typedef struct slot {
    struct sched *s;
    qtts_context *ctx;
    job *j;              /* NULL when free */
    int32_t *pending;    /* [MAX_CHUNK][G] frames not yet decoded */
    int n_pending;
    int n_decoded;       /* frames decoded for this job */
    int failed;          /* a decode failed: the job ends with the error */
    int n_new;           /* frames made in the current step */
    qtts_status fail_st;
    char fail_msg[256];
    float *pcm;          /* [MAX_CHUNK * spf] */
} slot;

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
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu;   /* guards everything below */
    pthread_cond_t cv;    /* engine wake-up */
    pthread_cond_t task_cv;
    job **queue;          /* ring of queued jobs */
    int q_cap, q_head, q_len;
    int n_active;         /* slots in use (written by the engine) */
    task *tasks, *tasks_tail;
    int stop;
    atomic_int ready;
    char warm_err[600];
};

static void update_gauges(sched *s) { metrics_set_gauges(s->mx, s->q_len, s->n_active); }

/* Decode a slot's pending frames and hand the samples to its job. */
static void decode_pending(slot *sl, double *decode_s) {
    if (!sl->n_pending || sl->failed) return;
    const double t = now_s();
    qtts_status st = qtts_context_audio_decode(sl->ctx, sl->pending, sl->n_pending, sl->pcm);
    *decode_s += now_s() - t;
    if (st) {
        sl->failed = 1;
        sl->fail_st = st;
        snprintf(sl->fail_msg, sizeof sl->fail_msg, "decoding audio failed: %s", qtts_context_last_error(sl->ctx));
        return;
    }
    if (job_push(sl->j, sl->pcm, (size_t)sl->n_pending * sl->s->spf)) {
        sl->failed = 1;
        sl->fail_st = QTTS_ERR_NOMEM;
        snprintf(sl->fail_msg, sizeof sl->fail_msg, "out of memory buffering audio");
        return;
    }
    sl->n_decoded += sl->n_pending;
    sl->n_pending = 0;
}

static int on_frame(const int32_t *codes, int idx, void *u) {
    slot *sl = u;
    (void)idx;
    if (atomic_load(&sl->j->cancel) || sl->failed) return 1;
    if (sl->n_pending == MAX_CHUNK) { /* cannot happen: chunks are decoded after every step */
        sl->failed = 1;
        sl->fail_st = QTTS_ERR_INTERNAL;
        snprintf(sl->fail_msg, sizeof sl->fail_msg, "frame queue overflow");
        return 1;
    }
    memcpy(sl->pending + (size_t)sl->n_pending * sl->s->G, codes, sizeof(int32_t) * sl->s->G);
    sl->n_pending++;
    sl->n_new++;
    return 0;
}

static int chunk_want(const slot *sl) { return sl->n_decoded == 0 ? sl->j->first_chunk_frames : sl->j->chunk_frames; }

/* Admit job j into free slot sl: reset its decoder, prefill, join the batch. */
static void admit(sched *s, slot *sl, job *j) {
    sl->j = j;
    sl->n_pending = sl->n_decoded = 0;
    sl->failed = 0;
    const double t = now_s();
    qtts_status st = QTTS_OK;
    if (atomic_load(&j->cancel)) {
        job_finish(j, QTTS_ERR_CANCELLED, "cancelled before it started", 0, QTTS_STOP_CANCELLED);
        st = QTTS_ERR_CANCELLED;
    } else {
        st = qtts_context_audio_begin(sl->ctx, &j->gp);
        if (!st) st = qtts_batch_add(s->batch, sl->ctx, &j->gp, on_frame, sl);
        if (st) job_finish(j, st, qtts_context_last_error(sl->ctx), 0, QTTS_STOP_NONE);
    }
    if (st) {
        sl->j = NULL;
        job_release(j);
        return;
    }
    metrics_prefill(s->mx, now_s() - t);
    job_set_state(j, JOB_RUNNING);
}

/* A slot whose stream left the batch: flush its audio, report, free the slot. */
static void retire(sched *s, slot *sl, double *decode_s) {
    int nf = 0;
    qtts_status st = qtts_context_finish(sl->ctx, &nf);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st ? qtts_context_last_error(sl->ctx) : "");
    if (!st) decode_pending(sl, decode_s);
    if (sl->failed) {
        st = sl->fail_st;
        snprintf(msg, sizeof msg, "%s", sl->fail_msg);
    }
    job_finish(sl->j, st, msg, nf, qtts_context_stop_reason(sl->ctx));
    job_release(sl->j);
    sl->j = NULL;
    sl->n_pending = 0;
}

static void warmup(sched *s) {
    qtts_model_info info;
    qtts_model_get_info(s->model, &info);
    qtts_gen_params gp = qtts_gen_default_params(s->model);
    gp.text = "Hello.";
    gp.force_frames = 4;
    float *xv = NULL;
    if (info.type == QTTS_MODEL_CUSTOM_VOICE && qtts_model_n_speakers(s->model) > 0)
        gp.speaker = qtts_model_speaker(s->model, 0);
    else if (info.type == QTTS_MODEL_VOICE_DESIGN)
        gp.instruct = "A calm, clear voice.";
    else if (info.type == QTTS_MODEL_BASE) {
        xv = calloc((size_t)info.hidden_size, sizeof(float));
        gp.xvector = xv;
    }
    job *j = job_new();
    slot *sl = &s->slots[0];
    qtts_status st = j ? QTTS_OK : QTTS_ERR_NOMEM;
    if (!st) {
        j->gp = gp;
        j->refs = 2; /* admit/retire drop one */
        admit(s, sl, j);
        double d = 0;
        for (int i = 0; i < 64 && qtts_batch_size(s->batch) > 0; i++) {
            qtts_batch_step(s->batch);
            decode_pending(sl, &d);
        }
        if (sl->j) retire(s, sl, &d);
        st = j->status;
        if (st) snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: %s", j->err);
        job_release(j);
    } else {
        snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: out of memory");
    }
    free(xv);
    if (!st) {
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
}

static void *engine(void *arg) {
    sched *s = arg;
    if (s->p.warmup) warmup(s);
    else {
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
    slot *admitted[QTTS_MAX_BATCH];
    job *admitted_jobs[QTTS_MAX_BATCH];
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && s->n_active == 0 && s->q_len == 0 && !s->tasks) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        task *tk = s->tasks;
        s->tasks = s->tasks_tail = NULL;
        int n_adm = 0;
        for (int i = 0; i < s->p.n_slots && s->q_len > 0; i++) {
            if (s->slots[i].j) continue;
            job *j = s->queue[s->q_head];
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_len--;
            admitted[n_adm] = &s->slots[i];
            admitted_jobs[n_adm++] = j;
            s->slots[i].j = j; /* reserve */
            s->n_active++;
        }
        update_gauges(s);
        pthread_mutex_unlock(&s->mu);

        /* tasks (voice cloning ...) */
        while (tk) {
            task *next = tk->next;
            tk->fn(tk->arg);
            pthread_mutex_lock(&s->mu);
            tk->done = 1;
            pthread_cond_broadcast(&s->task_cv);
            pthread_mutex_unlock(&s->mu);
            tk = next;
        }
        /* joiners: prefill now, join at this frame boundary */
        for (int i = 0; i < n_adm; i++) admit(s, admitted[i], admitted_jobs[i]);
        /* leavers: clients gone */
        for (int i = 0; i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->j && atomic_load(&sl->j->cancel) && qtts_context_is_generating(sl->ctx))
                qtts_batch_remove(s->batch, sl->ctx);
        }
        /* one frame for everyone */
        const int n = qtts_batch_size(s->batch);
        double step_s = 0, decode_s = 0;
        int n_frames = 0;
        if (n > 0) {
            for (int i = 0; i < s->p.n_slots; i++) s->slots[i].n_new = 0;
            const double t = now_s();
            qtts_batch_step(s->batch);
            step_s = now_s() - t;
            for (int i = 0; i < s->p.n_slots; i++) n_frames += s->slots[i].n_new;
        }
        /* first chunks first: a stream that has not made a sound yet is
         * waiting for its first audio; the others have audio buffered */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < s->p.n_slots; i++) {
                slot *sl = &s->slots[i];
                if (!sl->j || (sl->n_decoded == 0) != (pass == 0)) continue;
                if (sl->n_pending >= chunk_want(sl)) decode_pending(sl, &decode_s);
                if (!qtts_context_is_generating(sl->ctx)) retire(s, sl, &decode_s);
            }
        if (n > 0) metrics_step(s->mx, n, n_frames, step_s, decode_s);
        pthread_mutex_lock(&s->mu);
        int active = 0;
        for (int i = 0; i < s->p.n_slots; i++) active += s->slots[i].j != NULL;
        s->n_active = active;
        update_gauges(s);
        pthread_mutex_unlock(&s->mu);
    }
    /* stopping: everything in flight ends */
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j) continue;
        if (qtts_context_is_generating(sl->ctx)) qtts_batch_remove(s->batch, sl->ctx);
        int nf = 0;
        qtts_context_finish(sl->ctx, &nf);
        job_finish(sl->j, QTTS_ERR_CANCELLED, "the server is stopping", nf, QTTS_STOP_CANCELLED);
        job_release(sl->j);
        sl->j = NULL;
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
    s->n_active = 0;
    update_gauges(s);
    pthread_cond_broadcast(&s->task_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---------------------------------------------------------------- API */

int sched_new(sched **out, qtts_model *m, const sched_params *p, metrics *mx, char *err, size_t n) {
    *out = NULL;
    if (p->n_slots < 1 || p->n_slots > QTTS_MAX_BATCH || p->queue_depth < 0) {
        snprintf(err, n, "slots must be in [1, %d] and the queue depth >= 0", QTTS_MAX_BATCH);
        return -1;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    s->model = m;
    s->p = *p;
    s->mx = mx;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    s->G = info.n_code_groups;
    s->spf = info.samples_per_frame;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->task_cv, NULL);
    atomic_init(&s->ready, 0);
    s->q_cap = p->queue_depth + p->n_slots;
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->slots = calloc((size_t)p->n_slots, sizeof *s->slots);
    int rc = s->queue && s->slots ? 0 : -1;
    if (rc) snprintf(err, n, "out of memory");
    qtts_status st;
    if (!rc && (st = qtts_batch_new(m, p->n_slots, &s->batch))) {
        snprintf(err, n, "cannot make a batch of %d streams: %s", p->n_slots, qtts_status_str(st));
        rc = -1;
    }
    qtts_context_params cp = qtts_context_default_params();
    cp.n_ctx = p->n_ctx;
    for (int i = 0; !rc && i < p->n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->s = s;
        if ((st = qtts_context_new(m, &cp, &sl->ctx))) {
            snprintf(err, n, "cannot make context %d: %s", i, qtts_model_last_error(m));
            rc = -1;
            break;
        }
        sl->pending = malloc(sizeof(int32_t) * MAX_CHUNK * (size_t)s->G);
        sl->pcm = malloc(sizeof(float) * MAX_CHUNK * (size_t)s->spf);
        if (!sl->pending || !sl->pcm) {
            snprintf(err, n, "out of memory");
            rc = -1;
        }
    }
    metrics_set_slots(mx, p->n_slots);
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
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    qtts_batch_free(s->batch);
    for (int i = 0; s->slots && i < s->p.n_slots; i++) {
        qtts_context_free(s->slots[i].ctx);
        free(s->slots[i].pending);
        free(s->slots[i].pcm);
    }
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
    else if (s->q_len >= s->p.queue_depth + (s->p.n_slots - s->n_active) || s->q_len >= s->q_cap) rc = -1;
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
    int n = s->n_active + s->q_len;
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
