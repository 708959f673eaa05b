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

/* The frames a text takes at a typical speaking rate, as the benchmark's
 * cases are sized (tools/bench/cases.c): 15 characters per second, 4.5 for
 * CJK ideographs, kana and hangul, at 12.5 frames per second, rounded up;
 * at least 1. For forcing a random checkpoint's requests to the length a
 * real model would speak (`--frames auto`). Invalid UTF-8 bytes count as
 * one character each. */
int lg_typical_frames(const char *text);

#endif
