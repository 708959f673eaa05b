/* The library's monotonic clock (CLOCK_MONOTONIC): now_ms() and now_us() for
 * timings and stats, deadline_after_ms() for pthread_cond_timedwait on a
 * condition variable whose clock attribute is CLOCK_MONOTONIC. */
#ifndef QTTS_UTIL_CLOCK_H
#define QTTS_UTIL_CLOCK_H

#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static inline long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The CLOCK_MONOTONIC time timeout_ms (>= 0) from now. */
static inline struct timespec deadline_after_ms(int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
