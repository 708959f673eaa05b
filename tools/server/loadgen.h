/* Load generator: `qtts-server --loadgen` sends concurrent streamed speech
 * requests to a running server at several concurrency levels and reports
 * TTFA and per-request RTF distributions, aggregate audio seconds per wall
 * second, and (from the server's /metrics) generation throughput. */
#ifndef QTTS_SERVER_LOADGEN_H
#define QTTS_SERVER_LOADGEN_H

int loadgen_main(int argc, char **argv);

#endif
