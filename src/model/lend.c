/* Lending a worker of the model's pool to the caller (qtts_model_lend_thread):
 * the worker runs park() through ops_async and sleeps on the model's
 * condition variable until qtts_model_return_thread clears `lent`. The pool
 * has one async slot, which qtts_synthesize's overlapped decoding uses too:
 * whoever holds it, the other is refused (returns 0) rather than waiting.
 * A lend right after a return must not be refused by the lend's own park:
 * one still posted or parked simply stays (in_slot, parked), and one that has
 * just left holds the slot only until its worker marks it free, which the
 * lend waits out (leaving; at most LEND_SLOT_WAIT_MS, then it refuses). */
#include "model/generate.h"
#include "model/model.h"

#include <sched.h>
#include <string.h>

#define LEND_SLOT_WAIT_MS 2.0

int model_lend_init(model_lend *l) {
    memset(l, 0, sizeof *l);
    if (pthread_mutex_init(&l->mu, NULL)) return -1;
    if (pthread_cond_init(&l->cv, NULL)) {
        pthread_mutex_destroy(&l->mu);
        return -1;
    }
    l->init = 1;
    return 0;
}

void model_lend_free(model_lend *l) {
    if (!l->init) return;
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    l->init = 0;
}

static void park(void *arg) {
    model_lend *l = arg;
    pthread_mutex_lock(&l->mu);
    l->parked = 1;
    while (l->lent) pthread_cond_wait(&l->cv, &l->mu);
    l->parked = 0;
    l->in_slot = 0;
    l->leaving = 1;
    pthread_mutex_unlock(&l->mu);
}

int qtts_model_lend_thread(qtts_model *m) {
    if (!m || !m->lend.init) return 0;
    model_lend *l = &m->lend;
    pthread_mutex_lock(&l->mu);
    if (l->lent) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    l->lent = 1;
    if (l->parked || l->in_slot) { /* returned and lent again before park() left (or began): it stays */
        pthread_mutex_unlock(&l->mu);
        return 1;
    }
    const int leaving = l->leaving;
    l->in_slot = 1; /* before the post: the park it starts may run and leave before this returns */
    pthread_mutex_unlock(&l->mu);
    int posted = ops_async(&m->ops, park, l);
    if (!posted && leaving) { /* probably our last park's worker, about to free the slot */
        const double t0 = now_ms();
        while (!(posted = ops_async(&m->ops, park, l)) && now_ms() - t0 < LEND_SLOT_WAIT_MS) sched_yield();
    }
    pthread_mutex_lock(&l->mu);
    l->leaving = 0;
    if (!posted) { /* no worker, or the async slot is someone else's */
        l->in_slot = 0;
        l->lent = 0;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return posted;
}

void qtts_model_return_thread(qtts_model *m) {
    if (!m || !m->lend.init) return;
    model_lend *l = &m->lend;
    pthread_mutex_lock(&l->mu);
    l->lent = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}
