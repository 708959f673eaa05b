/* Load generator: `qtts-server --loadgen` sends concurrent streamed speech
 * requests to a running server at several concurrency levels and reports
 * TTFA and per-request RTF distributions, aggregate audio seconds per wall
 * second, and (from the server's /metrics) generation throughput. */
#ifndef QTTS_SERVER_LOADGEN_H
#define QTTS_SERVER_LOADGEN_H

int loadgen_main(int argc, char **argv);

/* The p-th percentile (0..100) of n sorted values by linear interpolation
 * between order statistics (numpy's default, as qtts-bench): the median of
 * an even count is the mean of the two middle values. NaN when n < 1. */
double lg_percentile(const double *sorted, int n, double p);

#endif
