/* The tools' monotonic clock (CLOCK_MONOTONIC), shared by qtts, qtts-server
 * and qtts-bench: tool_now_s() and tool_now_ms() for timings,
 * tool_deadline_ms() for pthread_cond_timedwait on a condition variable whose
 * clock attribute is CLOCK_MONOTONIC. The library keeps its own
 * (src/util/clock.h): tools use only the public header. */
#ifndef QTTS_TOOLS_CLOCK_H
#define QTTS_TOOLS_CLOCK_H

#include <time.h>

static inline double tool_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double tool_now_ms(void) { return tool_now_s() * 1e3; }

/* The CLOCK_MONOTONIC time timeout_ms (>= 0) from now. */
static inline struct timespec tool_deadline_ms(int timeout_ms) {
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
