/* safetensors reader: memory-maps one file or a sharded set (index.json) and
 * serves tensors in place. Dataflow: path -> mmap -> validated header table ->
 * const pointers into the map. Matches the format written by HF safetensors:
 * u64 LE header length, JSON header {name: {dtype, shape, data_offsets}},
 * raw little-endian data. Every offset, shape and size is validated before any
 * read; hostile files produce QTTS_ERR_FORMAT naming the file and tensor. */
#ifndef QTTS_IO_SAFETENSORS_H
#define QTTS_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/dtype.h"

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    char *name;               /* owned */
    qtts_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t n_elems;
    const void *data;         /* points into the mmap */
    size_t nbytes;
    int file_index;           /* which shard */
} st_tensor;

typedef struct st_set {
    int n_files;
    char **paths;             /* [n_files] owned */
    void **maps;              /* [n_files] mmap bases */
    size_t *map_sizes;        /* [n_files] */
    int n_tensors;
    st_tensor *tensors;       /* [n_tensors], sorted by name */
} st_set;

/* Open `path`: a .safetensors file, or a model directory containing
 * model.safetensors or model.safetensors.index.json (shards). */
qtts_status st_open(st_set *s, const char *path, qtts_error *e);

/* Open exactly one file (no index handling). */
qtts_status st_open_file(st_set *s, const char *file, qtts_error *e);

void st_close(st_set *s);   /* accepts a zeroed or closed set */

/* Tell the kernel the pages fully inside [data, data + n) (a tensor of s) are
 * no longer needed: they leave this process's resident memory and are read
 * again from the file if touched. For weights replaced by a converted copy. */
void st_release(const st_set *s, const void *data, size_t n);

/* Advise every file mapping of s for 2 MiB pages (huge_advise): weights
 * read in place then stream through huge TLB entries, with no copy. */
void st_advise_huge(const st_set *s);

/* Lookup by exact name; NULL if absent. */
const st_tensor *st_find(const st_set *s, const char *name);

/* Lookup with validation: the tensor must exist, be a float type
 * (F32/F16/BF16) and have exactly the given shape (ndim entries).
 * On failure returns QTTS_ERR_MODEL with a message naming the tensor. */
qtts_status st_get_float(const st_set *s, const char *name, int ndim, const int64_t *shape,
                         const st_tensor **out, qtts_error *e);

#endif
