/* The huge-page weight arena (util/huge_arena.h) and quantised matrices moved
 * into it (qmat_move_to_arena): alignment, bounds, trimming, and a matrix
 * that computes the same bits after the move as before. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/quant.h"
#include "test.h"
#include "util/huge_arena.h"

static void test_arena_basics(void) {
    huge_arena a;
    CHECK("arena_reserve", huge_arena_reserve(&a, 3 * HUGE_ARENA_PAGE + 5) == 0, "mmap failed");
    CHECK("arena_base_2mib_aligned", ((uintptr_t)a.base & (HUGE_ARENA_PAGE - 1)) == 0 && a.cap == 4 * HUGE_ARENA_PAGE,
          "base %p cap %zu", (void *)a.base, a.cap);
    unsigned char *p1 = huge_arena_alloc(&a, 100), *p2 = huge_arena_alloc(&a, 1);
    unsigned char *p3 = huge_arena_alloc(&a, 3 * HUGE_ARENA_PAGE);
    int ok = p1 && p2 && p3 && ((uintptr_t)p2 & 63) == 0 && ((uintptr_t)p3 & 63) == 0 && p2 >= p1 + 100 &&
             p3 >= p2 + 1 && p3 + 3 * HUGE_ARENA_PAGE <= a.base + a.cap;
    CHECK("arena_alloc_aligned_disjoint", ok, "p1 %p p2 %p p3 %p", (void *)p1, (void *)p2, (void *)p3);
    if (ok) { /* zero-filled, writable to the last byte */
        int zero = p1[0] == 0 && p3[3 * HUGE_ARENA_PAGE - 1] == 0;
        memset(p1, 1, 100);
        memset(p3, 2, 3 * HUGE_ARENA_PAGE);
        CHECK("arena_zeroed_writable", zero && p1[99] == 1 && p2[0] == 0 && p3[0] == 2, "contents wrong");
    }
    CHECK("arena_full_returns_null", huge_arena_alloc(&a, HUGE_ARENA_PAGE) == NULL && huge_arena_alloc(&a, 0) == NULL,
          "an allocation past the reservation succeeded");
    const size_t used = a.used;
    huge_arena_trim(&a);
    CHECK("arena_trim_keeps_used", a.cap >= used && a.cap % HUGE_ARENA_PAGE == 0 && p3[3 * HUGE_ARENA_PAGE - 1] == 2,
          "cap %zu used %zu", a.cap, used);
    huge_arena_release(&a);
    CHECK("arena_release", a.map == NULL && huge_arena_alloc(&a, 1) == NULL, "not emptied");
    huge_arena_release(NULL);
    huge_arena_trim(NULL);
    huge_arena e;
    memset(&e, 0, sizeof e);
    huge_arena_trim(&e); /* an empty arena: nothing to do */
    CHECK("arena_zero_reserve_fails", huge_arena_reserve(&e, 0) == -1 && e.map == NULL, "a 0-byte reservation");
}

/* Each quantised format: Y of the moved matrix equals Y before the move, the
 * old buffer is gone (owned NULL) and the data lies in the arena; with no room
 * the matrix keeps its own buffer. */
static void test_move_to_arena(void) {
    enum { ROWS = 37, COLS = 300 };
    static const int qtypes[] = {QT_Q8_B32, QT_Q4_B32, QT_Q4M_B32, QT_Q8_B32_X16, QT_Q8_B32_X16S, QT_Q4M_B32_X16};
    float *w = malloc(sizeof(float) * ROWS * COLS), *X = malloc(sizeof(float) * 3 * COLS);
    float *Y1 = malloc(sizeof(float) * 3 * ROWS), *Y2 = malloc(sizeof(float) * 3 * ROWS);
    uint32_t s = 12345;
    for (int i = 0; i < ROWS * COLS; i++) w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < 3 * COLS; i++) X[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    const qt_mat src = {.data = w, .dtype = DT_F32, .rows = ROWS, .cols = COLS};
    ops_ctx c;
    ops_init(&c, 1, 0);
    huge_arena a;
    const int reserved = huge_arena_reserve(&a, 1 << 20) == 0;
    for (size_t i = 0; i < sizeof qtypes / sizeof qtypes[0]; i++) {
        const int qt = qtypes[i];
        qt_mat q;
        qtts_error e;
        char name[64];
        snprintf(name, sizeof name, "move_to_arena_%s",
                 qt == QT_Q8_B32         ? "q8"
                 : qt == QT_Q4_B32       ? "q4"
                 : qt == QT_Q4M_B32      ? "q4m"
                 : qt == QT_Q8_B32_X16   ? "q8x16"
                 : qt == QT_Q8_B32_X16S  ? "q8x16s"
                                         : "q4mx16");
        const int q8x = qt == QT_Q8_B32_X16 || qt == QT_Q8_B32_X16S, x16 = q8x || qt == QT_Q4M_B32_X16;
        if (qmat_quantize(&src, q8x ? QT_Q8_B32 : qt == QT_Q4M_B32_X16 ? QT_Q4M_B32 : qt, &q, &e) ||
            (x16 && qmat_pack_x16(&q, qt == QT_Q8_B32_X16S, &e))) {
            CHECK(name, 0, "%s", e.msg);
            continue;
        }
        ops_matmul(&c, &q, X, 3, NULL, Y1);
        const int moved = reserved && qmat_move_to_arena(&q, &a) == QTTS_OK;
        ops_matmul(&c, &q, X, 3, NULL, Y2);
        const unsigned char *d = q.data;
        CHECK(name,
              moved && q.owned == NULL && d >= a.base && d < a.base + a.cap &&
                  memcmp(Y1, Y2, sizeof(float) * 3 * ROWS) == 0,
              "moved %d, owned %p, or the products differ after the move", moved, q.owned);
        qmat_free(&q); /* the arena's bytes stay until the release */
    }
    /* no room: unchanged */
    qt_mat q;
    qtts_error e;
    huge_arena small;
    if (qmat_quantize(&src, QT_Q8_B32, &q, &e) == QTTS_OK && huge_arena_reserve(&small, 64) == 0) {
        small.cap = 64; /* fewer bytes than the matrix */
        const void *before = q.data;
        CHECK("move_to_arena_no_room", qmat_move_to_arena(&q, &small) == QTTS_ERR_NOMEM && q.data == before && q.owned,
              "a move without room changed the matrix");
        huge_arena_release(&small);
        qmat_free(&q);
    }
    CHECK("move_to_arena_rejects_float", qmat_move_to_arena((qt_mat *)&src, &a) == QTTS_ERR_INVALID_ARG,
          "a float matrix was moved");
    huge_arena_release(&a);
    ops_free(&c);
    free(w);
    free(X);
    free(Y1);
    free(Y2);
}

/* huge_buf_alloc: small buffers 64-byte aligned, large ones on a 2 MiB
 * boundary and writable to their end; 0 and impossible sizes give NULL. */
static void test_huge_buf(void) {
    unsigned char *s = huge_buf_alloc(100), *l = huge_buf_alloc(HUGE_ARENA_PAGE + 12345);
    int ok = s && l && ((uintptr_t)s & 63) == 0 && ((uintptr_t)l & (HUGE_ARENA_PAGE - 1)) == 0;
    if (ok) {
        memset(s, 1, 100);
        memset(l, 2, HUGE_ARENA_PAGE + 12345);
        ok = s[99] == 1 && l[0] == 2 && l[HUGE_ARENA_PAGE + 12344] == 2;
    }
    CHECK("huge_buf_alignment", ok, "small %p, large %p", (void *)s, (void *)l);
    CHECK("huge_buf_bad_sizes", huge_buf_alloc(0) == NULL && huge_buf_alloc(SIZE_MAX) == NULL,
          "0 or SIZE_MAX bytes were handed out");
    free(s);
    free(l);
}

int main(void) {
    test_arena_basics();
    test_huge_buf();
    test_move_to_arena();
    return test_finish();
}
