/* The server's engine (scheduler.c) over the library pipeline, driven
 * directly without HTTP, on the e2e_string checkpoint, with one decode
 * thread: interleavings of the engine thread and the decode thread that only
 * load produces by chance, forced with the pipeline's debug hooks (a hook
 * holds the decode thread at a point until the engine has done what the
 * interleaving needs). In each, every job that is not cancelled must end well
 * with the same samples as when it ran alone.
 *
 * - slot_reuse_while_worker_lags: job A finishes; its decode thread frees the
 *   stream and is held there until the engine has admitted job B into the
 *   same stream and B has finished too, so B's last task (with codes) is
 *   written into the slot before A's decode thread returns: A's way out must
 *   not touch B's task.
 * - urgent_first_chunk_mid_chunk: the decode thread is held after the first
 *   frame of A's second chunk until B, submitted then into the other stream,
 *   has its first chunk queued; the decode thread decodes B's first chunk
 *   between two of A's frames, into a buffer of its own (A's audio unchanged).
 * - cancel_mid_chunk_slot_reused: A is cancelled between two frames of its
 *   second chunk; its last task runs between those frames and frees the
 *   stream, and the decode thread is held there until B is admitted into it:
 *   it must stop decoding A's frames into the context that is now B's.
 * - prefill_budget: three jobs queued while the engine runs a task are
 *   admitted one per frame boundary with a budget of 0 ms (steps of 1, 2, 3
 *   streams) and all at the first boundary with an unbounded one (3), each
 *   with the samples it makes alone.
 * - cancelled_while_queued: a job cancelled while it waits in the queue ends
 *   without a slot, and the queue-depth and active-slot gauges come back to 0. */
#include <pthread.h>
#include <unistd.h>

#include "metrics.h"
#include "scheduler.h"
#include "srv_util.h"

/* A is long so that it is surely still generating when it is cancelled after
 * the first frame of its second chunk: this tiny model makes a frame in about
 * 0.4 ms, so the ~190 left take the engine far longer than the worker needs to
 * get there. */
#define A_FRAMES 200
#define B_FRAMES 3

typedef enum scenario { PLAIN = 0, SLOT_REUSE, URGENT_MID_CHUNK, CANCEL_MID_CHUNK } scenario;

typedef struct hold {
    scenario sc;
    sched *s;
    job *a, *b;
    int frame_calls, freed_calls;
    int b_submitted; /* URGENT_MID_CHUNK: B was submitted from the hook */
    int held;        /* the hold saw what it waited for */
} hold;

static int wait_running(job *j) {
    const job_state st = job_wait_started(j, 30000);
    return st == JOB_RUNNING || st == JOB_DONE;
}

/* Margins below: a tiny model steps, prefills and decodes in milliseconds. */
static void on_slot_freed(void *arg, int slot) {
    hold *h = arg;
    (void)slot;
    if (h->freed_calls++) return; /* the first slot freed is A's */
    if (h->sc == SLOT_REUSE) {
        /* B is admitted into the slot just freed and runs its three frames:
         * then it leaves the batch and its last task is queued */
        h->held = wait_running(h->b);
        usleep(500000);
    } else if (h->sc == CANCEL_MID_CHUNK) {
        h->held = h->held && wait_running(h->b); /* B's prefill reset the context */
        usleep(100000);
    }
}

static void on_frame_decoded(void *arg, int slot, int done, int n) {
    hold *h = arg;
    (void)slot;
    /* the first frame of A's second chunk (its first is 1 frame, decoded in one call) */
    if (done != 1 || n != 8 || h->frame_calls++) return;
    if (h->sc == URGENT_MID_CHUNK) {
        h->b_submitted = sched_submit(h->s, h->b) == 0;
        h->held = h->b_submitted && wait_running(h->b);
        usleep(300000); /* B's first frame is stepped and its first chunk queued as urgent */
    } else if (h->sc == CANCEL_MID_CHUNK) {
        job_cancel(h->a);
        h->held = 1;
        usleep(300000); /* the engine drops A and queues its last task as urgent */
    }
}

static job *make_job(qtts_model *m, const char *text, const char *speaker, int frames, unsigned seed) {
    job *j = job_new();
    if (!j) return NULL;
    j->text = strdup(text);
    j->speaker = strdup(speaker);
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.text = j->text;
    gp.speaker = j->speaker;
    j->debug = qtts_gen_debug_default_params();
    j->debug.force_frames = frames;
    gp.debug = &j->debug;
    gp.seed = seed;
    j->gp = gp;
    j->first_chunk_frames = 1;
    j->chunk_frames = 8;
    return j;
}

/* Reads the job to its end; returns the samples (malloc'd) and their count. */
static float *drain_job(job *j, size_t *n, qtts_status *st) {
    size_t cap = 1 << 16, len = 0;
    float *pcm = malloc(sizeof(float) * cap);
    int done = 0;
    while (pcm && !done) {
        if (len + 4096 > cap) {
            float *p = realloc(pcm, sizeof(float) * (cap *= 2));
            if (!p) {
                free(pcm);
                return NULL;
            }
            pcm = p;
        }
        len += job_read(j, pcm + len, 4096, 60000, &done, NULL);
    }
    *n = len;
    *st = j->status;
    return pcm;
}

typedef struct run_out {
    float *pcm[2]; /* A, B */
    size_t n[2];
    qtts_status st[2];
    int held;
} run_out;

static void run_out_free(run_out *o) {
    for (int i = 0; i < 2; i++) free(o->pcm[i]);
}

/* Jobs A (200 frames: chunks of 1, then 8s) and B (3 frames: 1, 2) through an
 * engine with one decode worker. PLAIN runs them one after the other, alone. */
static int run(qtts_model *m, scenario sc, run_out *o) {
    memset(o, 0, sizeof *o);
    metrics *mx = metrics_new();
    hold h = {.sc = sc};
    sched_params p = {.n_slots = sc == URGENT_MID_CHUNK ? 2 : 1, .queue_depth = 4, .warmup = 0, .decode_threads = 1};
    if (sc != PLAIN) p.hooks = (qtts_pipeline_debug){.slot_freed = on_slot_freed, .frame_decoded = on_frame_decoded, .arg = &h};
    char err[256];
    sched *s = NULL;
    if (!mx || sched_new(&s, m, &p, mx, err, sizeof err)) {
        test_report("sched/start", 0, "%s", mx ? err : "out of memory");
        metrics_free(mx);
        return -1;
    }
    job *a = make_job(m, "The first request is a little longer.", "ryan", A_FRAMES, 5);
    job *b = make_job(m, "Then a short one.", "vivian", B_FRAMES, 6);
    h.s = s;
    h.a = a;
    h.b = b;
    int rc = a && b && !sched_submit(s, a) ? 0 : -1;
    if (!rc && sc == PLAIN) o->pcm[0] = drain_job(a, &o->n[0], &o->st[0]);
    if (!rc && sc != URGENT_MID_CHUNK && sched_submit(s, b)) rc = -1;
    if (!rc) {
        if (sc != PLAIN) o->pcm[0] = drain_job(a, &o->n[0], &o->st[0]);
        if (sc != URGENT_MID_CHUNK || h.b_submitted) o->pcm[1] = drain_job(b, &o->n[1], &o->st[1]);
    }
    o->held = h.held;
    sched_free(s);
    job_release(a);
    job_release(b);
    metrics_free(mx);
    if (rc) test_report("sched/submit", 0, "a job could not be queued");
    return rc;
}

/* prefill_budget: the engine is held in a task while three jobs are queued,
 * so they all wait at one frame boundary; the stepped hook records the batch
 * size of each step. cancelled_while_queued holds it the same way. */
typedef struct budget_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int release, in_task;
    int sizes[64], n_sizes;
    sched *s;
    pthread_t th; /* the thread whose task holds the engine */
} budget_run;

static void on_stepped(void *arg, int n) {
    budget_run *b = arg;
    if (b->n_sizes < 64) b->sizes[b->n_sizes++] = n; /* engine thread only */
}

static void hold_task(void *arg) {
    budget_run *b = arg;
    pthread_mutex_lock(&b->mu);
    b->in_task = 1;
    pthread_cond_broadcast(&b->cv);
    while (!b->release) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void *task_thread(void *arg) {
    budget_run *b = arg;
    sched_run_task(b->s, hold_task, b);
    return NULL;
}

/* Holds b->s's engine in hold_task, run from a thread of its own; returns
 * once the engine is in it (0), or -1 when the thread could not start. */
static int hold_engine(budget_run *b) {
    if (pthread_create(&b->th, NULL, task_thread, b)) return -1;
    pthread_mutex_lock(&b->mu);
    while (!b->in_task) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* Lets hold_engine's task return and joins its thread. */
static void release_engine(budget_run *b) {
    pthread_mutex_lock(&b->mu);
    b->release = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->th, NULL);
}

/* Runs three 3-frame jobs (B's text and speaker, seeds 6, 7, 8) queued at
 * one boundary; sizes of the first three steps into sizes[], samples into
 * pcm[]. Returns 0 when all three ended well. */
static int run_budget(qtts_model *m, int budget_ms, int sizes[3], float *pcm[3], size_t n[3]) {
    metrics *mx = metrics_new();
    budget_run b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    sched_params p = {.n_slots = 4, .queue_depth = 4, .decode_threads = 1, .prefill_budget_ms = budget_ms};
    p.hooks = (qtts_pipeline_debug){.stepped = on_stepped, .arg = &b};
    char err[256];
    int rc = -1;
    job *jobs[3] = {NULL, NULL, NULL};
    if (mx && !sched_new(&b.s, m, &p, mx, err, sizeof err) && !hold_engine(&b)) {
        rc = 0;
        for (int i = 0; i < 3; i++) {
            jobs[i] = make_job(m, "Then a short one.", "vivian", B_FRAMES, 6 + (unsigned)i);
            if (!jobs[i] || sched_submit(b.s, jobs[i])) rc = -1;
        }
        release_engine(&b);
        for (int i = 0; i < 3; i++) {
            qtts_status st = QTTS_ERR_INVALID_ARG;
            pcm[i] = jobs[i] && !rc ? drain_job(jobs[i], &n[i], &st) : NULL;
            if (st != QTTS_OK) rc = -1;
        }
    }
    sched_free(b.s); /* joins the engine: its hook calls are done */
    for (int i = 0; i < 3; i++) sizes[i] = i < b.n_sizes ? b.sizes[i] : -1;
    for (int i = 0; i < 3; i++) job_release(jobs[i]);
    metrics_free(mx);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return rc;
}

static double gauge(metrics *mx, const char *name) {
    char *t = metrics_render(mx);
    const double v = t ? metrics_value(t, name) : -1;
    free(t);
    return v;
}

/* cancelled_while_queued: the engine is held in a task while job X is
 * queued and cancelled (its client left); released, the engine takes X from
 * the queue and ends it without a slot. The gauges must say so: queue depth
 * 0 and no active slot once X has ended (a gauge not updated on that path
 * reads queue 1). */
static void cancelled_while_queued(qtts_model *m) {
    metrics *mx = metrics_new();
    budget_run b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    sched_params p = {.n_slots = 1, .queue_depth = 2, .decode_threads = 1};
    char err[256] = "";
    job *x = make_job(m, "Then a short one.", "vivian", B_FRAMES, 6);
    double queued = -1, depth = -1, active = -1;
    qtts_status st = QTTS_OK;
    size_t n = 0;
    float *pcm = NULL;
    int ok = mx && x && !sched_new(&b.s, m, &p, mx, err, sizeof err) && !hold_engine(&b);
    if (ok) {
        ok = !sched_submit(b.s, x);
        queued = gauge(mx, "qtts_queue_depth");
        job_cancel(x);
        release_engine(&b);
        if (ok) pcm = drain_job(x, &n, &st);
        depth = gauge(mx, "qtts_queue_depth");
        active = gauge(mx, "qtts_active_slots");
    }
    test_report("sched/cancelled_while_queued_gauges", ok && queued == 1 && st == QTTS_ERR_CANCELLED && n == 0 &&
                                                           depth == 0 && active == 0,
                "%s; queue %g while held; status %d (cancelled %d), %zu samples; then queue %g, active %g", err,
                queued, st, QTTS_ERR_CANCELLED, n, depth, active);
    free(pcm);
    sched_free(b.s);
    job_release(x);
    metrics_free(mx);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
}

static int same(const run_out *got, const run_out *ref, int i) {
    return got->st[i] == QTTS_OK && got->n[i] == ref->n[i] && got->pcm[i] && ref->pcm[i] &&
           !memcmp(got->pcm[i], ref->pcm[i], sizeof(float) * ref->n[i]);
}

int main(void) {
    qtts_model *m = load_model(test_path("golden/data/e2e_string"));
    if (!m) return test_finish();
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    const size_t spf = (size_t)info.samples_per_frame;
    run_out ref, got;
    if (run(m, PLAIN, &ref)) goto out;
    const int ref_ok = ref.st[0] == QTTS_OK && ref.st[1] == QTTS_OK && ref.n[0] == A_FRAMES * spf &&
                       ref.n[1] == B_FRAMES * spf;
    test_report("sched/reference_runs", ref_ok, "status %d / %d, %zu / %zu samples", ref.st[0], ref.st[1], ref.n[0],
                ref.n[1]);

    if (!run(m, SLOT_REUSE, &got)) {
        test_report("sched/slot_reuse_while_worker_lags", got.held && same(&got, &ref, 0) && same(&got, &ref, 1),
                    "held %d, status %d / %d, %zu / %zu samples, same A %d, same B %d", got.held, got.st[0],
                    got.st[1], got.n[0], got.n[1], same(&got, &ref, 0), same(&got, &ref, 1));
        run_out_free(&got);
    }
    if (!run(m, URGENT_MID_CHUNK, &got)) {
        test_report("sched/urgent_first_chunk_mid_chunk", got.held && same(&got, &ref, 0) && same(&got, &ref, 1),
                    "held %d, status %d / %d, %zu / %zu samples, same A %d, same B %d", got.held, got.st[0],
                    got.st[1], got.n[0], got.n[1], same(&got, &ref, 0), same(&got, &ref, 1));
        run_out_free(&got);
    }
    if (!run(m, CANCEL_MID_CHUNK, &got)) {
        test_report("sched/cancel_mid_chunk_slot_reused",
                    got.held && got.st[0] == QTTS_ERR_CANCELLED && same(&got, &ref, 1),
                    "held %d, status A %d (cancelled %d), B %d, same B %d", got.held, got.st[0],
                    QTTS_ERR_CANCELLED, got.st[1], same(&got, &ref, 1));
        run_out_free(&got);
    }
    {
        /* the jobs' samples alone: one at a time through the plain engine */
        float *alone[3] = {NULL, NULL, NULL}, *pcm[3] = {NULL, NULL, NULL};
        size_t n_alone[3] = {0, 0, 0}, n[3] = {0, 0, 0};
        int sizes[3];
        for (int i = 0; i < 3; i++) {
            metrics *mx = metrics_new();
            sched_params p = {.n_slots = 1, .queue_depth = 1, .decode_threads = 1};
            sched *s = NULL;
            char err[256];
            job *j = make_job(m, "Then a short one.", "vivian", B_FRAMES, 6 + (unsigned)i);
            qtts_status st;
            if (mx && j && !sched_new(&s, m, &p, mx, err, sizeof err) && !sched_submit(s, j))
                alone[i] = drain_job(j, &n_alone[i], &st);
            sched_free(s);
            job_release(j);
            metrics_free(mx);
        }
        for (int k = 0; k < 2; k++) {
            const int budget = k ? 600000 : 0;
            const int rc = run_budget(m, budget, sizes, pcm, n);
            int same_pcm = 1;
            for (int i = 0; i < 3; i++)
                same_pcm &= pcm[i] && alone[i] && n[i] == n_alone[i] && n[i] == B_FRAMES * spf &&
                            !memcmp(pcm[i], alone[i], sizeof(float) * n[i]);
            const int want = k ? sizes[0] == 3 : sizes[0] == 1 && sizes[1] == 2 && sizes[2] == 3;
            test_report(k ? "sched/prefill_budget_unbounded_admits_all" : "sched/prefill_budget_0_one_per_boundary",
                        !rc && want && same_pcm, "rc %d, steps of %d, %d, %d streams, same samples %d", rc, sizes[0],
                        sizes[1], sizes[2], same_pcm);
            for (int i = 0; i < 3; i++) {
                free(pcm[i]);
                pcm[i] = NULL;
            }
        }
        for (int i = 0; i < 3; i++) free(alone[i]);
        cancelled_while_queued(m);
        metrics *mx = metrics_new();
        sched_params bad = {.n_slots = 1, .queue_depth = 1, .prefill_budget_ms = -1};
        sched *s = NULL;
        char err[256] = "";
        const int refused = mx && sched_new(&s, m, &bad, mx, err, sizeof err) != 0 && !s && strstr(err, "prefill");
        test_report("sched/prefill_budget_negative_refused", refused, "%s", err);
        sched_free(s);
        metrics_free(mx);
    }
    run_out_free(&ref);
out:
    qtts_model_free(m);
    return test_finish();
}
