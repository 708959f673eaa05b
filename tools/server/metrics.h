/* Server metrics: counters, gauges and histograms kept under one mutex and
 * rendered in the Prometheus text exposition format (version 0.0.4) for
 * GET /metrics. Updated by HTTP threads (requests, TTFA, RTF) and the engine
 * thread (steps, frames, decode time). */
#ifndef QTTS_SERVER_METRICS_H
#define QTTS_SERVER_METRICS_H

#include <stddef.h>

typedef struct metrics metrics;

metrics *metrics_new(void);
void metrics_free(metrics *m); /* accepts NULL */

/* A request answered: endpoint ("speech", "voices", "health", ...) and HTTP status. */
void metrics_request(metrics *m, const char *endpoint, int status);
/* A finished speech request: audio seconds delivered, seconds from arrival to
 * first audio byte handed to the socket (< 0 = none), real-time factor
 * (request seconds / audio seconds; < 0 = no audio). */
void metrics_speech(metrics *m, double audio_s, double ttfa_s, double rtf);
void metrics_disconnect(metrics *m);      /* a client went away before the end */
void metrics_rejected(metrics *m);        /* 429: queue full */
/* Engine: one batched step of n streams made n_frames frames (a stream's
 * last step may make none) in step_s (generation only); decoding after it
 * took decode_s. */
void metrics_step(metrics *m, int n_streams, int n_frames, double step_s, double decode_s);
/* n_prefills segment prefills (prompt + prefill + voice priming): seconds, prompt positions, of
 * them reused (voice prefix), all summed */
void metrics_prefill(metrics *m, double s, int n_prompt, int n_reused, int n_prefills);
/* device time of a finished request (qtts_stats.gpu_*_ms, seconds; all 0 on the CPU backend) */
void metrics_gpu(metrics *m, double prefill_s, double talker_s, double predictor_s, double sampling_s);
void metrics_decode(metrics *m, double s);  /* codec decoding (a decode worker) */
void metrics_set_gauges(metrics *m, int queue_depth, int active_slots);
void metrics_set_slots(metrics *m, int n_slots);
void metrics_set_ready(metrics *m, int ready);
void metrics_set_warm_slots(metrics *m, int n);
/* Labels of the qtts_info gauge, e.g. model="x",kernels="avx512" (copied). */
void metrics_set_info(metrics *m, const char *labels);
/* The qtts_backend_info gauge's labels: the backend's name and its device's
 * (copied; quotes, backslashes and newlines escaped). */
void metrics_set_backend(metrics *m, const char *backend, const char *device);
/* Device memory of the model and its contexts, as qtts_model_info gives it
 * (0 on the CPU backend). */
void metrics_set_device_bytes(metrics *m, long long allocated, long long reserved);

/* Render everything; returns a malloc'ed NUL-terminated string (caller frees). */
char *metrics_render(metrics *m);

/* Read one sample of the rendered text, e.g. metrics_value(text,
 * "qtts_active_slots") or with labels "qtts_requests_total{endpoint=\"speech\",status=\"200\"}";
 * returns -1 when absent. For tests and the load generator. */
double metrics_value(const char *text, const char *name);

#endif
