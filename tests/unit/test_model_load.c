/* Unit test of qtts_model_load and request validation through the public API
 * (include/qtts.h): broken checkpoint folders (missing folder, no weights, a
 * tensor missing / with a wrong shape / with an integer dtype, truncated
 * weights, a config that disagrees with the weights) must fail with the right
 * status and a message naming the folder or file and the tensor; a valid load
 * of the custom_voice test checkpoint must describe itself correctly; bad
 * generation requests must fail before any compute with a message that says
 * what is valid, kept as the context's last error; invalid UTF-8 is reported
 * at its offset in the caller's text; speaker names keep the checkpoint's
 * spelling. Broken folders are written to a mkdtemp() folder under /tmp. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qtts.h"
#include "test.h"
#include "test_tmp.h"

static const int32_t k_text_ids[8] = {17, 300, 45, 999, 2, 511, 64, 8}; /* custom_voice prompts.json */
#define NEWLINE_ID 10

/* an address no API call returns: out-parameters must be overwritten */
static char g_sentinel[8];

static int copy_file(const char *src, const char *dst) {
    size_t n;
    unsigned char *b = test_read_file(src, &n);
    if (!b) return -1;
    int rc = test_write_file(dst, b, n);
    free(b);
    return rc;
}

/* A fresh folder name in the scratch folder, holding the custom_voice config.json and
 * generation_config.json (no weights). Returns its path (static, rotating). */
static const char *make_folder(const char *name) {
    static char bufs[4][512];
    static int k;
    char *dir = bufs[k++ & 3];
    snprintf(dir, 512, "%s/%s", test_tmp_dir(), name);
    mkdir(dir, 0755);
    char dst[700];
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    copy_file(test_path("golden/data/custom_voice/config.json"), dst);
    snprintf(dst, sizeof dst, "%s/generation_config.json", dir);
    copy_file(test_path("golden/data/custom_voice/generation_config.json"), dst);
    return dir;
}

/* Rewrite the custom_voice model.safetensors into dir/model.safetensors with
 * one change: `drop` removed, or `name` given a new dtype and/or shape (same
 * byte count). Tensors are repacked contiguously; the header is padded so the
 * data stays 8-byte aligned. Returns 0 on success. */
static int write_weights(const char *dir, const char *drop, const char *name, const char *dtype, json_t *shape) {
    size_t n;
    unsigned char *buf = test_read_file(test_path("golden/data/custom_voice/model.safetensors"), &n);
    if (!buf || n < 8) {
        free(buf);
        json_decref(shape);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    json_error_t jerr;
    json_t *hdr = json_loadb((const char *)buf + 8, (size_t)hlen, 0, &jerr);
    const unsigned char *data = buf + 8 + hlen;
    json_t *out = json_object();
    unsigned char *odata = malloc(n);
    size_t off = 0;
    const char *key;
    json_t *v;
    int rc = hdr && out && odata ? 0 : -1;
    if (!rc) {
        json_object_foreach(hdr, key, v) {
            if (strcmp(key, "__metadata__") == 0) {
                json_object_set(out, key, v);
                continue;
            }
            if (drop && strcmp(key, drop) == 0) continue;
            json_t *offs = json_object_get(v, "data_offsets");
            size_t b = (size_t)json_integer_value(json_array_get(offs, 0)),
                   e = (size_t)json_integer_value(json_array_get(offs, 1));
            json_t *t = json_deep_copy(v);
            if (name && strcmp(key, name) == 0) {
                if (dtype) json_object_set_new(t, "dtype", json_string(dtype));
                if (shape) json_object_set(t, "shape", shape);
            }
            json_object_set_new(t, "data_offsets", json_pack("[I, I]", (json_int_t)off, (json_int_t)(off + e - b)));
            json_object_set_new(out, key, t);
            memcpy(odata + off, data + b, e - b);
            off += e - b;
        }
    }
    char *text = rc ? NULL : json_dumps(out, JSON_COMPACT);
    if (text) {
        size_t tl = strlen(text), padded = (tl + 7) & ~(size_t)7;
        unsigned char *file = malloc(8 + padded + off);
        if (file) {
            for (int i = 0; i < 8; i++) file[i] = (unsigned char)((uint64_t)padded >> (8 * i));
            memcpy(file + 8, text, tl);
            memset(file + 8 + tl, ' ', padded - tl);
            memcpy(file + 8 + padded, odata, off);
            char p[700];
            snprintf(p, sizeof p, "%s/model.safetensors", dir);
            rc = test_write_file(p, file, 8 + padded + off);
            free(file);
        } else {
            rc = -1;
        }
        free(text);
    } else {
        rc = -1;
    }
    json_decref(shape);
    json_decref(hdr);
    json_decref(out);
    free(odata);
    free(buf);
    return rc;
}

static qtts_model_params no_codec_params(void) {
    qtts_model_params p = qtts_model_default_params();
    p.load_codec = 0; /* broken folders have no speech_tokenizer/ */
    return p;
}

/* Load dir, expect status want, *out NULL and errbuf containing sub1/sub2. */
static void expect_load(const char *name, const char *dir, qtts_status want, const char *sub1, const char *sub2) {
    qtts_model *m = (qtts_model *)g_sentinel; /* must be overwritten with NULL */
    char err[1024];
    memset(err, 'x', sizeof err);
    const qtts_model_params p = no_codec_params();
    qtts_status st = qtts_model_load(&m, dir, &p, err, sizeof err);
    const int ok = st == want && (want == QTTS_OK ? m != NULL : m == NULL) && memchr(err, 0, sizeof err) && (!sub1 || strstr(err, sub1)) &&
                   (!sub2 || strstr(err, sub2));
    test_report(name, ok, "got %d (%s) want %d, model %s, message \"%.900s\"; expected \"%s\" and \"%s\"", (int)st,
                qtts_status_str(st), (int)want, m ? "not NULL" : "NULL", memchr(err, 0, sizeof err) ? err : "(unterminated)",
                sub1 ? sub1 : "", sub2 ? sub2 : "");
    if (st == QTTS_OK) qtts_model_free(m);
}

static void test_broken_folders(void) {
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no_such_model", test_tmp_dir());
    expect_load("load_missing_folder", missing, QTTS_ERR_IO, missing, NULL);

    const char *dir = make_folder("no_weights");
    expect_load("load_no_safetensors", dir, QTTS_ERR_IO, dir, "model.safetensors");

    const char *t = "talker.model.layers.1.mlp.up_proj.weight";
    dir = make_folder("missing_tensor");
    if (write_weights(dir, t, NULL, NULL, NULL) == 0)
        expect_load("load_missing_tensor", dir, QTTS_ERR_MODEL, t, "missing");
    else
        test_report("load_missing_tensor", 0, "could not write the modified weights");

    dir = make_folder("wrong_shape");
    if (write_weights(dir, NULL, t, NULL, json_pack("[i, i]", 64, 128)) == 0)
        expect_load("load_wrong_shape", dir, QTTS_ERR_MODEL, t, "[64, 128]");
    else
        test_report("load_wrong_shape", 0, "could not write the modified weights");
    expect_load("load_wrong_shape_shows_expected", dir, QTTS_ERR_MODEL, "[128, 64]", NULL);

    dir = make_folder("i64_dtype");
    if (write_weights(dir, NULL, t, "I64", json_pack("[i, i]", 128, 16)) == 0)
        expect_load("load_i64_dtype", dir, QTTS_ERR_MODEL, t, "I64");
    else
        test_report("load_i64_dtype", 0, "could not write the modified weights");

    const char *cp_t = "talker.code_predictor.lm_head.7.weight";
    dir = make_folder("missing_cp_tensor");
    if (write_weights(dir, cp_t, NULL, NULL, NULL) == 0)
        expect_load("load_missing_code_predictor_tensor", dir, QTTS_ERR_MODEL, cp_t, NULL);
    else
        test_report("load_missing_code_predictor_tensor", 0, "could not write the modified weights");

    const char *norm = "talker.model.norm.weight";
    dir = make_folder("missing_norm");
    if (write_weights(dir, norm, NULL, NULL, NULL) == 0)
        expect_load("load_missing_norm_vector", dir, QTTS_ERR_MODEL, norm, NULL);
    else
        test_report("load_missing_norm_vector", 0, "could not write the modified weights");

    const char *qn = "talker.model.layers.0.self_attn.q_norm.weight";
    dir = make_folder("vector_as_matrix");
    if (write_weights(dir, NULL, qn, NULL, json_pack("[i, i]", 4, 4)) == 0)
        expect_load("load_vector_with_matrix_shape", dir, QTTS_ERR_MODEL, qn, "[4, 4]");
    else
        test_report("load_vector_with_matrix_shape", 0, "could not write the modified weights");

    /* weights fine, config disagrees: the tensor and both shapes are named */
    dir = make_folder("config_mismatch");
    write_weights(dir, NULL, NULL, NULL, NULL);
    {
        char p[700];
        snprintf(p, sizeof p, "%s/config.json", dir);
        json_error_t jerr;
        json_t *cfg = json_load_file(p, 0, &jerr);
        json_t *tk = json_object_get(cfg, "talker_config");
        json_object_set_new(tk, "intermediate_size", json_integer(96));
        json_dump_file(cfg, p, JSON_INDENT(2));
        json_decref(cfg);
    }
    expect_load("load_config_weights_mismatch", dir, QTTS_ERR_MODEL, "talker.model.layers.0.mlp.gate_proj.weight",
                "[96, 64]");

    /* truncated weights */
    dir = make_folder("truncated");
    {
        size_t n;
        unsigned char *b = test_read_file(test_path("golden/data/custom_voice/model.safetensors"), &n);
        char p[700];
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (b) test_write_file(p, b, n - 100);
        free(b);
        expect_load("load_truncated_weights", dir, QTTS_ERR_FORMAT, p, "truncated");
    }

    /* a broken config.json / generation_config.json is reported as such */
    dir = make_folder("bad_config");
    {
        char p[700];
        snprintf(p, sizeof p, "%s/config.json", dir);
        const char *bad = "{\"tts_model_type\": \"custom_voice\",\n \"talker_config\": {,}}";
        test_write_file(p, bad, strlen(bad));
        expect_load("load_malformed_config", dir, QTTS_ERR_FORMAT, p, "line 2");
    }
    dir = make_folder("bad_gen_config");
    write_weights(dir, NULL, NULL, NULL, NULL);
    {
        char p[700];
        snprintf(p, sizeof p, "%s/generation_config.json", dir);
        test_write_file(p, "{\"top_p\": 2.0}", 14);
        expect_load("load_bad_generation_config", dir, QTTS_ERR_FORMAT, p, "top_p");
    }

    /* the rewritten but unchanged weights load: the helper itself is sound */
    dir = make_folder("rewritten_ok");
    write_weights(dir, NULL, NULL, NULL, NULL);
    expect_load("load_rewritten_weights_ok", dir, QTTS_OK, NULL, NULL);

    /* argument checks */
    qtts_model *m = NULL;
    char err[256];
    qtts_status st = qtts_model_load(NULL, dir, NULL, err, sizeof err);
    CHECK("load_null_out", st == QTTS_ERR_INVALID_ARG && strstr(err, "NULL"), "status %d: %s", (int)st, err);
    st = qtts_model_load(&m, NULL, NULL, err, sizeof err);
    CHECK("load_null_dir", st == QTTS_ERR_INVALID_ARG && m == NULL, "status %d: %s", (int)st, err);
    qtts_model_params p = no_codec_params();
    p.n_threads = 0;
    st = qtts_model_load(&m, dir, &p, err, sizeof err);
    CHECK("load_zero_threads", st == QTTS_ERR_INVALID_ARG && m == NULL && strstr(err, "n_threads"), "status %d: %s",
          (int)st, err);
    p = no_codec_params();
    p.codec_weights = (qtts_codec_weights)7;
    st = qtts_model_load(&m, dir, &p, err, sizeof err);
    CHECK("load_unknown_codec_weights", st == QTTS_ERR_INVALID_ARG && m == NULL && strstr(err, "codec_weights"),
          "status %d: %s", (int)st, err);
    /* a tiny errbuf is filled and terminated, never overrun; NULL errbuf is fine */
    char small[24];
    memset(small, 'z', sizeof small);
    p = no_codec_params();
    st = qtts_model_load(&m, missing, &p, small, 8);
    CHECK("load_small_errbuf", st == QTTS_ERR_IO && strlen(small) == 7 && small[8] == 'z', "status %d, len %zu",
          (int)st, strnlen(small, sizeof small));
    st = qtts_model_load(&m, missing, &p, NULL, 0);
    CHECK("load_null_errbuf", st == QTTS_ERR_IO && m == NULL, "status %d", (int)st);
    qtts_model_free(NULL); /* accepted */
}

/* ------------------------------------------------------------ valid model */

static int g_cancel_after;
static int on_frame_cancel(const int32_t *codes, int frame_index, void *user) {
    (void)codes;
    int *count = user;
    (*count)++;
    return frame_index + 1 >= g_cancel_after;
}

/* The template ids of the test checkpoints' small vocabulary. */
static const qtts_gen_debug k_debug = {.newline_id = NEWLINE_ID, .user_id = -1};

static qtts_gen_params valid_params(const qtts_model *m) {
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.text_ids = k_text_ids;
    gp.n_text_ids = 8;
    gp.debug = &k_debug;
    gp.speaker = "ryan";
    gp.language = "english";
    gp.max_new_tokens = 4;
    gp.talker.do_sample = 0;
    gp.predictor.do_sample = 0;
    return gp;
}

/* Run gp on ctx and expect status want with sub1/sub2 in the last error. */
static void expect_gen(const char *name, qtts_context *ctx, const qtts_gen_params *gp, qtts_status want,
                       const char *sub1, const char *sub2) {
    int32_t *codes = (int32_t *)g_sentinel; /* must be reset */
    int n = -1;
    qtts_status st = qtts_generate_codes(ctx, gp, NULL, NULL, &codes, &n);
    const char *msg = qtts_context_last_error(ctx);
    const int ok = st == want && codes == NULL && n == 0 && *msg && (!sub1 || strstr(msg, sub1)) &&
                   (!sub2 || strstr(msg, sub2));
    test_report(name, ok, "got %d (%s) want %d, n_frames %d, codes %s, last error \"%s\"; expected \"%s\" and \"%s\"",
                (int)st, qtts_status_str(st), (int)want, n, codes ? "set" : "NULL", msg, sub1 ? sub1 : "",
                sub2 ? sub2 : "");
    if (st == QTTS_OK && codes != (int32_t *)g_sentinel) free(codes);
}

static int codes_valid(const int32_t *codes, int n, int groups, int codebook) {
    for (int i = 0; i < n * groups; i++)
        if (codes[i] < 0 || codes[i] >= codebook) return 0;
    return 1;
}

static void test_custom_voice(void) {
    const char *dir = test_path("golden/data/custom_voice");
    qtts_model *m = NULL;
    char err[1024];
    qtts_status st = qtts_model_load(&m, dir, NULL, err, sizeof err);
    test_report("load_custom_voice", st == QTTS_OK && m, "status %d: %s", (int)st, err);
    if (st) return;
    qtts_model_info info;
    memset(&info, 0xff, sizeof info);
    qtts_model_get_info(m, &info);
    CHECK("info_custom_voice",
          info.type == QTTS_MODEL_CUSTOM_VOICE && info.type_name && strcmp(info.type_name, "custom_voice") == 0 &&
              info.size_name && strcmp(info.size_name, "1b7") == 0 && info.hidden_size == 64 && info.n_layers == 2 &&
              info.cp_hidden_size == 32 && info.cp_n_layers == 2 && info.n_code_groups == 16 &&
              info.codebook_size == 2048 && info.sample_rate_hz == 24000 && info.samples_per_frame == 1920 &&
              info.has_tokenizer == 0 && info.has_speaker_encoder == 0,
          "info fields differ from the checkpoint (type %d hidden %d layers %d cp %d/%d groups %d codebook %d)",
          (int)info.type, info.hidden_size, info.n_layers, info.cp_hidden_size, info.cp_n_layers, info.n_code_groups,
          info.codebook_size);
    CHECK("info_weights", info.n_params > 1000000 && info.weight_bytes == 2 * info.n_params && info.weight_dtype &&
                              strcmp(info.weight_dtype, "BF16") == 0,
          "n_params %lld weight_bytes %lld dtype %s (all tensors are BF16)", (long long)info.n_params,
          (long long)info.weight_bytes, info.weight_dtype ? info.weight_dtype : "NULL");

    static const char *spk[9] = {"serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric", "dylan"};
    int ok = qtts_model_n_speakers(m) == 9;
    for (int i = 0; ok && i < 9; i++) ok = qtts_model_speaker(m, i) && strcmp(qtts_model_speaker(m, i), spk[i]) == 0;
    CHECK("speakers_in_config_order", ok, "n_speakers %d, first \"%s\"", qtts_model_n_speakers(m),
          qtts_model_speaker(m, 0) ? qtts_model_speaker(m, 0) : "NULL");
    CHECK("speaker_index_out_of_range", qtts_model_speaker(m, -1) == NULL && qtts_model_speaker(m, 9) == NULL,
          "out-of-range speaker index returned a name");
    static const char *lang[11] = {"auto",     "chinese",    "english", "german",  "italian", "portuguese",
                                   "spanish",  "japanese",   "korean",  "french",  "russian"};
    ok = qtts_model_n_languages(m) == 11;
    for (int i = 0; ok && i < 11; i++)
        ok = qtts_model_language(m, i) && strcmp(qtts_model_language(m, i), lang[i]) == 0;
    CHECK("languages_auto_first_no_dialects", ok, "n_languages %d, [0] \"%s\"", qtts_model_n_languages(m),
          qtts_model_language(m, 0) ? qtts_model_language(m, 0) : "NULL");
    CHECK("language_index_out_of_range", qtts_model_language(m, -1) == NULL && qtts_model_language(m, 11) == NULL,
          "out-of-range language index returned a name");

    /* no vocab.json / merges.txt in the test checkpoint */
    int32_t *ids = NULL;
    int n_ids = -1;
    char why[1024];
    st = qtts_tokenize(m, "hello", &ids, &n_ids, why, sizeof why);
    CHECK("tokenize_without_tokenizer", st == QTTS_ERR_UNSUPPORTED && ids == NULL && strstr(why, "vocab.json"),
          "status %d, message \"%s\"", (int)st, why);
    free(ids);
    CHECK("tokenize_null_args", qtts_tokenize(m, NULL, &ids, &n_ids, why, sizeof why) == QTTS_ERR_INVALID_ARG &&
                                    strstr(why, "NULL") &&
                                    qtts_tokenize(NULL, "x", &ids, &n_ids, NULL, 0) == QTTS_ERR_INVALID_ARG,
          "NULL arguments not rejected (message \"%s\")", why);

    qtts_context *ctx = (qtts_context *)g_sentinel; /* must be overwritten with NULL */
    st = qtts_context_new(NULL, NULL, &ctx, why, sizeof why);
    CHECK("context_new_null_model", st == QTTS_ERR_INVALID_ARG && ctx == NULL && strstr(why, "NULL"),
          "status %d, context %s, message \"%s\"", (int)st, ctx ? "not NULL" : "NULL", why);
    CHECK("context_new_null_out", qtts_context_new(m, NULL, NULL, NULL, 0) == QTTS_ERR_INVALID_ARG,
          "a NULL output pointer was not refused");
    memset(why, 'x', sizeof why);
    st = qtts_context_new(m, NULL, &ctx, why, sizeof why);
    test_report("context_new", st == QTTS_OK && ctx && why[0] == 0, "status %d: %s", (int)st,
                memchr(why, 0, sizeof why) ? why : "(errbuf not cleared)");
    if (st) {
        qtts_model_free(m);
        return;
    }

    /* a valid greedy request works, twice identically */
    qtts_gen_params gp = valid_params(m);
    int32_t *codes = NULL, *codes2 = NULL;
    int n = 0, n2 = 0;
    st = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &n);
    CHECK("generate_valid", st == QTTS_OK && n >= 1 && n <= gp.max_new_tokens && codes && codes_valid(codes, n, 16, 2048) &&
                                strcmp(qtts_context_last_error(ctx), "") == 0,
          "status %d, %d frames, last error \"%s\"", (int)st, n, qtts_context_last_error(ctx));

    /* bad requests */
    qtts_gen_params b = valid_params(m);
    b.speaker = "bob";
    expect_gen("gen_unknown_speaker", ctx, &b, QTTS_ERR_INPUT, "\"bob\"", "serena, vivian, uncle_fu, ryan");
    b = valid_params(m);
    b.speaker = "RYAN"; /* case-insensitive: accepted */
    int32_t *c3 = NULL;
    int n3 = 0;
    st = qtts_generate_codes(ctx, &b, NULL, NULL, &c3, &n3);
    CHECK("gen_speaker_case_insensitive", st == QTTS_OK && n3 == n && codes && c3 &&
                                              memcmp(codes, c3, sizeof(int32_t) * 16 * n) == 0,
          "status %d (%s)", (int)st, qtts_context_last_error(ctx));
    free(c3);
    b = valid_params(m);
    b.language = "klingon";
    expect_gen("gen_unknown_language", ctx, &b, QTTS_ERR_INPUT, "\"klingon\"", "auto, chinese, english");
    b.language = "beijing_dialect"; /* dialects are chosen through the speaker, not by name */
    expect_gen("gen_dialect_language_rejected", ctx, &b, QTTS_ERR_INPUT, "beijing_dialect", "english");
    {
        qtts_status s2 = qtts_generate_codes(ctx, &b, NULL, NULL, NULL, NULL);
        const char *msg = qtts_context_last_error(ctx), *list = strstr(msg, "choose one of");
        CHECK("gen_language_list_has_no_dialects", s2 == QTTS_ERR_INPUT && list && !strstr(list, "dialect"),
              "last error \"%s\"", msg);
    }
    b = valid_params(m);
    b.n_text_ids = 0;
    expect_gen("gen_empty_text_ids", ctx, &b, QTTS_ERR_INPUT, "empty", NULL);
    b.text_ids = NULL;
    b.text = NULL;
    expect_gen("gen_no_text", ctx, &b, QTTS_ERR_INPUT, "empty", NULL);
    b.text = " \t\n ";
    expect_gen("gen_blank_text", ctx, &b, QTTS_ERR_INPUT, "empty", NULL);
    b.text = "hello";
    expect_gen("gen_text_without_tokenizer", ctx, &b, QTTS_ERR_UNSUPPORTED, "vocab.json", NULL);
    b = valid_params(m);
    int32_t bad_ids[3] = {17, 5000, 8};
    b.text_ids = bad_ids;
    b.n_text_ids = 3;
    expect_gen("gen_text_id_out_of_vocab", ctx, &b, QTTS_ERR_INPUT, "5000", "1024");
    bad_ids[1] = -3;
    expect_gen("gen_text_id_negative", ctx, &b, QTTS_ERR_INPUT, "-3", NULL);
    b = valid_params(m);
    qtts_gen_debug dbg = k_debug;
    b.debug = &dbg;
    dbg.newline_id = 4096;
    expect_gen("gen_newline_id_out_of_vocab", ctx, &b, QTTS_ERR_INPUT, "4096", NULL);
    dbg = k_debug;
    dbg.force_frames = -1;
    expect_gen("gen_force_frames_negative", ctx, &b, QTTS_ERR_INVALID_ARG, "force_frames", NULL);
    const int32_t teacher_bad[16] = {3, 5000};
    dbg = k_debug;
    dbg.teacher_codes = teacher_bad;
    expect_gen("gen_teacher_codes_without_frames", ctx, &b, QTTS_ERR_INVALID_ARG, "teacher codes", NULL);
    dbg.n_teacher_frames = 1;
    expect_gen("gen_teacher_code_out_of_range", ctx, &b, QTTS_ERR_INPUT, "5000", "frame 0");
    b = valid_params(m);
    b.max_new_tokens = 0;
    expect_gen("gen_max_new_tokens_zero", ctx, &b, QTTS_ERR_INVALID_ARG, "max_new_tokens", NULL);
    b.max_new_tokens = -5;
    expect_gen("gen_max_new_tokens_negative", ctx, &b, QTTS_ERR_INVALID_ARG, "max_new_tokens", NULL);
    b = valid_params(m);
    b.talker.do_sample = 1;
    b.talker.temperature = 0.0f;
    expect_gen("gen_temperature_zero", ctx, &b, QTTS_ERR_INVALID_ARG, "talker temperature", NULL);
    b.talker.temperature = NAN;
    expect_gen("gen_temperature_nan", ctx, &b, QTTS_ERR_INVALID_ARG, "temperature", NULL);
    b = valid_params(m);
    b.talker.top_p = 1.5f;
    expect_gen("gen_top_p_above_one", ctx, &b, QTTS_ERR_INVALID_ARG, "top_p", "1.5");
    b = valid_params(m);
    b.predictor.top_k = -1;
    expect_gen("gen_predictor_top_k_negative", ctx, &b, QTTS_ERR_INVALID_ARG, "code predictor top_k", NULL);
    b = valid_params(m);
    b.talker.repetition_penalty = 0.0f;
    expect_gen("gen_repetition_penalty_zero", ctx, &b, QTTS_ERR_INVALID_ARG, "repetition_penalty", NULL);
    b = valid_params(m);
    b.text_mode = (qtts_text_mode)7;
    expect_gen("gen_bad_text_mode", ctx, &b, QTTS_ERR_INVALID_ARG, "text_mode", NULL);
    b = valid_params(m);
    float xvec[64] = {0};
    b.xvector = xvec;
    expect_gen("gen_xvector_on_custom_voice", ctx, &b, QTTS_ERR_INPUT, "Base", NULL);

    /* after the errors, the context still gives the same result; last error cleared */
    st = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes2, &n2);
    CHECK("generate_after_errors_identical", st == QTTS_OK && n2 == n && codes && codes2 &&
                                                 memcmp(codes, codes2, sizeof(int32_t) * 16 * n) == 0 &&
                                                 strcmp(qtts_context_last_error(ctx), "") == 0,
          "status %d, %d vs %d frames, last error \"%s\"", (int)st, n2, n, qtts_context_last_error(ctx));
    free(codes);
    free(codes2);

    /* a frame callback that stops generation */
    int count = 0;
    g_cancel_after = 1;
    b = valid_params(m);
    b.max_new_tokens = 8;
    st = qtts_generate_codes(ctx, &b, on_frame_cancel, &count, NULL, &n);
    CHECK("gen_cancelled_by_callback", st == QTTS_ERR_CANCELLED && count == 1 && n == 1 &&
                                           strstr(qtts_context_last_error(ctx), "callback"),
          "status %d, %d callbacks, %d frames, last error \"%s\"", (int)st, count, n, qtts_context_last_error(ctx));
    CHECK("gen_null_params", qtts_generate_codes(ctx, NULL, NULL, NULL, NULL, NULL) == QTTS_ERR_INVALID_ARG &&
                                 qtts_generate_codes(NULL, &gp, NULL, NULL, NULL, NULL) == QTTS_ERR_INVALID_ARG,
          "NULL context / params not rejected");

    /* the debug aids: forced frames past max_new_tokens, teacher codes fed and compared */
    qtts_gen_debug dd = qtts_gen_debug_default_params();
    CHECK("gen_debug_defaults", dd.newline_id == -1 && dd.user_id == -1 && dd.force_frames == 0 &&
                                    dd.teacher_codes == NULL && dd.n_teacher_frames == 0 &&
                                    qtts_gen_default_params(m).debug == NULL,
          "newline %d user %d force %d teacher %p/%d", dd.newline_id, dd.user_id, dd.force_frames,
          (const void *)dd.teacher_codes, dd.n_teacher_frames);
    b = valid_params(m);
    dbg = k_debug;
    dbg.force_frames = 6;
    b.debug = &dbg;
    codes = NULL;
    st = qtts_generate_codes(ctx, &b, NULL, NULL, &codes, &n2);
    CHECK("gen_debug_force_frames", st == QTTS_OK && n2 == 6 && codes, "status %d, %d frames (max_new_tokens 4)",
          (int)st, n2);
    int32_t teacher[3 * 16] = {0};
    for (int i = 0; codes && n2 == 6 && i < 3 * 16; i++) teacher[i] = codes[i] % 7;
    free(codes);
    dbg = k_debug;
    dbg.teacher_codes = teacher;
    dbg.n_teacher_frames = 3;
    codes = NULL;
    st = qtts_generate_codes(ctx, &b, NULL, NULL, &codes, &n2);
    qtts_stats qs;
    qtts_context_get_stats(ctx, &qs);
    CHECK("gen_debug_teacher_codes", st == QTTS_OK && n2 == 3 && qs.teacher_frames == 3,
          "status %d, %d frames, %d teacher frames", (int)st, n2, qs.teacher_frames);
    free(codes);
    qtts_context_free(ctx);

    /* a context too small for the prompt */
    qtts_context_params cp = qtts_context_default_params();
    cp.n_ctx = 4;
    st = qtts_context_new(m, &cp, &ctx, NULL, 0);
    if (st == QTTS_OK) {
        expect_gen("gen_prompt_exceeds_context", ctx, &gp, QTTS_ERR_LIMIT, "context", NULL);
        qtts_context_free(ctx);
    } else {
        test_report("gen_prompt_exceeds_context", 0, "context_new failed: %d", (int)st);
    }
    qtts_context_free(NULL);
    qtts_model_free(m);
}

static void test_base(void) {
    const char *dir = test_path("golden/data/base_clone");
    qtts_model *m = NULL;
    char err[1024];
    const qtts_model_params p = no_codec_params();
    qtts_status st = qtts_model_load(&m, dir, &p, err, sizeof err);
    test_report("load_base_clone", st == QTTS_OK && m, "status %d: %s", (int)st, err);
    if (st) return;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    CHECK("info_base", info.type == QTTS_MODEL_BASE && strcmp(info.type_name, "base") == 0 &&
                           info.has_speaker_encoder == 1 && qtts_model_n_speakers(m) == 0 &&
                           qtts_model_speaker(m, 0) == NULL,
          "type %d \"%s\", speaker encoder %d, %d speakers", (int)info.type, info.type_name, info.has_speaker_encoder,
          qtts_model_n_speakers(m));
    qtts_context *ctx = NULL;
    st = qtts_context_new(m, NULL, &ctx, NULL, 0);
    if (st == QTTS_OK) {
        qtts_gen_params b = valid_params(m);
        expect_gen("gen_speaker_on_base_model", ctx, &b, QTTS_ERR_INPUT, "CustomVoice", "\"ryan\"");
        b = valid_params(m);
        b.speaker = NULL;
        expect_gen("gen_base_without_voice", ctx, &b, QTTS_ERR_INPUT, "Base", "reference recording");
        float xvec[64];
        for (int i = 0; i < 64; i++) xvec[i] = 0.01f * (float)i;
        b.xvector = xvec;
        const int32_t instr[3] = {77, 5, 640};
        b.instruct_ids = instr;
        b.n_instruct_ids = 3;
        expect_gen("gen_instruction_on_base_model", ctx, &b, QTTS_ERR_INPUT, "instructions", "Base model");
        b.instruct_ids = NULL;
        b.n_instruct_ids = 0;
        xvec[5] = NAN;
        expect_gen("gen_xvector_not_finite", ctx, &b, QTTS_ERR_INPUT, "x-vector entry 5", NULL);
        xvec[5] = 0.0f;
        b = valid_params(m);
        b.speaker = NULL;
        const int32_t ref[16] = {0};
        b.ref_codes = ref;
        b.n_ref_frames = 1;
        expect_gen("gen_icl_without_transcript", ctx, &b, QTTS_ERR_INPUT, "transcript", NULL);
        qtts_context_free(ctx);
    } else {
        test_report("base_context_new", 0, "status %d", (int)st);
    }
    qtts_model_free(m);
}

/* A folder name in the scratch folder, holding symbolic links to the named entries of golden
 * cases: entries[i] is "case/entry". Returns its path (static, rotating). */
static const char *link_folder(const char *name, const char *const *entries, int n) {
    static char bufs[4][512];
    static int k;
    char *dir = bufs[k++ & 3];
    snprintf(dir, 512, "%s/%s", test_tmp_dir(), name);
    mkdir(dir, 0755);
    for (int i = 0; i < n; i++) {
        char src[1024], dst[1024];
        const char *base = strrchr(entries[i], '/');
        snprintf(src, sizeof src, "%s", test_path("golden/data/%s", entries[i]));
        if (src[0] != '/') { /* relative to the working folder: make it absolute for the link */
            char cwd[512];
            if (getcwd(cwd, sizeof cwd)) snprintf(src, sizeof src, "%s/%s", cwd, test_path("golden/data/%s", entries[i]));
        }
        snprintf(dst, sizeof dst, "%s/%s", dir, base ? base + 1 : entries[i]);
        if (symlink(src, dst) != 0) return NULL;
    }
    return dir;
}

/* Invalid UTF-8 in the text, the instruction or the reference transcript is
 * reported at its byte offset in what the caller gave, not in the chat
 * template the library wraps it in. */
static void test_utf8_offsets(void) {
    qtts_model *m = NULL;
    char err[1024];
    const qtts_model_params p = no_codec_params();
    qtts_status st = qtts_model_load(&m, test_path("golden/data/e2e_string"), &p, err, sizeof err);
    qtts_context *ctx = NULL;
    if (!st) st = qtts_context_new(m, NULL, &ctx, err, sizeof err);
    test_report("utf8/load_e2e", st == QTTS_OK, "status %d: %s", (int)st, err);
    if (!st) {
        int32_t *ids = NULL;
        int n = 0;
        st = qtts_tokenize(m, "abc\xff", &ids, &n, err, sizeof err);
        CHECK("utf8/tokenize_offset", st == QTTS_ERR_INPUT && ids == NULL && strstr(err, "byte offset 3 ("),
              "status %d, message \"%s\"", (int)st, err);
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.speaker = "vivian";
        gp.max_new_tokens = 2;
        gp.text = "abc\xff";
        expect_gen("utf8/text_offset", ctx, &gp, QTTS_ERR_INPUT, "the text is not valid UTF-8", "byte offset 3 (");
        gp.text = "Hello.";
        gp.instruct = "calm\xc3";
        expect_gen("utf8/instruct_offset", ctx, &gp, QTTS_ERR_INPUT, "the instruction is not valid UTF-8",
                   "byte offset 4 (");
    }
    qtts_context_free(ctx);
    qtts_model_free(m);
    ctx = NULL;
    m = NULL;

    /* the Base test checkpoint with the e2e case's tokenizer files */
    static const char *const base_tok[] = {"base_clone/config.json",     "base_clone/generation_config.json",
                                           "base_clone/model.safetensors", "base_clone/speech_tokenizer",
                                           "e2e_string/vocab.json",      "e2e_string/merges.txt",
                                           "e2e_string/tokenizer_config.json"};
    const char *dir = link_folder("base_tok", base_tok, 7);
    qtts_model_params bp = qtts_model_default_params(); /* with the codec: voices need its encoder */
    st = dir ? qtts_model_load(&m, dir, &bp, err, sizeof err) : QTTS_ERR_IO;
    if (!st) st = qtts_context_new(m, NULL, &ctx, err, sizeof err);
    test_report("utf8/load_base_with_tokenizer", st == QTTS_OK, "status %d: %s", (int)st, dir ? err : "no folder");
    if (!st) {
        float xvec[64];
        for (int i = 0; i < 64; i++) xvec[i] = 0.01f * (float)i;
        const int32_t ref[16] = {0};
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.text = "Hello.";
        gp.xvector = xvec;
        gp.ref_codes = ref;
        gp.n_ref_frames = 1;
        gp.ref_text = "ab\xed\xa0\x80"; /* a UTF-16 surrogate at byte 2 */
        gp.max_new_tokens = 2;
        expect_gen("utf8/ref_text_offset", ctx, &gp, QTTS_ERR_INPUT, "the reference transcript is not valid UTF-8",
                   "byte offset 2 (");
        float *pcm = malloc(sizeof(float) * 24000);
        for (int i = 0; pcm && i < 24000; i++) pcm[i] = 0.3f * sinf(2.0f * 3.14159265f * 220.0f * (float)i / 24000.0f);
        qtts_voice_params vp = qtts_voice_default_params();
        vp.ref_text = "x\xff";
        qtts_voice *v = NULL;
        st = pcm ? qtts_voice_from_pcm(m, pcm, 24000, 24000, &vp, &v, err, sizeof err) : QTTS_ERR_NOMEM;
        CHECK("utf8/voice_ref_text_offset",
              st == QTTS_ERR_INPUT && v == NULL && strstr(err, "the reference transcript is not valid UTF-8") &&
                  strstr(err, "byte offset 1 ("),
              "status %d, message \"%s\"", (int)st, err);
        qtts_voice_free(v);
        free(pcm);
    }
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* A speaker name the checkpoint spells with capitals is listed as written
 * and matched case-insensitively. */
static void test_speaker_case(void) {
    json_error_t je;
    json_t *cfg = json_load_file(test_path("golden/data/custom_voice/config.json"), 0, &je);
    json_t *spk = cfg ? json_object_get(json_object_get(cfg, "talker_config"), "spk_id") : NULL;
    static const char *const links[] = {"custom_voice/generation_config.json", "custom_voice/model.safetensors"};
    const char *dir = spk ? link_folder("speaker_case", links, 2) : NULL;
    char path[700], err[1024] = "cannot write the folder";
    int ok = dir && json_object_set_new(spk, "MyVoice", json_integer(3000)) == 0;
    if (ok) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        ok = json_dump_file(cfg, path, JSON_INDENT(1)) == 0;
    }
    json_decref(cfg);
    qtts_model *m = NULL;
    const qtts_model_params p = no_codec_params();
    qtts_status st = ok ? qtts_model_load(&m, dir, &p, err, sizeof err) : QTTS_ERR_IO;
    test_report("speaker_case/load", st == QTTS_OK, "status %d: %s", (int)st, err);
    if (st) return;
    int found = -1;
    for (int i = 0; i < qtts_model_n_speakers(m); i++)
        if (!strcasecmp(qtts_model_speaker(m, i), "myvoice")) found = i;
    CHECK("speaker_case/listed_as_written", found >= 0 && !strcmp(qtts_model_speaker(m, found), "MyVoice"),
          "listed as \"%s\"", found >= 0 ? qtts_model_speaker(m, found) : "(missing)");
    qtts_context *ctx = NULL;
    st = qtts_context_new(m, NULL, &ctx, err, sizeof err);
    const char *names[3] = {"MyVoice", "myvoice", "MYVOICE"};
    for (int i = 0; !st && i < 3; i++) {
        qtts_gen_params gp = valid_params(m);
        gp.speaker = names[i];
        int32_t *codes = NULL;
        int n = 0;
        qtts_status s = qtts_generate_codes(ctx, &gp, NULL, NULL, &codes, &n);
        char name[64];
        snprintf(name, sizeof name, "speaker_case/matched_%s", names[i]);
        test_report(name, s == QTTS_OK && n >= 1, "status %d: %s", (int)s, qtts_context_last_error(ctx));
        free(codes);
    }
    if (st) test_report("speaker_case/context", 0, "status %d: %s", (int)st, err);
    qtts_context_free(ctx);
    qtts_model_free(m);
}

/* max_new_tokens at INT_MAX is a valid (if silly) request: sizing the cache
 * must not overflow an int (UBSan in `make debug-test` aborts on one, so this
 * runs last, after everything else has been checked under the sanitizers). */
static void test_int_max_tokens(void) {
    qtts_model *m = NULL;
    char err[1024];
    const qtts_model_params p = no_codec_params();
    qtts_status st = qtts_model_load(&m, test_path("golden/data/custom_voice"), &p, err, sizeof err);
    qtts_context *ctx = NULL;
    if (st == QTTS_OK) st = qtts_context_new(m, NULL, &ctx, NULL, 0);
    if (st) {
        test_report("gen_max_new_tokens_int_max", 0, "load: %s", err);
        qtts_model_free(m);
        return;
    }
    int count = 0, n = 0;
    g_cancel_after = 2;
    qtts_gen_params b = valid_params(m);
    b.max_new_tokens = INT_MAX;
    st = qtts_generate_codes(ctx, &b, on_frame_cancel, &count, NULL, &n);
    CHECK("gen_max_new_tokens_int_max", st == QTTS_ERR_CANCELLED && count == 2 && n == 2,
          "status %d, %d callbacks, last error \"%s\"", (int)st, count, qtts_context_last_error(ctx));
    qtts_context_free(ctx);
    qtts_model_free(m);
}

int main(void) {
    if (test_tmp_make("qtts_test_load") != 0) return test_finish();
    test_broken_folders();
    test_custom_voice();
    test_base();
    test_utf8_offsets();
    test_speaker_case();
    test_tmp_remove();
    test_int_max_tokens();
    return test_finish();
}
