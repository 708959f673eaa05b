/* Voices in qtts-server: on a Base checkpoint (tests/golden/data/base_clone
 * plus the tiny test tokenizer) a voice uploaded once as multipart (ICL with a
 * transcript, or x-vector only) is kept on disk, listed, used by name, alone
 * or batched with the same bytes, survives a restart and can be deleted; bad
 * uploads (not audio, no name, bad name, no file, unknown field, not
 * multipart, too large, a duplicate) get 4xx in OpenAI's error shape. On a
 * VoiceDesign checkpoint the voice comes from the instructions; on non-Base
 * models cloning is refused clearly. */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "srv_util.h"

static char g_tmp[PATH_MAX];

/* dst/ = symlinks to everything in src/ and tok/ */
static int model_dir(const char *src, const char *tok, const char *dst) {
    if (mkdir(dst, 0755)) return -1;
    const char *dirs[2] = {src, tok};
    for (int i = 0; i < 2; i++) {
        char abs[PATH_MAX];
        if (!realpath(dirs[i], abs)) return -1;
        DIR *d = opendir(abs);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char from[PATH_MAX * 2], to[PATH_MAX * 2];
            snprintf(from, sizeof from, "%s/%s", abs, de->d_name);
            snprintf(to, sizeof to, "%s/%s", dst, de->d_name);
            if (symlink(from, to)) {
                closedir(d);
                return -1;
            }
        }
        if (d) closedir(d);
    }
    return 0;
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)sz);
    *n = p ? fread(p, 1, (size_t)sz, f) : 0;
    fclose(f);
    return p;
}

#define BOUNDARY "qttsBoundary7MA4YWxk"

typedef struct form {
    unsigned char *p;
    size_t n, cap;
} form;

static void put(form *f, const void *d, size_t n) {
    if (f->n + n > f->cap) f->p = realloc(f->p, f->cap = (f->n + n) * 2 + 1024);
    memcpy(f->p + f->n, d, n);
    f->n += n;
}

static void field(form *f, const char *name, const char *value) {
    char h[512];
    snprintf(h, sizeof h, "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n", name, value);
    put(f, h, strlen(h));
}

static void file_field(form *f, const char *name, const unsigned char *d, size_t n) {
    char h[512];
    snprintf(h, sizeof h,
             "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"ref.wav\"\r\nContent-Type: "
             "audio/wav\r\n\r\n",
             name);
    put(f, h, strlen(h));
    put(f, d, n);
    put(f, "\r\n", 2);
}

static int upload(server *s, form *f, http_result *r) {
    put(f, "--" BOUNDARY "--\r\n", strlen("--" BOUNDARY "--\r\n"));
    int rc = hc_request("127.0.0.1", server_port(s), "POST", "/v1/audio/voices",
                        "Content-Type: multipart/form-data; boundary=" BOUNDARY "\r\n", f->p, f->n, TIMEOUT_MS, r);
    free(f->p);
    memset(f, 0, sizeof *f);
    return rc;
}

#define SPEAK(voice, extra)                                                                                            \
    "{\"model\":\"m\",\"input\":\"Hello there, how are you?\",\"voice\":\"" voice "\",\"language\":\"english\","     \
    "\"seed\":5,\"do_sample\":true,\"response_format\":\"pcm\"" extra "}"

typedef struct bgs {
    server *s;
    int status;
} bgs;

static void *carol_stream(void *arg) {
    bgs *b = arg;
    http_result r;
    post_json(b->s, SPEAK("carol", ",\"stream_format\":\"audio\",\"force_frames\":300"), &r);
    b->status = r.status;
    http_result_free(&r);
    return NULL;
}

static void base_model(qtts_model *m, const unsigned char *wav, size_t n_wav) {
    char vdir[PATH_MAX + 16], why[512];
    snprintf(vdir, sizeof vdir, "%s/voices", g_tmp);
    server_config cfg = test_config();
    cfg.voices_dir = vdir;
    cfg.max_upload_bytes = 512 * 1024;
    server *s = start_server(m, &cfg);
    if (!s) return;
    http_result r;
    req(s, "GET", "/v1/audio/voices", NULL, NULL, &r);
    CHECK("base/list_empty", r.status == 200 && strstr(r.body, "\"data\":[]") && strstr(r.body, "\"base\""), "%s", r.body);
    http_result_free(&r);
    post_json(s, "{\"model\":\"m\",\"input\":\"hi\"}", &r);
    CHECK("base/speech_needs_voice", r.status == 400 && is_error_shape(&r, "voice", why, sizeof why), "%s", why);
    http_result_free(&r);
    post_json(s, SPEAK("bob", ""), &r);
    CHECK("base/unknown_voice_400", r.status == 400 && is_error_shape(&r, "voice", why, sizeof why), "%s", why);
    http_result_free(&r);

    form f = {0};
    field(&f, "name", "bob");
    field(&f, "text", "Hi there");
    file_field(&f, "audio", wav, n_wav);
    upload(s, &f, &r);
    CHECK("base/upload_icl_201", r.status == 201 && strstr(r.body, "\"mode\":\"icl\"") && strstr(r.body, "\"bob\""),
          "%d %s", r.status, r.body);
    http_result_free(&r);
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/bob.qvoice", vdir);
    struct stat st;
    CHECK("base/voice_kept_on_disk", stat(path, &st) == 0 && st.st_size > 64, "%s missing", path);
    field(&f, "name", "carol");
    field(&f, "xvector_only", "true");
    file_field(&f, "file", wav, n_wav);
    upload(s, &f, &r);
    CHECK("base/upload_xvector_201", r.status == 201 && strstr(r.body, "\"mode\":\"xvector\""), "%d %s", r.status, r.body);
    http_result_free(&r);

    struct {
        const char *name;
        int status;
        const char *param;
        int build; /* which form */
    } bad[] = {
        {"duplicate_409", 409, "name", 0}, {"not_audio_400", 400, "audio", 1}, {"no_name_400", 400, "name", 2},
        {"bad_name_400", 400, "name", 3},  {"no_audio_400", 400, "audio", 4},  {"unknown_field_400", 400, NULL, 5},
        {"too_large_413", 413, NULL, 6},
    };
    unsigned char junk[4000];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 37 + 11);
    unsigned char *huge = calloc(600 * 1024, 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        switch (bad[i].build) {
        case 0: field(&f, "name", "bob"); file_field(&f, "audio", wav, n_wav); break;
        case 1: field(&f, "name", "junk"); file_field(&f, "audio", junk, sizeof junk); break;
        case 2: file_field(&f, "audio", wav, n_wav); break;
        case 3: field(&f, "name", "../etc/x"); file_field(&f, "audio", wav, n_wav); break;
        case 4: field(&f, "name", "nofile"); break;
        case 5: field(&f, "name", "x1"); field(&f, "color", "blue"); file_field(&f, "audio", wav, n_wav); break;
        case 6: field(&f, "name", "big"); file_field(&f, "audio", huge, 600 * 1024); break;
        }
        upload(s, &f, &r);
        char tn[64];
        snprintf(tn, sizeof tn, "base/upload_%s", bad[i].name);
        CHECK(tn, r.status == bad[i].status && is_error_shape(&r, bad[i].param, why, sizeof why), "%s", why);
        http_result_free(&r);
    }
    free(huge);
    snprintf(path, sizeof path, "%s/junk.qvoice", vdir);
    CHECK("base/failed_upload_leaves_no_file", stat(path, &st) != 0, "%s exists", path);
    req(s, "POST", "/v1/audio/voices", "Content-Type: application/json\r\n", "{\"name\":\"x\"}", &r);
    CHECK("base/upload_not_multipart_400", r.status == 400 && is_error_shape(&r, NULL, why, sizeof why), "%s", why);
    http_result_free(&r);

    req(s, "GET", "/v1/audio/voices", NULL, NULL, &r);
    CHECK("base/list_uploaded", r.status == 200 && strstr(r.body, "\"bob\"") && strstr(r.body, "\"carol\"") &&
                                    strstr(r.body, "\"cloned\""),
          "%s", r.body);
    http_result_free(&r);
    http_result bob, bob2;
    post_json(s, SPEAK("bob", ""), &bob);
    CHECK("base/speak_icl_voice", bob.status == 200 && bob.n > 0, "%d %.200s", bob.status, bob.body);
    post_json(s, SPEAK("carol", ",\"stream_format\":\"audio\""), &r);
    CHECK("base/speak_xvector_voice_streamed", r.status == 200 && r.n > 0 && r.complete, "%d", r.status);
    http_result_free(&r);
    post_json(s, "{\"model\":\"m\",\"input\":\"hi\",\"voice\":\"bob\",\"instructions\":\"whisper\"}", &r);
    CHECK("base/instructions_refused", r.status == 400 && is_error_shape(&r, "instructions", why, sizeof why), "%s", why);
    http_result_free(&r);
    /* a cloned voice batched with another stream: same bytes */
    bgs b = {s, 0};
    pthread_t th;
    pthread_create(&th, NULL, carol_stream, &b);
    wait_metric(s, "qtts_active_slots", 1, 5000);
    post_json(s, SPEAK("bob", ""), &bob2);
    const double active = metric(s, "qtts_active_slots");
    pthread_join(th, NULL);
    CHECK("base/icl_voice_batched_bit_identical", bob2.status == 200 && bob2.n == bob.n && !memcmp(bob.body, bob2.body, bob.n) &&
                                                       b.status == 200 && active >= 1,
          "%zu vs %zu bytes, other stream %d, active %g", bob2.n, bob.n, b.status, active);
    http_result_free(&bob2);
    server_stop(s);

    /* a new server on the same folder knows the voices */
    s = start_server(m, &cfg);
    if (!s) {
        http_result_free(&bob);
        return;
    }
    post_json(s, SPEAK("bob", ""), &bob2);
    CHECK("base/voice_survives_restart", bob2.status == 200 && bob2.n == bob.n && !memcmp(bob.body, bob2.body, bob.n),
          "%d, %zu vs %zu bytes", bob2.status, bob2.n, bob.n);
    http_result_free(&bob2);
    http_result_free(&bob);
    req(s, "DELETE", "/v1/audio/voices/carol", NULL, NULL, &r);
    CHECK("base/delete", r.status == 200 && strstr(r.body, "\"deleted\":true"), "%d %s", r.status, r.body);
    http_result_free(&r);
    snprintf(path, sizeof path, "%s/carol.qvoice", vdir);
    CHECK("base/delete_removes_file", stat(path, &st) != 0, "%s still there", path);
    req(s, "DELETE", "/v1/audio/voices/carol", NULL, NULL, &r);
    CHECK("base/delete_again_404", r.status == 404 && is_error_shape(&r, NULL, why, sizeof why), "%s", why);
    http_result_free(&r);
    post_json(s, SPEAK("carol", ""), &r);
    CHECK("base/deleted_voice_unknown", r.status == 400, "%d", r.status);
    http_result_free(&r);
    server_stop(s);
}

static void design_model(qtts_model *m) {
    server_config cfg = test_config();
    server *s = start_server(m, &cfg);
    if (!s) return;
    http_result r;
    char why[512];
    post_json(s, "{\"model\":\"m\",\"input\":\"Hello there.\",\"instructions\":\"A warm, low voice.\","
                 "\"response_format\":\"wav\",\"seed\":3}",
              &r);
    CHECK("design/voice_from_instructions", r.status == 200 && r.n > 44 && !memcmp(r.body, "RIFF", 4), "%d %.200s", r.status,
          r.body);
    http_result_free(&r);
    post_json(s, "{\"model\":\"m\",\"input\":\"Hello there.\",\"voice\":\"alloy\",\"instructions\":\"A warm, low voice.\","
                 "\"response_format\":\"pcm\"}",
              &r);
    CHECK("design/voice_field_ignored", r.status == 200 && r.n > 0, "%d %.200s", r.status, r.body);
    http_result_free(&r);
    post_json(s, "{\"model\":\"m\",\"input\":\"Hello there.\",\"voice\":\"alloy\"}", &r);
    CHECK("design/needs_instructions", r.status == 400 && is_error_shape(&r, "instructions", why, sizeof why), "%s", why);
    http_result_free(&r);
    req(s, "GET", "/v1/audio/voices", NULL, NULL, &r);
    CHECK("design/list", r.status == 200 && strstr(r.body, "\"voice_from_instructions\":true"), "%s", r.body);
    http_result_free(&r);
    form f = {0};
    field(&f, "name", "x");
    upload(s, &f, &r);
    CHECK("design/cloning_refused", r.status == 400 && is_error_shape(&r, NULL, why, sizeof why) &&
                                        strstr(r.body, "cloning_unsupported"),
          "%s", why);
    http_result_free(&r);
    server_stop(s);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qtts-voices-test-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        test_report("voices/tmpdir", 0, "mkdtemp failed");
        return test_finish();
    }
    char bc[PATH_MAX + 8], vd[PATH_MAX + 8];
    snprintf(bc, sizeof bc, "%s/bc", g_tmp);
    snprintf(vd, sizeof vd, "%s/vd", g_tmp);
    if (model_dir(test_path("golden/data/base_clone"), test_path("golden/tiny_tokenizer"), bc) ||
        model_dir(test_path("golden/data/voice_design"), test_path("golden/tiny_tokenizer"), vd)) {
        test_report("voices/model_dirs", 0, "cannot link the test checkpoints into %s", g_tmp);
        return test_finish();
    }
    size_t n_wav = 0;
    unsigned char *wav = read_file(test_path("golden/data/base_clone/inputs/ref_audio.wav"), &n_wav);
    qtts_model *m = load_model(bc);
    if (m && wav) base_model(m, wav, n_wav);
    qtts_model_free(m);
    m = load_model(vd);
    if (m) design_model(m);
    qtts_model_free(m);
    free(wav);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return test_finish();
}
