/* qtts command-line tool: shared option parsing and helpers.
 * Exit codes (documented in --help): 0 ok, 2 usage, 3 model, 4 input, 5 I/O,
 * 6 other runtime failure. */
#ifndef QTTS_CLI_H
#define QTTS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "qtts.h"

enum { EXIT_OK = 0, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_INPUT = 4, EXIT_IO = 5, EXIT_RUNTIME = 6 };

#define CLI_MAX_TEXT_BYTES (1 << 20) /* 1 MiB of text per run */

#define CLI_MAX_MODELS 8
#define CLI_MAX_CASTS 64

typedef struct cli_opts {
    const char *model_dir;   /* the last --model */
    const char *models[CLI_MAX_MODELS]; /* every --model, in order (qtts script) */
    int n_models;
    const char *casts[CLI_MAX_CASTS];   /* every --cast value (qtts script) */
    int n_casts;
    const char *text;        /* literal text */
    const char *text_file;   /* file or "-" */
    const char *text_ids;    /* "I I ..." */
    const char *instruct;
    const char *instruct_ids;
    const char *speaker;
    const char *language;
    const char *text_mode;   /* streaming | non-streaming */
    const char *dump_codes;
    const char *output;      /* -o FILE */
    const char *format;      /* wav | flac | raw */
    const char *sample_format; /* s16 | f32 */
    const char *codes_file;  /* qtts decode --codes FILE */
    int to_stdout;           /* raw PCM to standard output */
    int stream;              /* write audio as it is generated */
    int chunk_frames;        /* 0 = library default */
    qtts_split_params split; /* text segments and pauses: --segment-chars, --pause-ms,
                                --paragraph-pause-ms, --no-split (speak, script) */
    const char *ref_audio;   /* voice cloning: reference recording */
    const char *ref_text;    /* its transcript (ICL) */
    const char *ref_text_ids;/* or its ids */
    int xvector_only;        /* speaker embedding only */
    const char *save_voice;  /* write the voice to this file */
    const char *voice;       /* use a saved voice */
    int greedy;
    int have_seed;
    uint64_t seed;
    float temperature, top_p, rep_pen, cp_temperature, cp_top_p;
    int top_k, cp_top_k, max_new_tokens;
    int set_temperature, set_top_p, set_rep_pen, set_cp_temperature, set_cp_top_p, set_top_k, set_cp_top_k;
    qtts_gen_debug debug;    /* --newline-id, --user-id */
    int n_threads;
    int weights;             /* qtts_weight_type for the talker (and predictor) */
    int predictor_weights;   /* qtts_weight_type, -1 = same */
    int codec_weights;       /* qtts_codec_weights of the codec decoder */
    int quiet;
    int alt_regex;
    int no_huge_pages;       /* 1: qtts_model_params.huge_pages = 0 */
    int no_cache;            /* --no-cache: no prepared-weights cache */
    int timing;              /* --timing: one line of start-up times on stderr at the end */
    const char *cache_dir;   /* --cache-dir, else the default (qtts_cache_default_dir); NULL = none */
    char cache_dir_buf[4096];
    int backend;             /* qtts_backend from --backend; -1 = not given (the library default,
                                which honours QTTS_BACKEND) */
    int device;              /* --device N; -1 = not given (default 0 or QTTS_DEVICE) */
} cli_opts;

/* Parse argv[first..argc) into o. Returns 0 or an exit code (message printed). */
int cli_parse(int argc, char **argv, int first, cli_opts *o);

/* Apply --backend / --device to mp (only those given), and the prepared-weights
 * cache folder (--cache-dir, the default, or none with --no-cache). */
void cli_apply_backend(const cli_opts *o, qtts_model_params *mp);

/* Read the text to speak according to o (literal, file or stdin): malloc'ed. */
int cli_read_text(const cli_opts *o, char **text);

/* Parse "I I I" into a malloc'ed id list. Returns 0 or EXIT_USAGE. */
int cli_parse_ids(const char *s, const char *what, int32_t **ids, int *n);

/* Speak standard input as it arrives (--text - with --stdout or --stream):
 * an incremental-text request; audio to on_audio (tools/cli/speak_stdin.c).
 * On failure err holds the message. */
qtts_status cli_speak_stdin(const qtts_model *m, const qtts_gen_params *gp, const qtts_audio_params *ap,
                            qtts_audio_fn on_audio, void *user, size_t *n_samples, char *err, size_t n_err);

/* Parse a codes file read from f (path names it in messages): *codes is
 * malloc'ed [*n_frames][G] (caller frees). Returns 0 or an exit code
 * (EXIT_INPUT for a malformed file, message printed). codes_file.c. */
int cli_read_codes(FILE *f, const char *path, int G, int32_t **codes, int *n_frames);

/* Map a library status to an exit code. */
int cli_exit_code(qtts_status st);

int cmd_cache(int argc, char **argv, int first);

int cmd_speak(int argc, char **argv, int first);
int cmd_tokenize(int argc, char **argv, int first);
int cmd_decode(int argc, char **argv, int first);
int cmd_voices(int argc, char **argv, int first);
int cmd_info(int argc, char **argv, int first);
int cmd_script(int argc, char **argv, int first);

/* Audio output chosen by -o/--format/--sample-format/--stdout. */
typedef struct cli_audio_out {
    qtts_audio_writer *w;
    const char *name;  /* file name or "standard output" */
    const char *path;  /* the file, removed by cli_audio_close when a write failed; NULL for standard output */
    int failed;
} cli_audio_out;
int cli_audio_open(const cli_opts *o, cli_audio_out *out);
int cli_audio_write(cli_audio_out *out, const float *pcm, size_t n);
/* Finish the file; EXIT_IO when a write or the close failed (a full disk, a
 * file-size limit), and then the incomplete file is removed. */
int cli_audio_close(cli_audio_out *out);
void cli_usage(void);

#endif
