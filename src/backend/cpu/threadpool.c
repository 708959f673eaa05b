/* Spin-then-sleep thread pool (see threadpool.h).
 * Memory order: the caller writes the job, then bumps gen (seq_cst); a worker
 * that sees the new gen (acquire) reads the job. A worker finishes its task,
 * then decrements pending (release); the caller reads the results after
 * seeing pending == 0 (acquire). Sleeping: a worker registers in sleepers
 * (seq_cst) and re-checks gen under the mutex before waiting; the caller
 * bumps gen (seq_cst) and then reads sleepers (seq_cst): one of the two sees
 * the other's store, so no wake-up is lost. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* How long an idle worker spins before sleeping, and how long the caller
 * spins on completion before yielding its core. */
#define QT_POOL_SPIN_US 200
#define QT_POOL_WAIT_SPIN_US 50

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static inline long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef struct worker {
    threadpool *pool;
    int index;
    pthread_t th;
} worker;

struct threadpool {
    int n_threads;
    worker *workers;                      /* [n_threads - 1] */
    _Alignas(64) atomic_uint gen;         /* bumped once per job */
    atomic_int stop;
    _Alignas(64) atomic_int pending;      /* workers still running the current job */
    _Alignas(64) atomic_int sleepers;     /* workers waiting on cv */
    _Alignas(64) tp_task_fn fn;           /* the current job (written before gen) */
    void *arg;
    int n_tasks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *worker_main(void *p) {
    worker *w = p;
    threadpool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g == seen) {
            const long long t0 = now_us();
            for (int k = 1; g == seen; k++) {
                cpu_relax();
                g = atomic_load_explicit(&pool->gen, memory_order_acquire);
                if ((k & 255) == 0 && now_us() - t0 > QT_POOL_SPIN_US) break;
            }
        }
        if (g == seen) {
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleepers, 1);
            while ((g = atomic_load(&pool->gen)) == seen) pthread_cond_wait(&pool->cv, &pool->mu);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mu);
        }
        seen = g;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        if (w->index < pool->n_tasks) pool->fn(pool->arg, w->index, pool->n_tasks);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i + 1;
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

static void wake(threadpool *p) {
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

void threadpool_run(threadpool *p, tp_task_fn fn, void *arg, int n_tasks) {
    if (!p || n_tasks <= 1) {
        fn(arg, 0, 1);
        return;
    }
    if (n_tasks > p->n_threads) n_tasks = p->n_threads;
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job */
    wake(p);
    fn(arg, 0, n_tasks);
    if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    const long long t0 = now_us();
    for (int k = 1; atomic_load_explicit(&p->pending, memory_order_acquire) != 0; k++) {
        if ((k & 255) == 0 && now_us() - t0 > QT_POOL_WAIT_SPIN_US) sched_yield();
        else cpu_relax();
    }
}

void threadpool_destroy(threadpool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i].th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}
