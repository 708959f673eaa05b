/* config.json / generation_config.json parsing (see config.h). */
#include "model/config.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct jctx {
    const char *file;
    qtts_error *e;
    qtts_status st;
} jctx;

/* Integer field; required unless def_ok (then def is used when absent). */
static int get_int(jctx *j, json_t *obj, const char *path, const char *key, int def_ok, int def, int lo, int hi) {
    if (j->st) return def;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (def_ok) return def;
        j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: missing key %s%s", j->file, path, key);
        return def;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: key %s%s must be an integer in [%d, %d]", j->file, path, key, lo,
                        hi);
        return def;
    }
    return (int)json_integer_value(v);
}

static double get_num(jctx *j, json_t *obj, const char *path, const char *key, int def_ok, double def, double lo,
                      double hi) {
    if (j->st) return def;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (def_ok) return def;
        j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: missing key %s%s", j->file, path, key);
        return def;
    }
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: key %s%s must be a number in [%g, %g]", j->file, path, key, lo, hi);
        return def;
    }
    return json_number_value(v);
}

static json_t *get_obj(jctx *j, json_t *obj, const char *path, const char *key, int optional) {
    if (j->st) return NULL;
    json_t *v = json_object_get(obj, key);
    if ((!v || json_is_null(v)) && optional) return NULL;
    if (!json_is_object(v)) {
        j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: key %s%s must be an object", j->file, path, key);
        return NULL;
    }
    return v;
}

static void parse_tf(jctx *j, json_t *o, const char *path, tf_config *t, int max_vocab) {
    t->hidden = get_int(j, o, path, "hidden_size", 0, 0, 1, 1 << 16);
    t->inter = get_int(j, o, path, "intermediate_size", 0, 0, 1, 1 << 18);
    t->n_layers = get_int(j, o, path, "num_hidden_layers", 0, 0, 1, 1024);
    t->n_heads = get_int(j, o, path, "num_attention_heads", 0, 0, 1, 1024);
    t->n_kv_heads = get_int(j, o, path, "num_key_value_heads", 1, t->n_heads, 1, 1024);
    t->head_dim = get_int(j, o, path, "head_dim", 1, t->n_heads ? t->hidden / t->n_heads : 0, 2, 4096);
    t->vocab = get_int(j, o, path, "vocab_size", 0, 0, 1, max_vocab);
    t->max_pos = get_int(j, o, path, "max_position_embeddings", 1, 32768, 1, 1 << 24);
    t->eps = (float)get_num(j, o, path, "rms_norm_eps", 1, 1e-6, 0, 1);
    t->rope_theta = (float)get_num(j, o, path, "rope_theta", 1, 10000.0, 1, 1e12);
    if (j->st) return;
    if (t->n_heads % t->n_kv_heads != 0 || t->head_dim % 2 != 0)
        j->st = err_set(j->e, QTTS_ERR_FORMAT,
                        "%s: %snum_attention_heads (%d) must be a multiple of num_key_value_heads (%d) and head_dim (%d) even",
                        j->file, path, t->n_heads, t->n_kv_heads, t->head_dim);
    if (!j->st) {
        json_t *act = json_object_get(o, "hidden_act");
        if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
            j->st = err_set(j->e, QTTS_ERR_UNSUPPORTED, "%s: %shidden_act must be \"silu\"", j->file, path);
    }
}

static void lower_copy(char *dst, const char *src, size_t n) {
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = 0;
}

/* A name -> codec id table; names kept as written (lower_case 0) or lower-cased. */
static void parse_table(jctx *j, json_t *o, const char *path, name_id *tab, int *n, int lo, int hi, int lower_case) {
    *n = 0;
    if (!o || j->st) return;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (*n >= CFG_MAX_NAMES || strlen(key) >= CFG_NAME_MAX) {
            j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: %s has too many entries or a key longer than %d", j->file,
                            path, CFG_NAME_MAX - 1);
            return;
        }
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) >= hi) {
            j->st = err_set(j->e, QTTS_ERR_FORMAT, "%s: %s.%s must be a codec id in [%d, %d)", j->file, path, key, lo,
                            hi);
            return;
        }
        if (lower_case) lower_copy(tab[*n].name, key, CFG_NAME_MAX);
        else snprintf(tab[*n].name, CFG_NAME_MAX, "%s", key);
        tab[*n].id = (int)json_integer_value(v);
        tab[*n].dialect[0] = 0;
        (*n)++;
    }
}

qtts_status config_load(qtts_config *c, const char *dir, qtts_error *e) {
    memset(c, 0, sizeof *c);
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(file, 0, &jerr);
    if (!root) {
        FILE *f = fopen(file, "rb");
        if (!f) return err_set(e, QTTS_ERR_IO, "%s: cannot open (is %s a Qwen3-TTS model folder?)", file, dir);
        fclose(f);
        return err_set(e, QTTS_ERR_FORMAT, "%s: line %d column %d: %s", file, jerr.line, jerr.column, jerr.text);
    }
    jctx j = {file, e, QTTS_OK};
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: top level is not a JSON object", file);
    }
    json_t *mt = json_object_get(root, "tts_model_type");
    if (!json_is_string(mt)) {
        j.st = err_set(e, QTTS_ERR_FORMAT, "%s: missing key tts_model_type (is this a Qwen3-TTS checkpoint?)", file);
    } else {
        const char *s = json_string_value(mt);
        if (strcmp(s, "base") == 0) c->type = QTTS_MODEL_BASE;
        else if (strcmp(s, "custom_voice") == 0) c->type = QTTS_MODEL_CUSTOM_VOICE;
        else if (strcmp(s, "voice_design") == 0) c->type = QTTS_MODEL_VOICE_DESIGN;
        else j.st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: tts_model_type \"%s\" is not one of base, custom_voice, voice_design", file, s);
        snprintf(c->type_name, sizeof c->type_name, "%s", s);
    }
    json_t *tt = json_object_get(root, "tokenizer_type");
    if (!j.st && tt && json_is_string(tt) && strcmp(json_string_value(tt), "qwen3_tts_tokenizer_12hz") != 0)
        j.st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: tokenizer_type \"%s\" is not supported (only the 12 Hz family)",
                       file, json_string_value(tt));
    json_t *sz = json_object_get(root, "tts_model_size");
    snprintf(c->size_name, sizeof c->size_name, "%s", json_is_string(sz) ? json_string_value(sz) : "");

    json_t *tk = get_obj(&j, root, "", "talker_config", 0);
    if (tk) {
        parse_tf(&j, tk, "talker_config.", &c->talker, 1 << 20);
        c->text_hidden = get_int(&j, tk, "talker_config.", "text_hidden_size", 0, 0, 1, 1 << 16);
        c->text_vocab = get_int(&j, tk, "talker_config.", "text_vocab_size", 0, 0, 1, 1 << 24);
        c->n_code_groups = get_int(&j, tk, "talker_config.", "num_code_groups", 0, 0, 2, 64);
        const int V = c->talker.vocab;
        c->codec_pad = get_int(&j, tk, "talker_config.", "codec_pad_id", 0, 0, 0, V - 1);
        c->codec_bos = get_int(&j, tk, "talker_config.", "codec_bos_id", 0, 0, 0, V - 1);
        c->codec_eos = get_int(&j, tk, "talker_config.", "codec_eos_token_id", 0, 0, 0, V - 1);
        c->codec_think = get_int(&j, tk, "talker_config.", "codec_think_id", 0, 0, 0, V - 1);
        c->codec_nothink = get_int(&j, tk, "talker_config.", "codec_nothink_id", 0, 0, 0, V - 1);
        c->codec_think_bos = get_int(&j, tk, "talker_config.", "codec_think_bos_id", 0, 0, 0, V - 1);
        c->codec_think_eos = get_int(&j, tk, "talker_config.", "codec_think_eos_id", 0, 0, 0, V - 1);
        parse_table(&j, get_obj(&j, tk, "talker_config.", "codec_language_id", 1), "talker_config.codec_language_id",
                    c->langs, &c->n_langs, 0, V, 1);
        parse_table(&j, get_obj(&j, tk, "talker_config.", "spk_id", 1), "talker_config.spk_id", c->speakers,
                    &c->n_speakers, 0, V, 0);
        json_t *dia = get_obj(&j, tk, "talker_config.", "spk_is_dialect", 1);
        for (int i = 0; dia && !j.st && i < c->n_speakers; i++) {
            json_t *v = NULL;
            const char *key;
            json_t *x;
            json_object_foreach(dia, key, x) {
                if (strcasecmp(key, c->speakers[i].name) == 0) v = x;
            }
            if (v && json_is_string(v)) lower_copy(c->speakers[i].dialect, json_string_value(v), CFG_NAME_MAX);
        }
        json_t *cp = get_obj(&j, tk, "talker_config.", "code_predictor_config", 0);
        if (cp) parse_tf(&j, cp, "talker_config.code_predictor_config.", &c->cp, 1 << 20);
        json_t *rs = json_object_get(tk, "rope_scaling");
        if (!j.st && rs && json_is_object(rs)) {
            json_t *il = json_object_get(rs, "interleaved");
            json_t *ty = json_object_get(rs, "rope_type");
            if ((ty && json_is_string(ty) && strcmp(json_string_value(ty), "default") != 0) ||
                (il && !json_is_boolean(il)))
                j.st = err_set(e, QTTS_ERR_UNSUPPORTED,
                               "%s: talker_config.rope_scaling: only rope_type \"default\" is supported", file);
        }
    }
    c->im_start = get_int(&j, root, "", "im_start_token_id", 0, 0, 0, c->text_vocab - 1);
    c->im_end = get_int(&j, root, "", "im_end_token_id", 0, 0, 0, c->text_vocab - 1);
    c->assistant = get_int(&j, root, "", "assistant_token_id", 1, -1, 0, c->text_vocab - 1);
    c->tts_pad = get_int(&j, root, "", "tts_pad_token_id", 0, 0, 0, c->text_vocab - 1);
    c->tts_bos = get_int(&j, root, "", "tts_bos_token_id", 0, 0, 0, c->text_vocab - 1);
    c->tts_eos = get_int(&j, root, "", "tts_eos_token_id", 0, 0, 0, c->text_vocab - 1);
    json_t *se = get_obj(&j, root, "", "speaker_encoder_config", 1);
    if (se) {
        c->has_speaker_encoder = 1;
        c->spk_enc_dim = get_int(&j, se, "speaker_encoder_config.", "enc_dim", 1, c->talker.hidden, 1, 1 << 16);
    }
    if (!j.st && c->type == QTTS_MODEL_BASE && !c->has_speaker_encoder)
        c->spk_enc_dim = c->talker.hidden;
    if (!j.st && c->type == QTTS_MODEL_CUSTOM_VOICE && c->n_speakers == 0)
        j.st = err_set(e, QTTS_ERR_FORMAT, "%s: a custom_voice model needs talker_config.spk_id", file);
    if (!j.st && c->cp.vocab > c->talker.vocab)
        j.st = err_set(e, QTTS_ERR_FORMAT, "%s: code predictor vocab_size exceeds the talker's", file);
    if (!j.st && c->spk_enc_dim && c->spk_enc_dim != c->talker.hidden)
        j.st = err_set(e, QTTS_ERR_FORMAT, "%s: speaker_encoder_config.enc_dim (%d) must equal talker hidden_size (%d)",
                       file, c->spk_enc_dim, c->talker.hidden);
    json_decref(root);
    return j.st;
}

qtts_status gen_config_load(gen_config *g, const char *dir, qtts_error *e) {
    /* official wrapper fallbacks */
    g->talker = (qtts_sampling){1, 0.9f, 50, 1.0f, 1.05f};
    g->predictor = (qtts_sampling){1, 0.9f, 50, 1.0f, 1.0f};
    g->max_new_tokens = 2048;
    char file[4096];
    snprintf(file, sizeof file, "%s/generation_config.json", dir);
    FILE *f = fopen(file, "rb");
    if (!f) return QTTS_OK;
    fclose(f);
    json_error_t jerr;
    json_t *root = json_load_file(file, 0, &jerr);
    if (!root) return err_set(e, QTTS_ERR_FORMAT, "%s: line %d column %d: %s", file, jerr.line, jerr.column, jerr.text);
    jctx j = {file, e, QTTS_OK};
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, QTTS_ERR_FORMAT, "%s: top level is not a JSON object", file);
    }
    const char *bkeys[2] = {"do_sample", "subtalker_dosample"};
    int *bdst[2] = {&g->talker.do_sample, &g->predictor.do_sample};
    for (int i = 0; i < 2 && !j.st; i++) {
        json_t *v = json_object_get(root, bkeys[i]);
        if (!v || json_is_null(v)) continue;
        if (json_is_boolean(v)) *bdst[i] = json_is_true(v);
        else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
            *bdst[i] = (int)json_integer_value(v);
        else j.st = err_set(e, QTTS_ERR_FORMAT, "%s: key %s must be true or false", file, bkeys[i]);
    }
    g->talker.temperature = (float)get_num(&j, root, "", "temperature", 1, 0.9, 1e-6, 100);
    g->talker.top_k = get_int(&j, root, "", "top_k", 1, 50, 0, 1 << 20);
    g->talker.top_p = (float)get_num(&j, root, "", "top_p", 1, 1.0, 1e-6, 1.0);
    g->talker.repetition_penalty = (float)get_num(&j, root, "", "repetition_penalty", 1, 1.05, 1e-6, 100);
    g->predictor.temperature = (float)get_num(&j, root, "", "subtalker_temperature", 1, 0.9, 1e-6, 100);
    g->predictor.top_k = get_int(&j, root, "", "subtalker_top_k", 1, 50, 0, 1 << 20);
    g->predictor.top_p = (float)get_num(&j, root, "", "subtalker_top_p", 1, 1.0, 1e-6, 1.0);
    g->max_new_tokens = get_int(&j, root, "", "max_new_tokens", 1, 2048, 1, 1 << 24);
    json_decref(root);
    return j.st;
}

static const name_id *find(const name_id *t, int n, const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < n; i++)
        if (strcasecmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

const name_id *config_language(const qtts_config *c, const char *name) { return find(c->langs, c->n_langs, name); }
const name_id *config_speaker(const qtts_config *c, const char *name) { return find(c->speakers, c->n_speakers, name); }
