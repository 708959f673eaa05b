/* The talker's KV cache (model/transformer.h): growth keeps the positions
 * asked for, and kv_cache_prefault maps the pages of the positions about to
 * be written (checked with mincore: resident after, while positions it was
 * not asked for stay untouched), with its bookkeeping (c->mapped). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/transformer.h"
#include "test.h"

/* Fraction of the whole pages inside [a, b) that are resident. */
static double resident(const void *a, const void *b) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)a + pg - 1) & ~(pg - 1), hi = (uintptr_t)b & ~(pg - 1);
    if (lo >= hi) return -1;
    const size_t n = (hi - lo) / pg;
    unsigned char *v = malloc(n);
    if (!v || mincore((void *)lo, hi - lo, v)) {
        free(v);
        return -1;
    }
    size_t in = 0;
    for (size_t i = 0; i < n; i++) in += v[i] & 1;
    free(v);
    return (double)in / (double)n;
}

/* Positions [p0, p1) of layer l of K (or V). */
static double resident_pos(const kv_cache *c, int v, int l, int p0, int p1) {
    const float *base = (v ? c->v : c->k) + (size_t)l * c->cap * c->kv_dim;
    return resident(base + (size_t)p0 * c->kv_dim, base + (size_t)p1 * c->kv_dim);
}

int main(void) {
    const tf_config cfg = {.n_layers = 3, .n_kv_heads = 8, .head_dim = 128}; /* 4 KiB a position, as the talker */
    kv_cache c;
    qtts_error e;
    err_clear(&e);
    CHECK("kv_init", kv_cache_init(&c, &cfg, 512, &e) == QTTS_OK && c.mapped == 0, "%s", e.msg);

    /* does this kernel have MADV_POPULATE_WRITE? (Linux 5.14) */
    int have = 0;
#ifdef MADV_POPULATE_WRITE
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe != MAP_FAILED) {
        have = madvise(probe, pg, MADV_POPULATE_WRITE) == 0 || errno != EINVAL;
        munmap(probe, pg);
    }
#endif
    kv_cache_prefault(&c, 0, 40);
    CHECK("kv_prefault_marks_mapped", c.mapped == 40, "mapped %d", c.mapped);
    if (have) {
        int ok = 1;
        for (int l = 0; l < 3; l++)
            for (int v = 0; v < 2; v++) ok = ok && resident_pos(&c, v, l, 0, 40) == 1.0;
        CHECK("kv_prefault_pages_resident", ok, "a page of positions 0..39 is not mapped after prefault");
        /* positions nobody asked for: a fresh mapping leaves them untouched (malloc of 6 MiB is an mmap) */
        CHECK("kv_prefault_only_the_range", resident_pos(&c, 1, 2, 100, 400) == 0.0, "%.2f of positions 100..399 resident",
              resident_pos(&c, 1, 2, 100, 400));
    } else {
        test_skip("kv_prefault_pages_resident", "the kernel has no MADV_POPULATE_WRITE (Linux < 5.14)");
    }
    kv_cache_prefault(&c, 10, 30); /* inside what is mapped: nothing to do */
    CHECK("kv_prefault_below_mapped_noop", c.mapped == 40, "mapped %d", c.mapped);
    kv_cache_prefault(&c, 40, 100000); /* clamped to the capacity */
    CHECK("kv_prefault_clamped", c.mapped == 512, "mapped %d", c.mapped);

    /* growth keeps the first `keep` positions of every layer, which the copy mapped */
    for (int l = 0; l < 3; l++)
        for (int p = 0; p < 512; p++) {
            c.k[((size_t)l * c.cap + p) * c.kv_dim] = (float)(l * 1000 + p);
            c.v[((size_t)l * c.cap + p) * c.kv_dim + 5] = (float)(-l * 1000 - p);
        }
    CHECK("kv_reserve_grow", kv_cache_reserve(&c, 1024, 300, &e) == QTTS_OK && c.cap == 1024 && c.mapped == 300, "%s",
          e.msg);
    int kept = 1;
    for (int l = 0; l < 3; l++)
        for (int p = 0; p < 300; p++)
            kept = kept && c.k[((size_t)l * c.cap + p) * c.kv_dim] == (float)(l * 1000 + p) &&
                   c.v[((size_t)l * c.cap + p) * c.kv_dim + 5] == (float)(-l * 1000 - p);
    CHECK("kv_reserve_keeps_positions", kept, "a kept position moved or changed");
    kv_cache_free(&c);
    return test_finish();
}
