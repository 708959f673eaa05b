/* Internal definition of qtts_model and helpers shared by the library's files.
 * Not part of the public API. A model is immutable after qtts_model_load: the
 * calls that use it take a const qtts_model * and keep their errors in their
 * own objects or the caller's buffer, so any number of threads may use one
 * model at once. The worker pool (ops) and the lent worker (lend, under its
 * mutex) synchronise themselves. */
#ifndef QTTS_MODEL_MODEL_H
#define QTTS_MODEL_MODEL_H

#include "model/code_predictor.h"
#include "model/codec_decoder.h"
#include "model/codec_encoder.h"
#include "model/speaker_encoder.h"
#include "model/config.h"
#include "model/talker.h"
#include "model/text_tokenizer.h"
#include "util/huge_arena.h"
#include "model/weights_cache.h"

typedef struct lmv_model lmv_model;

#include <pthread.h>

struct qtts_model {
    char *dir;                 /* checkpoint folder */
    qtts_model_params params;
    qtts_config cfg;
    gen_config gen;            /* generation_config.json */
    st_set st;                 /* model.safetensors (mmap) */
    huge_arena weights_arena;  /* the per-frame matrices, quantised or as stored (huge pages) */
    ops_ctx ops;
    talker_weights talker;
    cp_weights cp;
    text_tokenizer *tok;       /* NULL when the folder has no tokenizer files */
    codec_decoder *codec;      /* speech_tokenizer/ decoder; NULL if not loaded */
    codec_encoder *codec_enc;  /* speech_tokenizer/ encoder (Base, ICL cloning); NULL otherwise */
    speaker_encoder *spk_enc;  /* x-vector encoder (Base); NULL otherwise */
    char tok_missing[512];     /* why tok is NULL */
    int newline_id;            /* id of "\n" (198 in the Qwen vocabulary) */
    int n_lang_list;           /* "auto" + user-selectable languages */
    const char *lang_list[CFG_MAX_NAMES + 1];
    int64_t n_params, weight_bytes;
    int64_t talker_bytes, predictor_bytes; /* weight bytes read per frame */
    int64_t lm_bytes_in_use;               /* talker + predictor weights synthesis reads, each once */
    const char *weight_dtype;
    const char *talker_format, *predictor_format; /* "native", "q8", "q4" */
    lmv_model *lmv;            /* the language model on the Vulkan device; NULL on the CPU backend */
    double load_ms, prepare_ms;           /* qtts_model_load, and of it the matrices' preparation */
    wcache_map wcache;         /* the prepared-weights cache file the matrices point into, if mapped */
    char cache_path[4096];     /* its path (or the one written) */
    char cache_status[4200];   /* "off ...", "mapped PATH", "written PATH", "not written (PATH)" */
};

/* Send a formatted message to the model's log callback (if any). */
void model_log(const qtts_model *m, qtts_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Tokenize with the model's tokenizer; QTTS_ERR_UNSUPPORTED with a clear
 * message when the folder has no tokenizer files. */
qtts_status model_tokenize(const qtts_model *m, const char *text, int32_t **ids, int *n, qtts_error *e);

/* Tokenize pre + text + post (the user's text inside a chat template) as one
 * string. Invalid UTF-8 in text is reported as "<what> is not valid UTF-8 at
 * byte offset N", N counted in text, not in the wrapped string. */
qtts_status model_tokenize_tpl(const qtts_model *m, const char *pre, const char *text, const char *post,
                               const char *what, int32_t **ids, int *n, qtts_error *e);

#endif
