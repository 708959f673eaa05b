/* Memory in 2 MiB transparent huge pages. huge_arena: a bump allocator over
 * one anonymous mapping advised for them, for weights copied or made at load
 * (the per-frame matrices, quantised or as stored; the codec decoder's packed
 * transposed convs when there is no cache) that live as long as the model. Streaming hundreds of MB per frame
 * through 4 KiB pages costs a TLB walk every 4 KiB (under a hypervisor, a
 * two-level one); huge pages cut those walks 512-fold (1.7B BF16 RTF 9 %
 * lower, generation 23.0-23.7 -> 25.8-26.1 GB/s, on a 2-core Sapphire Rapids
 * KVM guest, `qtts-bench run` against `--no-huge-pages`). The reservation is virtual
 * (MAP_NORESERVE): only the bytes handed out become resident. Where the
 * kernel has no transparent huge pages the arena still works, with normal
 * pages. huge_buf_alloc: one large transient buffer advised the same way
 * (the codec decoder's activations). */
#ifndef QTTS_UTIL_HUGE_ARENA_H
#define QTTS_UTIL_HUGE_ARENA_H

#include <stddef.h>

#define HUGE_ARENA_PAGE ((size_t)2 << 20)

typedef struct huge_arena {
    void *map;       /* the mapping (NULL: none reserved) */
    size_t map_len;  /* its length in bytes */
    unsigned char *base; /* first 2 MiB boundary inside it: allocations start here */
    size_t cap;      /* bytes usable from base */
    size_t used;     /* bytes handed out (each allocation 64-byte aligned) */
} huge_arena;

/* Reserve cap bytes (virtual). 0 on success, -1 if the mapping failed (the
 * arena stays empty and every huge_arena_alloc returns NULL). */
int huge_arena_reserve(huge_arena *a, size_t cap);

/* n bytes, 64-byte aligned, zero-filled on first touch; NULL when the
 * reservation has no room (callers then keep their own buffer). Never freed
 * one by one: huge_arena_release frees everything. */
void *huge_arena_alloc(huge_arena *a, size_t n);

/* huge_arena_alloc(a, n) holding a copy of src's n bytes; NULL (nothing
 * copied) when there is no arena or no room. */
void *huge_arena_copy(huge_arena *a, const void *src, size_t n);

/* Give the untouched tail of the reservation back (after the last allocation
 * of a load); later allocations fail. */
void huge_arena_trim(huge_arena *a);

/* Unmap everything; a NULL or empty arena is fine. */
void huge_arena_release(huge_arena *a);

/* A transient buffer of n bytes (64-byte aligned) for large working sets
 * read many times per call (the codec decoder's activations): from 2 MiB up
 * it starts on a 2 MiB boundary, is rounded up to whole 2 MiB and advised for
 * transparent huge pages (a conv reading 96-768 input rows at a time touches
 * as many 4 KiB pages). NULL on failure; release
 * with free(). */
void *huge_buf_alloc(size_t n);

/* Advise a file mapping of n bytes at p (page aligned; read in place) for
 * transparent huge pages: the kernel then reads the file into 2 MiB
 * page-cache folios and maps those whole (FilePmdMapped in smaps), where the
 * filesystem supports large folios (ext4, xfs, tmpfs on Linux 6.x) and the
 * mapping starts on a 2 MiB boundary (mmap gives one for files of 2 MiB and
 * more). Later launches map the cached folios whole, with no copy and no
 * zeroing. Measured on ext4, Linux 6.18: a 446 MB file maps and faults in
 * 2-6 ms when its cache is in 2 MiB folios, 42-58 ms in 4 KiB ones. Pages
 * already cached in 4 KiB folios stay so until the kernel evicts them.
 * A refusal (THP off) changes nothing. */
void huge_advise(const void *p, size_t n);

/* Gives back the whole pages inside the n bytes at p (MADV_DONTNEED; the
 * partial pages at either end are kept): an anonymous page reads as zeros
 * afterwards, a file page as the file again. For memory nothing will read. */
void pages_drop(const void *p, size_t n);

#endif
