/* qtts voices / qtts info: describe a checkpoint folder, and with --backend
 * the compute devices of that backend (qtts_backend_devices); qtts cache:
 * list or clear the prepared-weights cache files. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static qtts_model *load_quiet(const char *dir, const cli_opts *o, int *rc) {
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = o->n_threads;
    cli_apply_backend(o, &mp);
    mp.weights = (qtts_weight_type)o->weights;
    mp.predictor_weights = (qtts_weight_type)o->predictor_weights;
    qtts_model *m = NULL;
    char err[1024];
    qtts_status s = qtts_model_load(&m, dir, &mp, err, sizeof err);
    if (s) {
        fprintf(stderr, "qtts: %s\n", err);
        *rc = s == QTTS_ERR_NOMEM ? EXIT_RUNTIME : EXIT_MODEL;
        return NULL;
    }
    *rc = 0;
    return m;
}

int cmd_voices(int argc, char **argv, int first) {
    cli_opts o;
    int rc = cli_parse(argc, argv, first, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.model_dir) {
        fprintf(stderr, "qtts voices: needs --model DIR\n");
        return EXIT_USAGE;
    }
    qtts_model *m = load_quiet(o.model_dir, &o, &rc);
    if (!m) return rc;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    printf("model: %s (%s)\n", info.type_name, info.size_name);
    if (info.type == QTTS_MODEL_CUSTOM_VOICE) {
        printf("speakers (--speaker):\n");
        for (int i = 0; i < qtts_model_n_speakers(m); i++) {
            const char *d = qtts_model_speaker_dialect(m, i);
            printf("  %s%s%s%s\n", qtts_model_speaker(m, i), d ? "  (speaks " : "", d ? d : "",
                   d ? " with --language chinese or auto)" : "");
        }
        if (!strcmp(info.size_name, "1b7")) printf("instructions (--instruct): supported\n");
        else printf("instructions: not supported by the 0.6B CustomVoice model (ignored with a warning)\n");
    } else if (info.type == QTTS_MODEL_BASE) {
        printf("voices: cloned from a recording (--ref-audio F with --ref-text STR or --xvector-only), or a saved voice (--voice F)\n");
    } else {
        printf("voices: described in words (--instruct \"a calm, low female voice\")\n");
    }
    printf("languages (--language):\n");
    for (int i = 0; i < qtts_model_n_languages(m); i++) printf("  %s\n", qtts_model_language(m, i));
    qtts_model_free(m);
    return 0;
}

static void show_file(const char *dir, const char *name) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &sb) == 0) printf("  %-40s %12lld bytes\n", name, (long long)sb.st_size);
    else printf("  %-40s missing\n", name);
}

static void show_cache_file(const char *path, long long bytes, void *u) {
    (void)u;
    printf("  %s %12lld bytes\n", path, bytes);
}

/* The devices of backend b, one block each. Returns 0 or an exit code. */
static int show_devices(qtts_backend b) {
    enum { MAX_DEVICES = 16 };
    qtts_device_info dev[MAX_DEVICES];
    int n = 0;
    char err[1024] = "";
    qtts_status st = qtts_backend_devices(b, dev, MAX_DEVICES, &n, err, sizeof err);
    if (st) {
        fprintf(stderr, "qtts info: backend %s: %s\n", qtts_backend_name(b), err[0] ? err : qtts_status_str(st));
        return cli_exit_code(st);
    }
    printf("backend:         %s, %d device%s\n", qtts_backend_name(b), n, n == 1 ? "" : "s");
    for (int i = 0; i < n && i < MAX_DEVICES; i++) {
        const qtts_device_info *d = &dev[i];
        printf("device %d:\n", i);
        printf("  name:          %s\n", d->name);
        printf("  type:          %s\n", d->type);
        if (b == QTTS_BACKEND_CPU) { /* the host: nothing of a GPU's to show */
            printf("  usable:        %s%s\n", d->usable ? "yes" : "no: ", d->usable ? "" : d->why_not);
            continue;
        }
        printf("  driver:        %s\n", d->driver);
        printf("  api version:   %u.%u.%u\n", (d->api_version >> 22) & 0x7Fu, (d->api_version >> 12) & 0x3FFu,
               d->api_version & 0xFFFu);
        printf("  memory:        %.2f GiB\n", d->memory_bytes / 1073741824.0);
        printf("  subgroup size: %u\n", d->subgroup_size);
        printf("  int8 dot:      %s\n", d->int8_dot ? "yes" : "no");
        printf("  fp16:          %s\n", d->fp16 ? "yes" : "no");
        printf("  int8 storage:  %s\n", d->int8_storage ? "yes" : "no");
        printf("  max buffer:    %.0f MiB (largest binding)\n", d->max_buffer_range / 1048576.0);
        printf("  usable:        %s%s\n", d->usable ? "yes" : "no: ", d->usable ? "" : d->why_not);
    }
    if (n > MAX_DEVICES) printf("(%d more devices not shown)\n", n - MAX_DEVICES);
    return 0;
}

int cmd_info(int argc, char **argv, int first) {
    cli_opts o;
    int rc = cli_parse(argc, argv, first, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.model_dir && o.backend < 0) {
        fprintf(stderr, "qtts info: needs --model DIR or --backend cpu|vulkan\n");
        return EXIT_USAGE;
    }
    if (o.backend >= 0) {
        if ((rc = show_devices((qtts_backend)o.backend))) return rc;
        if (!o.model_dir) return 0;
        printf("\n");
    }
    qtts_model *m = load_quiet(o.model_dir, &o, &rc);
    if (!m) return rc;
    qtts_model_info in;
    qtts_model_get_info(m, &in);
    printf("folder:          %s\n", o.model_dir);
    printf("variant:         %s, size %s\n", in.type_name, in.size_name);
    printf("talker:          %d layers, hidden %d\n", in.n_layers, in.hidden_size);
    printf("code predictor:  %d layers, hidden %d\n", in.cp_n_layers, in.cp_hidden_size);
    printf("codec:           %d codebooks x %d codes, %d Hz, %d samples per frame%s\n", in.n_code_groups,
           in.codebook_size, in.sample_rate_hz, in.samples_per_frame, in.has_codec ? "" : " (decoder not loaded)");
    printf("weights:         %lld parameters, %.1f MiB, mostly %s\n", (long long)in.n_params,
           in.weight_bytes / 1048576.0, in.weight_dtype);
    printf("in memory:       talker %s, code predictor %s; %.1f MiB read per frame (talker %.1f, predictor %.1f)\n",
           in.talker_format, in.predictor_format, (in.talker_bytes + in.predictor_bytes) / 1048576.0,
           in.talker_bytes / 1048576.0, in.predictor_bytes / 1048576.0);
    printf("weights in use:  %.1f MiB (each matrix, table and the codec decoder once; codec %.1f)\n",
           in.weight_bytes_in_use / 1048576.0, in.codec_bytes / 1048576.0);
    printf("kernels:         %s, %d thread(s)\n", in.kernels, in.n_threads);
    if (in.backend == QTTS_BACKEND_CPU) printf("backend:         cpu\n");
    else
        printf("backend:         %s, device %s (driver %s)\n", qtts_backend_name(in.backend),
               in.device_name ? in.device_name : "?", in.device_driver ? in.device_driver : "?");
    printf("device memory:   %.1f MiB allocated, %.1f MiB reserved%s\n", in.device_bytes_allocated / 1048576.0,
           in.device_bytes_reserved / 1048576.0, in.backend == QTTS_BACKEND_CPU ? " (none on the CPU backend)" : "");
    printf("tokenizer:       %s\n", in.has_tokenizer ? "yes" : "no (text must be given as ids)");
    printf("speaker encoder: %s\n", in.has_speaker_encoder ? "yes" : "no");
    printf("files:\n");
    const char *files[] = {"config.json", "generation_config.json", "model.safetensors", "vocab.json", "merges.txt",
                           "tokenizer_config.json", "speech_tokenizer/config.json", "speech_tokenizer/model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) show_file(o.model_dir, files[i]);
    printf("weights cache:   %s\n", in.weights_cache);
    if (o.cache_dir && !o.no_cache) {
        printf("cache files:     in %s\n", o.cache_dir);
        if (qtts_cache_list(o.cache_dir, o.model_dir, show_cache_file, NULL) <= 0) printf("  (none)\n");
    }
    qtts_model_free(m);
    return 0;
}

int cmd_cache(int argc, char **argv, int first) {
    if (first >= argc || (strcmp(argv[first], "clear") && strcmp(argv[first], "list"))) {
        fprintf(stderr, "qtts cache: clear or list [--model DIR] [--cache-dir DIR]\n");
        return EXIT_USAGE;
    }
    const int clear = !strcmp(argv[first], "clear");
    cli_opts o;
    int rc = cli_parse(argc, argv, first + 1, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.cache_dir) {
        fprintf(stderr, "qtts cache: no cache folder (set --cache-dir, XDG_CACHE_HOME or HOME)\n");
        return EXIT_USAGE;
    }
    if (!clear) {
        int n = qtts_cache_list(o.cache_dir, o.model_dir, show_cache_file, NULL);
        if (n <= 0) printf("no cache files in %s\n", o.cache_dir);
        return 0;
    }
    int n = qtts_cache_clear(o.cache_dir, o.model_dir);
    if (n < 0) printf("no cache folder %s: nothing to clear\n", o.cache_dir);
    else printf("removed %d cache file%s from %s\n", n, n == 1 ? "" : "s", o.cache_dir);
    return 0;
}
