/* qtts CLI option parsing (see cli.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "qtts: %s expects an integer in [%d, %d], got \"%s\"\n", opt, lo, hi, v);
        return EXIT_USAGE;
    }
    *out = (int)x;
    return 0;
}

static int parse_float(const char *opt, const char *v, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "qtts: %s expects a number in [%g, %g], got \"%s\"\n", opt, lo, hi, v);
        return EXIT_USAGE;
    }
    *out = x;
    return 0;
}

int cli_parse(int argc, char **argv, int first, cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->split = qtts_split_default_params();
    o->debug = qtts_gen_debug_default_params();
    o->n_threads = 1;
    o->weights = QTTS_WEIGHTS_NATIVE;
    o->predictor_weights = QTTS_WEIGHTS_DEFAULT;
    o->backend = -1;
    o->device = -1;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                            \
    do {                                                                  \
        if (!v) {                                                         \
            fprintf(stderr, "qtts: option %s needs a value\n", a);        \
            return EXIT_USAGE;                                            \
        }                                                                 \
        i++;                                                              \
    } while (0)
        int rc = 0;
        if (!strcmp(a, "--model") || !strcmp(a, "-m")) {
            NEED();
            o->model_dir = v;
            if (o->n_models == CLI_MAX_MODELS) {
                fprintf(stderr, "qtts: at most %d --model options\n", CLI_MAX_MODELS);
                return EXIT_USAGE;
            }
            o->models[o->n_models++] = v;
        }
        else if (!strcmp(a, "--cast")) {
            NEED();
            if (o->n_casts == CLI_MAX_CASTS) {
                fprintf(stderr, "qtts: at most %d --cast options\n", CLI_MAX_CASTS);
                return EXIT_USAGE;
            }
            o->casts[o->n_casts++] = v;
        }
        else if (!strcmp(a, "--text") || !strcmp(a, "-t")) { NEED(); o->text = v; }
        else if (!strcmp(a, "--text-file")) { NEED(); o->text_file = v; }
        else if (!strcmp(a, "--text-ids")) { NEED(); o->text_ids = v; }
        else if (!strcmp(a, "--instruct")) { NEED(); o->instruct = v; }
        else if (!strcmp(a, "--instruct-ids")) { NEED(); o->instruct_ids = v; }
        else if (!strcmp(a, "--speaker")) { NEED(); o->speaker = v; }
        else if (!strcmp(a, "--language")) { NEED(); o->language = v; }
        else if (!strcmp(a, "--text-mode")) {
            NEED();
            if (strcmp(v, "streaming") && strcmp(v, "non-streaming")) {
                fprintf(stderr, "qtts: --text-mode must be streaming or non-streaming, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
            o->text_mode = v;
        }
        else if (!strcmp(a, "--dump-codes")) { NEED(); o->dump_codes = v; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { NEED(); o->output = v; }
        else if (!strcmp(a, "--codes")) { NEED(); o->codes_file = v; }
        else if (!strcmp(a, "--format")) {
            NEED();
            if (strcmp(v, "wav") && strcmp(v, "flac") && strcmp(v, "raw")) {
                fprintf(stderr, "qtts: --format must be wav, flac or raw, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
            o->format = v;
        }
        else if (!strcmp(a, "--sample-format")) {
            NEED();
            if (strcmp(v, "s16") && strcmp(v, "f32")) {
                fprintf(stderr, "qtts: --sample-format must be s16 or f32, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
            o->sample_format = v;
        }
        else if (!strcmp(a, "--stdout")) o->to_stdout = 1;
        else if (!strcmp(a, "--weights") || !strcmp(a, "--predictor-weights")) {
            NEED();
            int t = !strcmp(v, "native") || !strcmp(v, "bf16") ? QTTS_WEIGHTS_NATIVE : !strcmp(v, "q8") ? QTTS_WEIGHTS_Q8
                    : !strcmp(v, "q4") ? QTTS_WEIGHTS_Q4 : -2;
            if (t == -2) {
                fprintf(stderr, "qtts: %s must be native, q8 or q4, got \"%s\"\n", a, v);
                return EXIT_USAGE;
            }
            if (!strcmp(a, "--weights")) o->weights = t;
            else o->predictor_weights = t;
        }
        else if (!strcmp(a, "--codec-weights")) {
            NEED();
            if ((o->codec_weights = qtts_codec_weights_from_name(v)) < 0) {
                fprintf(stderr, "qtts: --codec-weights must be f32, bf16, q8 or q8bf16, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
        }
        else if (!strcmp(a, "--ref-audio")) { NEED(); o->ref_audio = v; }
        else if (!strcmp(a, "--ref-text")) { NEED(); o->ref_text = v; }
        else if (!strcmp(a, "--ref-text-ids")) { NEED(); o->ref_text_ids = v; }
        else if (!strcmp(a, "--xvector-only")) o->xvector_only = 1;
        else if (!strcmp(a, "--save-voice")) { NEED(); o->save_voice = v; }
        else if (!strcmp(a, "--voice")) { NEED(); o->voice = v; }
        else if (!strcmp(a, "--stream")) o->stream = 1;
        else if (!strcmp(a, "--chunk-frames")) { NEED(); rc = parse_int(a, v, 1, 64, &o->chunk_frames); }
        else if (!strcmp(a, "--segment-chars")) { NEED(); rc = parse_int(a, v, 16, 1000000, &o->split.max_chars); }
        else if (!strcmp(a, "--pause-ms")) { NEED(); rc = parse_int(a, v, 0, 10000, &o->split.sentence_pause_ms); }
        else if (!strcmp(a, "--paragraph-pause-ms")) { NEED(); rc = parse_int(a, v, 0, 10000, &o->split.paragraph_pause_ms); }
        else if (!strcmp(a, "--no-split")) o->split.enabled = 0;
        else if (!strcmp(a, "--greedy")) o->greedy = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = 1;
        else if (!strcmp(a, "--alt-regex")) o->alt_regex = 1;
        else if (!strcmp(a, "--no-huge-pages")) o->no_huge_pages = 1;
        else if (!strcmp(a, "--no-cache")) o->no_cache = 1;
        else if (!strcmp(a, "--timing")) o->timing = 1;
        else if (!strcmp(a, "--cache-dir")) { NEED(); o->cache_dir = v; }
        else if (!strcmp(a, "--seed")) {
            NEED();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-') {
                fprintf(stderr, "qtts: --seed expects a non-negative integer, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
            o->seed = s;
            o->have_seed = 1;
        }
        else if (!strcmp(a, "--temperature")) { NEED(); rc = parse_float(a, v, 1e-6f, 100, &o->temperature); o->set_temperature = 1; }
        else if (!strcmp(a, "--top-k")) { NEED(); rc = parse_int(a, v, 0, 1 << 20, &o->top_k); o->set_top_k = 1; }
        else if (!strcmp(a, "--top-p")) { NEED(); rc = parse_float(a, v, 1e-6f, 1, &o->top_p); o->set_top_p = 1; }
        else if (!strcmp(a, "--repetition-penalty")) { NEED(); rc = parse_float(a, v, 1e-6f, 100, &o->rep_pen); o->set_rep_pen = 1; }
        else if (!strcmp(a, "--cp-temperature")) { NEED(); rc = parse_float(a, v, 1e-6f, 100, &o->cp_temperature); o->set_cp_temperature = 1; }
        else if (!strcmp(a, "--cp-top-k")) { NEED(); rc = parse_int(a, v, 0, 1 << 20, &o->cp_top_k); o->set_cp_top_k = 1; }
        else if (!strcmp(a, "--cp-top-p")) { NEED(); rc = parse_float(a, v, 1e-6f, 1, &o->cp_top_p); o->set_cp_top_p = 1; }
        else if (!strcmp(a, "--max-new-tokens")) { NEED(); rc = parse_int(a, v, 1, 1 << 20, &o->max_new_tokens); }
        else if (!strcmp(a, "--backend")) {
            NEED();
            o->backend = qtts_backend_from_name(v);
            if (o->backend < 0) {
                fprintf(stderr, "qtts: --backend must be cpu or vulkan, got \"%s\"\n", v);
                return EXIT_USAGE;
            }
        }
        else if (!strcmp(a, "--device")) { NEED(); rc = parse_int(a, v, 0, 1023, &o->device); }
        else if (!strcmp(a, "--threads")) { NEED(); rc = parse_int(a, v, 1, 1024, &o->n_threads); }
        else if (!strcmp(a, "--newline-id")) { NEED(); rc = parse_int(a, v, 0, INT_MAX, &o->debug.newline_id); }
        else if (!strcmp(a, "--user-id")) { NEED(); rc = parse_int(a, v, 0, INT_MAX, &o->debug.user_id); }
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cli_usage(); return -1; }
        else {
            fprintf(stderr, "qtts: unknown option \"%s\" (see qtts --help)\n", a);
            return EXIT_USAGE;
        }
        if (rc) return rc;
#undef NEED
    }
    if (!o->cache_dir && qtts_cache_default_dir(o->cache_dir_buf, sizeof o->cache_dir_buf) == 0)
        o->cache_dir = o->cache_dir_buf;
    return 0;
}

static int read_all(FILE *f, const char *what, char **out) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) return EXIT_RUNTIME;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return EXIT_RUNTIME;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, 4096, f);
        n += r;
        if (n > CLI_MAX_TEXT_BYTES) {
            fprintf(stderr, "qtts: %s is larger than %d bytes; split it into several runs\n", what, CLI_MAX_TEXT_BYTES);
            free(b);
            return EXIT_INPUT;
        }
        if (r < 4096) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "qtts: cannot read %s\n", what);
        free(b);
        return EXIT_IO;
    }
    if (memchr(b, 0, n)) {
        fprintf(stderr, "qtts: %s contains a NUL byte; it must be UTF-8 text\n", what);
        free(b);
        return EXIT_INPUT;
    }
    b[n] = 0;
    *out = b;
    return 0;
}

void cli_apply_backend(const cli_opts *o, qtts_model_params *mp) {
    mp->cache_dir = o->no_cache ? NULL : o->cache_dir;
    if (o->backend >= 0) mp->backend = (qtts_backend)o->backend;
    if (o->device >= 0) mp->device = o->device;
}

int cli_read_text(const cli_opts *o, char **text) {
    *text = NULL;
    const char *src = o->text_file ? o->text_file : (o->text && !strcmp(o->text, "-")) ? "-" : NULL;
    if (!src) {
        *text = strdup(o->text ? o->text : "");
        return *text ? 0 : EXIT_RUNTIME;
    }
    if (!strcmp(src, "-")) return read_all(stdin, "standard input", text);
    FILE *f = fopen(src, "rb");
    if (!f) {
        fprintf(stderr, "qtts: cannot open text file %s\n", src);
        return EXIT_IO;
    }
    int rc = read_all(f, src, text);
    fclose(f);
    return rc;
}

int cli_parse_ids(const char *s, const char *what, int32_t **ids, int *n) {
    int cap = 64, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * cap);
    if (!v) return EXIT_RUNTIME;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            fprintf(stderr, "qtts: %s must be space-separated non-negative integers (at \"%.20s\")\n", what, p);
            free(v);
            return EXIT_USAGE;
        }
        if (k == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, sizeof(int32_t) * cap);
            if (!nv) {
                free(v);
                return EXIT_RUNTIME;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

int cli_audio_open(const cli_opts *o, cli_audio_out *out) {
    memset(out, 0, sizeof *out);
    if (o->to_stdout && o->output) {
        fprintf(stderr, "qtts: give -o FILE or --stdout, not both\n");
        return EXIT_USAGE;
    }
    if (!o->to_stdout && !o->output) return 0;
    int fmt;
    if (o->to_stdout) {
        if (o->format && strcmp(o->format, "raw")) {
            fprintf(stderr, "qtts: --stdout writes raw PCM; --format %s needs -o FILE\n", o->format);
            return EXIT_USAGE;
        }
        fmt = QTTS_FILE_RAW;
    } else if (o->format) {
        fmt = !strcmp(o->format, "wav") ? QTTS_FILE_WAV : !strcmp(o->format, "flac") ? QTTS_FILE_FLAC : QTTS_FILE_RAW;
    } else {
        fmt = qtts_file_format_from_path(o->output);
        if (fmt < 0) {
            fprintf(stderr, "qtts: cannot tell the format of %s from its extension; use .wav, .flac or .raw, or --format\n",
                    o->output);
            return EXIT_USAGE;
        }
    }
    const qtts_sample_format sf = o->sample_format && !strcmp(o->sample_format, "f32") ? QTTS_SAMPLE_F32 : QTTS_SAMPLE_S16;
    char err[1024];
    qtts_status st = qtts_audio_writer_open(&out->w, o->to_stdout ? "-" : o->output, (qtts_file_format)fmt, sf, 24000,
                                            err, sizeof err);
    if (st) {
        fprintf(stderr, "qtts: %s\n", err);
        return st == QTTS_ERR_IO ? EXIT_IO : EXIT_USAGE;
    }
    out->name = o->to_stdout ? "standard output" : o->output;
    out->path = o->to_stdout ? NULL : o->output;
    return 0;
}

int cli_audio_write(cli_audio_out *out, const float *pcm, size_t n) {
    if (!out->w || out->failed) return out->failed;
    if (qtts_audio_writer_write(out->w, pcm, n)) {
        fprintf(stderr, "qtts: %s\n", qtts_audio_writer_last_error(out->w));
        out->failed = 1;
    }
    return out->failed;
}

int cli_audio_close(cli_audio_out *out) {
    if (!out->w) return out->failed ? EXIT_IO : 0;
    qtts_status st = qtts_audio_writer_close(out->w);
    out->w = NULL;
    if (st) fprintf(stderr, "qtts: finishing %s failed\n", out->name);
    struct stat sb; /* a regular file only: never a device such as /dev/full */
    if ((st || out->failed) && out->path && !stat(out->path, &sb) && S_ISREG(sb.st_mode)) {
        if (!unlink(out->path)) fprintf(stderr, "qtts: removed the incomplete %s\n", out->path);
    }
    return st || out->failed ? EXIT_IO : 0;
}

int cli_exit_code(qtts_status st) {
    switch (st) {
    case QTTS_OK: return EXIT_OK;
    case QTTS_ERR_INVALID_ARG: return EXIT_USAGE;
    case QTTS_ERR_MODEL:
    case QTTS_ERR_FORMAT:
    case QTTS_ERR_UNSUPPORTED: return EXIT_MODEL;
    case QTTS_ERR_INPUT:
    case QTTS_ERR_LIMIT: return EXIT_INPUT;
    case QTTS_ERR_IO: return EXIT_IO;
    default: return EXIT_RUNTIME;
    }
}
