/* Fuzz target: config.json and generation_config.json (src/model/config.c),
 * and with them a whole model load, so that dimensions which disagree with
 * each other or with the weights are refused, not used. Input: byte 0 picks
 * the depth (bit 0 set: after a successful parse, load the model from a
 * folder whose weights, codec and tokenizer are the tiny e2e_string test
 * checkpoint's, linked beside the fuzzed JSON); the rest is split at
 * "\n==GEN==\n" into config.json and generation_config.json (absent when
 * there is no separator). A parsed config must be self-consistent: ids in
 * their vocabularies, table entries named and in range. */
#include <limits.h>

#include "fuzz.h"
#include "model/config.h"
#include "qtts.h"

static void link_checkpoint(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *const names[] = {"model.safetensors", "speech_tokenizer", "vocab.json", "merges.txt",
                                 "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[256], abs[PATH_MAX], to[512];
        snprintf(rel, sizeof rel, "tests/golden/data/e2e_string/%s", names[i]);
        if (!realpath(fuzz_repo_path(rel), abs)) {
            fprintf(stderr, "fuzz_config: %s is missing (run from the repository root or set QTTS_REPO)\n", rel);
            abort();
        }
        snprintf(to, sizeof to, "%s/%s", fuzz_dir(), names[i]);
        unlink(to);
        if (symlink(abs, to)) abort();
    }
}

static void check_table(const name_id *t, int n, int vocab) {
    FUZZ_CHECK(n >= 0 && n <= CFG_MAX_NAMES);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(memchr(t[i].name, 0, CFG_NAME_MAX) != NULL);
        FUZZ_CHECK(memchr(t[i].dialect, 0, CFG_NAME_MAX) != NULL);
        FUZZ_CHECK(t[i].id >= 0 && t[i].id < vocab);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int load = data[0] & 1;
    const uint8_t *part[2];
    size_t len[2];
    int n = fuzz_split(data + 1, size - 1, "\n==GEN==\n", part, len, 2);
    fuzz_file("config.json", part[0], len[0]);
    if (n > 1) fuzz_file("generation_config.json", part[1], len[1]);
    else fuzz_file("generation_config.json", NULL, SIZE_MAX);
    qtts_config c;
    gen_config g;
    qtts_error e;
    memset(&e, 0, sizeof e);
    const qtts_status sc = config_load(&c, fuzz_dir(), &e);
    const qtts_status sg = gen_config_load(&g, fuzz_dir(), &e);
    if (sc == QTTS_OK) {
        FUZZ_CHECK(c.talker.hidden > 0 && c.talker.vocab > 0 && c.text_vocab > 0);
        FUZZ_CHECK(c.codec_pad >= 0 && c.codec_pad < c.talker.vocab);
        FUZZ_CHECK(c.codec_eos >= 0 && c.codec_eos < c.talker.vocab);
        FUZZ_CHECK(c.tts_pad >= 0 && c.tts_pad < c.text_vocab);
        check_table(c.langs, c.n_langs, c.talker.vocab);
        check_table(c.speakers, c.n_speakers, c.talker.vocab);
        for (int i = 0; i < c.n_langs; i++) FUZZ_CHECK(config_language(&c, c.langs[i].name) != NULL);
        for (int i = 0; i < c.n_speakers; i++) FUZZ_CHECK(config_speaker(&c, c.speakers[i].name) != NULL);
        config_language(&c, "english");
        config_speaker(&c, "");
    }
    if (sc == QTTS_OK && sg == QTTS_OK && load) {
        link_checkpoint();
        qtts_model_params mp = qtts_model_default_params();
        mp.n_threads = 1;
        qtts_model *m = NULL;
        char err[1024];
        if (qtts_model_load(&m, fuzz_dir(), &mp, err, sizeof err) == QTTS_OK) {
            qtts_model_info info;
            qtts_model_get_info(m, &info);
            FUZZ_CHECK(info.hidden_size == c.talker.hidden);
        } else {
            FUZZ_CHECK(m == NULL && err[0]);
        }
        qtts_model_free(m);
    }
    return 0;
}
