/* Unit test of saved-voice files (src/model/voice_file.c): round trips of
 * x-vector-only and ICL voices through files and memory, the documented byte
 * layout, byte-for-byte stable output, the CRC-32 against its check value,
 * and hostile input made by mutating a valid file: truncation at every byte,
 * a flipped bit at every byte, wrong magic, newer and invalid versions,
 * reserved flags, counts over the limits or past the end (CRC fixed up so the
 * count checks themselves are reached), bad contents, trailing bytes, an
 * oversized file. Every failure must be QTTS_ERR_FORMAT naming the file and
 * leave the voice zeroed; `make debug-test` runs it under ASan + UBSan.
 * Also save-side validation and the model compatibility check. Files go to a
 * mkdtemp() folder under /tmp, removed at the end. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/voice_file.h"
#include "test.h"
#include "test_tmp.h"

static uint32_t g_rng = 777u;
static uint32_t rnd(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Recompute the trailing CRC after a deliberate edit. */
static void fix_crc(unsigned char *b, size_t n) { put_u32(b + n - 4, voice_crc32(0, b, n - 4)); }

static const char *k_text = "H\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c"; /* "Héllo, 世界" */

/* A voice with deterministic contents: hidden 1024 (a 0.6B Base), 16 x 2048. */
static void make_voice(voice_data *v, int icl, int frames, int ids, const char *text) {
    memset(v, 0, sizeof *v);
    strcpy(v->model_type, "base");
    strcpy(v->model_size, "0b6");
    v->hidden_size = 1024;
    v->n_codebooks = 16;
    v->codebook_size = 2048;
    v->icl = icl;
    v->xvector_len = 1024;
    v->xvector = malloc(1024 * sizeof(float));
    for (int i = 0; i < 1024; i++) v->xvector[i] = ((float)rnd() / 8388608.0f - 1.0f) * 3.0f;
    v->xvector[5] = -0.0f;
    v->xvector[6] = 1e-38f; /* subnormal-adjacent values survive bit-exactly */
    if (icl) {
        v->n_ref_frames = frames;
        v->ref_codes = malloc((size_t)frames * 16 * sizeof(int32_t));
        for (int i = 0; i < frames * 16; i++) v->ref_codes[i] = (int32_t)(rnd() % 2048);
        v->ref_codes[0] = 0;
        v->ref_codes[1] = 2047;
        v->n_ref_text_ids = ids;
        v->ref_text_ids = malloc((size_t)ids * sizeof(int32_t));
        for (int i = 0; i < ids; i++) v->ref_text_ids[i] = (int32_t)(rnd() % 151936);
    }
    if (text) v->ref_text = strdup(text);
}

static int same_voice(const voice_data *a, const voice_data *b, const char **why) {
    if (strcmp(a->model_type, b->model_type) || strcmp(a->model_size, b->model_size)) return *why = "names", 0;
    if (a->hidden_size != b->hidden_size || a->n_codebooks != b->n_codebooks || a->codebook_size != b->codebook_size)
        return *why = "geometry", 0;
    if (a->icl != b->icl) return *why = "icl flag", 0;
    if (a->xvector_len != b->xvector_len || memcmp(a->xvector, b->xvector, (size_t)a->xvector_len * 4))
        return *why = "x-vector", 0;
    if (a->n_ref_frames != b->n_ref_frames ||
        (a->n_ref_frames && memcmp(a->ref_codes, b->ref_codes, (size_t)a->n_ref_frames * 16 * 4)))
        return *why = "codes", 0;
    if (a->n_ref_text_ids != b->n_ref_text_ids ||
        (a->n_ref_text_ids && memcmp(a->ref_text_ids, b->ref_text_ids, (size_t)a->n_ref_text_ids * 4)))
        return *why = "ids", 0;
    if ((a->ref_text == NULL) != (b->ref_text == NULL) || (a->ref_text && strcmp(a->ref_text, b->ref_text)))
        return *why = "transcript", 0;
    return 1;
}

static int is_zeroed(const voice_data *v) {
    static const voice_data z;
    return !memcmp(v, &z, sizeof z);
}

/* Load bytes (via a file when as_file) and expect status want, a message
 * naming the source and containing sub (when not NULL), a zeroed voice on failure. */
static int expect_load(const char *name, const unsigned char *b, size_t n, int as_file, qtts_status want,
                       const char *sub, int report_ok) {
    voice_data v;
    memset(&v, 0x5A, sizeof v); /* the loader must initialise it */
    qtts_error e;
    err_clear(&e);
    const char *label = as_file ? test_tmp_path("hostile.qvoice") : "upload.qvoice";
    qtts_status st;
    if (as_file) {
        test_write_file(label, b, n);
        st = voice_load(label, &v, &e);
    } else {
        st = voice_load_mem(b, n, label, &v, &e);
    }
    int ok = st == want;
    const char *why = "wrong status";
    if (ok && want != QTTS_OK && !strstr(e.msg, label)) ok = 0, why = "message does not name the file";
    if (ok && sub && !strstr(e.msg, sub)) ok = 0, why = "message lacks the expected text";
    if (ok && want != QTTS_OK && !is_zeroed(&v)) ok = 0, why = "voice not zeroed after failure";
    if (!ok || report_ok)
        test_report(name, ok, "%s: got %d (%s) want %d, message \"%s\" (expected \"%s\")", why, (int)st,
                    qtts_status_str(st), (int)want, e.msg, sub ? sub : "");
    if (st == QTTS_OK) voice_free(&v);
    return ok;
}

/* Offsets of the variable part of a saved voice (see voice_file.h). */
typedef struct layout {
    size_t A, B, C, D;
} layout;

static layout layout_of(const voice_data *v) {
    layout l;
    l.A = 64 + 4 * (size_t)v->xvector_len;
    l.B = l.A + 4 + 4 * (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    l.C = l.B + 4 + 4 * (size_t)v->n_ref_text_ids;
    l.D = l.C + 4 + (v->ref_text ? strlen(v->ref_text) : 0);
    return l;
}

/* ---------------------------------------------------------------- tests */

static void test_crc(void) {
    uint32_t c = voice_crc32(0, "123456789", 9);
    CHECK("vf_crc32_check_value", c == 0xCBF43926u, "crc32(\"123456789\") = 0x%08x, want 0xcbf43926", c);
    uint32_t c2 = voice_crc32(voice_crc32(0, "1234", 4), "56789", 5);
    CHECK("vf_crc32_incremental", c2 == c, "0x%08x vs 0x%08x", c2, c);
    CHECK("vf_crc32_empty", voice_crc32(0, "", 0) == 0, "0x%08x", voice_crc32(0, "", 0));
}

static void test_round_trip(void) {
    struct {
        const char *name;
        int icl, frames, ids;
        const char *text;
    } cases[] = {
        {"vf_roundtrip_xvector_only", 0, 0, 0, NULL},
        {"vf_roundtrip_xvector_only_with_text", 0, 0, 0, k_text},
        {"vf_roundtrip_icl", 1, 37, 11, k_text},
        {"vf_roundtrip_icl_no_text", 1, 1, 1, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        voice_data v, w;
        make_voice(&v, cases[k].icl, cases[k].frames, cases[k].ids, cases[k].text);
        qtts_error e;
        err_clear(&e);
        const char *p = test_tmp_path("voice.qvoice");
        qtts_status st = voice_save(p, &v, &e);
        qtts_status st2 = st == QTTS_OK ? voice_load(p, &w, &e) : st;
        const char *why = "status";
        int ok = st == QTTS_OK && st2 == QTTS_OK && same_voice(&v, &w, &why);
        test_report(cases[k].name, ok, "save %d load %d (%s), mismatch in %s", (int)st, (int)st2, e.msg, why);

        /* the file's bytes, the memory serialisation and a re-save are identical */
        size_t nf = 0, nm = 0, nm2 = 0;
        unsigned char *bf = test_read_file(p, &nf), *bm = NULL, *bm2 = NULL;
        voice_save_mem(&v, &bm, &nm, &e);
        voice_save_mem(&v, &bm2, &nm2, &e);
        unsigned char *br = NULL;
        size_t nr = 0;
        if (st2 == QTTS_OK) voice_save_mem(&w, &br, &nr, &e);
        char name[128];
        snprintf(name, sizeof name, "%s_bytes_stable", cases[k].name);
        CHECK(name, bf && bm && bm2 && br && nf == nm && nm == nm2 && nr == nm && !memcmp(bf, bm, nf) &&
                        !memcmp(bm, bm2, nm) && !memcmp(br, bm, nm),
              "file %zu / mem %zu / mem again %zu / re-saved %zu bytes differ", nf, nm, nm2, nr);

        /* documented layout */
        layout l = layout_of(&v);
        int lay = bm && nm == l.D + 4 && !memcmp(bm, "QTTSVOIC", 8) && get_u32(bm + 8) == 2 &&
                  get_u32(bm + 12) == (uint32_t)cases[k].icl && !memcmp(bm + 16, "base\0\0\0\0\0\0\0\0\0\0\0\0", 16) &&
                  !memcmp(bm + 32, "0b6\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) && get_u32(bm + 48) == 1024 &&
                  get_u32(bm + 52) == 16 && get_u32(bm + 56) == 2048 && get_u32(bm + 60) == 1024 &&
                  get_u32(bm + l.A) == (uint32_t)v.n_ref_frames && get_u32(bm + l.B) == (uint32_t)v.n_ref_text_ids &&
                  get_u32(bm + l.C) == (v.ref_text ? strlen(v.ref_text) : 0) &&
                  get_u32(bm + l.D) == voice_crc32(0, bm, l.D);
        if (lay) {
            uint32_t u;
            memcpy(&u, &v.xvector[0], 4);
            lay = get_u32(bm + 64) == u;
            if (v.icl) lay = lay && get_u32(bm + l.A + 4 + 4) == (uint32_t)v.ref_codes[1] &&
                             get_u32(bm + l.B + 4) == (uint32_t)v.ref_text_ids[0];
            if (v.ref_text) lay = lay && !memcmp(bm + l.C + 4, v.ref_text, strlen(v.ref_text));
        }
        snprintf(name, sizeof name, "%s_layout", cases[k].name);
        CHECK(name, lay, "bytes do not follow the documented layout (size %zu, expected %zu)", nm, l.D + 4);

        /* memory round trip */
        voice_data m;
        st = bm ? voice_load_mem(bm, nm, "mem", &m, &e) : QTTS_ERR_INTERNAL;
        snprintf(name, sizeof name, "%s_mem", cases[k].name);
        why = "status";
        CHECK(name, st == QTTS_OK && same_voice(&v, &m, &why), "status %d (%s), mismatch in %s", (int)st, e.msg, why);
        if (st == QTTS_OK) voice_free(&m);
        free(bf);
        free(bm);
        free(bm2);
        free(br);
        if (st2 == QTTS_OK) voice_free(&w);
        voice_free(&v);
    }
    /* a hand-filled name with garbage after its NUL is saved NUL-padded */
    voice_data v;
    make_voice(&v, 0, 0, 0, NULL);
    memset(v.model_size, 'Z', sizeof v.model_size);
    memcpy(v.model_size, "1b7", 4);
    unsigned char *b = NULL;
    size_t n = 0;
    qtts_error e;
    qtts_status st = voice_save_mem(&v, &b, &n, &e);
    CHECK("vf_save_pads_names", st == QTTS_OK && b && !memcmp(b + 32, "1b7\0\0\0\0\0\0\0\0\0\0\0\0\0", 16),
          "status %d (%s)", (int)st, e.msg);
    free(b);
    voice_free(&v);
    voice_free(&v); /* zeroed: fine */
    voice_free(NULL);
}

static void test_hostile(void) {
    voice_data v;
    make_voice(&v, 1, 9, 5, k_text);
    unsigned char *good = NULL;
    size_t n = 0;
    qtts_error e;
    err_clear(&e);
    if (voice_save_mem(&v, &good, &n, &e) != QTTS_OK) {
        test_report("vf_hostile_setup", 0, "%s", e.msg);
        voice_free(&v);
        return;
    }
    layout l = layout_of(&v);
    unsigned char *b = malloc(n + 16);

    /* truncated at every length, from memory and from a file */
    for (int as_file = 0; as_file < 2; as_file++) {
        int bad = 0;
        for (size_t len = 0; len < n && bad < 3; len++) {
            const char *want = len < 8 ? "not a qtts voice file" : "truncated";
            if (!expect_load(as_file ? "vf_truncated_file" : "vf_truncated_mem", good, len, as_file, QTTS_ERR_FORMAT,
                             want, 0))
                bad++;
        }
        test_report(as_file ? "vf_truncated_every_length_file" : "vf_truncated_every_length_mem", bad == 0,
                    "%d lengths misbehaved (see above)", bad);
    }
    CHECK("vf_control_full_length_loads", expect_load("vf_control", good, n, 1, QTTS_OK, NULL, 0), "see above");

    /* one flipped bit at every byte: never accepted; in the payload, "corrupted" */
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; i++) {
        memcpy(b, good, n);
        b[i] ^= (unsigned char)(1u << (i % 8));
        int payload = (i >= 64 && i < l.A) || (i >= l.A + 4 && i < l.B) || (i >= l.B + 4 && i < l.C) ||
                      (i >= l.C + 4);
        if (!expect_load("vf_bitflip", b, n, 0, QTTS_ERR_FORMAT, payload ? "corrupted" : NULL, 0)) bad++;
    }
    test_report("vf_bitflip_every_byte", bad == 0, "%d flips misbehaved (see above)", bad);

    /* header fields; fix_crc so that the check under test is the one that fires */
    memcpy(b, good, n);
    memcpy(b, "QTTSVOIX", 8);
    expect_load("vf_wrong_magic", b, n, 0, QTTS_ERR_FORMAT, "not a qtts voice file", 1);
    expect_load("vf_wav_instead", (const unsigned char *)"RIFF\x24\0\0\0WAVEfmt ", 16, 1, QTTS_ERR_FORMAT,
                "not a qtts voice file", 1);

#define MUTATE(off, val)          \
    do {                          \
        memcpy(b, good, n);       \
        put_u32(b + (off), (val)); \
        fix_crc(b, n);            \
    } while (0)
    MUTATE(8, 3);
    expect_load("vf_future_version", b, n, 1, QTTS_ERR_FORMAT, "format version 3; this qtts reads versions up to 2: a newer qtts", 1);
    MUTATE(8, 0xFFFFFFFFu);
    expect_load("vf_future_version_max", b, n, 0, QTTS_ERR_FORMAT, "newer qtts", 1);
    MUTATE(8, 0);
    expect_load("vf_version_zero", b, n, 0, QTTS_ERR_FORMAT, "invalid format version 0", 1);
    MUTATE(12, 5);
    expect_load("vf_reserved_flag", b, n, 0, QTTS_ERR_FORMAT, "unknown flags", 1);
    MUTATE(48, 0);
    expect_load("vf_hidden_zero", b, n, 0, QTTS_ERR_FORMAT, "hidden size 0", 1);
    MUTATE(48, 8193);
    expect_load("vf_hidden_huge", b, n, 0, QTTS_ERR_FORMAT, "hidden size 8193", 1);
    MUTATE(52, 65);
    expect_load("vf_codebooks_huge", b, n, 0, QTTS_ERR_FORMAT, "65 codebooks", 1);
    MUTATE(56, 0x80000000u);
    expect_load("vf_codebook_size_huge", b, n, 0, QTTS_ERR_FORMAT, "codebook size 2147483648", 1);
    MUTATE(60, 0xFFFFFFFFu);
    expect_load("vf_xvector_len_huge", b, n, 0, QTTS_ERR_FORMAT, "x-vector of 4294967295", 1);
    MUTATE(60, 8193);
    expect_load("vf_xvector_len_over_limit", b, n, 0, QTTS_ERR_FORMAT, "8193", 1);
    MUTATE(60, 2000); /* within the limit, past the end of the file */
    expect_load("vf_xvector_len_past_end", b, n, 0, QTTS_ERR_FORMAT, "truncated", 1);
    MUTATE(l.A, 0xFFFFFFFFu);
    expect_load("vf_frames_huge", b, n, 0, QTTS_ERR_FORMAT, "4294967295 reference frames", 1);
    MUTATE(l.A, 7501);
    expect_load("vf_frames_over_limit", b, n, 0, QTTS_ERR_FORMAT, "7501 reference frames", 1);
    MUTATE(l.A, 7500);
    expect_load("vf_frames_at_limit_past_end", b, n, 0, QTTS_ERR_FORMAT, "truncated", 1);
    MUTATE(l.A, 0);
    expect_load("vf_icl_without_frames", b, n, 0, QTTS_ERR_FORMAT, "0 reference frames", 1);
    MUTATE(l.B, 65537);
    expect_load("vf_ids_over_limit", b, n, 0, QTTS_ERR_FORMAT, "65537 transcript ids", 1);
    MUTATE(l.B, 0xFFFFFFFFu);
    expect_load("vf_ids_huge", b, n, 0, QTTS_ERR_FORMAT, "4294967295 transcript ids", 1);
    MUTATE(l.C, 0xFFFFFFFFu);
    expect_load("vf_text_len_huge", b, n, 0, QTTS_ERR_FORMAT, "transcript of 4294967295 bytes", 1);
    MUTATE(l.C, 1000);
    expect_load("vf_text_len_past_end", b, n, 0, QTTS_ERR_FORMAT, "truncated", 1);
    MUTATE(l.A + 4 + 4 * 17, 2048); /* frame 1, codebook 1 */
    expect_load("vf_code_out_of_range", b, n, 0, QTTS_ERR_FORMAT, "frame 1, codebook 1", 1);
    MUTATE(l.A + 4, 0xFFFFFFFFu);
    expect_load("vf_code_negative", b, n, 0, QTTS_ERR_FORMAT, "-1", 1);
    MUTATE(l.B + 4, 0x80000000u);
    expect_load("vf_id_negative", b, n, 0, QTTS_ERR_FORMAT, "negative", 1);
    MUTATE(64 + 4 * 3, 0x7FC00000u);
    expect_load("vf_xvector_nan", b, n, 0, QTTS_ERR_FORMAT, "not finite", 1);
    MUTATE(64, 0x7F800000u);
    expect_load("vf_xvector_inf", b, n, 0, QTTS_ERR_FORMAT, "not finite", 1);
    MUTATE(16, 0); /* empty model type */
    expect_load("vf_model_type_empty", b, n, 0, QTTS_ERR_FORMAT, "model type", 1);
    memcpy(b, good, n);
    b[16 + 6] = 'x'; /* garbage after the NUL of "base" */
    fix_crc(b, n);
    expect_load("vf_model_type_not_padded", b, n, 0, QTTS_ERR_FORMAT, "model type", 1);
    memcpy(b, good, n);
    memset(b + 32, 'A', 16); /* no NUL at all */
    fix_crc(b, n);
    expect_load("vf_model_size_unterminated", b, n, 0, QTTS_ERR_FORMAT, "model size", 1);
    memcpy(b, good, n);
    b[l.C + 4 + 2] = 0xC3; /* "H\xc3\xc3l": a lead byte where a continuation belongs */
    fix_crc(b, n);
    expect_load("vf_text_bad_utf8", b, n, 0, QTTS_ERR_FORMAT, "UTF-8", 1);
    memcpy(b, good, n);
    b[l.C + 4] = 0;
    fix_crc(b, n);
    expect_load("vf_text_with_nul", b, n, 0, QTTS_ERR_FORMAT, "UTF-8", 1);
    memcpy(b, good, n);
    put_u32(b + n - 4, get_u32(good + n - 4) ^ 0x00010000u);
    expect_load("vf_crc_mismatch", b, n, 1, QTTS_ERR_FORMAT, "corrupted", 1);

    /* bytes after the CRC */
    memcpy(b, good, n);
    memcpy(b + n, "junk", 4);
    expect_load("vf_trailing_garbage", b, n + 4, 1, QTTS_ERR_FORMAT, "4 unexpected bytes after its end", 1);
    b[n] = 0;
    expect_load("vf_trailing_zero_byte", b, n + 1, 0, QTTS_ERR_FORMAT, "unexpected bytes", 1);
#undef MUTATE
    free(b);
    free(good);

    /* an x-vector-only voice must not carry codes or ids */
    voice_data x;
    make_voice(&x, 0, 0, 0, NULL);
    voice_save_mem(&x, &good, &n, &e);
    l = layout_of(&x);
    b = malloc(n);
    memcpy(b, good, n);
    put_u32(b + l.A, 1);
    fix_crc(b, n);
    expect_load("vf_xvector_only_with_frames", b, n, 0, QTTS_ERR_FORMAT, "1 reference frames", 1);
    memcpy(b, good, n);
    put_u32(b + l.B, 2);
    fix_crc(b, n);
    expect_load("vf_xvector_only_with_ids", b, n, 0, QTTS_ERR_FORMAT, "2 transcript ids", 1);
    free(b);
    free(good);
    voice_free(&x);

    /* larger than any voice file: refused before being read whole */
    const char *big = test_tmp_path("big.qvoice");
    FILE *f = fopen(big, "wb");
    int made = f && fwrite("QTTSVOIC", 1, 8, f) == 8 && ftruncate(fileno(f), (off_t)VOICE_MAX_FILE_BYTES + 100) == 0;
    if (f) fclose(f);
    voice_data w;
    qtts_status st = made ? voice_load(big, &w, &e) : QTTS_ERR_INTERNAL;
    CHECK("vf_oversized_file", st == QTTS_ERR_FORMAT && strstr(e.msg, "larger than any voice file") && is_zeroed(&w),
          "status %d, message \"%s\"", (int)st, e.msg);
    unsigned char *huge = calloc(1, VOICE_MAX_FILE_BYTES + 1);
    memcpy(huge, "QTTSVOIC", 8);
    st = voice_load_mem(huge, VOICE_MAX_FILE_BYTES + 1, "big upload", &w, &e);
    CHECK("vf_oversized_mem", st == QTTS_ERR_FORMAT && strstr(e.msg, "big upload") && is_zeroed(&w),
          "status %d, message \"%s\"", (int)st, e.msg);
    free(huge);

    /* missing file, directory */
    const char *missing = test_tmp_path("nope.qvoice");
    st = voice_load(missing, &w, &e);
    CHECK("vf_missing_file", st == QTTS_ERR_IO && strstr(e.msg, missing) && is_zeroed(&w), "status %d, message \"%s\"",
          (int)st, e.msg);
    st = voice_load(test_tmp_dir(), &w, &e);
    CHECK("vf_directory", st == QTTS_ERR_IO && strstr(e.msg, "directory"), "status %d, message \"%s\"", (int)st, e.msg);
    voice_free(&v);
}

static void test_save_validation(void) {
    qtts_error e;
    struct {
        const char *name;
        int what;
        const char *sub;
    } cases[] = {
        {"vf_save_icl_no_frames", 0, "reference frames"}, {"vf_save_code_range", 1, "outside 0..2047"},
        {"vf_save_xvector_nan", 2, "not finite"},         {"vf_save_empty_type", 3, "model type"},
        {"vf_save_bad_utf8", 4, "UTF-8"},                 {"vf_save_xvec_only_frames", 5, "carries no reference"},
        {"vf_save_icl_no_ids", 6, "transcript ids"},      {"vf_save_no_xvector", 7, "x-vector"},
        {"vf_save_long_type", 8, "model type"},           {"vf_save_bad_icl_value", 9, "icl"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        voice_data v;
        make_voice(&v, 1, 4, 3, NULL);
        switch (cases[k].what) {
        case 0: v.n_ref_frames = 0; break;
        case 1: v.ref_codes[7] = 2048; break;
        case 2: v.xvector[9] = NAN; break;
        case 3: v.model_type[0] = 0; break;
        case 4: v.ref_text = strdup("bad \xff byte"); break;
        case 5: v.icl = 0; break;
        case 6: v.n_ref_text_ids = 0; break;
        case 7: v.xvector_len = 0; break;
        case 8: memset(v.model_type, 'a', sizeof v.model_type); break;
        case 9: v.icl = 2; break;
        }
        const char *p = test_tmp_path("invalid.qvoice");
        remove(p);
        err_clear(&e);
        qtts_status st = voice_save(p, &v, &e);
        struct stat sb;
        CHECK(cases[k].name, st == QTTS_ERR_INVALID_ARG && strstr(e.msg, cases[k].sub) && stat(p, &sb) != 0,
              "status %d, message \"%s\" (expected \"%s\"), file left behind: %d", (int)st, e.msg, cases[k].sub,
              stat(p, &sb) == 0);
        if (cases[k].what == 8) v.model_type[0] = 0;
        voice_free(&v);
    }
    voice_data v;
    make_voice(&v, 0, 0, 0, NULL);
    const char *p = test_tmp_path("no_such_dir/voice.qvoice");
    qtts_status st = voice_save(p, &v, &e);
    CHECK("vf_save_unwritable", st == QTTS_ERR_IO && strstr(e.msg, p), "status %d, message \"%s\"", (int)st, e.msg);
    voice_free(&v);
}

static void test_compatible(void) {
    voice_data v;
    make_voice(&v, 1, 3, 2, NULL);
    qtts_error e;
    err_clear(&e);
    qtts_status st = voice_check_compatible(&v, "base", "0b6", 1024, 16, 2048, &e);
    CHECK("vf_compatible_same_model", st == QTTS_OK, "status %d (%s)", (int)st, e.msg);
    st = voice_check_compatible(&v, "base", "1b7", 2048, 16, 2048, &e);
    CHECK("vf_incompatible_size", st == QTTS_ERR_INPUT &&
                                      strstr(e.msg, "this voice was made for a Base 0.6B model (hidden 1024); the "
                                                    "loaded model is Base 1.7B (hidden 2048)"),
          "status %d, message \"%s\"", (int)st, e.msg);
    st = voice_check_compatible(&v, "custom_voice", "0b6", 1024, 16, 2048, &e);
    CHECK("vf_incompatible_type", st == QTTS_ERR_INPUT && strstr(e.msg, "the loaded model is CustomVoice 0.6B"),
          "status %d, message \"%s\"", (int)st, e.msg);
    st = voice_check_compatible(&v, "base", "0b6", 2048, 16, 2048, &e);
    CHECK("vf_incompatible_hidden", st == QTTS_ERR_INPUT && strstr(e.msg, "(hidden 2048)"), "status %d, message \"%s\"",
          (int)st, e.msg);
    st = voice_check_compatible(&v, "base", "0b6", 1024, 8, 2048, &e);
    CHECK("vf_incompatible_codebooks", st == QTTS_ERR_INPUT && strstr(e.msg, "16 codebooks of 2048 codes") &&
                                           strstr(e.msg, "8 codebooks"),
          "status %d, message \"%s\"", (int)st, e.msg);
    st = voice_check_compatible(&v, "base", "0b6", 1024, 16, 1024, &e);
    CHECK("vf_incompatible_codebook_size", st == QTTS_ERR_INPUT && strstr(e.msg, "1024 codes"),
          "status %d, message \"%s\"", (int)st, e.msg);
    v.xvector_len = 512; /* inconsistent voice: x-vector must match the hidden size */
    st = voice_check_compatible(&v, "base", "0b6", 1024, 16, 2048, &e);
    CHECK("vf_incompatible_xvector_len", st == QTTS_ERR_INPUT, "status %d, message \"%s\"", (int)st, e.msg);
    v.xvector_len = 1024;
    st = voice_check_compatible(&v, NULL, "0b6", 1024, 16, 2048, &e);
    CHECK("vf_compatible_null_arg", st == QTTS_ERR_INVALID_ARG, "status %d", (int)st);
    voice_free(&v);
}

/* Version 2: an ICL voice with its primed decoder state; version 1 files
 * still load; the state's header and values are validated. */
static void test_primed(void) {
    voice_data v, w;
    make_voice(&v, 1, 6, 4, k_text);
    v.primed_key = 0x0123456789abcdefull;
    v.primed_ref_last = -0.25f;
    v.primed_pos = 6;
    v.primed_kv_len = 6;
    v.primed_n = 1000;
    v.primed_state = malloc(v.primed_n * sizeof(float));
    for (size_t i = 0; i < v.primed_n; i++) v.primed_state[i] = (float)rnd() / 4194304.0f - 1.0f;
    qtts_error e;
    err_clear(&e);
    unsigned char *b = NULL;
    size_t n = 0;
    qtts_status st = voice_save_mem(&v, &b, &n, &e);
    layout l = layout_of(&v);
    const size_t P = l.D; /* the primed block starts where v1's CRC was */
    int lay = st == QTTS_OK && n == P + 28 + 4 * v.primed_n + 4 && get_u32(b + 12) == 3u &&
              get_u32(b + P) == 0x89abcdefu && get_u32(b + P + 4) == 0x01234567u && get_u32(b + P + 12) == 6 &&
              get_u32(b + P + 20) == 6 && get_u32(b + P + 24) == 1000 && get_u32(b + n - 4) == voice_crc32(0, b, n - 4);
    CHECK("vf_primed_layout", lay, "status %d (%s), %zu bytes, expected %zu", (int)st, e.msg, n,
          P + 28 + 4 * v.primed_n + 4);
    st = b ? voice_load_mem(b, n, "primed.qvoice", &w, &e) : QTTS_ERR_INTERNAL;
    const char *why = "status";
    int ok = st == QTTS_OK && same_voice(&v, &w, &why);
    if (ok && (w.primed_key != v.primed_key || w.primed_pos != 6 || w.primed_kv_len != 6 || w.primed_n != 1000 ||
               w.primed_ref_last != -0.25f || memcmp(w.primed_state, v.primed_state, 4000)))
        ok = 0, why = "primed state";
    CHECK("vf_primed_roundtrip", ok, "status %d (%s), mismatch in %s", (int)st, e.msg, why);
    if (st == QTTS_OK) voice_free(&w);

    /* truncated inside the state, a flipped state bit */
    int bad = 0;
    for (size_t cut = P; cut < n; cut += 97)
        if (!expect_load("vf_primed_truncated", b, cut, 0, QTTS_ERR_FORMAT, cut < n - 4 ? "truncated" : NULL, 0)) bad++;
    test_report("vf_primed_truncated_everywhere", bad == 0, "%d cuts misbehaved (see above)", bad);
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    c[P + 28 + 40] ^= 0x10;
    expect_load("vf_primed_bitflip", c, n, 0, QTTS_ERR_FORMAT, "corrupted", 1);
    /* a state count over the limit, zero, a NaN in the state, primed on an x-vector voice */
    memcpy(c, b, n);
    put_u32(c + P + 24, VOICE_MAX_PRIMED_FLOATS + 1);
    fix_crc(c, n);
    expect_load("vf_primed_count_huge", c, n, 0, QTTS_ERR_FORMAT, "primed decoder state of", 1);
    memcpy(c, b, n);
    put_u32(c + P + 24, 0);
    fix_crc(c, n);
    expect_load("vf_primed_count_zero", c, n, 0, QTTS_ERR_FORMAT, "primed decoder state of 0 floats", 1);
    memcpy(c, b, n);
    put_u32(c + P + 28 + 8, 0x7fc00000u);
    fix_crc(c, n);
    expect_load("vf_primed_nan", c, n, 0, QTTS_ERR_FORMAT, "not finite", 1);
    memcpy(c, b, n);
    put_u32(c + 12, 2u);
    fix_crc(c, n);
    expect_load("vf_primed_on_xvector_voice", c, n, 0, QTTS_ERR_FORMAT, "x-vector-only", 1);
    /* version 1 knows no bit 1 */
    memcpy(c, b, n);
    put_u32(c + 8, 1u);
    fix_crc(c, n);
    expect_load("vf_v1_refuses_primed_flag", c, n, 0, QTTS_ERR_FORMAT, "unknown flags", 1);
    free(c);
    free(b);

    /* a version-1 file (no primed block) still loads, with no state */
    free(v.primed_state);
    v.primed_state = NULL;
    v.primed_n = 0;
    b = NULL;
    st = voice_save_mem(&v, &b, &n, &e);
    if (b) {
        put_u32(b + 8, 1u);
        fix_crc(b, n);
    }
    st = b ? voice_load_mem(b, n, "v1.qvoice", &w, &e) : QTTS_ERR_INTERNAL;
    why = "status";
    ok = st == QTTS_OK && same_voice(&v, &w, &why) && !w.primed_state && w.primed_n == 0;
    CHECK("vf_v1_file_loads", ok, "status %d (%s), mismatch in %s", (int)st, e.msg, why);
    if (st == QTTS_OK) voice_free(&w);
    free(b);

    /* saving: a state on an x-vector voice, a NaN in the state */
    voice_free(&v);
    make_voice(&v, 0, 0, 0, NULL);
    v.primed_n = 4;
    v.primed_state = calloc(4, sizeof(float));
    st = voice_save_mem(&v, &b, &n, &e);
    CHECK("vf_save_primed_xvector_only", st == QTTS_ERR_INVALID_ARG && strstr(e.msg, "primed"), "status %d (%s)",
          (int)st, e.msg);
    voice_free(&v);
    make_voice(&v, 1, 2, 2, NULL);
    v.primed_n = 4;
    v.primed_state = calloc(4, sizeof(float));
    v.primed_state[3] = INFINITY;
    st = voice_save_mem(&v, &b, &n, &e);
    CHECK("vf_save_primed_inf", st == QTTS_ERR_INVALID_ARG && strstr(e.msg, "not finite"), "status %d (%s)", (int)st,
          e.msg);
    voice_free(&v);
}

int main(void) {
    if (test_tmp_make("qtts_voice_file") != 0) return test_finish();
    test_crc();
    test_round_trip();
    test_hostile();
    test_save_validation();
    test_compatible();
    test_primed();
    test_tmp_remove();
    return test_finish();
}
