/* Parking a worker of an ops pool for a thread beside it
 * (backend/cpu/lend.h), as the pipeline's decode threads do: a pool of one
 * thread has nothing to lend; a lend holds until given back, and taking it
 * again while held keeps it; the pool's parallel ops give the same results
 * with a worker parked; give-back-and-take-again, over and over, is never
 * refused when nothing else holds the pool's async slot; a second borrower
 * is refused while the slot is taken; freeing waits for the parked worker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/lend.h"
#include "test.h"

typedef struct sum_job {
    const float *x;
    double part[16];
    int n;
} sum_job;

static void sum_task(void *arg, int t, int n_tasks) {
    sum_job *j = arg;
    double s = 0;
    for (int i = t; i < j->n; i += n_tasks) s += j->x[i];
    j->part[t] = s;
}

static double psum(const ops_ctx *c, const float *x, int n) {
    sum_job j = {x, {0}, n};
    ops_parallel(c, sum_task, &j, 16);
    double s = 0;
    for (int t = 0; t < 16; t++) s += j.part[t];
    return s;
}

int main(void) {
    ops_ctx one, two;
    ops_init(&one, 1, 0);
    ops_init(&two, 2, 0);
    pool_lend a, b;
    CHECK("lend/init", pool_lend_init(&a) == 0 && pool_lend_init(&b) == 0, "no mutex");
    CHECK("lend/one_thread_nothing_to_lend", pool_lend_take(&a, &one) == 0, "lent a worker of a 1-thread pool");
    pool_lend_give_back(&a);

    enum { N = 100000 };
    float *x = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = (float)(i % 97) * 0.25f;
    const double ref = psum(&two, x, N);
    const int t1 = pool_lend_take(&a, &two), t2 = pool_lend_take(&a, &two);
    CHECK("lend/take_and_keep", t1 == 1 && t2 == 1, "take %d, again %d", t1, t2);
    CHECK("lend/second_borrower_refused", pool_lend_take(&b, &two) == 0, "two workers parked in a 2-thread pool");
    pool_lend_give_back(&b);
    const double got = psum(&two, x, N);
    CHECK("lend/ops_same_results_while_parked", got == ref, "%.17g vs %.17g", got, ref);
    int refused = 0;
    for (int i = 0; i < 20000; i++) {
        pool_lend_give_back(&a);
        if (!pool_lend_take(&a, &two)) refused++;
    }
    CHECK("lend/give_back_take_loop", refused == 0, "%d of 20000 lends refused", refused);
    pool_lend_give_back(&a);
    int ok = 0;
    for (int i = 0; i < 10000 && !ok; i++) { /* the slot is free again once a's worker has left (1 s at most) */
        ok = pool_lend_take(&b, &two);
        if (!ok) usleep(100);
    }
    CHECK("lend/other_borrower_after_give_back", ok, "never lent");
    pool_lend_free(&b); /* while lent: gives back and waits for the worker to let go */
    pool_lend_free(&a);
    CHECK("lend/free_while_lent_returns", psum(&two, x, N) == ref, "pool broken after free");
    free(x);
    ops_free(&one);
    ops_free(&two);
    return test_finish();
}
