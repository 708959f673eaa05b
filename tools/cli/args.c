/* qtts CLI option parsing (see cli.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    o->newline_id = -1;
    o->user_id = -1;
    o->n_threads = 1;
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
        if (!strcmp(a, "--model") || !strcmp(a, "-m")) { NEED(); o->model_dir = v; }
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
        else if (!strcmp(a, "--greedy")) o->greedy = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o->quiet = 1;
        else if (!strcmp(a, "--alt-regex")) o->alt_regex = 1;
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
        else if (!strcmp(a, "--threads")) { NEED(); rc = parse_int(a, v, 1, 1024, &o->n_threads); }
        else if (!strcmp(a, "--newline-id")) { NEED(); rc = parse_int(a, v, 0, INT_MAX, &o->newline_id); }
        else if (!strcmp(a, "--user-id")) { NEED(); rc = parse_int(a, v, 0, INT_MAX, &o->user_id); }
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cli_usage(); return -1; }
        else {
            fprintf(stderr, "qtts: unknown option \"%s\" (see qtts --help)\n", a);
            return EXIT_USAGE;
        }
        if (rc) return rc;
#undef NEED
    }
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
