/* qtts-server: the HTTP front end of libqtts. One model, one engine thread
 * driving the library's pipeline of N streams, many HTTP connections (one
 * thread each). Dataflow: HTTP thread parses a request -> job queued
 * (scheduler.c) -> engine thread moves it into a free stream of the
 * pipeline and steps it (text segments, all streams together, each stream's
 * frames decoded beside generation) -> PCM into the job's buffer -> the HTTP
 * thread stretches (stretch.c), encodes (encode.c) and writes it to the
 * socket. This header holds the server's
 * configuration and lifecycle; each concern has its own header. */
#ifndef QTTS_SERVER_H
#define QTTS_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "qtts.h"
#include "../common/clock.h"

typedef struct metrics metrics;
typedef struct sched sched;
typedef struct voice_store voice_store;

typedef struct server_config {
    const char *host;           /* address to bind; default "127.0.0.1" (loopback only) */
    int port;                   /* TCP port; 0 = any free port (see server_port); default 8000 */
    const char *api_key;        /* when set, /v1/ requests need "Authorization: Bearer KEY"; default NULL */
    const char *cors_origin;    /* value of Access-Control-Allow-Origin ("*" or an origin); NULL = no CORS;
                                   default NULL */
    const char *model_name;     /* id listed by /v1/models and echoed in logs; default "qtts" */
    const char *voices_dir;     /* folder of uploaded voices (NAME.qvoice); default "qtts-voices" */
    int n_slots;                /* streams stepped together (1..QTTS_MAX_BATCH); default 4 */
    int queue_depth;            /* requests waiting for a slot before 429; >= 0; default 16 */
    int max_connections;        /* open HTTP connections; beyond it new ones are refused; default 64 */
    size_t max_body_bytes;      /* JSON request body; default 1 MiB */
    size_t max_upload_bytes;    /* voice upload (multipart) body; default 32 MiB */
    int max_input_chars;        /* input text, in Unicode code points; default 100000 (a long article: it is
                                   spoken segment by segment, see split) */
    int conn_timeout_s;         /* idle connection timeout (no bytes moving); default 30 */
    int request_timeout_s;      /* a request running longer is cancelled; 0 = none; default 600 */
    int n_ctx;                  /* talker positions per slot (prompt + frames); 0 = model maximum; default 0 */
    int max_frames;             /* frames per request at most; 0 = the model's max_new_tokens; default 0 */
    int first_chunk_frames;     /* frames in the first streamed chunk (80 ms each); default 1 */
    int chunk_frames;           /* frames per streamed chunk after the first; default 4 */
    int warmup;                 /* 1 = run a short generation before /ready says ready; default 1 */
    int decode_threads;         /* codec decode workers beside the engine thread (slot i -> worker i mod N);
                                   0 = decode on the engine thread between steps; default 1 */
    int lend_thread;            /* 1 = a decode thread with chunks to decode parks one of the model's
                                   workers until its queue is empty, so decoding beside generation does
                                   not oversubscribe the cores (qtts_pipeline_params.decode_share_cores);
                                   default 0 */
    int prefill_budget_ms;      /* prefills at one frame boundary stop once they have taken this long (the
                                   first always runs; 0 = one per boundary): running streams wait at most
                                   this plus one prefill; default 100 */
    qtts_split_params split;    /* input cut into segments (sentences) spoken in order, with pauses;
                                   default qtts_split_default_params() (300 characters, 300 / 700 ms) */
    int drain_s;                /* on stop: seconds running requests may take to finish; default 5 */
    int verbose;                /* 0 = warnings and errors, 1 = + one line per request, 2 = + debug */
    qtts_pipeline_debug hooks;  /* test aids (tests/server): the engine's pipeline hooks; default all NULL */
} server_config;

server_config server_default_config(void);

typedef struct server {
    server_config cfg;
    qtts_model *model;          /* borrowed: outlives the server */
    qtts_model_info info;
    metrics *mx;
    voice_store *voices;
    sched *sch;
    struct MHD_Daemon *httpd;
    int port;                   /* the bound port */
    atomic_int stopping;        /* set at the start of server_stop: new requests get 503 */
    atomic_int n_speech;        /* speech requests between arrival and their last byte */
    atomic_uint_fast64_t seed_state; /* seeds for requests that give none */
} server;

/* Start the engine thread and the HTTP daemon on an already loaded model
 * (which must have a tokenizer and the codec). *out is NULL on failure and
 * err says why. Stop and free with server_stop. */
int server_start(server **out, qtts_model *model, const server_config *cfg, char *err, size_t err_size);
int server_port(const server *s);
/* 1 once warmed up and not stopping. */
int server_ready(const server *s);
/* Stop accepting requests (new ones get 503, /ready says draining), let the
 * running ones finish for up to cfg.drain_s seconds, cancel the rest, stop
 * the HTTP daemon and the engine, free everything. Accepts NULL. */
void server_stop(server *s);

/* Diagnostics to stderr with a timestamp; level 0 error, 1 warning, 2 info, 3 debug. */
void srv_log(const server *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;


#endif
