/* Lending a worker of the model's pool to the caller (qtts_model_lend_thread):
 * the worker runs park() through ops_async and sleeps on the model's
 * condition variable until qtts_model_return_thread clears `lent`. The pool
 * has one async slot, which qtts_synthesize's overlapped decoding uses too:
 * whoever holds it, the other is refused (returns 0) rather than waiting. */
#include "model/model.h"

#include <string.h>

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
    if (l->parked) { /* returned and lent again before the worker left park(): it stays */
        pthread_mutex_unlock(&l->mu);
        return 1;
    }
    pthread_mutex_unlock(&l->mu);
    if (ops_async(&m->ops, park, l)) return 1;
    pthread_mutex_lock(&l->mu); /* no worker, or the async slot is taken */
    l->lent = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

void qtts_model_return_thread(qtts_model *m) {
    if (!m || !m->lend.init) return;
    model_lend *l = &m->lend;
    pthread_mutex_lock(&l->mu);
    l->lent = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}
