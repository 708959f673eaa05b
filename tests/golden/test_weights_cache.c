/* Prepared-weights cache (qtts_model_params.cache_dir): on a copy of the
 * e2e_string checkpoint in a temp folder, the first q8 / q4 / mixed load
 * writes a cache file and the next maps it, with codes identical to a load
 * without the cache; a file with a damaged header, truncated, with bytes
 * appended, or stale (the checkpoint's mtime changed) is detected, rebuilt
 * and the codes stay the same; four processes loading at once with an empty
 * cache all get the same codes and leave one valid file and no temporary
 * files; qtts_cache_list / qtts_cache_clear see and remove the files; no
 * cache_dir means no file; the codec decoder's packed transposed convs are
 * written, mapped and rebuilt with the same PCM. Never touches the user's
 * ~/.cache. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/codec_decoder.h"
#include "qtts.h"
#include "test.h"

static char g_tmp[256], g_model[512], g_cache[512];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Load with talker format t, predictor format pt; the codes of a greedy
 * request into *codes; the cache status into status. 0 on success. */
static int run(qtts_weight_type t, qtts_weight_type pt, const char *cache, int32_t **codes, int *nf, char *status,
               size_t cap) {
    qtts_model_params mp = qtts_model_default_params();
    mp.weights = t;
    mp.predictor_weights = pt;
    mp.cache_dir = cache;
    mp.load_codec = 0;
    qtts_model *m = NULL;
    char err[1024];
    *codes = NULL;
    if (qtts_model_load(&m, g_model, &mp, err, sizeof err)) {
        snprintf(status, cap, "load failed: %s", err);
        return -1;
    }
    qtts_model_info in;
    qtts_model_get_info(m, &in);
    snprintf(status, cap, "%s", in.weights_cache);
    qtts_context *ctx = NULL;
    int rc = -1;
    if (!qtts_context_new(m, NULL, &ctx, NULL, 0)) {
        qtts_gen_params gp = qtts_gen_default_params(m);
        gp.text = "Hi there, how are you?";
        gp.speaker = "vivian";
        gp.language = "english";
        gp.talker.do_sample = gp.predictor.do_sample = 0;
        gp.max_new_tokens = 10;
        rc = qtts_generate_codes(ctx, &gp, NULL, NULL, codes, nf) ? -1 : 0;
        qtts_context_free(ctx);
    }
    qtts_model_free(m);
    return rc;
}

static int same(const int32_t *a, int na, const int32_t *b, int nb) {
    return a && b && na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * 16 * (size_t)na);
}

static void count_file(const char *path, long long bytes, void *u) {
    (void)path, (void)bytes;
    ++*(int *)u;
}

/* The one cache file of the checkpoint with this suffix ("-q8-q8-"), into out. */
static int find_file(const char *suffix, char *out, size_t cap) {
    DIR *d = opendir(g_cache);
    int found = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, suffix) && strstr(de->d_name, ".qwc") && !strstr(de->d_name, ".tmp.")) {
            snprintf(out, cap, "%s/%s", g_cache, de->d_name);
            found++;
        }
    if (d) closedir(d);
    return found;
}

static int count_tmp(void) {
    DIR *d = opendir(g_cache);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    char buf[65536];
    size_t k;
    while (a && b && (k = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, k, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* A load that must rebuild the file after `what` was done to it, with the reference codes. */
static void expect_rebuilt(const char *name, const int32_t *ref, int nref) {
    int32_t *c = NULL;
    int nf = 0;
    char st[8192];
    int rc = run(QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_DEFAULT, g_cache, &c, &nf, st, sizeof st);
    int ok = rc == 0 && !strncmp(st, "written ", 8) && same(c, nf, ref, nref);
    free(c);
    /* and the rebuilt file is used by the next load */
    c = NULL;
    char st2[8192] = "";
    if (ok) rc = run(QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_DEFAULT, g_cache, &c, &nf, st2, sizeof st2);
    ok = ok && rc == 0 && !strncmp(st2, "mapped ", 7) && same(c, nf, ref, nref);
    CHECK(name, ok, "status \"%s\" then \"%s\"", st, st2);
    free(c);
}

/* The codec decoder's packed transposed convs through the cache
 * (codec_decoder_load_cached): written by the first load, mapped by the
 * next, rebuilt when truncated or when its key does not match, and the PCM
 * bit-identical to a load without the cache every time. */
static void check_codec_tconv_cache(void) {
    enum { F = 9 };
    char dir[1024], path[1024], st[4200];
    snprintf(dir, sizeof dir, "%s/speech_tokenizer", g_model);
    snprintf(path, sizeof path, "%s/codec-tconv-test.qwc", g_cache);
    int32_t codes[F * 16];
    for (int i = 0; i < F * 16; i++) codes[i] = (i * 7919 + 13) % 2048;
    float *ref = malloc(sizeof(float) * F * 1920), *pcm = malloc(sizeof(float) * F * 1920);
    qtts_error e = {0};
    codec_decoder *d = NULL;
    int ok = ref && pcm && codec_decoder_load(&d, dir, 1, &e) == QTTS_OK && codec_decode(d, codes, F, ref, &e) == QTTS_OK;
    codec_decoder_free(d);
    CHECK("codec_tconv/reference", ok, "%s", e.msg);
    if (!ok) {
        free(ref), free(pcm);
        return;
    }
    /* written, mapped, then truncated (rebuilt), mapped again; huge_pages 0 and 1 */
    const char *want[4] = {"written ", "mapped ", "written ", "mapped "};
    for (int k = 0; k < 4; k++) {
        if (k == 2) {
            struct stat sb;
            if (stat(path, &sb) == 0 && truncate(path, sb.st_size - 4096) != 0) sb.st_size = 0;
        }
        d = NULL;
        st[0] = 0;
        int r = codec_decoder_load_cached(&d, dir, k & 1, path, st, sizeof st, &e) == QTTS_OK &&
                codec_decode(d, codes, F, pcm, &e) == QTTS_OK;
        codec_decoder_free(d);
        char name[64];
        snprintf(name, sizeof name, "codec_tconv/%d_%.7s", k, want[k]);
        CHECK(name, r && !strncmp(st, want[k], strlen(want[k])) && !memcmp(ref, pcm, sizeof(float) * F * 1920),
              "status \"%s\", %s", st, r ? "PCM differs or wrong status" : e.msg);
    }
    free(ref), free(pcm);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qtts_wcache_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        test_report("wcache/mkdtemp", 0, "cannot create a temp folder");
        return test_finish();
    }
    /* the checkpoint: model.safetensors copied (its mtime is ours to change), the rest linked */
    snprintf(g_model, sizeof g_model, "%s/model", g_tmp);
    snprintf(g_cache, sizeof g_cache, "%s/cache", g_tmp);
    mkdir(g_model, 0755);
    const char *files[] = {"config.json", "generation_config.json", "merges.txt", "vocab.json",
                           "tokenizer_config.json", "speech_tokenizer"};
    char a[1024], b[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(a, sizeof a, "%s", test_path("golden/data/e2e_string/%s", files[i]));
        char *abs = realpath(a, NULL);
        snprintf(b, sizeof b, "%s/%s", g_model, files[i]);
        if (abs && symlink(abs, b) != 0) perror("symlink");
        free(abs);
    }
    snprintf(b, sizeof b, "%s/model.safetensors", g_model);
    copy_file(test_path("golden/data/e2e_string/model.safetensors"), b);

    struct {
        qtts_weight_type t, pt;
        const char *suffix;
    } fm[] = {{QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_DEFAULT, "-q8-q8-"},
              {QTTS_WEIGHTS_Q4, QTTS_WEIGHTS_DEFAULT, "-q4-q4-"},
              {QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_NATIVE, "-q8-native-"}};
    int32_t *ref_q8 = NULL;
    int n_ref_q8 = 0;
    char st[8192], name[128], path[4096];
    for (size_t k = 0; k < sizeof fm / sizeof fm[0]; k++) {
        int32_t *ref = NULL, *c1 = NULL, *c2 = NULL;
        int nr = 0, n1 = 0, n2 = 0;
        char s0[8192], s1[8192], s2[8192];
        int r0 = run(fm[k].t, fm[k].pt, NULL, &ref, &nr, s0, sizeof s0);
        int r1 = run(fm[k].t, fm[k].pt, g_cache, &c1, &n1, s1, sizeof s1);
        int r2 = run(fm[k].t, fm[k].pt, g_cache, &c2, &n2, s2, sizeof s2);
        snprintf(name, sizeof name, "wcache%s/no_cache_dir_is_off", fm[k].suffix);
        CHECK(name, r0 == 0 && !strcmp(s0, "off"), "rc %d, status \"%s\"", r0, s0);
        snprintf(name, sizeof name, "wcache%s/first_load_writes", fm[k].suffix);
        CHECK(name, r1 == 0 && !strncmp(s1, "written ", 8) && find_file(fm[k].suffix, path, sizeof path) == 1,
              "rc %d, status \"%s\"", r1, s1);
        snprintf(name, sizeof name, "wcache%s/second_load_maps", fm[k].suffix);
        CHECK(name, r2 == 0 && !strncmp(s2, "mapped ", 7), "rc %d, status \"%s\"", r2, s2);
        snprintf(name, sizeof name, "wcache%s/same_codes", fm[k].suffix);
        CHECK(name, same(ref, nr, c1, n1) && same(ref, nr, c2, n2), "%d / %d / %d frames", nr, n1, n2);
        if (k == 0) ref_q8 = ref, n_ref_q8 = nr, ref = NULL;
        free(ref), free(c1), free(c2);
    }
    /* native weights: nothing to prepare, no file */
    {
        int32_t *c = NULL;
        int n = 0;
        run(QTTS_WEIGHTS_NATIVE, QTTS_WEIGHTS_DEFAULT, g_cache, &c, &n, st, sizeof st);
        CHECK("wcache/native_not_cached", !strncmp(st, "off", 3) && find_file("-native-native-", path, sizeof path) == 0,
              "status \"%s\"", st);
        free(c);
    }

    /* damaged files */
    find_file("-q8-q8-", path, sizeof path);
    struct stat sb;
    stat(path, &sb);
    int fd = open(path, O_WRONLY);
    unsigned char x = 0x5A;
    if (fd >= 0) pwrite(fd, &x, 1, 40), close(fd); /* a reserved header byte: CRC mismatch */
    expect_rebuilt("wcache/damaged_header_rebuilt", ref_q8, n_ref_q8);
    fd = open(path, O_WRONLY);
    if (fd >= 0) pwrite(fd, &x, 1, 100), close(fd); /* the table */
    expect_rebuilt("wcache/damaged_table_rebuilt", ref_q8, n_ref_q8);
    if (truncate(path, sb.st_size / 2) != 0) perror("truncate");
    expect_rebuilt("wcache/truncated_rebuilt", ref_q8, n_ref_q8);
    if (truncate(path, 100) != 0) perror("truncate");
    expect_rebuilt("wcache/truncated_in_table_rebuilt", ref_q8, n_ref_q8);
    if (truncate(path, 0) != 0) perror("truncate");
    expect_rebuilt("wcache/empty_rebuilt", ref_q8, n_ref_q8);
    if (truncate(path, sb.st_size + 4096) != 0) perror("truncate");
    expect_rebuilt("wcache/extra_bytes_rebuilt", ref_q8, n_ref_q8);
    FILE *f = fopen(path, "wb");
    if (f) fputs("not a cache file at all", f), fclose(f);
    expect_rebuilt("wcache/garbage_rebuilt", ref_q8, n_ref_q8);

    /* stale: the checkpoint changed (its mtime) */
    char before[4096];
    snprintf(before, sizeof before, "%s", path);
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    snprintf(b, sizeof b, "%s/model.safetensors", g_model);
    utimes(b, tv);
    expect_rebuilt("wcache/stale_mtime_rebuilt", ref_q8, n_ref_q8);
    CHECK("wcache/stale_same_file_name", find_file("-q8-q8-", path, sizeof path) == 1 && !strcmp(path, before),
          "%s vs %s", path, before);

    /* concurrent: four processes, empty cache */
    int cleared = qtts_cache_clear(g_cache, g_model);
    CHECK("wcache/clear_counts", cleared == 3, "removed %d, want 3 (q8, q4, q8-native)", cleared);
    int listed = 0;
    qtts_cache_list(g_cache, g_model, count_file, &listed);
    CHECK("wcache/clear_leaves_none", listed == 0, "%d files listed", listed);
    enum { NP = 4 };
    pid_t pids[NP];
    for (int i = 0; i < NP; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            int32_t *c = NULL;
            int n = 0;
            char s[8192];
            int rc = run(QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_DEFAULT, g_cache, &c, &n, s, sizeof s);
            _exit(rc == 0 && same(c, n, ref_q8, n_ref_q8) ? 0 : 1);
        }
    }
    int good = 0;
    for (int i = 0; i < NP; i++) {
        int ws = 0;
        if (pids[i] > 0 && waitpid(pids[i], &ws, 0) == pids[i] && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) good++;
    }
    CHECK("wcache/concurrent_same_codes", good == NP, "%d of %d processes got the reference codes", good, NP);
    CHECK("wcache/concurrent_one_file_no_tmp", find_file("-q8-q8-", path, sizeof path) == 1 && count_tmp() == 0,
          "%d temporary files left", count_tmp());
    {
        int32_t *c = NULL;
        int n = 0;
        int rc = run(QTTS_WEIGHTS_Q8, QTTS_WEIGHTS_DEFAULT, g_cache, &c, &n, st, sizeof st);
        CHECK("wcache/concurrent_file_valid", rc == 0 && !strncmp(st, "mapped ", 7) && same(c, n, ref_q8, n_ref_q8),
              "status \"%s\"", st);
        free(c);
    }
    /* another checkpoint's files are not this one's */
    listed = 0;
    qtts_cache_list(g_cache, test_path("golden/data/e2e_string"), count_file, &listed);
    CHECK("wcache/list_per_checkpoint", listed == 0, "%d files listed for another folder", listed);
    CHECK("wcache/clear_missing_dir", qtts_cache_clear("/nonexistent/qtts-cache", NULL) == -1, "expected -1");
    char dd[4096];
    CHECK("wcache/default_dir", qtts_cache_default_dir(dd, sizeof dd) != 0 || strstr(dd, "qtts"), "%s", dd);
    check_codec_tconv_cache();
    free(ref_q8);
    nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
