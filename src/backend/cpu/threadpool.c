/* Spin-then-sleep thread pool with join/close jobs (see threadpool.h).
 * ctl packs [generation:32][closed:1][joined:31]. The caller writes the job,
 * then stores ctl = (gen + 1) << 32 (release). A worker that sees a new
 * generation joins with a CAS that only succeeds while ctl still holds that
 * generation and is open; after joining it may read the job (the CAS is an
 * acquire of the caller's store). When the tasks are exhausted the caller
 * sets the closed bit with a CAS, which fixes the number of joiners J, and
 * waits until J workers have left (release/acquire on `left`). A worker that
 * comes late finds the job closed (or a newer generation) and touches
 * nothing. Sleeping: a worker registers in sleepers (seq_cst) and re-checks
 * ctl under the mutex before waiting; the caller stores ctl (seq_cst) and then
 * reads sleepers (seq_cst): one of the two sees the other's store, so no
 * wake-up is lost. An async function (threadpool_async) is a second thing a
 * worker waits for: astate goes IDLE -> CLAIMED (the poster that wins the
 * CAS, so any thread may post) -> PENDING (that poster, seq_cst, after
 * writing afn/aarg, then the same sleepers check) -> RUNNING (the worker
 * that wins the CAS, acquire) -> IDLE (that worker, release, when fn
 * returns). */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/clock.h"

/* How long an idle worker spins before sleeping, and how long the caller
 * spins on stragglers before yielding its core. */
#define QT_POOL_SPIN_US 200
#define QT_POOL_WAIT_SPIN_US 50

#define CTL_CLOSED ((uint64_t)1 << 31)
#define CTL_JOINED_MASK (CTL_CLOSED - 1)
enum { ASYNC_IDLE, ASYNC_CLAIMED, ASYNC_PENDING, ASYNC_RUNNING };

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static inline uint32_t ctl_gen(uint64_t c) { return (uint32_t)(c >> 32); }

typedef struct worker {
    threadpool *pool;
    pthread_t th;
} worker;

struct threadpool {
    int n_threads;
    worker *workers;                       /* [n_threads - 1] */
    _Alignas(64) _Atomic uint64_t ctl;     /* generation, closed, joined */
    _Alignas(64) atomic_int next_task;     /* tasks handed out */
    _Alignas(64) atomic_int left;          /* joined workers that finished */
    _Alignas(64) atomic_int sleepers;      /* workers waiting on cv */
    atomic_int stop;
    _Alignas(64) atomic_int astate;        /* ASYNC_*: the async function's state */
    void (*afn)(void *);                   /* the async function (written before astate) */
    void *aarg;
    _Alignas(64) tp_task_fn fn;            /* the current job (written before ctl) */
    void *arg;
    int n_tasks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void pull_tasks(threadpool *p) {
    for (;;) {
        const int t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks) return;
        p->fn(p->arg, t, p->n_tasks);
    }
}

static int async_pending(threadpool *p) {
    return atomic_load_explicit(&p->astate, memory_order_relaxed) == ASYNC_PENDING;
}

/* Run the pending async function if this worker wins it; 1 if it did. */
static int take_async(threadpool *p) {
    int expect = ASYNC_PENDING;
    if (!atomic_compare_exchange_strong_explicit(&p->astate, &expect, ASYNC_RUNNING, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    p->afn(p->aarg);
    atomic_store_explicit(&p->astate, ASYNC_IDLE, memory_order_release);
    return 1;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    threadpool *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t c = atomic_load_explicit(&p->ctl, memory_order_acquire);
        if (ctl_gen(c) == seen && !async_pending(p)) {
            const long long t0 = now_us();
            for (int k = 1; ctl_gen(c) == seen && !async_pending(p); k++) {
                cpu_relax();
                c = atomic_load_explicit(&p->ctl, memory_order_acquire);
                if ((k & 255) == 0 && now_us() - t0 > QT_POOL_SPIN_US) break;
            }
        }
        if (ctl_gen(c) == seen && !async_pending(p)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (ctl_gen(c = atomic_load(&p->ctl)) == seen && atomic_load(&p->astate) != ASYNC_PENDING)
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        if (async_pending(p) && take_async(p)) continue; /* then look at the jobs again */
        if (ctl_gen(c) == seen) continue;                 /* another worker took the async function */
        seen = ctl_gen(c);
        /* join while the job is open */
        while (ctl_gen(c) == seen && !(c & CTL_CLOSED)) {
            if (atomic_compare_exchange_weak_explicit(&p->ctl, &c, c + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                pull_tasks(p);
                atomic_fetch_add_explicit(&p->left, 1, memory_order_release);
                break;
            }
        }
    }
    return NULL;
}

threadpool *threadpool_create(int n_threads) {
    if (n_threads < 2) return NULL;
    threadpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->workers = calloc((size_t)n_threads - 1, sizeof(worker));
    if (!p->workers || pthread_mutex_init(&p->mu, NULL)) {
        free(p->workers);
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL)) {
        pthread_mutex_destroy(&p->mu);
        free(p->workers);
        free(p);
        return NULL;
    }
    atomic_init(&p->ctl, 0);
    atomic_init(&p->next_task, 0);
    atomic_init(&p->left, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->astate, ASYNC_IDLE);
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        if (pthread_create(&p->workers[i].th, NULL, worker_main, &p->workers[i])) {
            p->n_threads = i + 1; /* the workers started so far */
            threadpool_destroy(p);
            return NULL;
        }
    }
    p->n_threads = n_threads;
    return p;
}

int threadpool_size(const threadpool *p) { return p ? p->n_threads : 1; }

static void wake_sleepers(threadpool *p) {
    if (atomic_load(&p->sleepers) > 0) { /* seq_cst, after the caller's seq_cst store */
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Publish a new generation (job or stop) and wake sleeping workers. */
static void publish(threadpool *p) {
    const uint64_t c = atomic_load_explicit(&p->ctl, memory_order_relaxed);
    atomic_store(&p->ctl, (uint64_t)(ctl_gen(c) + 1u) << 32); /* seq_cst */
    wake_sleepers(p);
}

void threadpool_async_wait(threadpool *p) {
    if (!p) return;
    const long long t0 = now_us();
    for (int k = 1; atomic_load_explicit(&p->astate, memory_order_acquire) != ASYNC_IDLE; k++) {
        if ((k & 255) == 0 && now_us() - t0 > QT_POOL_WAIT_SPIN_US) sched_yield();
        else cpu_relax();
    }
}

int threadpool_async(threadpool *p, void (*fn)(void *arg), void *arg) {
    if (!p || p->n_threads < 2 || !fn) return 0;
    int expect = ASYNC_IDLE;
    if (!atomic_compare_exchange_strong(&p->astate, &expect, ASYNC_CLAIMED)) return 0; /* one is lent already */
    p->afn = fn;
    p->aarg = arg;
    atomic_store(&p->astate, ASYNC_PENDING); /* seq_cst */
    wake_sleepers(p);
    return 1;
}

void threadpool_run(threadpool *p, tp_task_fn fn, void *arg, int n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(arg, t, n_tasks);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->left, 0, memory_order_relaxed);
    publish(p);
    pull_tasks(p);
    /* close the job: no worker joins from now on */
    uint64_t c = atomic_load_explicit(&p->ctl, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&p->ctl, &c, c | CTL_CLOSED, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
    }
    const int joined = (int)(c & CTL_JOINED_MASK);
    if (atomic_load_explicit(&p->left, memory_order_acquire) == joined) return;
    const long long t0 = now_us();
    for (int k = 1; atomic_load_explicit(&p->left, memory_order_acquire) != joined; k++) {
        if ((k & 255) == 0 && now_us() - t0 > QT_POOL_WAIT_SPIN_US) sched_yield();
        else cpu_relax();
    }
}

void threadpool_destroy(threadpool *p) {
    if (!p) return;
    threadpool_async_wait(p);
    atomic_store(&p->stop, 1);
    publish(p);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i].th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}
