/* Persistent worker threads for the op layer: one job at a time, made of
 * n_tasks independent tasks that the caller and the workers pull from a
 * shared counter (so a worker that is slow to wake, or descheduled because
 * the machine is oversubscribed, costs nothing: the others take its share).
 * Dispatch: the caller publishes the job and bumps a generation counter;
 * idle workers spin on it for a while (QT_POOL_SPIN_US) and then sleep on a
 * condition variable, so back-to-back ops (a decode step is ~200 small
 * matmuls) cost a cache-line round trip, not a syscall. A worker joins a job
 * only while it is open; when the caller has run out of tasks it closes the
 * job and waits just for the workers that joined. Nothing is allocated per
 * job. tests/bench/kbench.c measures the dispatch cost. */
#ifndef QTTS_BACKEND_CPU_THREADPOOL_H
#define QTTS_BACKEND_CPU_THREADPOOL_H

typedef struct threadpool threadpool;

/* task in [0, n_tasks): the part of the job this call does. */
typedef void (*tp_task_fn)(void *arg, int task, int n_tasks);

/* Start n_threads - 1 workers (n_threads >= 2). NULL if that fails. */
threadpool *threadpool_create(int n_threads);

/* Threads in the pool, the caller included. */
int threadpool_size(const threadpool *p);

/* Run fn(arg, t, n_tasks) once for every t in [0, n_tasks), on the caller and
 * whichever workers join, in any order and on any thread; return when all are
 * done. One caller at a time per pool. */
void threadpool_run(threadpool *p, tp_task_fn fn, void *arg, int n_tasks);

/* Hand fn(arg) to one worker, which runs it instead of joining jobs until it
 * returns, while the caller goes on; jobs run meanwhile on the caller and
 * the other workers (on the caller alone in a pool of two). One async
 * function at a time; any thread may post. Returns 1 when fn was handed
 * over, 0 (nothing started) when the pool has no workers (NULL) or the
 * previous async function has not returned yet. */
int threadpool_async(threadpool *p, void (*fn)(void *arg), void *arg);

/* Wait until the async function, if any, has returned. */
void threadpool_async_wait(threadpool *p);

/* Stop and join the workers (after the async function returns); accepts NULL. */
void threadpool_destroy(threadpool *p);

#endif
