/* qtts-server: command line, model load, signals. SIGINT/SIGTERM stop the
 * server cleanly (drain, then exit 0). `qtts-server --loadgen` runs the load
 * generator against a running server instead (loadgen.c). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/loadgen.h"
#include "server.h"

static void usage(void) {
    printf(
        "qtts-server: OpenAI-compatible text-to-speech server for Qwen3-TTS (libqtts)\n"
        "\n"
        "usage: qtts-server --model DIR [options]\n"
        "       qtts-server --loadgen [options]          measure a running server (see --loadgen --help)\n"
        "\n"
        "  -m, --model DIR            checkpoint folder (CustomVoice, VoiceDesign or Base)\n"
        "  --model-name NAME          id shown by /v1/models (default: the folder's name)\n"
        "  --threads N                compute threads (default: all CPUs)\n"
        "  --weights native|q8|q4     talker and code-predictor matrices in memory: as stored (BF16), int8 or\n"
        "                             int4 blocks quantised at load (default native)\n"
        "  --codec-weights F          the codec decoder's precision: f32 (default), bf16, q8 (int8 and int16\n"
        "                             convs, bf16 Linear layers) or q8bf16 (q8's int8 convs, the rest bf16)\n"
        "  --backend cpu|vulkan       where the language model and the codec decoder run (default: cpu, or\n"
        "                             $QTTS_BACKEND); the voice-cloning encoders run on the CPU either way\n"
        "  --device N                 the backend's device index (default 0, or $QTTS_DEVICE)\n"
        "network:\n"
        "  --host ADDR                address to bind (default 127.0.0.1: this machine only)\n"
        "  --port N                   TCP port (default 8000; 0 = any free port)\n"
        "  --port-file F              write the bound port to F once listening\n"
        "  --api-key KEY              require 'Authorization: Bearer KEY' on /v1/ (or env QTTS_API_KEY)\n"
        "  --cors-origin ORIGIN       allow browsers from ORIGIN ('*' for any); default: no CORS headers\n"
        "batching and limits:\n"
        "  --slots N                  requests stepped together (default 4, at most %d)\n"
        "  --queue N                  requests waiting for a slot before 429 (default 16)\n"
        "  --max-connections N        open connections (default 64)\n"
        "  --max-body-bytes N         JSON body limit (default 1048576)\n"
        "  --max-upload-bytes N       voice upload limit (default 33554432)\n"
        "  --max-input-chars N        input text limit in characters (default 100000); longer text is\n"
        "                             refused, never cut\n"
        "  --segment-chars N          input is spoken sentence by sentence, in segments of at most N\n"
        "                             characters (default 300); 0 = the whole input as one utterance\n"
        "  --pause-ms N               silence between segments (default 300)\n"
        "  --paragraph-pause-ms N     silence after a paragraph (blank line) (default 700)\n"
        "  --timeout S                idle connection timeout (default 30)\n"
        "  --request-timeout S        cancel a request running longer (default 600; 0 = never)\n"
        "  --ctx N                    talker positions per slot (default: the model's maximum)\n"
        "  --max-frames N             audio frames (80 ms) per request at most (default 4096)\n"
        "  --first-chunk-frames N     frames in the first streamed chunk (default 1 = 80 ms)\n"
        "  --chunk-frames N           frames per later chunk (default 4 = 320 ms)\n"
        "  --drain S                  on SIGTERM, let running requests finish for S seconds (default 5)\n"
        "  --decode-threads N         threads decoding audio beside generation; 0 = decode on the engine\n"
        "                             thread between steps, on all of --threads (default: the CPUs that\n"
        "                             --threads leaves free, 0 when it takes them all)\n"
        "  --lend-thread 0|1          1 = a decode thread with chunks to decode parks one of the model's\n"
        "                             workers meanwhile, so the two do not oversubscribe\n"
        "                             the cores (default: 1 when --threads and --decode-threads together\n"
        "                             exceed the CPUs)\n"
        "  --prefill-budget-ms N      at each step prefill waiting segments one at a time, oldest first, until\n"
        "                             their prefills have taken N ms (the first always runs; 0 = one per\n"
        "                             step): running streams wait at most N ms plus one prefill for\n"
        "                             their next frame (default 100)\n"
        "  --no-warmup                ready at once, without a warm-up generation\n"
        "other:\n"
        "  --voices-dir DIR           uploaded voices (Base models; default ./qtts-voices)\n"
        "  -v, --verbose              log each request (-vv: debug)\n"
        "  -h, --help                 this help\n",
        QTTS_MAX_BATCH);
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "qtts-server: %s needs an integer in [%ld, %ld] (got '%s')\n", opt, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static void log_cb(qtts_log_level level, const char *msg, void *user) {
    const server_config *c = user;
    if ((int)level <= 1 + c->verbose) srv_log(NULL, (int)level, "%s", msg);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--loadgen")) return loadgen_main(argc, argv);
    server_config cfg = server_default_config();
    cfg.max_frames = 4096;
    const char *model_dir = NULL, *port_file = NULL, *weights = "native", *backend = NULL, *codec_weights = "f32";
    long device = -1; /* -1: the library default */
    long n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    const long n_cpus = n_threads;
    cfg.decode_threads = -1; /* auto, resolved once --threads is known */
    long lend = -1;          /* auto, the same */
    long segment_chars = -1; /* -1 = the default */
    const char *env_key = getenv("QTTS_API_KEY");
    if (env_key && *env_key) cfg.api_key = env_key;
    char model_name[256] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
#define INT_OPT(name, lo, hi, field)                                                                                   \
    if (!strcmp(a, name)) {                                                                                            \
        if (parse_int(a, v, lo, hi, &x)) return 2;                                                                     \
        field = x;                                                                                                     \
        i++;                                                                                                           \
        continue;                                                                                                      \
    }
#define STR_OPT(name, field)                                                                                           \
    if (!strcmp(a, name)) {                                                                                            \
        if (!v) {                                                                                                      \
            fprintf(stderr, "qtts-server: %s needs a value\n", a);                                                     \
            return 2;                                                                                                  \
        }                                                                                                              \
        field = v;                                                                                                     \
        i++;                                                                                                           \
        continue;                                                                                                      \
    }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            cfg.verbose++;
            continue;
        }
        if (!strcmp(a, "-vv")) {
            cfg.verbose += 2;
            continue;
        }
        if (!strcmp(a, "--no-warmup")) {
            cfg.warmup = 0;
            continue;
        }
        STR_OPT("-m", model_dir)
        STR_OPT("--model", model_dir)
        STR_OPT("--model-name", cfg.model_name)
        STR_OPT("--host", cfg.host)
        STR_OPT("--port-file", port_file)
        STR_OPT("--weights", weights)
        STR_OPT("--codec-weights", codec_weights)
        STR_OPT("--backend", backend)
        INT_OPT("--device", 0, 1023, device)
        STR_OPT("--api-key", cfg.api_key)
        STR_OPT("--cors-origin", cfg.cors_origin)
        STR_OPT("--voices-dir", cfg.voices_dir)
        INT_OPT("--threads", 1, 1024, n_threads)
        INT_OPT("--port", 0, 65535, cfg.port)
        INT_OPT("--slots", 1, QTTS_MAX_BATCH, cfg.n_slots)
        INT_OPT("--queue", 0, 100000, cfg.queue_depth)
        INT_OPT("--max-connections", 1, 100000, cfg.max_connections)
        INT_OPT("--max-body-bytes", 1024, 1L << 30, cfg.max_body_bytes)
        INT_OPT("--max-upload-bytes", 1024, 1L << 31, cfg.max_upload_bytes)
        INT_OPT("--max-input-chars", 1, 1 << 20, cfg.max_input_chars)
        INT_OPT("--timeout", 1, 86400, cfg.conn_timeout_s)
        INT_OPT("--request-timeout", 0, 86400, cfg.request_timeout_s)
        INT_OPT("--ctx", 0, 1 << 24, cfg.n_ctx)
        INT_OPT("--max-frames", 1, 1 << 20, cfg.max_frames)
        INT_OPT("--first-chunk-frames", 1, 64, cfg.first_chunk_frames)
        INT_OPT("--chunk-frames", 1, 64, cfg.chunk_frames)
        INT_OPT("--drain", 0, 3600, cfg.drain_s)
        INT_OPT("--decode-threads", 0, 64, cfg.decode_threads)
        INT_OPT("--lend-thread", 0, 1, lend)
        INT_OPT("--prefill-budget-ms", 0, 600000, cfg.prefill_budget_ms)
        INT_OPT("--segment-chars", 0, 1 << 20, segment_chars)
        INT_OPT("--pause-ms", 0, 10000, cfg.split.sentence_pause_ms)
        INT_OPT("--paragraph-pause-ms", 0, 10000, cfg.split.paragraph_pause_ms)
        fprintf(stderr, "qtts-server: unknown option '%s' (see --help)\n", a);
        return 2;
    }
    /* Decode workers only where cores are left over: beside generation on the
     * same cores they compete with it, and decoding between steps on all of
     * them measured faster end to end and to the first audio on 2 cores
     * (docs/SERVER.md, "Decoding"). */
    if (cfg.decode_threads < 0) cfg.decode_threads = n_cpus > n_threads ? (int)(n_cpus - n_threads) : 0;
    cfg.lend_thread = lend >= 0 ? (int)lend : cfg.decode_threads > 0 && n_threads + cfg.decode_threads > n_cpus;
    if (segment_chars == 0) cfg.split.enabled = 0;
    else if (segment_chars > 0 && segment_chars < 16) {
        fprintf(stderr, "qtts-server: --segment-chars must be 0 or >= 16 (got %ld)\n", segment_chars);
        return 2;
    } else if (segment_chars > 0) cfg.split.max_chars = (int)segment_chars;
    if (!model_dir) {
        fprintf(stderr, "qtts-server: --model DIR is required (see --help)\n");
        return 2;
    }
    if (!strcmp(cfg.model_name, "qtts")) { /* default: the folder's name */
        const char *b = strrchr(model_dir, '/');
        while (b && !b[1] && b > model_dir) { /* trailing slash */
            const char *p = b - 1;
            while (p > model_dir && *p != '/') p--;
            b = p;
        }
        snprintf(model_name, sizeof model_name, "%s", b && *b == '/' ? b + 1 : model_dir);
        char *sl = strchr(model_name, '/');
        if (sl) *sl = 0;
        if (model_name[0]) cfg.model_name = model_name;
    }
    /* signals: handled by sigwait in this thread; every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = (int)n_threads;
    if (!strcmp(weights, "native")) mp.weights = QTTS_WEIGHTS_NATIVE;
    else if (!strcmp(weights, "q8")) mp.weights = QTTS_WEIGHTS_Q8;
    else if (!strcmp(weights, "q4")) mp.weights = QTTS_WEIGHTS_Q4;
    else {
        fprintf(stderr, "qtts-server: --weights must be native, q8 or q4 (got '%s')\n", weights);
        return 2;
    }
    const int cw = qtts_codec_weights_from_name(codec_weights);
    if (cw < 0) {
        fprintf(stderr, "qtts-server: --codec-weights must be f32, bf16, q8 or q8bf16 (got '%s')\n", codec_weights);
        return 2;
    }
    mp.codec_weights = (qtts_codec_weights)cw;
    if (backend) {
        const int b = qtts_backend_from_name(backend);
        if (b < 0) {
            fprintf(stderr, "qtts-server: --backend must be cpu or vulkan (got '%s')\n", backend);
            return 2;
        }
        mp.backend = (qtts_backend)b;
    }
    if (device >= 0) mp.device = (int)device;
    mp.log = log_cb;
    mp.log_user = &cfg;
    char err[1024];
    qtts_model *m = NULL;
    if (qtts_model_load(&m, model_dir, &mp, err, sizeof err)) {
        fprintf(stderr, "qtts-server: %s\n", err);
        return 1;
    }
    server *s = NULL;
    if (server_start(&s, m, &cfg, err, sizeof err)) {
        fprintf(stderr, "qtts-server: %s\n", err);
        qtts_model_free(m);
        return 1;
    }
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    srv_log(NULL, 2,
            "serving %s (%s %s, %s weights, %s kernels, %d threads, backend %s on %s) on http://%s:%d with %d slots, "
            "queue %d",
            cfg.model_name, info.type_name, info.size_name, info.talker_format, info.kernels, info.n_threads,
            qtts_backend_name(info.backend), info.device_name ? info.device_name : "?", cfg.host, server_port(s),
            cfg.n_slots, cfg.queue_depth);
    if (port_file) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", server_port(s)) < 0 || fclose(f) || rename(tmp, port_file)) {
            fprintf(stderr, "qtts-server: cannot write --port-file %s\n", port_file);
            server_stop(s);
            qtts_model_free(m);
            return 1;
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    srv_log(NULL, 2, "%s: stopping (draining for up to %d s)", sig == SIGINT ? "SIGINT" : "SIGTERM", cfg.drain_s);
    server_stop(s);
    qtts_model_free(m);
    srv_log(NULL, 2, "stopped");
    return 0;
}
