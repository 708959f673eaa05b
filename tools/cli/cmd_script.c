/* qtts script: render a multi-speaker script ("NAME: line" per line) into one
 * audio file. Each NAME is cast (--cast NAME=VOICE) as a preset speaker of a
 * CustomVoice model, a saved clone voice of a Base model, or a description for
 * a VoiceDesign model; several --model options may be loaded at once. Turns
 * are streamed to the output one after another with a paragraph's pause
 * (--paragraph-pause-ms); a long turn is split into segments as qtts speak
 * splits text. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"


typedef enum { CAST_SPEAKER, CAST_VOICE, CAST_DESIGN } cast_kind;

typedef struct cast {
    char name[64];
    char value[1024];
    cast_kind kind;
    int model;          /* index into the loaded models */
    qtts_voice *voice;  /* CAST_VOICE */
    int used;
} cast;

typedef struct turn {
    int cast;
    int line;
    char *text;
} turn;

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    size_t b = 0;
    while (isspace((unsigned char)s[b])) b++;
    memmove(s, s + b, n - b + 1);
}

/* Split one --cast value into NAME=VOICE entries: a comma starts a new entry
 * only when what follows looks like NAME= (so descriptions may hold commas). */
static int parse_casts(const char *v, cast *c, int *n, int max) {
    const char *p = v;
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq) {
            fprintf(stderr, "qtts script: --cast entries are NAME=VOICE, got \"%s\"\n", p);
            return EXIT_USAGE;
        }
        const char *end = eq + 1;
        for (;;) {
            const char *comma = strchr(end, ',');
            if (!comma) {
                end += strlen(end);
                break;
            }
            const char *q = comma + 1;
            while (*q == ' ') q++;
            const char *r = q;
            while (*r && (isalnum((unsigned char)*r) || *r == '_' || *r == '-' || *r == ' ' || (unsigned char)*r >= 0x80)) r++;
            if (*r == '=' && r > q) {
                end = comma;
                break;
            }
            end = comma + 1;
        }
        if (*n == max) {
            fprintf(stderr, "qtts script: at most %d cast entries\n", max);
            return EXIT_USAGE;
        }
        cast *k = &c[(*n)++];
        memset(k, 0, sizeof *k);
        snprintf(k->name, sizeof k->name, "%.*s", (int)(eq - p), p);
        snprintf(k->value, sizeof k->value, "%.*s", (int)(end - eq - 1), eq + 1);
        trim(k->name);
        trim(k->value);
        if (!k->name[0] || !k->value[0]) {
            fprintf(stderr, "qtts script: empty name or voice in --cast \"%s\"\n", v);
            return EXIT_USAGE;
        }
        for (int i = 0; i < *n - 1; i++)
            if (!strcasecmp(c[i].name, k->name)) {
                fprintf(stderr, "qtts script: %s is cast twice\n", k->name);
                return EXIT_USAGE;
            }
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int find_cast(const cast *c, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcasecmp(c[i].name, name)) return i;
    return -1;
}

/* Resolve each cast entry to a loaded model. */
static int resolve_casts(cast *c, int n, qtts_model **models, int n_models) {
    for (int i = 0; i < n; i++) {
        cast *k = &c[i];
        const char *v = k->value;
        int forced = -1;
        if (!strncmp(v, "speaker:", 8)) forced = CAST_SPEAKER, v += 8;
        else if (!strncmp(v, "voice:", 6)) forced = CAST_VOICE, v += 6;
        else if (!strncmp(v, "design:", 7)) forced = CAST_DESIGN, v += 7;
        memmove(k->value, v, strlen(v) + 1);
        trim(k->value);
        k->model = -1;
        char why[2048] = "";
        for (int m = 0; m < n_models && k->model < 0 && (forced < 0 || forced == CAST_SPEAKER); m++)
            for (int s = 0; s < qtts_model_n_speakers(models[m]); s++)
                if (!strcasecmp(qtts_model_speaker(models[m], s), k->value)) {
                    k->kind = CAST_SPEAKER;
                    k->model = m;
                }
        struct stat sb;
        if (k->model < 0 && (forced < 0 || forced == CAST_VOICE) && stat(k->value, &sb) == 0) {
            for (int m = 0; m < n_models && k->model < 0; m++) {
                qtts_model_info in;
                qtts_model_get_info(models[m], &in);
                if (in.type != QTTS_MODEL_BASE) continue;
                char err[1024];
                if (qtts_voice_load(models[m], k->value, &k->voice, err, sizeof err) == QTTS_OK) {
                    k->kind = CAST_VOICE;
                    k->model = m;
                } else {
                    snprintf(why, sizeof why, " (%s)", err);
                }
            }
            if (k->model < 0 && !why[0]) snprintf(why, sizeof why, " (a saved voice needs a Base --model)");
        }
        for (int m = 0; m < n_models && k->model < 0 && (forced < 0 || forced == CAST_DESIGN) && !why[0]; m++) {
            qtts_model_info in;
            qtts_model_get_info(models[m], &in);
            if (in.type == QTTS_MODEL_VOICE_DESIGN) {
                k->kind = CAST_DESIGN;
                k->model = m;
            }
        }
        if (k->model < 0) {
            fprintf(stderr,
                    "qtts script: cannot cast %s as \"%s\"%s: it is not a preset speaker of a loaded CustomVoice model, "
                    "not a saved voice for a loaded Base model, and no VoiceDesign model is loaded to use it as a "
                    "description\n",
                    k->name, k->value, why);
            return EXIT_INPUT;
        }
    }
    return 0;
}

/* Parse the script into turns; unknown names are collected and reported. */
static int parse_script(const char *text, cast *c, int nc, turn **out, int *n_out) {
    int cap = 64, n = 0, rc = 0, line_no = 0, open_turn = 0;
    turn *t = malloc(sizeof(turn) * cap);
    char unknown[2048] = "";
    size_t ul = 0;
    const char *p = text;
    while (t && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = malloc(len + 1);
        if (!line) break;
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (nl ? 1 : 0);
        line_no++;
        trim(line);
        if (!line[0]) {
            open_turn = 0;
            free(line);
            continue;
        }
        if (line[0] == '#') {
            free(line);
            continue;
        }
        char *colon = strchr(line, ':');
        char *fw = strstr(line, "\xef\xbc\x9a"); /* full-width colon */
        size_t sep = 1;
        if (fw && (!colon || fw < colon)) colon = fw, sep = 3;
        int k = -1;
        if (colon && colon - line < 64) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(colon - line), line);
            trim(name);
            k = find_cast(c, nc, name);
            if (k < 0 && name[0] && !strchr(name, ' ')) {
                ul += snprintf(unknown + ul, ul < sizeof unknown ? sizeof unknown - ul : 0, "%s%s (line %d)", ul ? ", " : "",
                               name, line_no);
                rc = EXIT_INPUT;
                free(line);
                continue;
            }
        }
        if (k >= 0) {
            if (n == cap) {
                cap *= 2;
                turn *nt = realloc(t, sizeof(turn) * cap);
                if (!nt) {
                    free(line);
                    break;
                }
                t = nt;
            }
            char *body = colon + sep;
            trim(body);
            t[n].cast = k;
            t[n].line = line_no;
            t[n].text = strdup(body);
            c[k].used = 1;
            n++;
            open_turn = 1;
        } else if (open_turn && n > 0) {
            size_t a = strlen(t[n - 1].text), b = strlen(line);
            char *m = realloc(t[n - 1].text, a + b + 2);
            if (m) {
                m[a] = ' ';
                memcpy(m + a + 1, line, b + 1);
                t[n - 1].text = m;
            }
        } else {
            fprintf(stderr, "qtts script: line %d: expected \"NAME: text\"\n", line_no);
            rc = EXIT_INPUT;
        }
        free(line);
    }
    if (unknown[0]) {
        char names[1024] = "";
        size_t k = 0;
        for (int i = 0; i < nc; i++) k += snprintf(names + k, k < sizeof names ? sizeof names - k : 0, "%s%s", i ? ", " : "", c[i].name);
        fprintf(stderr, "qtts script: not in the cast: %s; cast: %s (add --cast NAME=VOICE)\n", unknown, names);
    }
    if (!rc && n == 0) {
        fprintf(stderr, "qtts script: the script has no lines to speak\n");
        rc = EXIT_INPUT;
    }
    *out = t;
    *n_out = n;
    return rc;
}

static int write_chunk(const float *pcm, size_t n, void *user) { return cli_audio_write(user, pcm, n); }

static void log_stderr(qtts_log_level level, const char *msg, void *user) {
    if (level <= QTTS_LOG_WARN && !*(const int *)user) fprintf(stderr, "qtts: %s%s\n", level == QTTS_LOG_ERROR ? "error: " : "warning: ", msg);
}

int cmd_script(int argc, char **argv, int first) {
    if (first >= argc || argv[first][0] == '-') {
        fprintf(stderr, "qtts script: usage: qtts script FILE --model DIR --cast NAME=VOICE,... -o OUT\n");
        return EXIT_USAGE;
    }
    const char *file = argv[first];
    cli_opts o;
    int rc = cli_parse(argc, argv, first + 1, &o);
    float *silence = NULL; /* the pause between turns */
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.n_models || !o.n_casts || (!o.output && !o.to_stdout)) {
        fprintf(stderr, "qtts script: needs --model DIR, --cast NAME=VOICE and -o OUT (or --stdout)\n");
        return EXIT_USAGE;
    }
    cast casts[CLI_MAX_CASTS];
    int nc = 0;
    for (int i = 0; i < o.n_casts && !rc; i++) rc = parse_casts(o.casts[i], casts, &nc, CLI_MAX_CASTS);
    if (rc) return rc;
    cli_opts to = o;
    to.text = NULL;
    to.text_file = file;
    char *text = NULL;
    if ((rc = cli_read_text(&to, &text))) return rc;
    turn *turns = NULL;
    int nt = 0;
    qtts_model *models[CLI_MAX_MODELS] = {0};
    qtts_context *ctxs[CLI_MAX_MODELS] = {0};
    cli_audio_out ao;
    memset(&ao, 0, sizeof ao);
    if ((rc = parse_script(text, casts, nc, &turns, &nt))) goto out;
    for (int m = 0; m < o.n_models; m++) {
        qtts_model_params mp = qtts_model_default_params();
        mp.n_threads = o.n_threads;
        cli_apply_backend(&o, &mp);
        mp.weights = (qtts_weight_type)o.weights;
        mp.predictor_weights = (qtts_weight_type)o.predictor_weights;
        mp.huge_pages = !o.no_huge_pages;
        mp.codec_weights = (qtts_codec_weights)o.codec_weights;
        mp.log = log_stderr;
        mp.log_user = &o.quiet;
        char err[1024];
        qtts_status s = qtts_model_load(&models[m], o.models[m], &mp, err, sizeof err);
        if (!s) s = qtts_context_new(models[m], NULL, &ctxs[m], err, sizeof err);
        if (s) {
            fprintf(stderr, "qtts: %s\n", err);
            rc = EXIT_MODEL;
            goto out;
        }
    }
    if ((rc = resolve_casts(casts, nc, models, o.n_models))) goto out;
    for (int i = 0; i < nc; i++)
        if (!casts[i].used && !o.quiet) fprintf(stderr, "qtts script: warning: %s is cast but has no lines\n", casts[i].name);
    if ((rc = cli_audio_open(&o, &ao))) goto out;
    const int progress = !o.quiet && isatty(STDERR_FILENO);
    const size_t n_pause = (size_t)o.split.paragraph_pause_ms * 24; /* between turns: a paragraph's pause */
    silence = calloc(n_pause ? n_pause : 1, sizeof(float));
    if (!silence) {
        fprintf(stderr, "qtts script: out of memory\n");
        rc = EXIT_IO;
        goto out;
    }
    for (int i = 0; i < nt && !rc; i++) {
        const cast *k = &casts[turns[i].cast];
        qtts_model *m = models[k->model];
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.text = turns[i].text;
        if (o.language) gp.language = o.language;
        if (k->kind == CAST_SPEAKER) gp.speaker = k->value;
        else if (k->kind == CAST_VOICE) gp.voice = k->voice;
        else gp.instruct = k->value;
        if (o.greedy) gp.talker.do_sample = gp.predictor.do_sample = 0;
        gp.seed = (o.have_seed ? o.seed : 0) + (uint64_t)i;
        if (o.max_new_tokens) {
            gp.max_new_tokens = o.max_new_tokens;
            gp.auto_length_cap = 0;
        }
        if (progress) fprintf(stderr, "\r\033[Kqtts script: turn %d/%d  %s", i + 1, nt, k->name);
        qtts_audio_params ap = qtts_audio_default_params();
        ap.split = o.split;
        qtts_status s = qtts_synthesize(ctxs[k->model], &gp, &ap, write_chunk, &ao, NULL, NULL);
        if (s) {
            if (!ao.failed) fprintf(stderr, "\nqtts script: line %d (%s): %s\n", turns[i].line, k->name, qtts_context_last_error(ctxs[k->model]));
            rc = ao.failed ? EXIT_IO : cli_exit_code(s);
            break;
        }
        if (i + 1 < nt && cli_audio_write(&ao, silence, n_pause)) rc = EXIT_IO;
    }
    if (progress) fprintf(stderr, "\r\033[K");
    if (!rc && progress) fprintf(stderr, "qtts script: %d turns by %d voices -> %s\n", nt, nc, ao.name);
out:
    if (ao.w) {
        int wrc = cli_audio_close(&ao);
        if (!rc) rc = wrc;
    }
    for (int i = 0; i < nt; i++) free(turns[i].text);
    free(turns);
    free(silence);
    for (int i = 0; i < nc; i++) qtts_voice_free(casts[i].voice);
    for (int m = 0; m < CLI_MAX_MODELS; m++) {
        qtts_context_free(ctxs[m]);
        qtts_model_free(models[m]);
    }
    free(text);
    return rc;
}
