/* The engine: one thread owning a qtts_batch of N slots (contexts), the only
 * thread that steps them. HTTP threads hand it jobs through a bounded queue;
 * between steps it admits queued jobs into free slots (their prefill runs
 * then, within a time budget per step), removes slots whose client went away, and steps every active slot
 * together. Each slot's new frames go, a chunk at a time, to a decode worker
 * (slot i to worker i mod W) that runs the slot's streaming codec decoder
 * beside generation and appends the PCM to the job's buffer, waking the HTTP
 * thread that waits on it. A finished stream's slot is freed by its worker
 * once its last audio is out; the others never wait for it. The engine also
 * runs short model tasks (voice cloning) between steps. */
#ifndef QTTS_SERVER_SCHEDULER_H
#define QTTS_SERVER_SCHEDULER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "metrics.h"
#include "qtts.h"
#include "voices.h"

/* Calls out of the engine's threads at points where they hand a slot over;
 * tests use them to hold a thread there and force interleavings that load
 * only produces by chance. Each may be NULL. */
typedef struct sched_hooks {
    /* by the thread that freed a slot (a decode worker, or the engine when
     * decoding inline), right after it let go of it */
    void (*slot_freed)(void *arg, int slot);
    /* by a decode worker after each frame of a chunk it decodes frame by
     * frame (done of n frames so far), before it looks for urgent tasks */
    void (*frame_decoded)(void *arg, int slot, int done, int n);
    /* by the engine after each batched step, with the streams it stepped */
    void (*stepped)(void *arg, int n_streams);
    void *arg;
} sched_hooks;

typedef struct sched_params {
    int n_slots;            /* 1..QTTS_MAX_BATCH */
    int queue_depth;        /* jobs waiting for a slot, >= 0 */
    int n_ctx;              /* context positions per slot; 0 = model maximum */
    int warmup;             /* run a short generation before sched_ready */
    int decode_threads;     /* decode workers; 0 = decode inline on the engine thread after each step */
    int lend_thread;        /* 1 = a worker with chunks queued borrows a model thread (qtts_model_lend_thread)
                               until its queue is empty */
    int prefill_budget_ms;  /* at one frame boundary the engine admits queued jobs one at a time (jobs that
                               arrive meanwhile included) until their prefills have taken this long; the
                               first always runs. Running streams then wait at most this plus one prefill
                               for their next frame, and of a burst the first few reach their first audio
                               while the rest prefill at the next boundaries. 0 = one job per boundary */
    sched_hooks hooks;      /* all NULL: none */
} sched_params;

typedef enum job_state { JOB_NEW = 0, JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;

/* One speech request. The HTTP side fills the request part, submits it and
 * then only reads through job_* calls; the engine owns the rest. Reference
 * counted (HTTP side + engine). */
typedef struct job {
    /* request: owned strings, set before sched_submit, immutable after */
    qtts_gen_params gp;       /* text/speaker/debug/... point into the fields below */
    qtts_gen_debug debug;     /* measurement aids (force_frames); gp.debug points here when a request
                                 has them, else NULL. Set it from qtts_gen_debug_default_params() */
    char *text, *instruct, *speaker, *language;
    voice_ref *voice;         /* released with the job */
    float *xvector;           /* owned x-vector (the warm-up of Base models) or NULL */
    int first_chunk_frames, chunk_frames;
    /* shared state, guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_state state;
    atomic_int cancel;        /* set by the HTTP side: client gone or timed out */
    float *pcm;               /* decoded samples not yet read: pcm[r .. n) */
    size_t n_pcm, r_pcm, cap_pcm;
    size_t total_samples;     /* samples produced so far */
    qtts_status status;       /* final status once JOB_DONE */
    char err[512];
    int n_frames;
    qtts_stop_reason stop;
    double t_started_s;       /* admitted into a slot, prefill done */
    int refs;
} job;

job *job_new(void);
void job_release(job *j); /* drop one reference; accepts NULL */
/* Ask the engine to drop the job (client gone): it leaves its slot before the
 * next step, or is skipped if still queued. */
void job_cancel(job *j);
/* Wait up to timeout_ms until the job runs (prefilled, streaming) or is done;
 * returns its state. */
job_state job_wait_started(job *j, int timeout_ms);
/* Wait up to timeout_ms for samples or the end; copy up to max samples to
 * out. Returns how many; *done = 1 once the job finished and every sample
 * was read (then see job->status, read under no lock since it is final). */
size_t job_read(job *j, float *out, size_t max, int timeout_ms, int *done);

typedef struct sched sched;

int sched_new(sched **out, qtts_model *model, const sched_params *p, metrics *mx, char *err, size_t err_size);
/* Stop the engine: queued and running jobs end with QTTS_ERR_CANCELLED
 * ("the server is stopping"), later submits and tasks are refused. The object
 * stays valid for callers still holding it until sched_free. */
void sched_stop(sched *s);
/* sched_stop, then free everything; accepts NULL. */
void sched_free(sched *s);
int sched_ready(const sched *s);          /* warm-up done */
const char *sched_warmup_error(const sched *s); /* "" when the warm-up succeeded or is running */
/* Queue a job. 0 = queued; -1 = queue full (answer 429); -2 = stopping (503). */
int sched_submit(sched *s, job *j);
int sched_active(sched *s);               /* jobs in slots + queued */
/* Run fn(arg) on the engine thread between steps and wait for it (for work
 * that uses the model's kernels, like voice cloning). -2 if stopping. */
int sched_run_task(sched *s, void (*fn)(void *arg), void *arg);

#endif
