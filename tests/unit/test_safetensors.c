/* Unit test of the safetensors reader (src/io/safetensors.c) against hostile
 * and truncated files: every malformed file must give QTTS_ERR_FORMAT (a
 * missing one QTTS_ERR_IO) with a message naming the file and, where there is
 * one, the tensor; never a crash or a read outside the map (run under ASan by
 * `make debug-test`). Also a valid round trip of F32/BF16/F16 data, the
 * f16/bf16 scalar conversions, sharded sets via model.safetensors.index.json,
 * st_get_float's checks, and truncated copies of the real test checkpoint.
 * Files are written to a mkdtemp() folder under /tmp, removed at the end. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test.h"
#include "test_tmp.h"

static void put_u64le(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Write a safetensors file: u64 header length, header (padded with spaces so
 * the data starts 8-byte aligned, as HF writes it), then data (NULL = zeros). */
static int write_st(const char *path, const char *header, const void *data, size_t data_len) {
    size_t hl = strlen(header);
    size_t padded = (hl + 7) & ~(size_t)7;
    size_t n = 8 + padded + data_len;
    unsigned char *buf = calloc(1, n ? n : 1);
    if (!buf) return -1;
    put_u64le(buf, padded);
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    if (data && data_len) memcpy(buf + 8 + padded, data, data_len);
    int rc = test_write_file(path, buf, n);
    free(buf);
    return rc;
}

/* Raw variant: explicit header-length field, header bytes as given. */
static int write_st_raw(const char *path, uint64_t hlen_field, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    size_t n = 8 + hl + data_len;
    unsigned char *buf = calloc(1, n);
    if (!buf) return -1;
    put_u64le(buf, hlen_field);
    memcpy(buf + 8, header, hl);
    int rc = test_write_file(path, buf, n);
    free(buf);
    return rc;
}

static int set_is_zeroed(const st_set *s) {
    return s->n_files == 0 && s->n_tensors == 0 && s->tensors == NULL && s->paths == NULL && s->maps == NULL;
}

/* Open `path` with st_open_file (or st_open when dir_mode) and expect status
 * want with a message containing path (when must_path) and each of subs. */
static void expect_open(const char *name, int dir_mode, const char *path, qtts_status want, const char *must_path,
                        const char *sub1, const char *sub2) {
    st_set s;
    qtts_error e;
    err_clear(&e);
    memset(&s, 0xAB, sizeof s); /* the opener must initialise it */
    qtts_status st = dir_mode ? st_open(&s, path, &e) : st_open_file(&s, path, &e);
    int ok = st == want;
    const char *why = "wrong status";
    if (ok && must_path && !strstr(e.msg, must_path)) ok = 0, why = "message does not name the file";
    if (ok && sub1 && !strstr(e.msg, sub1)) ok = 0, why = "message lacks the first expected text";
    if (ok && sub2 && !strstr(e.msg, sub2)) ok = 0, why = "message lacks the second expected text";
    if (ok && want != QTTS_OK && dir_mode == 0 && !set_is_zeroed(&s)) ok = 0, why = "set not zeroed after failure";
    test_report(name, ok, "%s: got %d (%s) want %d, message \"%s\" (expected \"%s\" / \"%s\")", why, (int)st,
                qtts_status_str(st), (int)want, e.msg, sub1 ? sub1 : "", sub2 ? sub2 : "");
    if (st == QTTS_OK) st_close(&s);
}

/* Header-only hostile file with `data_len` zero bytes of data. */
static void hostile(const char *name, const char *header, size_t data_len, const char *sub1, const char *sub2) {
    const char *p = test_tmp_path("%s.safetensors", name);
    if (write_st(p, header, NULL, data_len) != 0) {
        test_report(name, 0, "cannot write %s", p);
        return;
    }
    expect_open(name, 0, p, QTTS_ERR_FORMAT, p, sub1, sub2);
}

static void test_hostile_files(void) {
    /* sizes too small for the 8-byte length */
    const char *p = test_tmp_path("empty.safetensors");
    test_write_file(p, "", 0);
    expect_open("st_empty_file", 0, p, QTTS_ERR_FORMAT, p, "too short", NULL);
    p = test_tmp_path("seven.safetensors");
    test_write_file(p, "\x10\0\0\0\0\0\0", 7);
    expect_open("st_7_byte_file", 0, p, QTTS_ERR_FORMAT, p, "too short", NULL);
    /* exactly 8 bytes: header length 0 -> empty header is not JSON */
    p = test_tmp_path("eight.safetensors");
    test_write_file(p, "\0\0\0\0\0\0\0\0", 8);
    expect_open("st_zero_length_header", 0, p, QTTS_ERR_FORMAT, p, "JSON", NULL);

    /* header length fields that run past the end */
    p = test_tmp_path("hlen_past_end.safetensors");
    write_st_raw(p, 100, "{}", 10);
    expect_open("st_header_length_past_end", 0, p, QTTS_ERR_FORMAT, p, "header length 100", NULL);
    p = test_tmp_path("hlen_huge.safetensors");
    write_st_raw(p, (uint64_t)1 << 63, "{}", 10);
    expect_open("st_header_length_2^63", 0, p, QTTS_ERR_FORMAT, p, "header length", NULL);
    p = test_tmp_path("hlen_max.safetensors");
    write_st_raw(p, UINT64_MAX, "{}", 10);
    expect_open("st_header_length_u64_max", 0, p, QTTS_ERR_FORMAT, p, "header length", NULL);
    p = test_tmp_path("hlen_minus7.safetensors"); /* size - 8 + 1: off by one past the end */
    write_st_raw(p, 3, "{}", 0);
    expect_open("st_header_length_one_past_end", 0, p, QTTS_ERR_FORMAT, p, "header length", NULL);

    hostile("st_header_not_json", "this is not json at all", 0, "JSON", NULL);
    hostile("st_header_truncated_json", "{\"a\": {\"dtype\": \"F32\", \"sha", 0, "JSON", NULL);
    hostile("st_header_json_array", "[1, 2, 3]", 0, "not a JSON object", NULL);
    hostile("st_header_json_string", "\"hello\"", 0, "JSON", NULL);
    hostile("st_entry_not_object", "{\"w.bad\": [1, 2]}", 0, "'w.bad'", "not an object");
    hostile("st_unknown_dtype", "{\"w.q\": {\"dtype\": \"Q4_K\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 8,
            "'w.q'", "dtype");
    hostile("st_dtype_not_string", "{\"w.q\": {\"dtype\": 7, \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "'w.q'",
            "dtype");
    hostile("st_missing_dtype", "{\"w.q\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "'w.q'", "dtype");
    hostile("st_shape_negative", "{\"w.neg\": {\"dtype\": \"F32\", \"shape\": [-1, 2], \"data_offsets\": [0, 8]}}", 8,
            "'w.neg'", "dimension");
    hostile("st_shape_string_dim", "{\"w.str\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}",
            8, "'w.str'", "dimension");
    hostile("st_shape_float_dim", "{\"w.flt\": {\"dtype\": \"F32\", \"shape\": [2.0], \"data_offsets\": [0, 8]}}", 8,
            "'w.flt'", "dimension");
    hostile("st_shape_fractional_dim",
            "{\"w.frac\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 8, "'w.frac'", "dimension");
    hostile("st_shape_not_array", "{\"w.sh\": {\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]}}", 8,
            "'w.sh'", "shape");
    hostile("st_shape_too_many_dims",
            "{\"w.9d\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 8, "'w.9d'",
            "shape");
    /* element counts whose product (or product x 4) wraps to 0 in 64 bits:
     * with data_offsets [0, 0] a reader without overflow checks accepts them */
    hostile("st_shape_overflow_2^64",
            "{\"w.big\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 8,
            "'w.big'", "dimension");
    hostile("st_shape_overflow_times_dtype",
            "{\"w.big\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 16777216], \"data_offsets\": [0, 0]}}", 8,
            "'w.big'", "dimension");
    hostile("st_shape_overflow_three_dims",
            "{\"w.big\": {\"dtype\": \"BF16\", \"shape\": [1048576, 1048576, 1048576, 1048576], "
            "\"data_offsets\": [0, 0]}}",
            8, "'w.big'", "dimension");
    hostile("st_shape_dim_over_2^40",
            "{\"w.big\": {\"dtype\": \"U8\", \"shape\": [1099511627777], \"data_offsets\": [0, 8]}}", 8, "'w.big'",
            "dimension");
    hostile("st_offsets_past_data",
            "{\"w.far\": {\"dtype\": \"F32\", \"shape\": [250], \"data_offsets\": [0, 1000]}}", 16, "'w.far'",
            "outside");
    hostile("st_offsets_huge",
            "{\"w.far\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [9223372036854775800, "
            "9223372036854775807]}}",
            16, "'w.far'", "outside");
    hostile("st_offsets_negative", "{\"w.neg\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [-4, 0]}}", 16,
            "'w.neg'", "outside");
    hostile("st_offsets_end_before_begin",
            "{\"w.rev\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 4]}}", 16, "'w.rev'", "[8, 4]");
    hostile("st_offsets_one_entry", "{\"w.one\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4]}}", 16,
            "'w.one'", "data_offsets");
    hostile("st_offsets_missing", "{\"w.none\": {\"dtype\": \"U8\", \"shape\": [4]}}", 16, "'w.none'",
            "data_offsets");
    hostile("st_offsets_not_integer",
            "{\"w.flt\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0.0, 4.0]}}", 16, "'w.flt'",
            "data_offsets");
    hostile("st_span_shorter_than_shape",
            "{\"w.span\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}", 16, "'w.span'",
            "12 bytes");
    hostile("st_span_longer_than_shape",
            "{\"w.span\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 16, "'w.span'",
            "needs 6");
    hostile("st_tensors_overlap",
            "{\"w.first\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
            "\"w.second\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
            24, "'w.first'", "'w.second'");
    hostile("st_tensors_identical_span",
            "{\"w.a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
            "\"w.b\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
            8, "overlap", NULL);
    hostile("st_duplicate_names",
            "{\"w.dup\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
            "\"w.dup\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
            8, "w.dup", "duplicate");

    /* a 5000-character tensor name in an error message is truncated, not overflowed */
    {
        static char hdr[6000];
        char name[5001];
        memset(name, 'n', 5000);
        name[5000] = 0;
        snprintf(hdr, sizeof hdr, "{\"%s\": {\"dtype\": \"F4\", \"shape\": [1], \"data_offsets\": [0, 4]}}", name);
        hostile("st_long_tensor_name", hdr, 8, "nnnnnnnn", NULL);
    }

    /* missing files and non-files */
    p = test_tmp_path("no_such_file.safetensors");
    expect_open("st_open_file_missing", 0, p, QTTS_ERR_IO, p, NULL, NULL);
    expect_open("st_open_missing", 1, p, QTTS_ERR_IO, p, NULL, NULL);
    mkdir(test_tmp_path("dir_as_file"), 0755);
    expect_open("st_open_file_on_directory", 0, test_tmp_path("dir_as_file"), QTTS_ERR_IO, test_tmp_path("dir_as_file"),
                "regular", NULL);
    mkdir(test_tmp_path("empty_model_dir"), 0755);
    expect_open("st_open_dir_without_weights", 1, test_tmp_path("empty_model_dir"), QTTS_ERR_IO, test_tmp_path("empty_model_dir"),
                "model.safetensors", NULL);
    /* st_close accepts "a zeroed or closed set": a failed st_open must leave
     * one, whichever way it failed, or a caller's cleanup frees garbage */
    const char *paths[3] = {test_tmp_path("no_such_file.safetensors"), test_tmp_path("empty_model_dir"), test_tmp_path("empty.safetensors")};
    int zero_ok = 1;
    char why[1400] = "";
    for (int i = 0; i < 3; i++) {
        st_set s;
        qtts_error e;
        memset(&s, 0xAB, sizeof s);
        if (st_open(&s, paths[i], &e) != QTTS_OK && !set_is_zeroed(&s) && zero_ok) {
            zero_ok = 0;
            snprintf(why, sizeof why, "st_open(%s) failed (%s) but left the set uninitialised", paths[i], e.msg);
        }
    }
    CHECK("st_open_failure_zeroes_set", zero_ok, "%s", why);
}

/* ------------------------------------------------------------ valid files */

/* A reference f16 decoder independent of the library's: sign, exponent, mantissa. */
static double f16_ref(uint16_t h) {
    const int sgn = h >> 15, ex = (h >> 10) & 31, man = h & 1023;
    double v;
    if (ex == 0) v = ldexp((double)man, -24);
    else if (ex == 31) v = man ? NAN : INFINITY;
    else v = ldexp(1.0 + man / 1024.0, ex - 15);
    return sgn ? -v : v;
}

static void test_round_trip(void) {
    const float f32v[6] = {1.5f, -2.25f, 3.0e-39f /* f32 subnormal */, 65504.0f, -0.0f, 1.0e30f};
    const float bfv[4] = {1.0f, -3.5f, 0.0078125f, 3.0e38f};
    uint16_t bf[4];
    for (int i = 0; i < 4; i++) bf[i] = f32_to_bf16(bfv[i]);
    /* f16: normal, smallest subnormal, largest subnormal, negative subnormal, +inf, -inf, max, -0 */
    const uint16_t hf[8] = {0x3c00, 0x0001, 0x03ff, 0x8001, 0x7c00, 0xfc00, 0x7bff, 0x8000};
    const int64_t i64v[2] = {-7, 1234567890123ll};
    unsigned char data[24 + 8 + 16 + 16 + 4];
    size_t off = 0;
    memcpy(data + off, f32v, 24); off += 24;
    memcpy(data + off, bf, 8); off += 8;
    memcpy(data + off, hf, 16); off += 16;
    memcpy(data + off, i64v, 16); off += 16;
    memcpy(data + off, &f32v[0], 4); off += 4;
    const char *hdr =
        "{\"__metadata__\": {\"format\": \"pt\"},"
        " \"t.f32\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
        " \"t.bf16\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [24, 32]},"
        " \"t.f16\": {\"dtype\": \"F16\", \"shape\": [2, 2, 2], \"data_offsets\": [32, 48]},"
        " \"t.i64\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [48, 64]},"
        " \"t.scalar\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [64, 68]},"
        " \"t.empty\": {\"dtype\": \"F32\", \"shape\": [0, 5], \"data_offsets\": [68, 68]}}";
    const char *p = test_tmp_path("valid.safetensors");
    if (write_st(p, hdr, data, off) != 0) {
        test_report("st_round_trip_open", 0, "cannot write %s", p);
        return;
    }
    st_set s;
    qtts_error e;
    err_clear(&e);
    qtts_status st = st_open(&s, p, &e);
    test_report("st_round_trip_open", st == QTTS_OK, "status %d: %s", (int)st, e.msg);
    if (st) return;
    CHECK("st_round_trip_count", s.n_tensors == 6 && s.n_files == 1, "n_tensors %d n_files %d (want 6, 1)",
          s.n_tensors, s.n_files);
    int sorted = 1;
    for (int i = 1; i < s.n_tensors; i++) sorted &= strcmp(s.tensors[i - 1].name, s.tensors[i].name) < 0;
    CHECK("st_round_trip_sorted", sorted, "tensor table not sorted by name");
    CHECK("st_find_absent", st_find(&s, "t.nope") == NULL && st_find(&s, "") == NULL &&
                                st_find(&s, "__metadata__") == NULL,
          "st_find returned a tensor for an absent name");

    const st_tensor *t = st_find(&s, "t.f32");
    float out[8];
    int ok = t && t->dtype == DT_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->n_elems == 6 &&
             t->nbytes == 24;
    if (ok) {
        dtype_to_f32(t->dtype, t->data, out, 6);
        ok = memcmp(out, f32v, 24) == 0;
    }
    CHECK("st_round_trip_f32", ok, "F32 tensor metadata or values differ");

    t = st_find(&s, "t.bf16");
    ok = t && t->dtype == DT_BF16 && t->ndim == 1 && t->shape[0] == 4 && t->nbytes == 8;
    if (ok) {
        dtype_to_f32(t->dtype, t->data, out, 4);
        /* all four values are exactly representable in bf16 except 3e38 */
        ok = out[0] == 1.0f && out[1] == -3.5f && out[2] == 0.0078125f && fabsf(out[3] - 3.0e38f) <= 3.0e38f / 256;
    }
    CHECK("st_round_trip_bf16", ok, "BF16 values: %g %g %g %g", out[0], out[1], out[2], out[3]);

    t = st_find(&s, "t.f16");
    ok = t && t->dtype == DT_F16 && t->ndim == 3 && t->n_elems == 8 && t->nbytes == 16;
    int bad_i = -1;
    if (ok) {
        dtype_to_f32(t->dtype, t->data, out, 8);
        for (int i = 0; i < 8 && bad_i < 0; i++) {
            const double ref = f16_ref(hf[i]);
            if (!((double)out[i] == ref && (signbit(out[i]) != 0) == (signbit(ref) != 0))) bad_i = i;
        }
        ok = bad_i < 0;
    }
    CHECK("st_round_trip_f16_subnormal_inf", ok, "F16 element %d (bits 0x%04x): got %.9g want %.9g", bad_i,
          bad_i >= 0 ? hf[bad_i] : 0, bad_i >= 0 ? out[bad_i] : 0.0, bad_i >= 0 ? f16_ref(hf[bad_i]) : 0.0);

    t = st_find(&s, "t.i64");
    ok = t && t->dtype == DT_I64 && t->nbytes == 16 && memcmp(t->data, i64v, 16) == 0;
    CHECK("st_round_trip_i64", ok, "I64 tensor metadata or bytes differ");
    t = st_find(&s, "t.scalar");
    ok = t && t->ndim == 0 && t->n_elems == 1 && t->nbytes == 4 && memcmp(t->data, &f32v[0], 4) == 0;
    CHECK("st_round_trip_scalar", ok, "0-dim tensor wrong");
    t = st_find(&s, "t.empty");
    ok = t && t->ndim == 2 && t->n_elems == 0 && t->nbytes == 0;
    CHECK("st_round_trip_zero_size", ok, "zero-size tensor wrong");

    /* st_get_float */
    const st_tensor *got = NULL;
    int64_t sh23[2] = {2, 3}, sh32[2] = {3, 2}, sh6[1] = {6};
    err_clear(&e);
    st = st_get_float(&s, "t.f32", 2, sh23, &got, &e);
    CHECK("st_get_float_ok", st == QTTS_OK && got == st_find(&s, "t.f32"), "status %d: %s", (int)st, e.msg);
    err_clear(&e);
    st = st_get_float(&s, "t.missing", 2, sh23, &got, &e);
    CHECK("st_get_float_missing", st == QTTS_ERR_MODEL && strstr(e.msg, "'t.missing'") && strstr(e.msg, p),
          "status %d: %s", (int)st, e.msg);
    err_clear(&e);
    int64_t sh2[1] = {2};
    st = st_get_float(&s, "t.i64", 1, sh2, &got, &e);
    CHECK("st_get_float_wrong_dtype", st == QTTS_ERR_MODEL && strstr(e.msg, "'t.i64'") && strstr(e.msg, "I64"),
          "status %d: %s", (int)st, e.msg);
    err_clear(&e);
    st = st_get_float(&s, "t.f32", 2, sh32, &got, &e);
    CHECK("st_get_float_wrong_shape",
          st == QTTS_ERR_MODEL && strstr(e.msg, "'t.f32'") && strstr(e.msg, "[2, 3]") && strstr(e.msg, "[3, 2]"),
          "status %d: %s", (int)st, e.msg);
    err_clear(&e);
    st = st_get_float(&s, "t.f32", 1, sh6, &got, &e);
    CHECK("st_get_float_wrong_ndim", st == QTTS_ERR_MODEL && strstr(e.msg, "[2, 3]") && strstr(e.msg, "[6]"),
          "status %d: %s", (int)st, e.msg);
    st_close(&s);
    st_close(&s); /* closing twice is allowed */
    CHECK("st_close_zeroes", set_is_zeroed(&s), "st_close left state behind");

    /* misaligned float data (header length not padded): a clear error, not a misaligned load */
    p = test_tmp_path("misaligned.safetensors");
    char mh[128];
    snprintf(mh, sizeof mh, "%s", "{\"t.m\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    if ((8 + strlen(mh)) % 4 == 0) strcat(mh, " "); /* keep the data misaligned */
    unsigned char raw[160];
    const size_t hl = strlen(mh);
    put_u64le(raw, hl);
    memcpy(raw + 8, mh, hl);
    memset(raw + 8 + hl, 0, 4);
    test_write_file(p, raw, 8 + hl + 4);
    err_clear(&e);
    st = st_open_file(&s, p, &e);
    if (st == QTTS_OK) {
        int64_t sh1[1] = {1};
        st = st_get_float(&s, "t.m", 1, sh1, &got, &e);
        CHECK("st_get_float_misaligned", st == QTTS_ERR_MODEL && strstr(e.msg, "'t.m'") && strstr(e.msg, "align"),
              "status %d: %s", (int)st, e.msg);
        st_close(&s);
    } else {
        test_report("st_get_float_misaligned", 0, "open failed: %s", e.msg);
    }
}

static void test_conversions(void) {
    /* f16 -> f32 over all 65536 bit patterns against an independent decoder */
    int bad = -1;
    for (uint32_t h = 0; h < 0x10000u && bad < 0; h++) {
        const float f = f16_to_f32((uint16_t)h);
        const double r = f16_ref((uint16_t)h);
        if (isnan(r) ? !isnan(f) : ((double)f != r || (signbit(f) != 0) != (signbit(r) != 0))) bad = (int)h;
    }
    CHECK("f16_to_f32_all_patterns", bad < 0, "bits 0x%04x: got %.9g want %.9g", bad,
          bad >= 0 ? f16_to_f32((uint16_t)bad) : 0.0, bad >= 0 ? f16_ref((uint16_t)bad) : 0.0);

    /* f32 -> bf16 round to nearest, ties to even */
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 exact */
        {0x3f808000u, 0x3f80}, /* halfway, lower is even: down */
        {0x3f818000u, 0x3f82}, /* halfway, lower is odd: up */
        {0x3f808001u, 0x3f81}, /* just above halfway: up */
        {0x3f807fffu, 0x3f80}, /* just below halfway: down */
        {0xbf818000u, 0xbf82}, /* negative halfway odd: away from zero to even */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to +inf */
        {0x7f800000u, 0x7f80}, /* +inf */
        {0xff800000u, 0xff80}, /* -inf */
        {0x80000000u, 0x8000}, /* -0 */
        {0x00000001u, 0x0000}, /* tiny subnormal rounds to 0 */
        {0x00018000u, 0x0002}, /* subnormal halfway, odd: up */
    };
    int bad_c = -1;
    uint16_t got_c = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && bad_c < 0; i++) {
        float f;
        memcpy(&f, &cases[i].in, 4);
        got_c = f32_to_bf16(f);
        if (got_c != cases[i].out) bad_c = (int)i;
    }
    CHECK("f32_to_bf16_round_nearest_even", bad_c < 0, "case %d: 0x%08x -> 0x%04x, want 0x%04x", bad_c,
          bad_c >= 0 ? cases[bad_c].in : 0u, got_c, bad_c >= 0 ? cases[bad_c].out : 0);
    /* NaNs stay NaN (a signalling NaN with only low mantissa bits must not become inf) */
    const uint32_t nans[3] = {0x7f800001u, 0xffc00000u, 0x7fffffffu};
    int nan_ok = 1;
    for (int i = 0; i < 3; i++) {
        float f;
        memcpy(&f, &nans[i], 4);
        nan_ok &= isnan(bf16_to_f32(f32_to_bf16(f))) != 0;
    }
    CHECK("f32_to_bf16_nan_stays_nan", nan_ok, "a NaN did not survive f32 -> bf16 -> f32");
    /* bf16 -> f32 is exact for every bf16 value */
    int bad_b = -1;
    for (uint32_t h = 0; h < 0x10000u && bad_b < 0; h++) {
        const float f = bf16_to_f32((uint16_t)h);
        uint32_t u;
        memcpy(&u, &f, 4);
        if (u != h << 16) bad_b = (int)h;
        else if (!isnan(f) && f32_to_bf16(f) != h) bad_b = (int)h;
    }
    CHECK("bf16_round_trip_all_patterns", bad_b < 0, "bits 0x%04x", bad_b);
    CHECK("dtype_sizes", dtype_size(DT_F32) == 4 && dtype_size(DT_BF16) == 2 && dtype_size(DT_F16) == 2 &&
                             dtype_size(DT_I64) == 8 && dtype_size(DT_BOOL) == 1 && dtype_size(DT_COUNT) == 0,
          "wrong dtype sizes");
    CHECK("dtype_names", strcmp(dtype_name(DT_BF16), "BF16") == 0 && strcmp(dtype_name(DT_I64), "I64") == 0 &&
                             strcmp(dtype_name(DT_COUNT), "?") == 0,
          "wrong dtype names");
}

/* ------------------------------------------------------------ shards */

static const char *g_shard_a_hdr =
    "{\"a.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
    " \"b.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}";
static const char *g_shard_b_hdr = "{\"c.w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 12]}}";

/* Make folder `name` with two shards and the given index text (NULL = none). */
static const char *make_shards(const char *name, const char *hdr_a, const char *hdr_b, const char *index) {
    const char *dir = test_tmp_path("%s", name);
    mkdir(dir, 0755);
    const float da[3] = {1.0f, 2.0f, 3.0f}, db[3] = {4.0f, 5.0f, 6.0f};
    if (hdr_a) write_st(test_tmp_path("%s/model-00001-of-00002.safetensors", name), hdr_a, da, sizeof da);
    if (hdr_b) write_st(test_tmp_path("%s/model-00002-of-00002.safetensors", name), hdr_b, db, sizeof db);
    if (index) {
        const char *ip = test_tmp_path("%s/model.safetensors.index.json", name);
        test_write_file(ip, index, strlen(index));
    }
    return dir;
}

#define S1 "\"model-00001-of-00002.safetensors\""
#define S2 "\"model-00002-of-00002.safetensors\""

static void test_shards(void) {
    const char *good_index = "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S1
                             ", \"c.w\": " S2 "}}";
    const char *dir = make_shards("shards_ok", g_shard_a_hdr, g_shard_b_hdr, good_index);
    st_set s;
    qtts_error e;
    err_clear(&e);
    qtts_status st = st_open(&s, dir, &e);
    test_report("st_shards_open", st == QTTS_OK, "status %d: %s", (int)st, e.msg);
    if (st == QTTS_OK) {
        const st_tensor *a = st_find(&s, "a.w"), *b = st_find(&s, "b.w"), *c = st_find(&s, "c.w");
        int ok = s.n_files == 2 && s.n_tensors == 3 && a && b && c && a->file_index != c->file_index &&
                 a->file_index == b->file_index;
        float va[2] = {0}, vb[1] = {0}, vc[3] = {0};
        if (ok) {
            dtype_to_f32(a->dtype, a->data, va, 2);
            dtype_to_f32(b->dtype, b->data, vb, 1);
            dtype_to_f32(c->dtype, c->data, vc, 3);
            ok = va[0] == 1.0f && va[1] == 2.0f && vb[0] == 3.0f && vc[0] == 4.0f && vc[1] == 5.0f && vc[2] == 6.0f;
        }
        CHECK("st_shards_both_found", ok, "n_files %d n_tensors %d, values a=%g,%g b=%g c=%g,%g,%g", s.n_files,
              s.n_tensors, va[0], va[1], vb[0], vc[0], vc[1], vc[2]);
        const st_tensor *got;
        int64_t bad_shape[1] = {4};
        err_clear(&e);
        st = st_get_float(&s, "c.w", 1, bad_shape, &got, &e);
        CHECK("st_shards_error_names_shard", st == QTTS_ERR_MODEL && strstr(e.msg, "model-00002-of-00002"),
              "status %d: %s", (int)st, e.msg);
        st_close(&s);
    }
    /* model.safetensors wins over an index when both exist */
    dir = make_shards("shards_single_wins", g_shard_a_hdr, g_shard_b_hdr, "not json");
    write_st(test_tmp_path("shards_single_wins/model.safetensors"), g_shard_b_hdr, (float[3]){7, 8, 9}, 12);
    err_clear(&e);
    st = st_open(&s, dir, &e);
    CHECK("st_single_file_preferred", st == QTTS_OK && s.n_tensors == 1 && st_find(&s, "c.w"), "status %d: %s",
          (int)st, e.msg);
    if (st == QTTS_OK) st_close(&s);

    const char *ip;
    dir = make_shards("shards_slash", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": \"sub/model-00001-of-00002.safetensors\"}}");
    ip = test_tmp_path("shards_slash/model.safetensors.index.json");
    expect_open("st_shards_path_with_slash", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", "shard");
    dir = make_shards("shards_dotdot", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": \"../shards_ok/model-00001-of-00002.safetensors\"}}");
    ip = test_tmp_path("shards_dotdot/model.safetensors.index.json");
    expect_open("st_shards_path_dotdot", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", "shard");
    dir = make_shards("shards_bare_dotdot", g_shard_a_hdr, g_shard_b_hdr, "{\"weight_map\": {\"a.w\": \"..\"}}");
    ip = test_tmp_path("shards_bare_dotdot/model.safetensors.index.json");
    expect_open("st_shards_path_bare_dotdot", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", NULL);
    dir = make_shards("shards_absolute", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": \"/etc/passwd\"}}");
    ip = test_tmp_path("shards_absolute/model.safetensors.index.json");
    expect_open("st_shards_path_absolute", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", NULL);
    dir = make_shards("shards_empty_name", g_shard_a_hdr, g_shard_b_hdr, "{\"weight_map\": {\"a.w\": \"\"}}");
    ip = test_tmp_path("shards_empty_name/model.safetensors.index.json");
    expect_open("st_shards_path_empty", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", NULL);
    dir = make_shards("shards_not_string", g_shard_a_hdr, g_shard_b_hdr, "{\"weight_map\": {\"a.w\": 3}}");
    ip = test_tmp_path("shards_not_string/model.safetensors.index.json");
    expect_open("st_shards_name_not_string", 1, dir, QTTS_ERR_FORMAT, ip, "'a.w'", NULL);

    dir = make_shards("shards_missing_tensor", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S1 ", \"c.w\": " S2 ", \"d.w\": " S1 "}}");
    ip = test_tmp_path("shards_missing_tensor/model.safetensors.index.json");
    expect_open("st_shards_tensor_missing_from_shard", 1, dir, QTTS_ERR_FORMAT, ip, "'d.w'",
                "model-00001-of-00002.safetensors");
    /* both shards are opened, but the index puts b.w in the wrong one */
    dir = make_shards("shards_wrong_shard", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S2 ", \"c.w\": " S2 "}}");
    ip = test_tmp_path("shards_wrong_shard/model.safetensors.index.json");
    expect_open("st_shards_tensor_in_other_shard", 1, dir, QTTS_ERR_FORMAT, ip, "'b.w'", "model-00002-of-00002");
    /* a tensor the index does not list at all, in a listed shard: the reader
     * serves what the shards hold (the index is a map, not a whitelist) */
    dir = make_shards("shards_unlisted", g_shard_a_hdr, g_shard_b_hdr,
                      "{\"weight_map\": {\"a.w\": " S1 ", \"c.w\": " S2 "}}");
    expect_open("st_shards_unlisted_tensor_ok", 1, dir, QTTS_OK, NULL, NULL, NULL);
    const char *dup_b = "{\"c.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                        " \"a.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}";
    dir = make_shards("shards_dup", g_shard_a_hdr, dup_b,
                      "{\"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S1 ", \"c.w\": " S2 "}}");
    expect_open("st_shards_same_tensor_twice", 1, dir, QTTS_ERR_FORMAT, "'a.w'", "model-00001-of-00002",
                "model-00002-of-00002");
    dir = make_shards("shards_bad_json", g_shard_a_hdr, g_shard_b_hdr, "{\"weight_map\": {\"a.w\": " S1 ",,}}");
    ip = test_tmp_path("shards_bad_json/model.safetensors.index.json");
    expect_open("st_shards_index_malformed", 1, dir, QTTS_ERR_FORMAT, ip, "line 1", NULL);
    dir = make_shards("shards_no_map", g_shard_a_hdr, g_shard_b_hdr, "{\"metadata\": {}}");
    ip = test_tmp_path("shards_no_map/model.safetensors.index.json");
    expect_open("st_shards_index_no_weight_map", 1, dir, QTTS_ERR_FORMAT, ip, "weight_map", NULL);
    dir = make_shards("shards_map_array", g_shard_a_hdr, g_shard_b_hdr, "[{\"weight_map\": {}}]");
    ip = test_tmp_path("shards_map_array/model.safetensors.index.json");
    expect_open("st_shards_index_is_array", 1, dir, QTTS_ERR_FORMAT, ip, "weight_map", NULL);
    dir = make_shards("shards_missing_file", g_shard_a_hdr, NULL,
                      "{\"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S1 ", \"c.w\": " S2 "}}");
    expect_open("st_shards_shard_file_missing", 1, dir, QTTS_ERR_IO, "model-00002-of-00002.safetensors", NULL, NULL);
    dir = make_shards("shards_bad_shard", g_shard_a_hdr, "[]",
                      "{\"weight_map\": {\"a.w\": " S1 ", \"b.w\": " S1 ", \"c.w\": " S2 "}}");
    expect_open("st_shards_shard_malformed", 1, dir, QTTS_ERR_FORMAT, "model-00002-of-00002.safetensors",
                "not a JSON object", NULL);
}

/* ------------------------------------------------------------ real checkpoint, truncated */

static void test_truncated_real(void) {
    const char *src = test_path("golden/data/custom_voice/model.safetensors");
    size_t n = 0;
    unsigned char *buf = test_read_file(src, &n);
    if (!buf) {
        test_skip("st_real_truncated", "cannot read %s", src);
        return;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    const char *p = test_tmp_path("real_full.safetensors");
    test_write_file(p, buf, n);
    st_set s;
    qtts_error e;
    err_clear(&e);
    qtts_status st = st_open_file(&s, p, &e);
    CHECK("st_real_full_copy_opens", st == QTTS_OK && s.n_tensors > 10, "status %d: %s", (int)st, e.msg);
    if (st == QTTS_OK) st_close(&s);
    /* cut points: inside the length, inside the header, at the header's end
     * (no data), inside the data, one byte short */
    const size_t cuts[] = {0, 1, 7, 8, 9, 100, (size_t)hlen / 2, (size_t)hlen + 7, (size_t)hlen + 8,
                           (size_t)hlen + 9, (size_t)hlen + 8 + 1000, n / 2, n - 4097, n - 2, n - 1};
    int all_ok = 1;
    char first_bad[1200] = "";
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        if (cuts[i] >= n) continue;
        p = test_tmp_path("real_cut_%zu.safetensors", cuts[i]);
        test_write_file(p, buf, cuts[i]);
        err_clear(&e);
        st = st_open_file(&s, p, &e);
        const int ok = st == QTTS_ERR_FORMAT && strstr(e.msg, p) && set_is_zeroed(&s);
        if (!ok && all_ok) snprintf(first_bad, sizeof first_bad, "cut at %zu: status %d: %s", cuts[i], (int)st, e.msg);
        all_ok &= ok;
        if (st == QTTS_OK) st_close(&s);
        remove(p);
    }
    CHECK("st_real_truncated", all_ok, "%s", first_bad);
    /* a cut inside the data names the first tensor that no longer fits */
    p = test_tmp_path("real_cut_data.safetensors");
    test_write_file(p, buf, n - 1);
    err_clear(&e);
    st = st_open_file(&s, p, &e);
    CHECK("st_real_truncated_names_tensor", st == QTTS_ERR_FORMAT && strstr(e.msg, "tensor '") &&
                                                strstr(e.msg, "truncated"),
          "status %d: %s", (int)st, e.msg);
    if (st == QTTS_OK) st_close(&s);
    /* header length field corrupted by one bit in the high byte */
    buf[7] ^= 0x01;
    p = test_tmp_path("real_bad_len.safetensors");
    test_write_file(p, buf, n);
    err_clear(&e);
    st = st_open_file(&s, p, &e);
    CHECK("st_real_corrupt_length", st == QTTS_ERR_FORMAT && strstr(e.msg, p), "status %d: %s", (int)st, e.msg);
    if (st == QTTS_OK) st_close(&s);
    buf[7] ^= 0x01;
    /* a header byte flipped to garbage inside a dtype string */
    char *d = memmem(buf + 8, (size_t)hlen, "\"BF16\"", 6);
    if (d) {
        d[1] = 'X';
        p = test_tmp_path("real_bad_dtype.safetensors");
        test_write_file(p, buf, n);
        err_clear(&e);
        st = st_open_file(&s, p, &e);
        CHECK("st_real_corrupt_dtype", st == QTTS_ERR_FORMAT && strstr(e.msg, "dtype") && strstr(e.msg, "tensor '"),
              "status %d: %s", (int)st, e.msg);
        if (st == QTTS_OK) st_close(&s);
    } else {
        test_report("st_real_corrupt_dtype", 0, "no BF16 tensor in %s", src);
    }
    free(buf);
}

int main(void) {
    if (test_tmp_make("qtts_test_st") != 0) return test_finish();
    test_hostile_files();
    test_round_trip();
    test_conversions();
    test_shards();
    test_truncated_real();
    test_tmp_remove();
    return test_finish();
}
