/* The timing harness of the bandwidth and arithmetic-peak probes: fn(arg, t)
 * on n threads released together (none begins before all exist), timed from
 * the release to the end of the slowest. A gate (mutex + condition variable)
 * rather than a barrier: when a thread cannot be created, the ones already
 * waiting are released with "stop" and joined, not left blocked. */
#include <pthread.h>

#include "bench.h"

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 wait, 1 go, -1 stop */
    void (*fn)(void *arg, int t);
    void *arg;
} gate;

typedef struct member {
    gate *g;
    int t;
    double t_end;
} member;

static void *member_main(void *p) {
    member *m = p;
    gate *g = m->g;
    pthread_mutex_lock(&g->mu);
    while (!g->state) pthread_cond_wait(&g->cv, &g->mu);
    const int go = g->state > 0;
    pthread_mutex_unlock(&g->mu);
    if (go) {
        g->fn(g->arg, m->t);
        m->t_end = tool_now_ms();
    }
    return NULL;
}

double bench_run_threads(int n, void (*fn)(void *arg, int t), void *arg) {
    if (n < 1 || n > BENCH_MAX_THREADS) return -1;
    gate g = {.state = 0, .fn = fn, .arg = arg};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    member ms[BENCH_MAX_THREADS];
    pthread_t th[BENCH_MAX_THREADS];
    int nt = 0;
    for (int t = 0; t < n; t++) {
        ms[t] = (member){&g, t, 0};
        if (pthread_create(&th[t], NULL, member_main, &ms[t])) break;
        nt++;
    }
    pthread_mutex_lock(&g.mu);
    g.state = nt == n ? 1 : -1;
    const double t0 = tool_now_ms();
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    double t1 = t0;
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        if (ms[t].t_end > t1) t1 = ms[t].t_end;
    }
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
    return nt == n ? t1 - t0 : -1;
}
