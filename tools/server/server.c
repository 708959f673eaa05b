/* Server lifecycle (see server.h): checks the model, starts metrics, the
 * voice store, the engine and the HTTP daemon; stops them in the order that
 * keeps every handler's objects alive: refuse new work -> drain -> stop the
 * engine (running jobs end) -> stop HTTP (joins connection threads) -> free. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "metrics.h"
#include "scheduler.h"
#include "server.h"
#include "voices.h"

server_config server_default_config(void) {
    server_config c;
    memset(&c, 0, sizeof c);
    c.host = "127.0.0.1";
    c.port = 8000;
    c.model_name = "qtts";
    c.voices_dir = "qtts-voices";
    c.n_slots = 4;
    c.queue_depth = 16;
    c.max_connections = 64;
    c.max_body_bytes = 1u << 20;
    c.max_upload_bytes = 32u << 20;
    c.max_input_chars = 100000;
    c.conn_timeout_s = 30;
    c.request_timeout_s = 600;
    c.n_ctx = 0;
    c.max_frames = 0;
    c.first_chunk_frames = 1;
    c.chunk_frames = 4;
    c.warmup = 1;
    c.decode_threads = 1;
    c.prefill_budget_ms = 100;
    c.split = qtts_split_default_params();
    c.drain_s = 5;
    c.verbose = 0;
    return c;
}

void srv_log(const server *s, int level, const char *fmt, ...) {
    const int verbose = s ? s->cfg.verbose : 1;
    if (level >= 2 && level > verbose + 1) return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ qtts-server %s: %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, names[level < 0 ? 0 : level > 3 ? 3 : level],
            msg);
}

static void log_voice(void *u, const char *msg) { srv_log(u, 1, "%s", msg); }

int server_start(server **out, qtts_model *m, const server_config *cfg, char *err, size_t n) {
    *out = NULL;
    server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    s->cfg = *cfg;
    s->model = m;
    qtts_model_get_info(m, &s->info);
    atomic_init(&s->stopping, 0);
    atomic_init(&s->n_speech, 0);
    atomic_init(&s->seed_state, (uint_fast64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint_fast64_t)getpid());
    int rc = 0;
    if (!s->info.has_tokenizer) {
        snprintf(err, n, "the checkpoint has no tokenizer (vocab.json, merges.txt), so it cannot read text");
        rc = -1;
    } else if (!s->info.has_codec) {
        snprintf(err, n, "the model was loaded without its speech_tokenizer/ decoder, so it cannot make audio");
        rc = -1;
    } else if (cfg->n_slots < 1 || cfg->n_slots > QTTS_MAX_BATCH) {
        snprintf(err, n, "--slots must be in [1, %d] (got %d)", QTTS_MAX_BATCH, cfg->n_slots);
        rc = -1;
    } else if (cfg->queue_depth < 0 || cfg->max_connections < 1 || cfg->max_input_chars < 1 ||
               cfg->conn_timeout_s < 0 || cfg->request_timeout_s < 0 || cfg->first_chunk_frames < 1 ||
               cfg->first_chunk_frames > 64 || cfg->chunk_frames < 1 || cfg->chunk_frames > 64 || cfg->max_frames < 0 ||
               cfg->drain_s < 0 || cfg->decode_threads < 0 || cfg->decode_threads > 64 ||
               cfg->prefill_budget_ms < 0) {
        snprintf(err, n, "a limit is out of range (queue >= 0, connections >= 1, chunk frames in [1, 64], ...)");
        rc = -1;
    }
    if (!rc && !(s->mx = metrics_new())) {
        snprintf(err, n, "out of memory");
        rc = -1;
    }
    if (!rc && s->info.type == QTTS_MODEL_BASE && !(s->voices = voice_store_open(m, cfg->voices_dir, log_voice, s))) {
        snprintf(err, n, "out of memory");
        rc = -1;
    }
    if (!rc) {
        char info[512];
        snprintf(info, sizeof info,
                 "model=\"%s\",type=\"%s\",size=\"%s\",checkpoint_dtype=\"%s\",talker=\"%s\",predictor=\"%s\","
                 "kernels=\"%s\",threads=\"%d\",slots=\"%d\",decode_threads=\"%d\",lend_thread=\"%d\"",
                 cfg->model_name, s->info.type_name, s->info.size_name, s->info.weight_dtype, s->info.talker_format,
                 s->info.predictor_format, s->info.kernels, s->info.n_threads, cfg->n_slots, cfg->decode_threads,
                 cfg->lend_thread);
        metrics_set_info(s->mx, info);
        metrics_set_backend(s->mx, qtts_backend_name(s->info.backend),
                            s->info.device_name ? s->info.device_name : "");
        metrics_set_device_bytes(s->mx, (long long)s->info.device_bytes_allocated,
                                 (long long)s->info.device_bytes_reserved);
    }
    sched_params sp = {.n_slots = cfg->n_slots, .queue_depth = cfg->queue_depth, .n_ctx = cfg->n_ctx,
                       .warmup = cfg->warmup, .decode_threads = cfg->decode_threads,
                       .share_cores = cfg->lend_thread, .prefill_budget_ms = cfg->prefill_budget_ms,
                       .split = cfg->split, .hooks = cfg->hooks};
    if (!rc) rc = sched_new(&s->sch, m, &sp, s->mx, err, n);
    if (!rc) rc = http_start(s, err, n);
    if (rc) {
        sched_free(s->sch);
        voice_store_free(s->voices);
        metrics_free(s->mx);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int server_port(const server *s) { return s ? s->port : 0; }

int server_ready(const server *s) { return s && !atomic_load(&((server *)s)->stopping) && sched_ready(s->sch); }

void server_stop(server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    metrics_set_ready(s->mx, 0);
    const double t_end = tool_now_s() + s->cfg.drain_s;
    while ((sched_active(s->sch) > 0 || atomic_load(&s->n_speech) > 0) && tool_now_s() < t_end) usleep(20000);
    if (atomic_load(&s->n_speech) > 0)
        srv_log(s, 1, "stopping with %d speech requests unfinished", atomic_load(&s->n_speech));
    sched_stop(s->sch);
    http_stop(s);
    sched_free(s->sch);
    voice_store_free(s->voices);
    metrics_free(s->mx);
    free(s);
}
