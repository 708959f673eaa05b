/* Model configuration: config.json (Qwen3TTSConfig with nested talker_config
 * and code_predictor_config) and generation_config.json, parsed and validated
 * into plain structs. Key names follow the official configuration_qwen3_tts.py. */
#ifndef QTTS_MODEL_CONFIG_H
#define QTTS_MODEL_CONFIG_H

#include "qtts.h"
#include "util/error.h"

/* A Qwen3 decoder stack (talker or code predictor). */
typedef struct tf_config {
    int hidden;      /* model width */
    int inter;       /* SwiGLU width */
    int n_layers;
    int n_heads;     /* query heads */
    int n_kv_heads;  /* key/value heads (GQA) */
    int head_dim;
    int vocab;       /* output vocabulary (codec ids) */
    int max_pos;     /* max_position_embeddings */
    float eps;       /* rms_norm_eps */
    float rope_theta;
} tf_config;

#define CFG_MAX_NAMES 64
#define CFG_NAME_MAX 64

typedef struct name_id {
    char name[CFG_NAME_MAX];    /* key: languages lower-case, speakers as written (matched
                                   case-insensitively either way) */
    int id;                     /* codec id */
    char dialect[CFG_NAME_MAX]; /* speakers: dialect language key or "" */
} name_id;

typedef struct qtts_config {
    qtts_model_type type;
    char type_name[32];   /* tts_model_type */
    char size_name[16];   /* tts_model_size */
    tf_config talker;
    tf_config cp;
    int text_hidden;      /* text_embedding width */
    int text_vocab;       /* text_embedding rows */
    int n_code_groups;    /* 16 */
    /* codec control ids */
    int codec_pad, codec_bos, codec_eos, codec_think, codec_nothink, codec_think_bos, codec_think_eos;
    /* text ids */
    int im_start, im_end, assistant, tts_pad, tts_bos, tts_eos;
    int n_langs;
    name_id langs[CFG_MAX_NAMES];
    int n_speakers;
    name_id speakers[CFG_MAX_NAMES];
    int has_speaker_encoder;
    int spk_enc_dim;
} qtts_config;

/* Sampling defaults (generation_config.json). */
typedef struct gen_config {
    qtts_sampling talker, predictor;
    int max_new_tokens;
} gen_config;

/* Parse dir/config.json. Errors name the file and the key. */
qtts_status config_load(qtts_config *c, const char *dir, qtts_error *e);

/* Parse dir/generation_config.json if present (else official fallbacks). */
qtts_status gen_config_load(gen_config *g, const char *dir, qtts_error *e);

/* Lookups (case-insensitive); -1 / NULL when absent. */
const name_id *config_language(const qtts_config *c, const char *name);
const name_id *config_speaker(const qtts_config *c, const char *name);

#endif
