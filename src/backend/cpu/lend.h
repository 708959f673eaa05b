/* Parking one worker of an ops pool for a thread that runs beside the pool
 * (a decode thread beside generation), so the two do not oversubscribe the
 * cores: the worker runs park() through ops_async and sleeps until the
 * borrower gives it back; the pool's parallel ops meanwhile run on the caller
 * and the other workers, with the same results. The pool has one async slot:
 * when it is taken, a lend is refused (returns 0) rather than waiting. */
#ifndef QTTS_BACKEND_CPU_LEND_H
#define QTTS_BACKEND_CPU_LEND_H

#include <pthread.h>

#include "backend/cpu/ops.h"

typedef struct pool_lend {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int want;     /* the borrower wants the worker parked (guarded) */
    int running;  /* park() is posted or running and has not let go yet (guarded) */
    int left;     /* the last park() has let go: its worker may hold the pool's async slot a few
                     more instructions, until the pool marks it free (guarded) */
} pool_lend;

int pool_lend_init(pool_lend *l); /* 0 ok, -1 no mutex */
/* Park a worker of ops' pool: 1 when one is parked (or still was from the
 * last lend), 0 when the pool has no worker or its async slot is taken. */
int pool_lend_take(pool_lend *l, const ops_ctx *ops);
/* Let the parked worker go back to the pool (no-op when none). */
void pool_lend_give_back(pool_lend *l);
/* Give back and wait until park() has let go of l; then free l. */
void pool_lend_free(pool_lend *l);

#endif
