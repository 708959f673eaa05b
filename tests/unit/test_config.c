/* Unit test of config.json / generation_config.json parsing
 * (src/model/config.c): the custom_voice test checkpoint's config is copied
 * into a mkdtemp() folder with one mutation at a time, and config_load must
 * answer with the right status and a message naming the file and the key
 * (dotted path) at fault; malformed JSON reports line and column. Also the
 * generation_config fallbacks and range checks, and the case-insensitive
 * language / speaker lookups. */
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/config.h"
#include "test.h"

static char g_tmp[256];
static json_t *g_cfg; /* the pristine custom_voice config.json */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static const char *case_dir(const char *name) {
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, 512, "%s/%s", g_tmp, name);
    mkdir(b, 0755);
    return b;
}

static int write_text(const char *dir, const char *file, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    size_t w = fwrite(text, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* One edit of the JSON tree: set path (dotted) to val, or delete it (val NULL). */
typedef struct mut {
    const char *path;
    json_t *val; /* reference stolen; NULL = delete the key */
} mut;

#define MUTS(...) (mut[]){__VA_ARGS__}, (int)(sizeof((mut[]){__VA_ARGS__}) / sizeof(mut))

static int apply(json_t *root, const mut *m) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", m->path);
    json_t *o = root;
    char *save = NULL, *tok = strtok_r(buf, ".", &save);
    for (;;) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) break;
        o = json_object_get(o, tok);
        if (!json_is_object(o)) return -1;
        tok = next;
    }
    if (m->val) return json_object_set_new(o, tok, m->val);
    return json_object_del(o, tok);
}

/* Write a mutated copy of the pristine config to g_tmp/name/config.json. */
static const char *write_mutated(const char *name, const mut *m, int n) {
    json_t *root = json_deep_copy(g_cfg);
    int ok = root != NULL;
    for (int i = 0; i < n; i++) {
        if (ok && apply(root, &m[i]) != 0) ok = 0;
        else if (!ok) json_decref(m[i].val);
    }
    const char *dir = case_dir(name);
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (ok && json_dump_file(root, p, JSON_INDENT(2)) != 0) ok = 0;
    json_decref(root);
    return ok ? dir : NULL;
}

/* config_load on dir; expect want with the message naming config.json and
 * containing sub1 and sub2 (when not NULL). */
static void expect_dir(const char *name, const char *dir, qtts_status want, const char *sub1, const char *sub2) {
    qtts_config c;
    qtts_error e;
    err_clear(&e);
    qtts_status st = config_load(&c, dir, &e);
    char file[700];
    snprintf(file, sizeof file, "%s/config.json", dir);
    int ok = st == want && (want == QTTS_OK || (strstr(e.msg, file) && (!sub1 || strstr(e.msg, sub1)) &&
                                                (!sub2 || strstr(e.msg, sub2))));
    test_report(name, ok, "got %d (%s) want %d; message \"%s\"; expected \"%s\" and \"%s\"", (int)st,
                qtts_status_str(st), (int)want, e.msg, sub1 ? sub1 : "", sub2 ? sub2 : "");
}

static void expect(const char *name, const mut *m, int n, qtts_status want, const char *sub1, const char *sub2) {
    const char *dir = write_mutated(name, m, n);
    if (!dir) {
        test_report(name, 0, "could not apply the mutation (test bug: a path does not exist)");
        return;
    }
    expect_dir(name, dir, want, sub1, sub2);
}

static void test_valid(void) {
    const char *dir = write_mutated("valid", NULL, 0);
    qtts_config c;
    qtts_error e;
    err_clear(&e);
    qtts_status st = dir ? config_load(&c, dir, &e) : QTTS_ERR_IO;
    test_report("config_valid_loads", st == QTTS_OK, "status %d: %s", (int)st, e.msg);
    if (st) return;
    CHECK("config_valid_type", c.type == QTTS_MODEL_CUSTOM_VOICE && strcmp(c.type_name, "custom_voice") == 0 &&
                                   strcmp(c.size_name, "1b7") == 0,
          "type %d \"%s\" size \"%s\"", (int)c.type, c.type_name, c.size_name);
    CHECK("config_valid_talker",
          c.talker.hidden == 64 && c.talker.inter == 128 && c.talker.n_layers == 2 && c.talker.n_heads == 4 &&
              c.talker.n_kv_heads == 2 && c.talker.head_dim == 16 && c.talker.vocab == 3072 &&
              c.talker.max_pos == 32768 && c.talker.eps == 1e-6f && c.talker.rope_theta == 1e6f,
          "talker config fields differ from config.json");
    CHECK("config_valid_code_predictor",
          c.cp.hidden == 32 && c.cp.inter == 64 && c.cp.n_layers == 2 && c.cp.n_heads == 4 && c.cp.n_kv_heads == 2 &&
              c.cp.head_dim == 8 && c.cp.vocab == 2048 && c.cp.max_pos == 65536,
          "code predictor config fields differ from config.json");
    CHECK("config_valid_ids",
          c.text_hidden == 48 && c.text_vocab == 1024 && c.n_code_groups == 16 && c.codec_pad == 2148 &&
              c.codec_bos == 2149 && c.codec_eos == 2150 && c.codec_think == 2154 && c.codec_nothink == 2155 &&
              c.codec_think_bos == 2156 && c.codec_think_eos == 2157 && c.im_start == 1000 && c.im_end == 1001 &&
              c.assistant == 1002 && c.tts_pad == 1021 && c.tts_bos == 1022 && c.tts_eos == 1023,
          "control ids differ from config.json");
    CHECK("config_valid_tables", c.n_langs == 12 && c.n_speakers == 9 && strcmp(c.langs[0].name, "chinese") == 0 &&
                                     strcmp(c.speakers[0].name, "serena") == 0 && c.has_speaker_encoder == 0,
          "n_langs %d n_speakers %d first %s / %s", c.n_langs, c.n_speakers, c.langs[0].name, c.speakers[0].name);

    /* lookups: case-insensitive, NULL when absent */
    const name_id *l = config_language(&c, "English"), *l2 = config_language(&c, "ENGLISH"),
                  *l3 = config_language(&c, "english");
    CHECK("config_language_case_insensitive", l && l == l2 && l == l3 && l->id == 2050, "English -> %d",
          l ? l->id : -1);
    CHECK("config_language_absent",
          config_language(&c, "klingon") == NULL && config_language(&c, NULL) == NULL &&
              config_language(&c, "") == NULL && config_language(&c, "englis") == NULL &&
              config_language(&c, "english ") == NULL,
          "a lookup of an absent language returned an entry");
    const name_id *s = config_speaker(&c, "Ryan"), *s2 = config_speaker(&c, "RYAN");
    CHECK("config_speaker_case_insensitive", s && s == s2 && s->id == 3061 && s->dialect[0] == 0, "Ryan -> %d",
          s ? s->id : -1);
    const name_id *eric = config_speaker(&c, "ERIC"), *dylan = config_speaker(&c, "dylan");
    CHECK("config_speaker_dialect", eric && dylan && strcmp(eric->dialect, "sichuan_dialect") == 0 &&
                                        strcmp(dylan->dialect, "beijing_dialect") == 0,
          "eric dialect \"%s\", dylan dialect \"%s\"", eric ? eric->dialect : "?", dylan ? dylan->dialect : "?");
    CHECK("config_speaker_absent", config_speaker(&c, "bob") == NULL && config_speaker(&c, NULL) == NULL,
          "a lookup of an absent speaker returned an entry");

    /* a speaker key with capitals keeps its spelling (matched case-insensitively);
     * its dialect, a language key, is stored lower-case */
    dir = write_mutated("mixed_case", MUTS({"talker_config.spk_id.Big_Bob", json_integer(3000)},
                                           {"talker_config.spk_is_dialect.BIG_BOB", json_string("Sichuan_Dialect")}));
    err_clear(&e);
    st = dir ? config_load(&c, dir, &e) : QTTS_ERR_IO;
    const name_id *bb = st == QTTS_OK ? config_speaker(&c, "big_bob") : NULL;
    CHECK("config_speaker_mixed_case_key", bb && bb == config_speaker(&c, "BIG_BOB") && bb->id == 3000 &&
                                               strcmp(bb->name, "Big_Bob") == 0 &&
                                               strcmp(bb->dialect, "sichuan_dialect") == 0,
          "status %d (%s); big_bob \"%s\" %s", (int)st, e.msg, bb ? bb->name : "", bb ? bb->dialect : "not found");

    /* base model without speaker_encoder_config: x-vector width = hidden */
    dir = write_mutated("base_no_spk", MUTS({"tts_model_type", json_string("base")}, {"talker_config.spk_id", NULL}));
    err_clear(&e);
    st = dir ? config_load(&c, dir, &e) : QTTS_ERR_IO;
    CHECK("config_base_without_speakers", st == QTTS_OK && c.type == QTTS_MODEL_BASE && c.n_speakers == 0 &&
                                              c.spk_enc_dim == 64,
          "status %d (%s)", (int)st, e.msg);
    /* optional keys absent: num_key_value_heads defaults to heads, head_dim to hidden/heads */
    dir = write_mutated("defaults", MUTS({"talker_config.num_key_value_heads", NULL}, {"talker_config.head_dim", NULL},
                                         {"talker_config.rope_theta", NULL}));
    err_clear(&e);
    st = dir ? config_load(&c, dir, &e) : QTTS_ERR_IO;
    CHECK("config_optional_defaults", st == QTTS_OK && c.talker.n_kv_heads == 4 && c.talker.head_dim == 16 &&
                                          c.talker.rope_theta == 10000.0f,
          "status %d (%s), kv %d head_dim %d theta %g", (int)st, e.msg, c.talker.n_kv_heads, c.talker.head_dim,
          c.talker.rope_theta);
}

static void test_malformed(void) {
    char *text = json_dumps(g_cfg, JSON_INDENT(2));
    if (!text) {
        test_report("config_malformed", 0, "cannot serialise the config");
        return;
    }
    /* garbage at the start of line 5 */
    size_t n = strlen(text);
    char *bad = malloc(n + 8);
    const char *p = text;
    for (int line = 1; line < 5 && p; line++) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    if (!bad || !p) {
        test_report("config_malformed_line_column", 0, "config has fewer than 5 lines");
        free(bad);
        free(text);
        return;
    }
    size_t at = (size_t)(p - text);
    memcpy(bad, text, at);
    memcpy(bad + at, "@@", 2);
    memcpy(bad + at + 2, text + at, n - at + 1);
    const char *dir = case_dir("malformed");
    write_text(dir, "config.json", bad);
    expect_dir("config_malformed_line_column", dir, QTTS_ERR_FORMAT, "line 5", "column");
    /* cut in half */
    bad[n / 2] = 0;
    memcpy(bad, text, n / 2);
    dir = case_dir("truncated");
    write_text(dir, "config.json", bad);
    expect_dir("config_truncated", dir, QTTS_ERR_FORMAT, "line", NULL);
    dir = case_dir("empty_file");
    write_text(dir, "config.json", "");
    expect_dir("config_empty_file", dir, QTTS_ERR_FORMAT, "line", NULL);
    dir = case_dir("array");
    write_text(dir, "config.json", "[1, 2, 3]\n");
    expect_dir("config_top_level_array", dir, QTTS_ERR_FORMAT, "not a JSON object", NULL);
    dir = case_dir("empty_object");
    write_text(dir, "config.json", "{}\n");
    expect_dir("config_empty_object", dir, QTTS_ERR_FORMAT, "tts_model_type", NULL);
    dir = case_dir("binary");
    write_text(dir, "config.json", "\x7f" "ELF\x02\x01\x01");
    expect_dir("config_binary_garbage", dir, QTTS_ERR_FORMAT, "line", NULL);
    free(bad);
    free(text);

    /* no config.json at all */
    dir = case_dir("no_config");
    qtts_config c;
    qtts_error e;
    err_clear(&e);
    qtts_status st = config_load(&c, dir, &e);
    CHECK("config_missing_file", st == QTTS_ERR_IO && strstr(e.msg, "config.json") && strstr(e.msg, dir),
          "status %d: %s", (int)st, e.msg);
}

static void test_mutations(void) {
    expect("config_missing_tts_model_type", MUTS({"tts_model_type", NULL}), QTTS_ERR_FORMAT, "tts_model_type",
           NULL);
    expect("config_tts_model_type_not_string", MUTS({"tts_model_type", json_integer(1)}), QTTS_ERR_FORMAT,
           "tts_model_type", NULL);
    expect("config_unknown_tts_model_type", MUTS({"tts_model_type", json_string("omni_voice")}),
           QTTS_ERR_UNSUPPORTED, "\"omni_voice\"", "custom_voice");
    expect("config_unknown_tokenizer_type", MUTS({"tokenizer_type", json_string("qwen3_tts_tokenizer_25hz")}),
           QTTS_ERR_UNSUPPORTED, "tokenizer_25hz", NULL);
    expect("config_missing_talker_config", MUTS({"talker_config", NULL}), QTTS_ERR_FORMAT, "talker_config", NULL);
    expect("config_talker_config_not_object", MUTS({"talker_config", json_array()}), QTTS_ERR_FORMAT,
           "talker_config", "object");
    expect("config_missing_hidden_size", MUTS({"talker_config.hidden_size", NULL}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", "missing");
    expect("config_null_hidden_size", MUTS({"talker_config.hidden_size", json_null()}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", NULL);
    expect("config_missing_cp_layers", MUTS({"talker_config.code_predictor_config.num_hidden_layers", NULL}),
           QTTS_ERR_FORMAT, "talker_config.code_predictor_config.num_hidden_layers", NULL);
    expect("config_missing_code_predictor_config", MUTS({"talker_config.code_predictor_config", NULL}),
           QTTS_ERR_FORMAT, "code_predictor_config", NULL);
    expect("config_negative_hidden_size", MUTS({"talker_config.hidden_size", json_integer(-64)}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", NULL);
    expect("config_zero_layers", MUTS({"talker_config.num_hidden_layers", json_integer(0)}), QTTS_ERR_FORMAT,
           "talker_config.num_hidden_layers", NULL);
    expect("config_huge_hidden_size", MUTS({"talker_config.hidden_size", json_integer(1LL << 40)}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", NULL);
    expect("config_huge_layers", MUTS({"talker_config.num_hidden_layers", json_integer(1000000000)}),
           QTTS_ERR_FORMAT, "talker_config.num_hidden_layers", NULL);
    expect("config_huge_vocab", MUTS({"talker_config.vocab_size", json_integer(2147483647)}), QTTS_ERR_FORMAT,
           "talker_config.vocab_size", NULL);
    expect("config_int_min_intermediate", MUTS({"talker_config.intermediate_size", json_integer(-2147483648LL)}),
           QTTS_ERR_FORMAT, "talker_config.intermediate_size", NULL);
    expect("config_hidden_size_string", MUTS({"talker_config.hidden_size", json_string("64")}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", NULL);
    expect("config_hidden_size_fractional", MUTS({"talker_config.hidden_size", json_real(64.5)}), QTTS_ERR_FORMAT,
           "talker_config.hidden_size", NULL);
    expect("config_negative_eps", MUTS({"talker_config.rms_norm_eps", json_real(-1e-6)}), QTTS_ERR_FORMAT,
           "talker_config.rms_norm_eps", NULL);
    expect("config_rope_theta_zero", MUTS({"talker_config.rope_theta", json_integer(0)}), QTTS_ERR_FORMAT,
           "talker_config.rope_theta", NULL);
    expect("config_heads_not_multiple_of_kv",
           MUTS({"talker_config.num_attention_heads", json_integer(4)},
                {"talker_config.num_key_value_heads", json_integer(3)}),
           QTTS_ERR_FORMAT, "num_attention_heads (4)", "num_key_value_heads (3)");
    expect("config_cp_heads_not_multiple_of_kv",
           MUTS({"talker_config.code_predictor_config.num_key_value_heads", json_integer(3)}), QTTS_ERR_FORMAT,
           "talker_config.code_predictor_config.num_attention_heads", NULL);
    expect("config_kv_heads_zero", MUTS({"talker_config.num_key_value_heads", json_integer(0)}), QTTS_ERR_FORMAT,
           "talker_config.num_key_value_heads", NULL);
    expect("config_head_dim_odd", MUTS({"talker_config.head_dim", json_integer(15)}), QTTS_ERR_FORMAT, "head_dim",
           NULL);
    expect("config_hidden_act_gelu", MUTS({"talker_config.hidden_act", json_string("gelu")}), QTTS_ERR_UNSUPPORTED,
           "hidden_act", NULL);
    expect("config_rope_scaling_yarn", MUTS({"talker_config.rope_scaling.rope_type", json_string("yarn")}),
           QTTS_ERR_UNSUPPORTED, "rope_scaling", NULL);
    expect("config_code_groups_one", MUTS({"talker_config.num_code_groups", json_integer(1)}), QTTS_ERR_FORMAT,
           "talker_config.num_code_groups", NULL);
    expect("config_language_id_out_of_range", MUTS({"talker_config.codec_language_id.english", json_integer(3072)}),
           QTTS_ERR_FORMAT, "talker_config.codec_language_id.english", "[0, 3072)");
    expect("config_language_id_negative", MUTS({"talker_config.codec_language_id.german", json_integer(-1)}),
           QTTS_ERR_FORMAT, "talker_config.codec_language_id.german", NULL);
    expect("config_language_id_string", MUTS({"talker_config.codec_language_id.french", json_string("2061")}),
           QTTS_ERR_FORMAT, "talker_config.codec_language_id.french", NULL);
    expect("config_language_table_not_object", MUTS({"talker_config.codec_language_id", json_integer(3)}),
           QTTS_ERR_FORMAT, "codec_language_id", NULL);
    expect("config_speaker_id_out_of_range", MUTS({"talker_config.spk_id.ryan", json_integer(99999)}),
           QTTS_ERR_FORMAT, "talker_config.spk_id.ryan", NULL);
    expect("config_custom_voice_without_spk_id", MUTS({"talker_config.spk_id", NULL}), QTTS_ERR_FORMAT, "spk_id",
           "custom_voice");
    expect("config_custom_voice_empty_spk_id", MUTS({"talker_config.spk_id", json_object()}), QTTS_ERR_FORMAT,
           "spk_id", NULL);
    expect("config_codec_eos_out_of_vocab", MUTS({"talker_config.codec_eos_token_id", json_integer(3072)}),
           QTTS_ERR_FORMAT, "talker_config.codec_eos_token_id", NULL);
    expect("config_missing_codec_bos", MUTS({"talker_config.codec_bos_id", NULL}), QTTS_ERR_FORMAT,
           "talker_config.codec_bos_id", NULL);
    expect("config_im_start_out_of_text_vocab", MUTS({"im_start_token_id", json_integer(1024)}), QTTS_ERR_FORMAT,
           "im_start_token_id", NULL);
    expect("config_missing_tts_pad", MUTS({"tts_pad_token_id", NULL}), QTTS_ERR_FORMAT, "tts_pad_token_id", NULL);
    expect("config_cp_vocab_exceeds_talker",
           MUTS({"talker_config.code_predictor_config.vocab_size", json_integer(4096)}), QTTS_ERR_FORMAT,
           "vocab_size", NULL);
    expect("config_speaker_encoder_dim_mismatch",
           MUTS({"speaker_encoder_config", json_pack("{s:i}", "enc_dim", 128)}), QTTS_ERR_FORMAT, "enc_dim", NULL);

    /* tables beyond the fixed capacity */
    json_t *many = json_object();
    for (int i = 0; i < CFG_MAX_NAMES + 1; i++) {
        char k[32];
        snprintf(k, sizeof k, "speaker_%d", i);
        json_object_set_new(many, k, json_integer(3000 + i % 50));
    }
    expect("config_too_many_speakers", MUTS({"talker_config.spk_id", many}), QTTS_ERR_FORMAT, "talker_config.spk_id",
           "too many");
    char longkey[CFG_NAME_MAX + 8];
    memset(longkey, 'x', CFG_NAME_MAX);
    longkey[CFG_NAME_MAX] = 0;
    json_t *lk = json_object();
    json_object_set_new(lk, longkey, json_integer(3000));
    expect("config_speaker_name_too_long", MUTS({"talker_config.spk_id", lk}), QTTS_ERR_FORMAT, "talker_config.spk_id",
           NULL);
}

/* ------------------------------------------------------------ generation_config.json */

static int sampling_eq(const qtts_sampling *a, int ds, float t, int k, float p, float rp) {
    return a->do_sample == ds && a->temperature == t && a->top_k == k && a->top_p == p && a->repetition_penalty == rp;
}

static void expect_gen(const char *name, const char *json, qtts_status want, const char *sub) {
    const char *dir = case_dir(name);
    write_text(dir, "generation_config.json", json);
    gen_config g;
    qtts_error e;
    err_clear(&e);
    qtts_status st = gen_config_load(&g, dir, &e);
    int ok = st == want && (want == QTTS_OK ||
                            (strstr(e.msg, "generation_config.json") && strstr(e.msg, dir) && (!sub || strstr(e.msg, sub))));
    test_report(name, ok, "got %d want %d; message \"%s\"; expected \"%s\"", (int)st, (int)want, e.msg,
                sub ? sub : "");
}

static void test_gen_config(void) {
    gen_config g;
    qtts_error e;
    err_clear(&e);
    memset(&g, 0x5a, sizeof g);
    const char *dir = case_dir("gen_absent");
    qtts_status st = gen_config_load(&g, dir, &e);
    CHECK("gen_config_absent_fallbacks",
          st == QTTS_OK && sampling_eq(&g.talker, 1, 0.9f, 50, 1.0f, 1.05f) &&
              sampling_eq(&g.predictor, 1, 0.9f, 50, 1.0f, 1.0f) && g.max_new_tokens == 2048,
          "status %d; talker {%d %g %d %g %g} predictor {%d %g %d %g %g} max %d", (int)st, g.talker.do_sample,
          g.talker.temperature, g.talker.top_k, g.talker.top_p, g.talker.repetition_penalty, g.predictor.do_sample,
          g.predictor.temperature, g.predictor.top_k, g.predictor.top_p, g.predictor.repetition_penalty,
          g.max_new_tokens);

    err_clear(&e);
    st = gen_config_load(&g, test_path("golden/data/custom_voice"), &e);
    CHECK("gen_config_real_file",
          st == QTTS_OK && sampling_eq(&g.talker, 0, 0.9f, 50, 1.0f, 1.05f) &&
              sampling_eq(&g.predictor, 0, 0.9f, 50, 1.0f, 1.0f) && g.max_new_tokens == 9,
          "status %d (%s); talker do_sample %d, max_new_tokens %d", (int)st, e.msg, g.talker.do_sample,
          g.max_new_tokens);

    dir = case_dir("gen_partial");
    write_text(dir, "generation_config.json",
               "{\"top_k\": 10, \"subtalker_temperature\": 0.5, \"subtalker_top_p\": 0.8, \"max_new_tokens\": 77}");
    err_clear(&e);
    st = gen_config_load(&g, dir, &e);
    CHECK("gen_config_partial", st == QTTS_OK && sampling_eq(&g.talker, 1, 0.9f, 10, 1.0f, 1.05f) &&
                                    sampling_eq(&g.predictor, 1, 0.5f, 50, 0.8f, 1.0f) && g.max_new_tokens == 77,
          "status %d (%s)", (int)st, e.msg);

    expect_gen("gen_config_malformed", "{\n  \"top_k\": 50,\n  \"top_p\": ,\n}\n", QTTS_ERR_FORMAT, "line 3");
    expect_gen("gen_config_empty_file", "", QTTS_ERR_FORMAT, "line");
    expect_gen("gen_config_array", "[0.9, 50]", QTTS_ERR_FORMAT, "not a JSON object");
    expect_gen("gen_config_top_p_above_one", "{\"top_p\": 1.5}", QTTS_ERR_FORMAT, "top_p");
    expect_gen("gen_config_top_p_zero", "{\"subtalker_top_p\": 0}", QTTS_ERR_FORMAT, "subtalker_top_p");
    expect_gen("gen_config_temperature_zero", "{\"temperature\": 0}", QTTS_ERR_FORMAT, "temperature");
    expect_gen("gen_config_temperature_negative", "{\"subtalker_temperature\": -1.0}", QTTS_ERR_FORMAT,
               "subtalker_temperature");
    expect_gen("gen_config_temperature_string", "{\"temperature\": \"hot\"}", QTTS_ERR_FORMAT, "temperature");
    expect_gen("gen_config_top_k_negative", "{\"top_k\": -5}", QTTS_ERR_FORMAT, "top_k");
    expect_gen("gen_config_top_k_fractional", "{\"subtalker_top_k\": 2.5}", QTTS_ERR_FORMAT, "subtalker_top_k");
    expect_gen("gen_config_repetition_penalty_zero", "{\"repetition_penalty\": 0}", QTTS_ERR_FORMAT,
               "repetition_penalty");
    expect_gen("gen_config_max_new_tokens_zero", "{\"max_new_tokens\": 0}", QTTS_ERR_FORMAT, "max_new_tokens");
    expect_gen("gen_config_max_new_tokens_huge", "{\"max_new_tokens\": 99999999999}", QTTS_ERR_FORMAT,
               "max_new_tokens");
    expect_gen("gen_config_nan_like", "{\"temperature\": 1e999}", QTTS_ERR_FORMAT, NULL);
    /* do_sample written as 0 / "false": HF reads 0 as false (greedy); it must
     * not be silently ignored, which leaves sampling on. Either honour it or
     * reject it with a message naming the key. */
    static const char *ds[3] = {"{\"do_sample\": 0}", "{\"do_sample\": \"false\"}", "{\"subtalker_dosample\": 0}"};
    char why[1400] = "";
    for (int i = 0; i < 3; i++) {
        dir = case_dir("gen_do_sample_type");
        write_text(dir, "generation_config.json", ds[i]);
        err_clear(&e);
        st = gen_config_load(&g, dir, &e);
        const int key_sub = i == 2, got = key_sub ? g.predictor.do_sample : g.talker.do_sample;
        const int honoured = st == QTTS_OK && got == 0;
        const int rejected = st == QTTS_ERR_FORMAT && strstr(e.msg, key_sub ? "subtalker_dosample" : "do_sample");
        if (!honoured && !rejected && !why[0])
            snprintf(why, sizeof why, "%s: status %d (%s), do_sample %d: silently ignored, sampling stays on", ds[i],
                     (int)st, e.msg, got);
    }
    CHECK("gen_config_do_sample_not_boolean", !why[0], "%s", why);
}

int main(void) {
    json_error_t jerr;
    const char *src = test_path("golden/data/custom_voice/config.json");
    g_cfg = json_load_file(src, 0, &jerr);
    if (!g_cfg) {
        test_skip("config", "cannot read %s: %s", src, jerr.text);
        return test_finish();
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qtts_test_cfg_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        test_report("mkdtemp", 0, "cannot create a temp folder under /tmp");
        json_decref(g_cfg);
        return test_finish();
    }
    test_valid();
    test_malformed();
    test_mutations();
    test_gen_config();
    json_decref(g_cfg);
    nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
