/* Bump allocator over one MADV_HUGEPAGE mapping, single huge-page buffers, and page advice (see huge_arena.h). */
#include "util/huge_arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int huge_arena_reserve(huge_arena *a, size_t cap) {
    memset(a, 0, sizeof *a);
    if (cap == 0 || cap > SIZE_MAX - 2 * HUGE_ARENA_PAGE) return -1;
    cap = (cap + HUGE_ARENA_PAGE - 1) & ~(HUGE_ARENA_PAGE - 1);
    const size_t len = cap + HUGE_ARENA_PAGE; /* room to start on a 2 MiB boundary */
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE;
#endif
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return -1;
    a->map = p;
    a->map_len = len;
    a->base = (unsigned char *)(((uintptr_t)p + HUGE_ARENA_PAGE - 1) & ~(uintptr_t)(HUGE_ARENA_PAGE - 1));
    a->cap = cap;
#ifdef MADV_HUGEPAGE
    (void)madvise(a->base, cap, MADV_HUGEPAGE); /* refused (THP off): the arena works with 4 KiB pages */
#endif
    return 0;
}

void *huge_arena_alloc(huge_arena *a, size_t n) {
    if (!a || !a->base || n == 0) return NULL;
    const size_t at = (a->used + 63) & ~(size_t)63;
    if (at > a->cap || n > a->cap - at) return NULL;
    a->used = at + n;
    return a->base + at;
}

void *huge_arena_copy(huge_arena *a, const void *src, size_t n) {
    void *p = huge_arena_alloc(a, n);
    if (p) memcpy(p, src, n);
    return p;
}

void huge_arena_trim(huge_arena *a) {
    if (!a || !a->map) return;
    if (a->used == 0) {
        huge_arena_release(a);
        return;
    }
    const size_t keep = (a->used + HUGE_ARENA_PAGE - 1) & ~(HUGE_ARENA_PAGE - 1);
    unsigned char *end = (unsigned char *)a->map + a->map_len, *cut = a->base + keep;
    if (end > cut && munmap(cut, (size_t)(end - cut)) == 0) {
        a->map_len = (size_t)(cut - (unsigned char *)a->map);
        a->cap = keep;
    }
}

void huge_arena_release(huge_arena *a) {
    if (!a) return;
    if (a->map) munmap(a->map, a->map_len);
    memset(a, 0, sizeof *a);
}

void *huge_buf_alloc(size_t n) {
    if (n == 0 || n > SIZE_MAX - HUGE_ARENA_PAGE) return NULL;
    if (n < HUGE_ARENA_PAGE) return aligned_alloc(64, (n + 63) & ~(size_t)63);
    const size_t len = (n + HUGE_ARENA_PAGE - 1) & ~(HUGE_ARENA_PAGE - 1);
    void *p = aligned_alloc(HUGE_ARENA_PAGE, len);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, len, MADV_HUGEPAGE); /* refused (THP off): 4 KiB pages, same bytes */
#endif
    return p;
}

void huge_advise(const void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (p && n) (void)madvise((void *)p, n, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

void pages_drop(const void *p, size_t n) {
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || !n) return;
    const uintptr_t b = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    const uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    if (e > b) (void)madvise((void *)b, e - b, MADV_DONTNEED);
}
