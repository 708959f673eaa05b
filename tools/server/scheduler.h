/* The server's engine: one thread driving the library's synthesis pipeline
 * (qtts_pipeline: text segments, batched steps, decoding beside generation;
 * docs/API.md). HTTP threads hand it jobs through a bounded queue (a full
 * queue is a 429); between steps it moves queued jobs into free streams of
 * the pipeline, cancels the jobs whose client went away (they leave at the
 * next step), and steps the pipeline. The pipeline's audio callbacks append
 * PCM to the job's buffer, waking the HTTP thread that waits on it. The engine
 * also runs short model tasks (voice cloning) between steps. */
#ifndef QTTS_SERVER_SCHEDULER_H
#define QTTS_SERVER_SCHEDULER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "qtts.h"
#include "voices.h"

typedef struct sched_params {
    int n_slots;            /* pipeline streams, 1..QTTS_MAX_BATCH */
    int queue_depth;        /* jobs waiting for a stream, >= 0 */
    int n_ctx;              /* context positions per stream; 0 = model maximum */
    int warmup;             /* every stream once through a short request before sched_ready */
    int decode_threads;     /* qtts_pipeline_params.decode_threads (0 = decode on the engine thread) */
    int share_cores;        /* qtts_pipeline_params.decode_share_cores (-1 auto, 0, 1) */
    int prefill_budget_ms;  /* qtts_pipeline_params.prefill_budget_ms */
    qtts_split_params split;/* how a job's input is cut into segments, and the pauses */
    qtts_pipeline_debug hooks; /* test aids; all NULL: none */
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
    size_t read_samples;      /* samples read so far */
    size_t *seg_start;        /* [n_seg_marks] sample where segment i starts (total count) */
    int n_seg_marks, cap_seg_marks;
    int n_segments;           /* segments of the input (known with its first audio) */
    qtts_status status;       /* final status once JOB_DONE */
    char err[512];
    int n_frames;
    qtts_stop_reason stop;
    int started;              /* its first frame was generated (engine thread) */
    uint64_t id;              /* its request in the pipeline (engine) */
    struct sched *sched;      /* the engine it runs on (set when it enters the pipeline) */
    int push_failed;          /* out of memory buffering its audio (pipeline side) */
    int refs;
    /* incremental text (the WebSocket endpoint): set incremental before
     * sched_submit, then give the text with job_text; guarded by mu */
    int incremental;
    char *tin;                /* text given before the job entered the pipeline */
    size_t tin_n, tin_cap;
    int tin_end;
    int in_pipeline;          /* the engine added it: text goes to the pipeline directly */
} job;

job *job_new(void);
void job_release(job *j); /* drop one reference; accepts NULL */
/* Ask the engine to drop the job (client gone): it leaves its slot before the
 * next step, or is skipped if still queued. */
void job_cancel(job *j);
/* Wait up to timeout_ms until the job runs (prefilled, its first frame
 * made) or is done; returns its state. */
job_state job_wait_started(job *j, int timeout_ms);
/* Wait up to timeout_ms for samples or the end; copy up to max samples of
 * one segment to out (*segment, may be NULL, gets its index). Returns how
 * many; *done = 1 once the job finished and every sample was read (then see
 * job->status, read under no lock since it is final). */
size_t job_read(job *j, float *out, size_t max, int timeout_ms, int *done, int *segment);

/* Incremental text of an incremental job: n bytes, then (end) its end. Kept
 * until the job enters the pipeline, then handed to it. 0, or -1 when the
 * job no longer takes text (it ended) or out of memory. */
int job_text(job *j, const char *text, size_t n, int end);

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
