/* qtts-bench run and suite: the speed arm. Parses the list parameters, runs
 * the cross product of model x weights x threads x chunk x mode x decode
 * placement over the case set (for each case: one cold run, then the
 * measured runs, the configurations interleaved A B A B ...), and hands the
 * records to the report writers. Dataflow: options -> loaded models ->
 * bench_run_once per (case, rep, config) -> bench_record[] -> report.c /
 * plot.c. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/* ---------------------------------------------------------------- weight formats */

/* Names the weights list accepts. The engine's formats are those of
 * qtts_weight_type in include/qtts.h; add a line here with each new one. */
static const weight_name weight_names[] = {
    {"native", QTTS_WEIGHTS_NATIVE},
    {"bf16", QTTS_WEIGHTS_NATIVE}, /* the released checkpoints store BF16: native */
    {"q8", QTTS_WEIGHTS_Q8},
    {"q4", QTTS_WEIGHTS_Q4},
};

int bench_parse_weights(const char *name, qtts_weight_type *t, const char **canon) {
    for (size_t i = 0; i < sizeof weight_names / sizeof weight_names[0]; i++)
        if (strcmp(name, weight_names[i].name) == 0) {
            *t = weight_names[i].type;
            *canon = weight_names[i].name;
            return 0;
        }
    return -1;
}

const char *bench_weight_names(void) {
    static char buf[256];
    size_t l = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof weight_names / sizeof weight_names[0]; i++)
        l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%s", i ? "," : "", weight_names[i].name);
    return buf;
}

/* Every distinct format (aliases dropped): what "-w all" means. */
static int all_weights(const char **out, int max) {
    int n = 0;
    for (size_t i = 0; i < sizeof weight_names / sizeof weight_names[0] && n < max; i++) {
        int dup = 0;
        for (size_t j = 0; j < i; j++) dup |= weight_names[j].type == weight_names[i].type;
        if (!dup) out[n++] = weight_names[i].name;
    }
    return n;
}

/* ---------------------------------------------------------------- options */

typedef struct bench_opts {
    const char *models[BENCH_MAX_LIST];
    int n_models;
    const char *weights[BENCH_MAX_LIST];
    int n_weights;
    int threads[BENCH_MAX_LIST];
    int n_threads;
    int first[BENCH_MAX_LIST], chunk[BENCH_MAX_LIST];
    int n_chunks;
    qtts_text_mode modes[BENCH_MAX_LIST];
    const char *mode_names[BENCH_MAX_LIST];
    int n_modes;
    bench_decode decodes[BENCH_MAX_LIST];
    int n_decodes;
    const bench_case *cases[64];
    int n_cases;
    int frames;       /* > 0 forced, -1 auto, 0 eos */
    int frames_given; /* --frames was on the command line */
    int reps;
    uint64_t seed;
    int greedy;
    const char *out_fmt;
    const char *out_path;   /* -o file for the chosen format */
    const char *json_path, *csv_path, *md_path, *plot_path;
    double bw_mib;
    double bw_run_mib;  /* probes around every run; 0 = off */
    int quiet;
    /* suite */
    const char *out_dir;
    const char *asr_cmd;
    const char *ref_weights;
    int cold_per_case;         /* 1 = a cold run before every case, not only the first */
    int no_huge_pages;         /* 1 = qtts_model_params.huge_pages 0 (weights in place, 4 KiB pages) */
    const char *quality_cases; /* suite: cases of the quality arm (NULL = all of --cases) */
    bench_backend backend;     /* --backend / --device (zero = the library default) */
    const char *codec_weights[BENCH_MAX_LIST]; /* --codec-weights LIST */
    int n_codec_weights;
} bench_opts;

static char *list_buf[64];
static int n_list_buf;

/* Split "a,b,c" into items (the strings live until exit). */
static int split_list(const char *s, const char **out, int max) {
    char *c = strdup(s);
    if (!c) return 0;
    if (n_list_buf < 64) list_buf[n_list_buf++] = c;
    int n = 0;
    for (char *save = NULL, *t = strtok_r(c, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) out[n++] = t;
    return n;
}

static int parse_cases(const char *s, bench_opts *o) {
    const char *items[64];
    int n = split_list(s, items, 64);
    o->n_cases = 0;
    for (int i = 0; i < n; i++) {
        int hit = 0;
        for (int k = 0; k < bench_n_cases; k++) {
            const bench_case *c = &bench_cases[k];
            if (strcmp(items[i], "all") == 0 || strcmp(items[i], c->name) == 0 || strcmp(items[i], c->length) == 0 ||
                strcmp(items[i], c->language) == 0) {
                int dup = 0;
                for (int j = 0; j < o->n_cases; j++) dup |= o->cases[j] == c;
                if (!dup && o->n_cases < 64) o->cases[o->n_cases++] = c;
                hit = 1;
            }
        }
        if (!hit) {
            fprintf(stderr, "qtts-bench: unknown case '%s' (names:", items[i]);
            for (int k = 0; k < bench_n_cases; k++) fprintf(stderr, " %s", bench_cases[k].name);
            fprintf(stderr, "; or short, medium, long, clone, a language, all)\n");
            return -1;
        }
    }
    return 0;
}

static int parse_mode(const char *s, qtts_text_mode *m) {
    if (strcmp(s, "default") == 0) *m = QTTS_TEXT_MODE_DEFAULT;
    else if (strcmp(s, "streaming") == 0) *m = QTTS_TEXT_MODE_STREAMING;
    else if (strcmp(s, "non-streaming") == 0) *m = QTTS_TEXT_MODE_NON_STREAMING;
    else return -1;
    return 0;
}

void bench_help(FILE *f) {
    fprintf(f,
            "qtts-bench: speed and quality measurements of qtts (method: docs/BENCH.md)\n\n"
            "qtts-bench [run] -m DIR[,DIR...] [options]\n"
            "  Lists (comma-separated) are crossed, as llama-bench does:\n"
            "  -m, --model LIST        checkpoint folders\n"
            "  -w, --weights LIST      weight formats: %s, or all (default native)\n"
            "  -t, --threads LIST      compute threads (default: online CPUs)\n"
            "  -c, --chunk LIST        streaming chunk F/C: first chunk F frames, then C (N = N/N; default 1/4)\n"
            "      --mode LIST         text mode: default, streaming, non-streaming (default: default)\n"
            "      --decode LIST       where the codec decoder runs: inline (between frames on the calling\n"
            "                          thread), worker (a decode thread beside generation, parking a model worker:\n"
            "                          the library default with 2+ threads), none (no audio: generation\n"
            "                          alone) (default worker)\n"
            "  Cases and runs:\n"
            "      --cases LIST        case names, short, medium, long, clone, a language, or all (default all)\n"
            "      --frames N|auto|eos N frames per case, EOS ignored; auto = the case's typical length\n"
            "                          (default auto); eos = until the model stops (real checkpoints only)\n"
            "  -r, --reps N            measured runs after the cold run (default 5; fewer is flagged)\n"
            "      --cold-per-case     a cold run before every case (default: before the first case only)\n"
            "      --seed N            seed (default 1234); --sample to sample instead of greedy decoding\n"
            "      --bw-mib N          buffer of the opening bandwidth measurement (default 1024 MiB)\n"
            "      --bw-run-mib N      buffer of the probes right before and after every run, whose mean is\n"
            "                          the run's roofline denominator (default 256 MiB; 0 = off: the opening\n"
            "                          measurement)\n"
            "      --no-huge-pages     load with qtts_model_params.huge_pages = 0: stored weights read in place\n"
            "                          (4 KiB pages) instead of copied into 2 MiB pages (an A/B of the two)\n"
            "      --backend cpu|vulkan  where the LM and codec decoder run (default: cpu, or $QTTS_BACKEND); on a\n"
            "                          GPU backend the reports add the GPU time per phase and device memory\n"
            "      --device N          the backend's device index (default 0, or $QTTS_DEVICE)\n"
            "      --codec-weights LIST  the codec decoder's format(s), crossed with -w: f32 (default), bf16, q8,\n"
            "                          q8bf16\n"
            "  Output:\n"
            "  -o md|json|csv|none     format on standard output (default md)\n"
            "      --json F, --csv F, --md F   also write these files; --plot F.svg  RTF and phase plot\n"
            "  -q                      no progress on stderr\n\n"
            "qtts-bench suite -m DIR [--out DIR] [run options] [--asr-cmd 'CMD {wav}'] [--quality-cases LIST]\n"
            "  Speed runs at every weight format (-w all; --frames 8; cases short_en,short_zh,medium_de,\n"
            "  long_en,clone_en unless given), the quality arm against --ref (default native) on\n"
            "  short_en,long_en, and report.md, results.json, results.csv, plot.svg, wav/ in --out\n"
            "  (default bench-out). Fits 10 minutes on a 0.6B model on a 2-core machine.\n\n"
            "qtts-bench make-model --size 0.6b|1.7b --type custom_voice|base|voice_design [--seed N] DIR\n"
            "  A synthetic checkpoint with the real geometry, names and dtypes (random weights).\n\n"
            "qtts-bench quality -m DIR [-w LIST] [--ref native] [--cases LIST] [--frames N] [--asr-cmd 'CMD {wav}']\n"
            "  Teacher-forced code agreement per codebook, log-mel correlation and waveform SNR against\n"
            "  the reference path; speaker similarity (Base); WER through the recogniser command.\n"
            "qtts-bench quality -m DIR --codec-weights LIST [--frames N]\n"
            "  The codec decoder alone in each format against f32 on the same codes (DIR/golden/*/codes.npy\n"
            "  and N random frames, default 100): waveform SNR, log-mel correlation and L1 per case; exit 1\n"
            "  when a case is under 30 dB or 0.999.\n\n"
            "qtts-bench compare A.json B.json [--metric rtf] [--ignore weights,threads,model,decode]\n"
            "  Cases matched pairwise: per-case deltas, median, mean and weighted change, faster/slower.\n\n"
            "qtts-bench wer REF HYP      normalised WER of two strings\n"
            "qtts-bench bandwidth [-t LIST] [--bw-mib N] [--method auto|scalar|avx2|avx512]\n"
            "                            memory read bandwidth (auto: the widest loads this CPU has)\n"
            "qtts-bench peak [-t LIST] [--method auto|scalar|avx2|avx512]\n"
            "                            f32 and int8 multiply-adds per second (auto: the kernels' instructions)\n"
            "qtts-bench plot RESULTS.json OUT.svg         the SVG plot of a JSON report\n",
            bench_weight_names());
}

static int parse_opts(int argc, char **argv, bench_opts *o, int suite) {
    memset(o, 0, sizeof o[0]);
    o->frames = suite ? 8 : -1;
    o->reps = 5;
    o->seed = 1234;
    o->greedy = 1;
    o->out_fmt = "md";
    o->bw_mib = 1024;
    o->bw_run_mib = 256;
    o->ref_weights = "native";
    o->out_dir = "bench-out";
    if (suite) o->quality_cases = "short_en,long_en";
    const char *models = NULL, *weights = NULL, *threads = NULL, *chunks = "1/4", *modes = "default",
               *decodes = "worker",
               *cases = suite ? "short_en,short_zh,medium_de,long_en,clone_en" : "all";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(s, l) ((strcmp(a, s) == 0 || strcmp(a, l) == 0) && v && (i++, 1))
        if (OPT("-m", "--model")) models = v;
        else if (OPT("-w", "--weights")) weights = v;
        else if (OPT("-t", "--threads")) threads = v;
        else if (OPT("-c", "--chunk")) chunks = v;
        else if (OPT("--mode", "--modes")) modes = v;
        else if (OPT("--decode", "--decode")) decodes = v;
        else if (OPT("--cases", "--case")) cases = v;
        else if (OPT("--frames", "--frames")) {
            o->frames_given = 1;
            if (strcmp(v, "auto") == 0) o->frames = -1;
            else if (strcmp(v, "eos") == 0) o->frames = 0;
            else if ((o->frames = atoi(v)) <= 0) {
                fprintf(stderr, "qtts-bench: --frames takes N > 0, auto or eos\n");
                return -1;
            }
        } else if (OPT("-r", "--reps")) {
            o->reps = atoi(v);
            if (o->reps < 1 || o->reps > BENCH_MAX_RUNS) {
                fprintf(stderr, "qtts-bench: --reps takes 1..%d\n", BENCH_MAX_RUNS);
                return -1;
            }
        } else if (OPT("--seed", "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--sample") == 0) o->greedy = 0;
        else if (strcmp(a, "--cold-per-case") == 0) o->cold_per_case = 1;
        else if (strcmp(a, "--no-huge-pages") == 0) o->no_huge_pages = 1;
        else if (strcmp(a, "--greedy") == 0) o->greedy = 1;
        else if (OPT("--backend", "--backend") || OPT("--device", "--device")) {
            if (bench_parse_backend(a, v, &o->backend)) return -1;
        }
        else if (OPT("-o", "--output")) {
            if (strcmp(v, "md") && strcmp(v, "json") && strcmp(v, "csv") && strcmp(v, "none")) {
                fprintf(stderr, "qtts-bench: -o takes md, json, csv or none\n");
                return -1;
            }
            o->out_fmt = v;
        } else if (OPT("--json", "--json")) o->json_path = v;
        else if (OPT("--csv", "--csv")) o->csv_path = v;
        else if (OPT("--md", "--md")) o->md_path = v;
        else if (OPT("--plot", "--plot")) o->plot_path = v;
        else if (OPT("--bw-mib", "--bw-mib")) o->bw_mib = atof(v);
        else if (OPT("--bw-run-mib", "--bw-run-mib")) {
            char *end;
            o->bw_run_mib = strtod(v, &end);
            if (*end || !(o->bw_run_mib == 0 || (o->bw_run_mib >= 64 && o->bw_run_mib <= 65536))) {
                fprintf(stderr, "qtts-bench: --bw-run-mib takes 0 (off) or 64..65536 (larger than the caches)\n");
                return -1;
            }
        }
        else if (OPT("--out", "--out-dir")) o->out_dir = v;
        else if (OPT("--asr-cmd", "--asr-cmd")) o->asr_cmd = v;
        else if (OPT("--ref", "--ref")) o->ref_weights = v;
        else if (OPT("--quality-cases", "--quality-cases")) o->quality_cases = v;
        else if (OPT("--codec-weights", "--codec-weights")) {
            o->n_codec_weights = split_list(v, o->codec_weights, BENCH_MAX_LIST);
            for (int k = 0; k < o->n_codec_weights; k++)
                if (qtts_codec_weights_from_name(o->codec_weights[k]) < 0) {
                    fprintf(stderr, "qtts-bench: --codec-weights takes f32, bf16, q8, q8bf16 (got '%s')\n", o->codec_weights[k]);
                    return -1;
                }
        }
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) o->quiet = 1;
        else {
            fprintf(stderr, "qtts-bench: unknown or incomplete option '%s' (see qtts-bench help)\n", a);
            return -1;
        }
#undef OPT
    }
    if (!models) {
        fprintf(stderr, "qtts-bench: give a model folder with -m DIR (qtts-bench make-model writes one)\n");
        return -1;
    }
    o->n_models = split_list(models, o->models, BENCH_MAX_LIST);
    if (!weights) weights = suite ? "all" : "native";
    if (strcmp(weights, "all") == 0) o->n_weights = all_weights(o->weights, BENCH_MAX_LIST);
    else o->n_weights = split_list(weights, o->weights, BENCH_MAX_LIST);
    for (int i = 0; i < o->n_weights; i++) {
        qtts_weight_type t;
        const char *canon;
        if (bench_parse_weights(o->weights[i], &t, &canon)) {
            fprintf(stderr, "qtts-bench: unknown weight format '%s' (this build knows: %s)\n", o->weights[i],
                    bench_weight_names());
            return -1;
        }
    }
    if (!threads) {
        static char nb[16];
        snprintf(nb, sizeof nb, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
        threads = nb;
    }
    const char *items[BENCH_MAX_LIST];
    int n = split_list(threads, items, BENCH_MAX_LIST);
    for (int i = 0; i < n; i++) {
        o->threads[i] = atoi(items[i]);
        if (o->threads[i] < 1 || o->threads[i] > 256) {
            fprintf(stderr, "qtts-bench: bad thread count '%s'\n", items[i]);
            return -1;
        }
    }
    o->n_threads = n;
    n = split_list(chunks, items, BENCH_MAX_LIST);
    for (int i = 0; i < n; i++) {
        int f = 0, c = 0;
        if (strchr(items[i], '/')) {
            if (sscanf(items[i], "%d/%d", &f, &c) != 2) f = 0;
        } else {
            f = c = atoi(items[i]);
        }
        if (f < 1 || c < 1) {
            fprintf(stderr, "qtts-bench: bad chunk '%s' (F/C or N, frames >= 1)\n", items[i]);
            return -1;
        }
        o->first[i] = f, o->chunk[i] = c;
    }
    o->n_chunks = n;
    n = split_list(modes, o->mode_names, BENCH_MAX_LIST);
    for (int i = 0; i < n; i++)
        if (parse_mode(o->mode_names[i], &o->modes[i])) {
            fprintf(stderr, "qtts-bench: bad mode '%s' (default, streaming, non-streaming)\n", o->mode_names[i]);
            return -1;
        }
    o->n_modes = n;
    n = split_list(decodes, items, BENCH_MAX_LIST);
    for (int i = 0; i < n; i++)
        if (bench_parse_decode(items[i], &o->decodes[i])) {
            fprintf(stderr, "qtts-bench: bad decode placement '%s' (inline, worker, none)\n", items[i]);
            return -1;
        }
    if (n == 0) {
        fprintf(stderr, "qtts-bench: --decode needs inline, worker or none\n");
        return -1;
    }
    o->n_decodes = n;
    return parse_cases(cases, o);
}

/* ---------------------------------------------------------------- running */

static int config_synthetic(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j) return 0;
    const int s = json_object_get(j, "qtts_synthetic") != NULL;
    json_decref(j);
    return s;
}

static const char *base_name(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    static char buf[8][256];
    static int k;
    char *b = buf[k++ & 7];
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(b, 256, "%.*s", (int)(n - s), dir + s);
    return b;
}

static void log_ignore(qtts_log_level level, const char *msg, void *user) {
    if (level <= QTTS_LOG_WARN && user == NULL) fprintf(stderr, "  qtts: %s\n", msg);
}

typedef struct loaded {
    qtts_model *model;
    int device;         /* device index it was loaded with */
    const char *weights;
    const char *codec;  /* codec_weights name */
    int n_threads;
    double load_ms;
    char err[512];
    qtts_voice *voice_x, *voice_icl;
    double voice_ms, voice_icl_ms; /* making the x-vector voice / the ICL voice from the 3 s clip */
} loaded;

static void make_voices(loaded *L) {
    qtts_model_info info;
    qtts_model_get_info(L->model, &info);
    if (info.type != QTTS_MODEL_BASE) return;
    float *pcm;
    size_t n;
    const char *tr;
    bench_ref_clip(&pcm, &n, &tr);
    qtts_voice_params vp = qtts_voice_default_params();
    vp.xvector_only = 1;
    char err[256];
    const double t0 = tool_now_ms();
    if (qtts_voice_from_pcm(L->model, pcm, n, 24000, &vp, &L->voice_x, err, sizeof err))
        snprintf(L->err, sizeof L->err, "voice: %s", err);
    L->voice_ms = tool_now_ms() - t0;
    vp = qtts_voice_default_params();
    vp.ref_text = tr;
    const double t1 = tool_now_ms();
    if (!L->err[0] && qtts_voice_from_pcm(L->model, pcm, n, 24000, &vp, &L->voice_icl, err, sizeof err))
        snprintf(L->err, sizeof L->err, "ICL voice: %s", err);
    L->voice_icl_ms = tool_now_ms() - t1;
    free(pcm);
}

static void fill_record_model(bench_record *rec, const char *dir, qtts_model *m, int device) {
    snprintf(rec->model, sizeof rec->model, "%s", dir);
    rec->device = device;
    snprintf(rec->model_name, sizeof rec->model_name, "%s", base_name(dir));
    rec->synthetic = config_synthetic(dir);
    if (!m) return;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    snprintf(rec->size_name, sizeof rec->size_name, "%s", info.size_name ? info.size_name : "");
    snprintf(rec->type_name, sizeof rec->type_name, "%s", info.type_name ? info.type_name : "");
    snprintf(rec->kernels, sizeof rec->kernels, "%s", info.kernels ? info.kernels : "");
    snprintf(rec->weight_dtype, sizeof rec->weight_dtype, "%s", info.weight_dtype ? info.weight_dtype : "");
    rec->talker_bytes = info.talker_bytes;
    rec->predictor_bytes = info.predictor_bytes;
    rec->codec_bytes = info.codec_bytes;
    rec->n_params = info.n_params;
    rec->weights_in_use = info.weight_bytes_in_use;
    snprintf(rec->backend, sizeof rec->backend, "%s", qtts_backend_name(info.backend));
    snprintf(rec->device_name, sizeof rec->device_name, "%s", info.device_name ? info.device_name : "");
    snprintf(rec->device_driver, sizeof rec->device_driver, "%s", info.device_driver ? info.device_driver : "");
    rec->device_bytes_allocated = info.device_bytes_allocated;
    rec->device_bytes_reserved = info.device_bytes_reserved;
}

static int case_frames(const bench_opts *o, const bench_case *c) {
    return o->frames < 0 ? c->frames : o->frames;
}

/* One probe beside a run: best of 3 passes over a fresh bw_run_mib buffer,
 * freed before the run so it is not in the run's RSS; NaN when off. */
static double probe_around(const bench_opts *o, int n_threads) {
    if (o->bw_run_mib <= 0) return NAN;
    const double g = measure_read_bandwidth((size_t)(o->bw_run_mib * 1048576.0), n_threads, 3, bw_method_best());
    return g > 0 ? g : NAN;
}

/* Runs the speed arm into r (records appended). Returns 0, or -1 when no
 * configuration could run at all. */
static int run_speed(const bench_opts *o, bench_report *r) {
    int any_ok = 0;
    for (int mi = 0; mi < o->n_models; mi++) {
        const char *dir = o->models[mi];
        /* --codec-weights crossed with -w (f32 alone when not given) */
        const int ncw = o->n_codec_weights > 0 ? o->n_codec_weights : 1;
        const int nl = o->n_weights * ncw * o->n_threads;
        loaded *L = calloc((size_t)nl, sizeof *L);
        if (!L) return -1;
        for (int wi = 0; wi < o->n_weights; wi++)
            for (int xi = 0; xi < ncw; xi++)
            for (int ti = 0; ti < o->n_threads; ti++) {
                loaded *l = &L[(wi * ncw + xi) * o->n_threads + ti];
                qtts_model_params mp = qtts_model_default_params();
                const char *canon = o->weights[wi];
                bench_parse_weights(o->weights[wi], &mp.weights, &canon);
                mp.codec_weights = o->n_codec_weights > 0
                                       ? (qtts_codec_weights)qtts_codec_weights_from_name(o->codec_weights[xi])
                                       : QTTS_CODEC_F32;
                l->codec = qtts_codec_weights_name(mp.codec_weights);
                mp.n_threads = o->threads[ti];
                mp.huge_pages = !o->no_huge_pages;
                mp.log = log_ignore;
                bench_apply_backend(&o->backend, &mp);
                l->device = mp.device;
                l->weights = canon;
                l->n_threads = o->threads[ti];
                if (!o->quiet)
                    fprintf(stderr, "loading %s (%s, codec %s, %d threads, backend %s device %d)\n", dir, canon,
                            l->codec, mp.n_threads, qtts_backend_name(mp.backend), mp.device);
                const double t0 = tool_now_ms();
                qtts_status st = qtts_model_load(&l->model, dir, &mp, l->err, sizeof l->err);
                l->load_ms = tool_now_ms() - t0;
                if (st) {
                    fprintf(stderr, "qtts-bench: %s (%s): %s\n", dir, canon, l->err);
                    continue;
                }
                make_voices(l);
                if (l->err[0]) fprintf(stderr, "qtts-bench: %s: %s\n", dir, l->err);
            }
        /* configurations: loaded model x chunk x mode x decode placement */
        const int nc = nl * o->n_chunks * o->n_modes * o->n_decodes;
        bench_config *cfg = calloc((size_t)nc, sizeof *cfg);
        int *cfg_model = calloc((size_t)nc, sizeof(int));
        if (!cfg || !cfg_model) {
            free(cfg), free(cfg_model), free(L);
            return -1;
        }
        int k = 0;
        for (int li = 0; li < nl; li++)
            for (int ci = 0; ci < o->n_chunks; ci++)
                for (int di = 0; di < o->n_modes; di++)
                    for (int pi = 0; pi < o->n_decodes; pi++, k++) {
                        cfg[k] = (bench_config){dir, 0, L[li].weights, L[li].n_threads, o->first[ci], o->chunk[ci],
                                                o->modes[di], o->mode_names[di], o->decodes[pi]};
                        cfg_model[k] = li;
                    }
        int total_runs = 0, done = 0;
        for (int ci = 0; ci < o->n_cases; ci++) total_runs += nc * (o->reps + (ci == 0 || o->cold_per_case));
        for (int ci = 0; ci < o->n_cases; ci++) {
            const bench_case *c = o->cases[ci];
            /* one record per configuration for this case */
            bench_record *recs = realloc(r->rec, sizeof *r->rec * (size_t)(r->n_rec + nc));
            if (!recs) break;
            r->rec = recs;
            bench_record *R = r->rec + r->n_rec;
            r->n_rec += nc;
            for (int j = 0; j < nc; j++) {
                bench_record *rec = &R[j];
                memset(rec, 0, sizeof *rec);
                loaded *l = &L[cfg_model[j]];
                fill_record_model(rec, dir, l->model, l->device);
                snprintf(rec->weights, sizeof rec->weights, "%s", cfg[j].weights_name);
                snprintf(rec->codec_weights, sizeof rec->codec_weights, "%s", l->codec ? l->codec : "f32");
                rec->n_threads = cfg[j].n_threads;
                rec->first_chunk = cfg[j].first_chunk;
                rec->chunk = cfg[j].chunk;
                snprintf(rec->mode, sizeof rec->mode, "%s", cfg[j].mode_name);
                snprintf(rec->decode, sizeof rec->decode, "%s", bench_decode_name(cfg[j].decode));
                snprintf(rec->case_name, sizeof rec->case_name, "%s", c->name);
                snprintf(rec->length, sizeof rec->length, "%s", c->length);
                snprintf(rec->language, sizeof rec->language, "%s", c->language);
                rec->text_chars = (int)strlen(c->text);
                rec->frames_forced = case_frames(o, c);
                rec->load_ms = l->load_ms;
                rec->voice_ms = l->voice_ms;
                rec->voice_icl_ms = l->voice_icl_ms;
                rec->bw_gbps = report_bw_for(r, cfg[j].n_threads);
                if (!l->model) snprintf(rec->error, sizeof rec->error, "load failed: %.200s", l->err);
                else if (l->err[0]) snprintf(rec->error, sizeof rec->error, "%.240s", l->err);
                else if (c->clone && strcmp(rec->type_name, "base") != 0)
                    snprintf(rec->error, sizeof rec->error, "skipped: the clone case needs a Base model");
            }
            for (int rep = 0; rep <= o->reps; rep++) {
                for (int j = 0; j < nc; j++) {
                    bench_record *rec = &R[j];
                    loaded *l = &L[cfg_model[j]];
                    if (rec->error[0]) continue;
                    /* the cold run (page-in, allocator growth) is the first run after the
                     * load: on the first case, or on every case with --cold-per-case */
                    if (rep == 0 && ci > 0 && !o->cold_per_case) continue;
                    run_request rq;
                    memset(&rq, 0, sizeof rq);
                    rq.c = c;
                    rq.frames = rec->frames_forced;
                    rq.seed = o->seed;
                    rq.greedy = o->greedy;
                    rq.voice = c->clone ? l->voice_icl : l->voice_x;
                    run_output out;
                    /* the run's own denominator: probes in the same minute as the run (on a
                     * shared host the bandwidth moves within minutes, so the opening probe
                     * can be from another regime than a run made later) */
                    const double bw_before = probe_around(o, cfg[j].n_threads);
                    bench_run_once(l->model, &cfg[j], &rq, rec->bw_gbps, &out);
                    if (o->bw_run_mib > 0 && !out.m.status)
                        run_set_probe(&out.m, (bw_before + probe_around(o, cfg[j].n_threads)) / 2);
                    if (out.m.status) {
                        snprintf(rec->error, sizeof rec->error, "%.240s", out.err);
                        fprintf(stderr, "qtts-bench: %s %s: %s\n", rec->model_name, c->name, out.err);
                    } else if (rep == 0) {
                        rec->cold = out.m;
                    } else {
                        rec->runs[rec->n_runs++] = out.m;
                        any_ok = 1;
                    }
                    if (!out.m.status) {
                        if (out.device_bytes_allocated > rec->device_bytes_allocated)
                            rec->device_bytes_allocated = out.device_bytes_allocated;
                        if (out.device_bytes_reserved > rec->device_bytes_reserved)
                            rec->device_bytes_reserved = out.device_bytes_reserved;
                    }
                    done++;
                    if (!o->quiet)
                        fprintf(stderr, "[%d/%d] %s %s %s t%d %d/%d %s decode %s %s: RTF %.3f, %d frames\n", done,
                                total_runs, rec->model_name, c->name, rec->weights, rec->n_threads, rec->first_chunk,
                                rec->chunk, rec->mode, rec->decode, rep == 0 ? "cold" : "run", out.m.rtf,
                                (int)out.m.n_frames);
                    run_output_free(&out);
                }
            }
        }
        for (int li = 0; li < nl; li++) {
            qtts_voice_free(L[li].voice_x);
            qtts_voice_free(L[li].voice_icl);
            qtts_model_free(L[li].model);
        }
        free(L);
        free(cfg);
        free(cfg_model);
    }
    return any_ok ? 0 : -1;
}

static void measure_bw(const bench_opts *o, bench_report *r) {
    const bw_method method = bw_method_best();
    r->bw_buffer_mib = o->bw_mib;
    r->bw_run_mib = o->bw_run_mib;
    snprintf(r->bw_method, sizeof r->bw_method, "%s", bw_method_name(method));
    for (int i = 0; i < o->n_threads && r->n_bw < BENCH_MAX_LIST; i++) {
        int dup = 0;
        for (int j = 0; j < r->n_bw; j++) dup |= r->bw_threads[j] == o->threads[i];
        if (dup) continue;
        if (!o->quiet)
            fprintf(stderr, "measuring read bandwidth (%d threads, %.0f MiB, %s)...\n", o->threads[i], o->bw_mib,
                    r->bw_method);
        r->bw_threads[r->n_bw] = o->threads[i];
        r->bw_gbps[r->n_bw] = measure_read_bandwidth((size_t)(o->bw_mib * 1048576.0), o->threads[i], 5, method);
        r->n_bw++;
        /* the arithmetic the same threads retire at most (~0.25 s): the other floor */
        if (r->n_peaks < BENCH_MAX_LIST) measure_peaks(o->threads[i], 3, &r->peaks[r->n_peaks++]);
    }
}

static void report_init(const bench_opts *o, bench_report *r) {
    memset(r, 0, sizeof *r);
    sys_collect(&r->sys);
    r->frames_mode = o->frames;
    r->reps = o->reps;
    r->seed = o->seed;
    r->greedy = o->greedy;
    r->huge_pages = !o->no_huge_pages;
}

static int write_outputs(const bench_opts *o, const bench_report *r) {
    int rc = 0;
    if (o->json_path) rc |= report_write_file(r, "json", o->json_path);
    if (o->csv_path) rc |= report_write_file(r, "csv", o->csv_path);
    if (o->md_path) rc |= report_write_file(r, "md", o->md_path);
    if (o->plot_path) rc |= plot_write_svg(r, o->plot_path);
    return rc;
}

int cmd_run(int argc, char **argv) {
    bench_opts o;
    if (parse_opts(argc, argv, &o, 0)) return 2;
    bench_report r;
    report_init(&o, &r);
    const double t0 = tool_now_ms();
    measure_bw(&o, &r);
    const int rc = run_speed(&o, &r);
    r.total_s = (tool_now_ms() - t0) / 1000.0;
    if (strcmp(o.out_fmt, "none")) report_write(&r, o.out_fmt, stdout);
    const int wrc = write_outputs(&o, &r);
    report_free(&r);
    return rc || wrc ? 1 : 0;
}

int cmd_suite(int argc, char **argv) {
    bench_opts o;
    if (parse_opts(argc, argv, &o, 1)) return 2;
    if (mkdir(o.out_dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "qtts-bench: cannot create %s\n", o.out_dir);
        return 1;
    }
    bench_report r;
    report_init(&o, &r);
    const double t0 = tool_now_ms();
    measure_bw(&o, &r);
    int rc = run_speed(&o, &r);
    /* quality arm: every other weight format against the reference path */
    const char *const *test_w = o.weights;
    const int nt = o.n_weights;
    /* the quality arm runs 3 syntheses per case and format: a short and a
     * long case unless --quality-cases says otherwise (speaker similarity
     * uses the x-vector voice of the reference clip on Base models) */
    const bench_case *qcases[64];
    int nq = 0;
    for (int i = 0; i < o.n_cases; i++)
        if (!o.quality_cases || strstr(o.quality_cases, o.cases[i]->name) ||
            (strcmp(o.quality_cases, "all") == 0))
            qcases[nq++] = o.cases[i];
    char wav_dir[4096];
    snprintf(wav_dir, sizeof wav_dir, "%.4000s/wav", o.out_dir);
    mkdir(wav_dir, 0755);
    quality_options qo = {o.ref_weights, o.asr_cmd, o.frames > 0 ? o.frames : 8, o.threads[o.n_threads - 1],
                          o.seed, wav_dir, o.backend};
    for (int mi = 0; mi < o.n_models; mi++) {
        if (!o.quiet) fprintf(stderr, "quality arm: %s\n", o.models[mi]);
        if (quality_run(o.models[mi], test_w, nt, qcases, nq, &qo, &r)) rc = -1;
    }
    r.total_s = (tool_now_ms() - t0) / 1000.0;
    char p[4096];
    int wrc = 0;
    snprintf(p, sizeof p, "%s/report.md", o.out_dir);
    wrc |= report_write_file(&r, "md", p);
    snprintf(p, sizeof p, "%s/results.json", o.out_dir);
    wrc |= report_write_file(&r, "json", p);
    snprintf(p, sizeof p, "%s/results.csv", o.out_dir);
    wrc |= report_write_file(&r, "csv", p);
    snprintf(p, sizeof p, "%s/plot.svg", o.out_dir);
    wrc |= plot_write_svg(&r, p);
    wrc |= write_outputs(&o, &r);
    if (strcmp(o.out_fmt, "none")) report_write(&r, o.out_fmt, stdout);
    if (!o.quiet) fprintf(stderr, "suite finished in %.1f s; files in %s/\n", r.total_s, o.out_dir);
    report_free(&r);
    return rc || wrc ? 1 : 0;
}

int cmd_quality(int argc, char **argv) {
    bench_opts o;
    if (parse_opts(argc, argv, &o, 1)) return 2;
    bench_report r;
    report_init(&o, &r);
    const double t0 = tool_now_ms();
    quality_options qo = {o.ref_weights, o.asr_cmd, o.frames > 0 ? o.frames : 8, o.threads[o.n_threads - 1],
                          o.seed, NULL, o.backend};
    int rc = 0;
    if (o.n_codec_weights) { /* the codec arm: the decoder alone, against f32 on the same codes */
        for (int mi = 0; mi < o.n_models; mi++)
            if (quality_codec_run(o.models[mi], o.codec_weights, o.n_codec_weights,
                                  o.frames_given && o.frames > 0 ? o.frames : 100,
                                  o.threads[o.n_threads - 1], o.seed, stdout) != 0)
                rc = 1;
        report_free(&r);
        return rc;
    }
    for (int mi = 0; mi < o.n_models; mi++)
        if (quality_run(o.models[mi], o.weights, o.n_weights, o.cases, o.n_cases, &qo, &r)) rc = 1;
    r.total_s = (tool_now_ms() - t0) / 1000.0;
    if (strcmp(o.out_fmt, "none")) report_write(&r, o.out_fmt, stdout);
    if (write_outputs(&o, &r)) rc = 1;
    report_free(&r);
    return rc;
}
