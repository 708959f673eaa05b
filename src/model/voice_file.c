/* Saved-voice files: voice_data <-> the versioned little-endian format
 * described in voice_file.h. Loading validates every count against the
 * limits before allocating, checks the CRC, then the contents. */
#include "model/voice_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- CRC-32 */

/* Half-byte table of the reflected IEEE polynomial 0xEDB88320: entry i is i
 * shifted through the polynomial four times. Constant, so concurrent callers
 * share nothing mutable; two lookups per byte are plenty for files of a few MB. */
static const uint32_t crc_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
    0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t voice_crc32(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        crc = crc_nibble[crc & 15u] ^ (crc >> 4);
        crc = crc_nibble[crc & 15u] ^ (crc >> 4);
    }
    return ~crc;
}

/* ---------------------------------------------------------------- bytes */

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_f32(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(p, u);
}

static float get_f32(const unsigned char *p) {
    uint32_t u = get_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int32_t get_i32(const unsigned char *p) {
    uint32_t u = get_u32(p);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

static void put_i32(unsigned char *p, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(p, u);
}

/* ---------------------------------------------------------------- validation */

/* 1 when s[n] is well-formed UTF-8 (no overlongs, surrogates, > U+10FFFF) without NUL. */
static int utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else return 0;
        if (n - i < len) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += len;
    }
    return 1;
}

/* 1 when name (a field of VOICE_NAME_FIELD bytes) holds 1..15 printable ASCII
 * bytes and a NUL; strict (a file's field): every byte after it is NUL too. */
static int name_ok(const char *name, int strict) {
    size_t len = 0;
    while (len < VOICE_NAME_FIELD && name[len]) len++;
    if (len == 0 || len >= VOICE_NAME_FIELD) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x21 || (unsigned char)name[i] > 0x7E) return 0;
    for (size_t i = len; strict && i < VOICE_NAME_FIELD; i++)
        if (name[i]) return 0;
    return 1;
}

/* Content checks shared by save (st = INVALID_ARG) and load (st = FORMAT).
 * Counts are already known to be within the limits when loading. */
static qtts_status validate(const voice_data *v, const char *label, qtts_status st, qtts_error *e) {
    if (!name_ok(v->model_type, st == QTTS_ERR_FORMAT))
        return err_set(e, st, "%s: model type is not 1..15 printable ASCII characters", label);
    if (!name_ok(v->model_size, st == QTTS_ERR_FORMAT))
        return err_set(e, st, "%s: model size is not 1..15 printable ASCII characters", label);
    if (v->hidden_size < 1 || v->hidden_size > VOICE_MAX_XVECTOR)
        return err_set(e, st, "%s: hidden size %d is outside 1..%d", label, v->hidden_size, VOICE_MAX_XVECTOR);
    if (v->n_codebooks < 1 || v->n_codebooks > VOICE_MAX_CODEBOOKS)
        return err_set(e, st, "%s: %d codebooks is outside 1..%d", label, v->n_codebooks, VOICE_MAX_CODEBOOKS);
    if (v->codebook_size < 1 || v->codebook_size > VOICE_MAX_CODEBOOK_SIZE)
        return err_set(e, st, "%s: codebook size %d is outside 1..%d", label, v->codebook_size,
                       VOICE_MAX_CODEBOOK_SIZE);
    if (v->icl != 0 && v->icl != 1) return err_set(e, st, "%s: icl must be 0 or 1, got %d", label, v->icl);
    if (v->xvector_len < 1 || v->xvector_len > VOICE_MAX_XVECTOR || !v->xvector)
        return err_set(e, st, "%s: x-vector length %d is outside 1..%d (or the x-vector is missing)", label,
                       v->xvector_len, VOICE_MAX_XVECTOR);
    for (int i = 0; i < v->xvector_len; i++)
        if (!isfinite(v->xvector[i]))
            return err_set(e, st, "%s: x-vector value %d is not finite", label, i);
    if (v->icl) {
        if (v->n_ref_frames < 1 || v->n_ref_frames > VOICE_MAX_REF_FRAMES || !v->ref_codes)
            return err_set(e, st, "%s: an ICL voice needs 1..%d reference frames, got %d", label,
                           VOICE_MAX_REF_FRAMES, v->n_ref_frames);
        if (v->n_ref_text_ids < 1 || v->n_ref_text_ids > VOICE_MAX_TEXT_IDS || !v->ref_text_ids)
            return err_set(e, st, "%s: an ICL voice needs 1..%d reference transcript ids, got %d", label,
                           VOICE_MAX_TEXT_IDS, v->n_ref_text_ids);
    } else if (v->n_ref_frames != 0 || v->n_ref_text_ids != 0) {
        return err_set(e, st, "%s: an x-vector-only voice carries no reference codes or ids (got %d frames, %d ids)",
                       label, v->n_ref_frames, v->n_ref_text_ids);
    }
    size_t n_codes = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    for (size_t i = 0; i < n_codes; i++)
        if (v->ref_codes[i] < 0 || v->ref_codes[i] >= v->codebook_size)
            return err_set(e, st, "%s: reference code %d (frame %zu, codebook %zu) is outside 0..%d", label,
                           v->ref_codes[i], i / (size_t)v->n_codebooks, i % (size_t)v->n_codebooks,
                           v->codebook_size - 1);
    for (int i = 0; i < v->n_ref_text_ids; i++)
        if (v->ref_text_ids[i] < 0)
            return err_set(e, st, "%s: reference transcript id %d is negative (%d)", label, i, v->ref_text_ids[i]);
    if (v->ref_text) {
        size_t L = strlen(v->ref_text);
        if (L > VOICE_MAX_TEXT_BYTES)
            return err_set(e, st, "%s: reference transcript of %zu bytes exceeds the %u-byte limit", label, L,
                           VOICE_MAX_TEXT_BYTES);
        if (!utf8_ok((const unsigned char *)v->ref_text, L))
            return err_set(e, st, "%s: reference transcript is not valid UTF-8", label);
    }
    if (v->primed_state) {
        if (!v->icl) return err_set(e, st, "%s: an x-vector-only voice carries no primed decoder state", label);
        if (v->primed_n < 1 || v->primed_n > VOICE_MAX_PRIMED_FLOATS)
            return err_set(e, st, "%s: primed decoder state of %zu floats is outside 1..%u", label, v->primed_n,
                           VOICE_MAX_PRIMED_FLOATS);
        if (v->primed_pos < 0 || v->primed_kv_len < 0)
            return err_set(e, st, "%s: primed decoder position %lld / window %d is negative", label,
                           (long long)v->primed_pos, v->primed_kv_len);
        if (!isfinite(v->primed_ref_last))
            return err_set(e, st, "%s: the primed reference's last sample is not finite", label);
        for (size_t i = 0; i < v->primed_n; i++)
            if (!isfinite(v->primed_state[i]))
                return err_set(e, st, "%s: primed decoder state value %zu is not finite", label, i);
    }
    return QTTS_OK;
}

/* ---------------------------------------------------------------- save */

qtts_status voice_save_mem(const voice_data *v, unsigned char **buf, size_t *size, qtts_error *e) {
    if (!v || !buf || !size) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_save_mem: bad arguments");
    *buf = NULL;
    *size = 0;
    qtts_status st = validate(v, "voice to save", QTTS_ERR_INVALID_ARG, e);
    if (st != QTTS_OK) return st;
    size_t X = (size_t)v->xvector_len, F = (size_t)v->n_ref_frames, Q = (size_t)v->n_codebooks;
    size_t N = (size_t)v->n_ref_text_ids, L = v->ref_text ? strlen(v->ref_text) : 0;
    size_t S = v->primed_state ? v->primed_n : 0;
    size_t total = VOICE_HEADER_BYTES + 4 * X + 4 + 4 * F * Q + 4 + 4 * N + 4 + L + 4;
    if (S) total += VOICE_PRIMED_FIXED_BYTES + 4 * S;
    unsigned char *b = calloc(1, total);
    if (!b) return err_set(e, QTTS_ERR_NOMEM, "out of memory (%zu bytes for a voice)", total);
    memcpy(b, VOICE_MAGIC, 8);
    put_u32(b + 8, VOICE_FORMAT_VERSION);
    put_u32(b + 12, (v->icl ? VOICE_FLAG_ICL : 0u) | (S ? VOICE_FLAG_PRIMED : 0u));
    memcpy(b + 16, v->model_type, strlen(v->model_type)); /* NUL padding from calloc */
    memcpy(b + 32, v->model_size, strlen(v->model_size));
    put_u32(b + 48, (uint32_t)v->hidden_size);
    put_u32(b + 52, (uint32_t)v->n_codebooks);
    put_u32(b + 56, (uint32_t)v->codebook_size);
    put_u32(b + 60, (uint32_t)X);
    size_t o = VOICE_HEADER_BYTES;
    for (size_t i = 0; i < X; i++, o += 4) put_f32(b + o, v->xvector[i]);
    put_u32(b + o, (uint32_t)F);
    o += 4;
    for (size_t i = 0; i < F * Q; i++, o += 4) put_i32(b + o, v->ref_codes[i]);
    put_u32(b + o, (uint32_t)N);
    o += 4;
    for (size_t i = 0; i < N; i++, o += 4) put_i32(b + o, v->ref_text_ids[i]);
    put_u32(b + o, (uint32_t)L);
    o += 4;
    if (L) memcpy(b + o, v->ref_text, L);
    o += L;
    if (S) {
        put_u32(b + o, (uint32_t)v->primed_key);
        put_u32(b + o + 4, (uint32_t)(v->primed_key >> 32));
        put_f32(b + o + 8, v->primed_ref_last);
        put_u32(b + o + 12, (uint32_t)(uint64_t)v->primed_pos);
        put_u32(b + o + 16, (uint32_t)((uint64_t)v->primed_pos >> 32));
        put_u32(b + o + 20, (uint32_t)v->primed_kv_len);
        put_u32(b + o + 24, (uint32_t)S);
        o += VOICE_PRIMED_FIXED_BYTES;
        for (size_t i = 0; i < S; i++, o += 4) put_f32(b + o, v->primed_state[i]);
    }
    put_u32(b + o, voice_crc32(0, b, o));
    *buf = b;
    *size = total;
    return QTTS_OK;
}

qtts_status voice_save(const char *path, const voice_data *v, qtts_error *e) {
    if (!path) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_save: path is NULL");
    unsigned char *b = NULL;
    size_t n = 0;
    qtts_status st = voice_save_mem(v, &b, &n, e);
    if (st != QTTS_OK) return st;
    /* written beside path under a unique name, then renamed over it: a file
     * already at path is replaced only by a complete one (a full disk or a
     * file-size limit leaves it as it was) */
    static atomic_uint seq;
    char *tmp = malloc(strlen(path) + 48);
    if (!tmp) {
        free(b);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory saving voice file %s", path);
    }
    sprintf(tmp, "%s.tmp%ld.%u", path, (long)getpid(), atomic_fetch_add(&seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        st = err_set(e, QTTS_ERR_IO, "cannot create voice file %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        free(b);
        return st;
    }
    size_t w = fwrite(b, 1, n, f);
    int werr = errno;
    int rc = fflush(f);
    if (w == n && rc) werr = errno;
    if (w == n && !rc && fsync(fileno(f))) rc = -1, werr = errno;
    if (fclose(f) && w == n && !rc) rc = -1, werr = errno;
    if (w == n && !rc && rename(tmp, path)) rc = -1, werr = errno;
    if (w != n || rc != 0) {
        unlink(tmp);
        st = err_set(e, QTTS_ERR_IO, "cannot write voice file %s: %s", path, strerror(werr));
    }
    free(tmp);
    free(b);
    return st;
}

/* ---------------------------------------------------------------- load */

void voice_free(voice_data *v) {
    if (!v) return;
    free(v->xvector);
    free(v->ref_codes);
    free(v->ref_text_ids);
    free(v->ref_text);
    free(v->primed_state);
    memset(v, 0, sizeof *v);
}

/* Fails with a "truncated" message unless `need` bytes remain at offset o. */
#define NEED(need, what)                                                                                  \
    do {                                                                                                  \
        if (size - o < (size_t)(need))                                                                    \
            return err_set(e, QTTS_ERR_FORMAT,                                                            \
                           "voice file %s is truncated: %s needs %zu bytes at offset %zu but only %zu "   \
                           "remain (file size %zu): save the voice again",                                \
                           label, (what), (size_t)(need), o, size - o, size);                             \
    } while (0)

/* Parse and validate bytes into v (v zeroed on entry; freed by the caller on failure). */
static qtts_status parse(const unsigned char *d, size_t size, const char *label, voice_data *v, qtts_error *e) {
    if (size < 8 || memcmp(d, VOICE_MAGIC, 8) != 0)
        return err_set(e, QTTS_ERR_FORMAT, "%s is not a qtts voice file (it does not start with \"%s\")", label,
                       VOICE_MAGIC);
    size_t o = 8;
    NEED(4, "the format version");
    uint32_t version = get_u32(d + o);
    o += 4;
    if (version == 0)
        return err_set(e, QTTS_ERR_FORMAT, "voice file %s has an invalid format version 0: the file is damaged",
                       label);
    if (version > VOICE_FORMAT_VERSION)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s has format version %u; this qtts reads versions up to %u: a newer qtts "
                       "is needed to load it",
                       label, version, VOICE_FORMAT_VERSION);
    NEED(VOICE_HEADER_BYTES - 12, "the header");
    uint32_t flags = get_u32(d + 12);
    const uint32_t known = version >= 2 ? VOICE_FLAG_ICL | VOICE_FLAG_PRIMED : VOICE_FLAG_ICL;
    if (flags & ~known)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s sets unknown flags 0x%08x (version %u defines only %s): the file is "
                       "damaged or from a newer qtts",
                       label, flags & ~known, version, version >= 2 ? "bits 0 and 1" : "bit 0");
    if ((flags & VOICE_FLAG_PRIMED) && !(flags & VOICE_FLAG_ICL))
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s flags a primed decoder state on an x-vector-only voice: the file is damaged",
                       label);
    v->icl = (flags & VOICE_FLAG_ICL) ? 1 : 0;
    memcpy(v->model_type, d + 16, VOICE_NAME_FIELD);
    memcpy(v->model_size, d + 32, VOICE_NAME_FIELD);
    uint32_t hidden = get_u32(d + 48), Q = get_u32(d + 52), cbs = get_u32(d + 56), X = get_u32(d + 60);
    if (hidden < 1 || hidden > VOICE_MAX_XVECTOR)
        return err_set(e, QTTS_ERR_FORMAT, "voice file %s claims hidden size %u (allowed 1..%d): the file is damaged",
                       label, hidden, VOICE_MAX_XVECTOR);
    if (Q < 1 || Q > VOICE_MAX_CODEBOOKS)
        return err_set(e, QTTS_ERR_FORMAT, "voice file %s claims %u codebooks (allowed 1..%d): the file is damaged",
                       label, Q, VOICE_MAX_CODEBOOKS);
    if (cbs < 1 || cbs > VOICE_MAX_CODEBOOK_SIZE)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s claims codebook size %u (allowed 1..%d): the file is damaged", label, cbs,
                       VOICE_MAX_CODEBOOK_SIZE);
    if (X < 1 || X > VOICE_MAX_XVECTOR)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s claims an x-vector of %u values (allowed 1..%d): the file is damaged", label,
                       X, VOICE_MAX_XVECTOR);
    v->hidden_size = (int)hidden;
    v->n_codebooks = (int)Q;
    v->codebook_size = (int)cbs;
    o = VOICE_HEADER_BYTES;
    NEED(4 * (size_t)X, "the x-vector");
    v->xvector = malloc(4 * (size_t)X);
    if (!v->xvector) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading voice file %s", label);
    v->xvector_len = (int)X;
    for (uint32_t i = 0; i < X; i++, o += 4) v->xvector[i] = get_f32(d + o);

    NEED(4, "the reference frame count");
    uint32_t F = get_u32(d + o);
    o += 4;
    uint32_t maxF = v->icl ? VOICE_MAX_REF_FRAMES : 0;
    if (F > maxF || (v->icl && F == 0))
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s claims %u reference frames (allowed %s%u for %s voice): the file is damaged",
                       label, F, v->icl ? "1.." : "", maxF, v->icl ? "an ICL" : "an x-vector-only");
    size_t n_codes = (size_t)F * Q;
    NEED(4 * n_codes, "the reference codes");
    if (n_codes) {
        v->ref_codes = malloc(4 * n_codes);
        if (!v->ref_codes) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading voice file %s", label);
        for (size_t i = 0; i < n_codes; i++, o += 4) v->ref_codes[i] = get_i32(d + o);
    }
    v->n_ref_frames = (int)F;

    NEED(4, "the transcript id count");
    uint32_t N = get_u32(d + o);
    o += 4;
    uint32_t maxN = v->icl ? VOICE_MAX_TEXT_IDS : 0;
    if (N > maxN || (v->icl && N == 0))
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s claims %u transcript ids (allowed %s%u for %s voice): the file is damaged",
                       label, N, v->icl ? "1.." : "", maxN, v->icl ? "an ICL" : "an x-vector-only");
    NEED(4 * (size_t)N, "the transcript ids");
    if (N) {
        v->ref_text_ids = malloc(4 * (size_t)N);
        if (!v->ref_text_ids) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading voice file %s", label);
        for (uint32_t i = 0; i < N; i++, o += 4) v->ref_text_ids[i] = get_i32(d + o);
    }
    v->n_ref_text_ids = (int)N;

    NEED(4, "the transcript length");
    uint32_t L = get_u32(d + o);
    o += 4;
    if (L > VOICE_MAX_TEXT_BYTES)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s claims a transcript of %u bytes (limit %u): the file is damaged", label, L,
                       VOICE_MAX_TEXT_BYTES);
    NEED(L, "the transcript");
    size_t text_at = o;
    o += L;
    size_t primed_at = 0, S = 0;
    if (flags & VOICE_FLAG_PRIMED) {
        NEED(VOICE_PRIMED_FIXED_BYTES, "the primed decoder state's header");
        uint32_t s32 = get_u32(d + o + 24);
        if (s32 < 1 || s32 > VOICE_MAX_PRIMED_FLOATS)
            return err_set(e, QTTS_ERR_FORMAT,
                           "voice file %s claims a primed decoder state of %u floats (allowed 1..%u): the file is "
                           "damaged",
                           label, s32, VOICE_MAX_PRIMED_FLOATS);
        S = s32;
        primed_at = o;
        o += VOICE_PRIMED_FIXED_BYTES;
        NEED(4 * S, "the primed decoder state");
        o += 4 * S;
    }
    NEED(4, "the CRC-32");
    uint32_t stored = get_u32(d + o);
    size_t crc_at = o;
    o += 4;
    if (o != size)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s has %zu unexpected bytes after its end (offset %zu): the file is damaged "
                       "or not a voice file",
                       label, size - o, o);
    uint32_t crc = voice_crc32(0, d, crc_at);
    if (crc != stored)
        return err_set(e, QTTS_ERR_FORMAT,
                       "voice file %s is corrupted (CRC-32 stored 0x%08x, computed 0x%08x): save the voice again",
                       label, stored, crc);
    if (L) {
        if (!utf8_ok(d + text_at, L))
            return err_set(e, QTTS_ERR_FORMAT, "voice file %s: the reference transcript is not valid UTF-8", label);
        v->ref_text = malloc((size_t)L + 1);
        if (!v->ref_text) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading voice file %s", label);
        memcpy(v->ref_text, d + text_at, L);
        v->ref_text[L] = '\0';
    }
    if (S) {
        const unsigned char *p = d + primed_at;
        v->primed_key = (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
        v->primed_ref_last = get_f32(p + 8);
        uint64_t pos = (uint64_t)get_u32(p + 12) | (uint64_t)get_u32(p + 16) << 32;
        uint32_t kv = get_u32(p + 20);
        if (pos > (uint64_t)INT64_MAX || kv > (uint32_t)INT32_MAX)
            return err_set(e, QTTS_ERR_FORMAT, "voice file %s: the primed decoder position is out of range", label);
        v->primed_pos = (int64_t)pos;
        v->primed_kv_len = (int)kv;
        v->primed_state = malloc(4 * S + 1);
        if (!v->primed_state) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading voice file %s", label);
        for (size_t i = 0; i < S; i++) v->primed_state[i] = get_f32(p + VOICE_PRIMED_FIXED_BYTES + 4 * i);
        v->primed_n = S;
    }
    char what[600];
    snprintf(what, sizeof what, "voice file %s", label);
    return validate(v, what, QTTS_ERR_FORMAT, e);
}

qtts_status voice_load_mem(const void *data, size_t size, const char *name, voice_data *v, qtts_error *e) {
    if (!v) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_load_mem: v is NULL");
    memset(v, 0, sizeof *v);
    if (!data && size) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_load_mem: data is NULL");
    const char *label = name ? name : "voice data";
    if (size > VOICE_MAX_FILE_BYTES)
        return err_set(e, QTTS_ERR_FORMAT, "%s is %zu bytes, larger than any voice file (at most %zu): it is not a "
                       "qtts voice file", label, size, (size_t)VOICE_MAX_FILE_BYTES);
    qtts_status st = parse(data ? data : (const void *)"", size, label, v, e);
    if (st != QTTS_OK) voice_free(v);
    return st;
}

qtts_status voice_load(const char *path, voice_data *v, qtts_error *e) {
    if (!v) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_load: v is NULL");
    memset(v, 0, sizeof *v);
    if (!path) return err_set(e, QTTS_ERR_INVALID_ARG, "voice_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, QTTS_ERR_IO, "cannot open voice file %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int err = errno;
        fclose(f);
        return err_set(e, QTTS_ERR_IO, "cannot read voice file %s: %s", path, strerror(err));
    }
    if (S_ISDIR(sb.st_mode)) {
        fclose(f);
        return err_set(e, QTTS_ERR_IO, "cannot read voice file %s: it is a directory", path);
    }
    /* Read at most one byte more than the largest voice file: a larger file is
     * refused without reading it all. */
    size_t cap = VOICE_MAX_FILE_BYTES + 1;
    if (sb.st_size >= 0 && (unsigned long long)sb.st_size < cap) cap = (size_t)sb.st_size + 1;
    unsigned char *b = malloc(cap);
    if (!b) {
        fclose(f);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory reading voice file %s", path);
    }
    size_t n = 0, got;
    while (n < cap && (got = fread(b + n, 1, cap - n, f)) > 0) n += got;
    int rerr = ferror(f);
    fclose(f);
    qtts_status st;
    if (rerr) st = err_set(e, QTTS_ERR_IO, "cannot read voice file %s", path);
    else st = voice_load_mem(b, n, path, v, e);
    free(b);
    return st;
}

/* ---------------------------------------------------------------- compatibility */

static const char *type_label(const char *t) {
    if (!t) return "?";
    if (!strcmp(t, "base")) return "Base";
    if (!strcmp(t, "custom_voice")) return "CustomVoice";
    if (!strcmp(t, "voice_design")) return "VoiceDesign";
    return t;
}

/* "0b6" -> "0.6B", "1b7" -> "1.7B"; anything else unchanged. */
static void size_label(const char *s, char *dst, size_t cap) {
    if (s && strlen(s) == 3 && s[0] >= '0' && s[0] <= '9' && (s[1] == 'b' || s[1] == 'B') && s[2] >= '0' &&
        s[2] <= '9')
        snprintf(dst, cap, "%c.%cB", s[0], s[2]);
    else
        snprintf(dst, cap, "%s", s ? s : "?");
}

qtts_status voice_check_compatible(const voice_data *v, const char *model_type, const char *model_size,
                                   int hidden_size, int n_codebooks, int codebook_size, qtts_error *e) {
    if (!v || !model_type || !model_size)
        return err_set(e, QTTS_ERR_INVALID_ARG, "voice_check_compatible: bad arguments");
    /* the voice's names, terminated even in a hand-filled struct */
    char vtype[VOICE_NAME_FIELD + 1], vsize[VOICE_NAME_FIELD + 1], vs[32], ms[32];
    snprintf(vtype, sizeof vtype, "%.*s", VOICE_NAME_FIELD, v->model_type);
    snprintf(vsize, sizeof vsize, "%.*s", VOICE_NAME_FIELD, v->model_size);
    size_label(vsize, vs, sizeof vs);
    size_label(model_size, ms, sizeof ms);
    if (strcmp(vtype, model_type) != 0 || strcmp(vsize, model_size) != 0 ||
        v->hidden_size != hidden_size || v->xvector_len != hidden_size)
        return err_set(e, QTTS_ERR_INPUT,
                       "this voice was made for a %s %s model (hidden %d); the loaded model is %s %s (hidden %d): "
                       "make the voice again with this model, or load a %s %s model",
                       type_label(vtype), vs, v->hidden_size, type_label(model_type), ms, hidden_size,
                       type_label(vtype), vs);
    if (v->n_codebooks != n_codebooks || v->codebook_size != codebook_size)
        return err_set(e, QTTS_ERR_INPUT,
                       "this voice was made for a model with %d codebooks of %d codes; the loaded model has %d "
                       "codebooks of %d codes: make the voice again with this model",
                       v->n_codebooks, v->codebook_size, n_codebooks, codebook_size);
    return QTTS_OK;
}
