/* See lend.h. park() holds l->running from its post until it leaves the
 * lock for the last time, so a take that finds it running (given back but
 * not yet gone) simply keeps it parked, and pool_lend_free knows when l is
 * no longer touched. */
#include "backend/cpu/lend.h"

#include <sched.h>

#include "util/clock.h"

#define LEND_SLOT_WAIT_MS 2.0

int pool_lend_init(pool_lend *l) {
    l->want = l->running = l->left = 0;
    if (pthread_mutex_init(&l->mu, NULL)) return -1;
    if (pthread_cond_init(&l->cv, NULL)) {
        pthread_mutex_destroy(&l->mu);
        return -1;
    }
    return 0;
}

static void park(void *arg) {
    pool_lend *l = arg;
    pthread_mutex_lock(&l->mu);
    while (l->want) pthread_cond_wait(&l->cv, &l->mu);
    l->running = 0;
    l->left = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int pool_lend_take(pool_lend *l, const ops_ctx *ops) {
    pthread_mutex_lock(&l->mu);
    l->want = 1;
    if (l->running) { /* given back but not gone yet: it stays */
        pthread_mutex_unlock(&l->mu);
        return 1;
    }
    l->running = 1;
    const int left = l->left;
    l->left = 0;
    pthread_mutex_unlock(&l->mu);
    int posted = ops_async(ops, park, l);
    if (!posted && left) { /* probably our last park's worker, about to free the slot */
        const double t0 = now_ms();
        while (!(posted = ops_async(ops, park, l)) && now_ms() - t0 < LEND_SLOT_WAIT_MS) sched_yield();
    }
    if (posted) return 1;
    pthread_mutex_lock(&l->mu);
    l->want = l->running = 0;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

void pool_lend_give_back(pool_lend *l) {
    pthread_mutex_lock(&l->mu);
    l->want = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void pool_lend_free(pool_lend *l) {
    pthread_mutex_lock(&l->mu);
    l->want = 0;
    pthread_cond_broadcast(&l->cv);
    while (l->running) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}
