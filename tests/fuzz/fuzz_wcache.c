/* Fuzz target: the prepared-weights cache reader (src/model/weights_cache.c:
 * wcache_open's header and table checks, wcache_get and wcache_get_f32) on a
 * file's bytes in a temporary file. Input: byte 0 says what the target
 * repairs so that the fuzzer gets past the header (bit 0: the magic and
 * layout version, bit 1: the size field, bit 2: the CRC, computed last); the
 * rest is the file. The matrix count and key asked for are the file's own.
 * Checks: an opened file is mapped whole; every matrix wcache_get hands out
 * has a quantised format whose data, scales and minima (quant.h's layouts)
 * lie inside the map and inside its entry, 64-byte aligned; every f32 array
 * lies inside the map. */
#include "fuzz.h"
#include "backend/cpu/quant.h"
#include "model/voice_file.h"
#include "model/weights_cache.h"

static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* [p, p + n) inside [base, base + len) */
static int inside(const void *p, uint64_t n, const void *base, size_t len) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    return a >= b && a - b <= len && n <= len - (a - b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int fix = data[0];
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return 0;
    memcpy(b, data + 1, n);
    int n_mats = 0;
    uint64_t key = 0;
    if (n >= 64) {
        if (fix & 1) memcpy(b, "QTTSWCCH", 8), memcpy(b + 8, &(uint32_t){WCACHE_LAYOUT}, 4);
        if (fix & 2) memcpy(b + 24, &(uint64_t){n}, 8);
        const uint32_t nm = rd32(b + 12);
        n_mats = nm <= 4096 ? (int)nm : 0;
        key = rd64(b + 16);
        if ((fix & 4) && 64 + (size_t)56 * n_mats <= n) {
            const uint32_t crc = voice_crc32(voice_crc32(0, b, 60), b + 64, (size_t)56 * n_mats);
            memcpy(b + 60, &crc, 4);
        }
    }
    const char *path = fuzz_file("w.qwc", b, n);
    free(b);
    wcache_map c;
    char why[512];
    if (wcache_open(path, key, n_mats, &c, why, sizeof why)) {
        FUZZ_CHECK(c.map == NULL && why[0]);
        return 0;
    }
    FUZZ_CHECK(c.map != NULL && c.len == n && c.n_mats == n_mats);
    for (int i = 0; i < n_mats; i++) {
        const uint8_t *t = c.table + (size_t)56 * i;
        qt_mat w;
        memset(&w, 0, sizeof w);
        w.dtype = DT_F32;
        w.rows = (int)rd32(t + 12);
        w.cols = (int)rd32(t + 16);
        const int r = wcache_get(&c, i, &w);
        if (r == 1) FUZZ_CHECK(rd32(t) == 0 && w.data == NULL);
        if (r == 0) {
            FUZZ_CHECK(qt_is_quant(&w) && w.rows >= 1 && w.cols >= 1);
            const uint64_t kpad = (uint64_t)qt_kpad(w.cols), nb = kpad / QT_BLOCK, rows = (uint64_t)w.rows;
            const uint64_t g16 = (rows + 15) / 16;
            uint64_t db = 0, sb = 0;
            int mins = 0;
            switch (w.quant) {
            case QT_Q8_B32: FUZZ_CHECK(w.dtype == DT_I8); db = rows * kpad, sb = rows * nb * 2; break;
            case QT_Q4_B32: FUZZ_CHECK(w.dtype == DT_U8); db = rows * kpad / 2, sb = rows * nb * 2; break;
            case QT_Q4M_B32: FUZZ_CHECK(w.dtype == DT_U8); db = rows * kpad / 2, sb = rows * nb * 2, mins = 1; break;
            case QT_Q8_B32_X16:
            case QT_Q8_B32_X16S: FUZZ_CHECK(w.dtype == DT_I8); db = g16 * nb * 512, sb = g16 * nb * 32; break;
            case QT_Q4M_B32_X16: FUZZ_CHECK(w.dtype == DT_U8); db = g16 * nb * 256, sb = g16 * nb * 32, mins = 1; break;
            default: FUZZ_CHECK(!"a quantised format");
            }
            const uint8_t *entry = (const uint8_t *)c.map + rd64(t + 24);
            const uint64_t eb = rd64(t + 32);
            FUZZ_CHECK(inside(entry, eb, c.map, c.len));
            FUZZ_CHECK(w.data == entry && inside(w.data, db, entry, eb) && (uintptr_t)w.data % 64 == 0);
            FUZZ_CHECK(inside(w.scales, sb, entry, eb) && (uintptr_t)w.scales % 64 == 0);
            FUZZ_CHECK(mins ? w.mins && inside(w.mins, sb, entry, eb) && (uintptr_t)w.mins % 64 == 0 : !w.mins);
            /* the rows a kernel reads, for the row-major formats */
            if (w.quant == QT_Q8_B32 || w.quant == QT_Q4_B32 || w.quant == QT_Q4M_B32) {
                float *row = malloc(sizeof(float) * kpad);
                for (int k = 0; row && k < w.rows && k < 8; k++) qmat_dequant_row(&w, w.rows - 1 - k, row);
                free(row);
            }
        }
        const uint64_t eb = rd64(t + 32);
        const float *f = wcache_get_f32(&c, i, (size_t)(eb / 4));
        if (f) FUZZ_CHECK(eb % 4 == 0 && inside(f, eb, c.map, c.len) && (uintptr_t)f % 4 == 0);
    }
    wcache_close(&c);
    FUZZ_CHECK(c.map == NULL);
    return 0;
}
