/* The engine thread (see scheduler.h).
 * Engine iteration: run pending tasks (voice cloning) -> move queued jobs
 * into free streams of the pipeline (qtts_pipeline_add; a job cancelled
 * while queued ends here) -> cancel the running jobs whose client went away
 * -> qtts_pipeline_step (prefills within the budget, one frame for every
 * stream, chunks to decoding). It sleeps while the pipeline has nothing to
 * step and no queued job can start; the pipeline's on_wake wakes it when a
 * segment waits for its prefill or a stream is freed.
 * The pipeline calls back: on_frame (engine thread) marks a job running at
 * its first frame; from its decode threads (or the engine thread when it
 * decodes inline) on_audio appends a chunk to the job's buffer and on_done
 * finishes the job. */
#include "scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"

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
    j->debug = qtts_gen_debug_default_params();
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
    free(j->seg_start);
    free(j->tin);
    free(j);
}

void job_cancel(job *j) {
    if (j) atomic_store(&j->cancel, 1);
}

job_state job_wait_started(job *j, int timeout_ms) {
    const struct timespec ts = tool_deadline_ms(timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_RUNNING && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    job_state st = j->state;
    pthread_mutex_unlock(&j->mu);
    return st;
}

/* The segment of sample number pos (a count since the job's start). */
static int segment_at(const job *j, size_t pos, size_t *seg_end) {
    int k = 0;
    while (k + 1 < j->n_seg_marks && j->seg_start[k + 1] <= pos) k++;
    *seg_end = k + 1 < j->n_seg_marks ? j->seg_start[k + 1] : (size_t)-1;
    return k;
}

size_t job_read(job *j, float *out, size_t max, int timeout_ms, int *done, int *segment) {
    const struct timespec ts = tool_deadline_ms(timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (j->r_pcm == j->n_pcm && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    size_t k = j->n_pcm - j->r_pcm;
    if (k > max) k = max;
    size_t seg_end;
    const int seg = segment_at(j, j->read_samples, &seg_end);
    if (k > seg_end - j->read_samples) k = seg_end - j->read_samples; /* one segment per read */
    if (k) memcpy(out, j->pcm + j->r_pcm, sizeof(float) * k);
    j->r_pcm += k;
    j->read_samples += k;
    if (j->r_pcm == j->n_pcm) j->r_pcm = j->n_pcm = 0;
    *done = j->state == JOB_DONE && j->n_pcm == 0;
    if (segment) *segment = seg;
    pthread_mutex_unlock(&j->mu);
    return k;
}

/* Pipeline side: append samples of segment seg (compacting what was read).
 * 0 ok, -1 no memory. */
static int job_push(job *j, const float *pcm, size_t n, int seg, int n_segments) {
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    j->n_segments = n_segments;
    while (!rc && j->n_seg_marks <= seg) { /* segment starts, in order */
        if (j->n_seg_marks == j->cap_seg_marks) {
            const int cap = j->cap_seg_marks ? 2 * j->cap_seg_marks : 16;
            size_t *m = realloc(j->seg_start, sizeof(size_t) * (size_t)cap);
            if (!m) {
                rc = -1;
                break;
            }
            j->seg_start = m;
            j->cap_seg_marks = cap;
        }
        j->seg_start[j->n_seg_marks++] = j->total_samples;
    }
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
    qtts_pipeline *pl;
    job **running;        /* [n_slots] jobs in the pipeline (engine) */
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu;   /* guards the queue, n_busy, tasks, stop */
    pthread_cond_t cv;    /* engine wake-up */
    pthread_cond_t task_cv;
    job **queue;          /* ring of queued jobs */
    int q_cap, q_head, q_len;
    int n_busy;           /* jobs in the pipeline */
    task *tasks, *tasks_tail;
    int stop;
    job **warm;           /* [n_slots] the warm-up jobs until they are done */
    int n_warm;
    float *warm_xvector;  /* a zero x-vector for a Base model's warm-up */
    atomic_int ready;
    char warm_err[600];
};

int job_text(job *j, const char *text, size_t n, int end) {
    int rc = 0;
    pthread_mutex_lock(&j->mu);
    if (j->state == JOB_DONE || j->tin_end) rc = -1;
    else if (j->in_pipeline) { /* the order of the pieces is kept: the job's mu is held */
        if ((n && qtts_pipeline_push_text(j->sched->pl, j->id, text, n)) ||
            (end && qtts_pipeline_end_text(j->sched->pl, j->id)))
            rc = -1;
    } else {
        if (j->tin_n + n + 1 > j->tin_cap) {
            size_t cap = j->tin_cap ? j->tin_cap : 256;
            while (cap < j->tin_n + n + 1) cap *= 2;
            char *t = realloc(j->tin, cap);
            if (!t) rc = -1;
            else {
                j->tin = t;
                j->tin_cap = cap;
            }
        }
        if (!rc && n) memcpy(j->tin + j->tin_n, text, n);
        if (!rc) j->tin_n += n;
    }
    if (!rc && end) j->tin_end = 1;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

static void update_gauges(sched *s) { metrics_set_gauges(s->mx, s->q_len, s->n_busy); }

static void on_wake(void *arg) {
    sched *s = arg;
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int on_audio(const qtts_chunk *c, void *arg) {
    job *j = arg;
    sched *s = j->sched;
    if (c->decode_ms > 0) metrics_decode(s->mx, c->decode_ms / 1000.0);
    if (atomic_load(&j->cancel)) return 1;
    if (job_push(j, c->pcm, c->n_samples, c->segment, c->n_segments)) {
        j->push_failed = 1;
        return 1;
    }
    return 0;
}

/* A job runs once its first frame exists (its prompt was prefilled): errors
 * of the prefill reach the client before it does, as an HTTP status. */
static int on_frame(const int32_t *codes, int idx, void *arg) {
    job *j = arg;
    (void)codes;
    (void)idx;
    if (j->started) return 0;
    j->started = 1;
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void on_done(const qtts_request_result *r, void *arg) {
    job *j = arg;
    sched *s = j->sched;
    const int oom = r->status == QTTS_ERR_CANCELLED && j->push_failed;
    pthread_mutex_lock(&s->mu);
    const int stopping = s->stop;
    pthread_mutex_unlock(&s->mu);
    const char *msg = oom ? "out of memory buffering audio"
                      : r->status == QTTS_ERR_CANCELLED && stopping ? "the server is stopping" : r->error;
    job_finish(j, oom ? QTTS_ERR_NOMEM : r->status, msg, r->n_frames, r->stop_reason);
    metrics_gpu(s->mx, r->stats.gpu_prefill_ms / 1000.0, r->stats.gpu_talker_ms / 1000.0,
                r->stats.gpu_predictor_ms / 1000.0, r->stats.gpu_sampling_ms / 1000.0);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->p.n_slots; i++)
        if (s->running[i] == j) s->running[i] = NULL;
    s->n_busy--;
    update_gauges(s);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    job_release(j); /* the engine's */
}

/* Move job j (the engine's reference) into the pipeline, or end it. */
static void start_job(sched *s, job *j) {
    if (atomic_load(&j->cancel)) {
        job_finish(j, QTTS_ERR_CANCELLED, "cancelled before it started", 0, QTTS_STOP_CANCELLED);
        job_release(j);
        return;
    }
    qtts_audio_params ap = qtts_audio_default_params();
    ap.first_chunk_frames = j->first_chunk_frames;
    ap.chunk_frames = j->chunk_frames;
    ap.split = s->p.split;
    ap.on_frame = on_frame;
    ap.frame_user = j;
    j->sched = s;
    const qtts_request rq = {&j->gp, &ap, on_audio, on_done, j, j->incremental};
    char err[512];
    pthread_mutex_lock(&s->mu);
    s->n_busy++; /* before the add: on_done may come from a decode thread at once */
    int k = 0;
    while (s->running[k]) k++;
    s->running[k] = j;
    update_gauges(s);
    pthread_mutex_unlock(&s->mu);
    if (j->incremental) pthread_mutex_lock(&j->mu); /* its text waits until it is in */
    const qtts_status st = qtts_pipeline_add(s->pl, &rq, &j->id, err, sizeof err);
    if (j->incremental) {
        if (!st) {
            j->in_pipeline = 1;
            if (j->tin_n) qtts_pipeline_push_text(s->pl, j->id, j->tin, j->tin_n);
            if (j->tin_end) qtts_pipeline_end_text(s->pl, j->id);
        }
        pthread_mutex_unlock(&j->mu);
    }
    if (st) {
        pthread_mutex_lock(&s->mu);
        s->running[k] = NULL;
        s->n_busy--;
        update_gauges(s);
        pthread_mutex_unlock(&s->mu);
        job_finish(j, st, err, 0, QTTS_STOP_NONE);
        job_release(j);
    }
}

/* One short request per stream, all at once, before the first client: a
 * stream's first request pays for first use (its KV cache reserved and its
 * pages faulted in, scratch grown, the codec stream's buffers), so without
 * this each stream's first client would be slower than the rest. */
static void warmup_jobs(sched *s) {
    qtts_model_info info;
    qtts_model_get_info(s->model, &info);
    s->warm = calloc((size_t)s->p.n_slots, sizeof *s->warm);
    if (info.type == QTTS_MODEL_BASE) s->warm_xvector = calloc((size_t)info.hidden_size, sizeof(float));
    if (!s->warm || (info.type == QTTS_MODEL_BASE && !s->warm_xvector)) {
        snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: out of memory");
        return;
    }
    for (int i = 0; i < s->p.n_slots; i++) {
        job *j = job_new();
        if (!j) {
            snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: out of memory");
            return;
        }
        qtts_gen_params gp = qtts_gen_default_params(s->model);
        gp.text = "Hello. This sentence warms up every stream of the server before it says that it is ready.";
        j->debug.force_frames = 5; /* a 1-frame first chunk and a 4-frame chunk */
        gp.debug = &j->debug;
        if (info.type == QTTS_MODEL_CUSTOM_VOICE && qtts_model_n_speakers(s->model) > 0)
            gp.speaker = qtts_model_speaker(s->model, 0);
        else if (info.type == QTTS_MODEL_VOICE_DESIGN)
            gp.instruct = "A calm, clear voice.";
        else if (info.type == QTTS_MODEL_BASE)
            gp.xvector = s->warm_xvector;
        j->gp = gp;
        j->refs = 2; /* ours (s->warm) and the engine's */
        j->state = JOB_QUEUED;
        s->warm[s->n_warm++] = j;
        s->queue[(s->q_head + s->q_len) % s->q_cap] = j;
        s->q_len++;
    }
}

static int job_done(job *j) {
    pthread_mutex_lock(&j->mu);
    const int done = j->state == JOB_DONE;
    pthread_mutex_unlock(&j->mu);
    return done;
}

static int warm_done(sched *s) {
    for (int i = 0; i < s->n_warm; i++)
        if (!job_done(s->warm[i])) return 0;
    return 1;
}

static void check_warm(sched *s) {
    if (!warm_done(s)) return;
    int ok = 0;
    for (int i = 0; i < s->n_warm; i++) {
        job *j = s->warm[i];
        if (j->status && !s->warm_err[0]) snprintf(s->warm_err, sizeof s->warm_err, "warm-up failed: %s", j->err);
        ok += !j->status;
        job_release(j);
    }
    s->n_warm = 0;
    free(s->warm);
    s->warm = NULL;
    metrics_set_warm_slots(s->mx, ok);
    if (!s->warm_err[0]) {
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
}

static void *engine(void *arg) {
    sched *s = arg;
    if (!s->warm) {
        atomic_store(&s->ready, 1);
        metrics_set_ready(s->mx, 1);
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        for (;;) {
            if (s->stop || qtts_pipeline_busy(s->pl) || (s->q_len && qtts_pipeline_n_free(s->pl) > 0) || s->tasks ||
                (s->warm && warm_done(s)))
                break;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        task *tk = s->tasks;
        s->tasks = s->tasks_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        if (s->warm) check_warm(s);

        while (tk) { /* tasks (voice cloning ...) */
            task *next = tk->next;
            tk->fn(tk->arg);
            pthread_mutex_lock(&s->mu);
            tk->done = 1;
            pthread_cond_broadcast(&s->task_cv);
            pthread_mutex_unlock(&s->mu);
            tk = next;
        }
        /* queued jobs into free streams (their prefills run in the step) */
        for (;;) {
            job *j = NULL;
            pthread_mutex_lock(&s->mu);
            if (s->q_len > 0 && qtts_pipeline_n_free(s->pl) > 0) {
                j = s->queue[s->q_head];
                s->q_head = (s->q_head + 1) % s->q_cap;
                s->q_len--;
                update_gauges(s); /* here: a job cancelled while queued ends in start_job without a slot */
            }
            pthread_mutex_unlock(&s->mu);
            if (!j) break;
            start_job(s, j);
        }
        /* leavers: clients gone */
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < s->p.n_slots; i++)
            if (s->running[i] && atomic_load(&s->running[i]->cancel)) qtts_pipeline_cancel(s->pl, s->running[i]->id);
        pthread_mutex_unlock(&s->mu);
        if (!qtts_pipeline_busy(s->pl)) continue;
        qtts_pipeline_step(s->pl);
        qtts_step_info si;
        qtts_pipeline_last_step(s->pl, &si);
        if (si.n_prefills > 0)
            metrics_prefill(s->mx, si.prefill_ms / 1000.0, si.n_prompt, si.n_prompt_reused, si.n_prefills);
        if (si.n_streams > 0) metrics_step(s->mx, si.n_streams, si.n_frames, si.step_ms / 1000.0, 0);
    }
    /* stopping: queued jobs are refused; running ones end when the pipeline is freed */
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
    s->mx = mx;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->task_cv, NULL);
    atomic_init(&s->ready, 0);
    s->q_cap = p->queue_depth + 2 * p->n_slots + 1;
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->running = calloc((size_t)p->n_slots, sizeof *s->running);
    int rc = s->queue && s->running ? 0 : -1;
    if (rc) snprintf(err, n, "out of memory");
    qtts_pipeline_params pp = qtts_pipeline_default_params();
    pp.max_streams = p->n_slots;
    pp.n_ctx = p->n_ctx;
    pp.decode_threads = p->decode_threads;
    pp.decode_share_cores = p->share_cores;
    pp.prefill_budget_ms = p->prefill_budget_ms;
    pp.on_wake = on_wake;
    pp.wake_user = s;
    pp.debug = &s->p.hooks;
    char perr[512];
    if (!rc && qtts_pipeline_new(m, &pp, &s->pl, perr, sizeof perr)) {
        snprintf(err, n, "cannot start the pipeline of %d streams: %s", p->n_slots, perr);
        rc = -1;
    }
    metrics_set_slots(mx, p->n_slots);
    if (!rc && p->warmup) warmup_jobs(s);
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
    /* running jobs end (QTTS_ERR_CANCELLED, their on_done) as the pipeline goes */
    pthread_mutex_lock(&s->mu);
    for (int i = 0; s->running && i < s->p.n_slots; i++)
        if (s->running[i]) job_cancel(s->running[i]);
    pthread_mutex_unlock(&s->mu);
    qtts_pipeline *pl = s->pl;
    s->pl = NULL;
    qtts_pipeline_free(pl);
    while (s->q_len > 0) { /* the engine never ran */
        job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        job_finish(j, QTTS_ERR_CANCELLED, "the server is stopping", 0, QTTS_STOP_CANCELLED);
        job_release(j);
    }
    for (int i = 0; i < s->n_warm; i++) job_release(s->warm[i]);
    s->n_warm = 0;
    free(s->warm);
    s->warm = NULL;
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    free(s->running);
    free(s->queue);
    free(s->warm_xvector);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->task_cv);
    free(s);
}

int sched_ready(const sched *s) { return s && atomic_load(&((sched *)s)->ready); }

const char *sched_warmup_error(const sched *s) { return s ? s->warm_err : ""; }

int sched_submit(sched *s, job *j) {
    if (j->first_chunk_frames < 1) j->first_chunk_frames = 1;
    if (j->first_chunk_frames > 64) j->first_chunk_frames = 64;
    if (j->chunk_frames < 1) j->chunk_frames = 1;
    if (j->chunk_frames > 64) j->chunk_frames = 64;
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
