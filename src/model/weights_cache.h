/* Prepared-weights cache: the per-frame matrices of a checkpoint as the CPU
 * kernels use them (quantised to q8/q4 and regrouped for this ISA), written
 * once to a file and mapped by later loads, which then quantise and repack
 * nothing. Dataflow: prepared qt_mat -> writer (temporary file, rename) ->
 * file -> mmap -> qt_mat pointing into the map.
 *
 * File name: <cache dir>/<16 hex: hash of the checkpoint's real path>-
 * <talker format>-<predictor format>-<ISA>.qwc, so that one checkpoint has
 * one file per format and ISA and `qtts cache clear` / `qtts info` find them.
 *
 * File layout (little-endian, this machine's byte order: the file never
 * leaves it):
 *   0    8   magic "QTTSWCCH"
 *   8    4   u32 layout version (WCACHE_LAYOUT)
 *   12   4   u32 N = matrices
 *   16   8   u64 key (wcache_key: the checkpoint files' sizes, mtimes and
 *            safetensors headers, the formats, the kernel table, the layout)
 *   24   8   u64 file size in bytes
 *   32   28  reserved, 0
 *   60   4   u32 CRC-32 of bytes [0, 60) and of the table
 *   64   56N table, per matrix: u32 kind (0 = as stored, not in the file;
 *            1 = quantised; 2 = an f32 array made at load, as the codec
 *            decoder's packed transposed convs), u32 dtype, u32 quant, i32 rows, i32 cols, u32 0,
 *            u64 offset of its bytes, u64 bytes, u64 scales offset and u64
 *            mins offset inside them (mins: ~0 = none)
 *   then each matrix's bytes (data, scales, mins), 4096-byte aligned.
 * A file with another magic, layout, key, size or CRC, or a table that does
 * not fit the model, is not used: the load prepares the weights again and
 * replaces the file. The matrices' bytes are not checksummed (reading them
 * all would cost what the cache saves); a damaged file is detected by its
 * size and header. */
#ifndef QTTS_MODEL_WEIGHTS_CACHE_H
#define QTTS_MODEL_WEIGHTS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"
#include "io/safetensors.h"
#include "util/error.h"

#define WCACHE_LAYOUT 1u
#define WCACHE_EXT ".qwc"

/* A mapped cache file. */
typedef struct wcache_map {
    void *map;
    size_t len;
    int n_mats;
    const unsigned char *table;
} wcache_map;

/* A cache file being written (to a temporary file beside it). */
typedef struct wcache_writer {
    int fd;             /* -1: not writing (failed or unused) */
    char path[4096];
    char tmp[4200];
    uint64_t key;
    int n_mats, i;
    unsigned char *table;
    uint64_t off;
} wcache_writer;

/* "<dir>/<hash of realpath(model_dir)>" (the prefix of the checkpoint's files)
 * into out; -1 if it does not fit or model_dir cannot be resolved. */
int wcache_prefix(const char *cache_dir, const char *model_dir, char *out, size_t cap);

/* The file for these formats and this kernel table. */
int wcache_path(const char *cache_dir, const char *model_dir, const char *tfmt, const char *pfmt,
                const char *isa, char *out, size_t cap);

/* The key of the prepared weights. */
uint64_t wcache_key(const st_set *st, const char *tfmt, const char *pfmt, const ops_kernels *k);

/* The key of other prepared arrays of the checkpoint whose files are st:
 * tag names them, version their layout. */
uint64_t wcache_key_tag(const st_set *st, const char *tag, uint32_t version);

/* Map path if it is a valid cache file for key with n_mats matrices: 0; else
 * -1 with the reason in why (missing, truncated, stale, damaged). */
int wcache_open(const char *path, uint64_t key, int n_mats, wcache_map *c, char *why, size_t why_cap);

/* Point w at matrix i of the map. 0 on success; -1 when the entry does not
 * fit w (shape), or is stored as is (kind 0: w unchanged, returns 1). */
int wcache_get(const wcache_map *c, int i, qt_mat *w);

/* Entry i as an f32 array of n floats (kind 2), pointing into the map; NULL
 * when it is not one or has another length. */
const float *wcache_get_f32(const wcache_map *c, int i, size_t n);

void wcache_close(wcache_map *c); /* accepts a zeroed map */

/* Start writing path (creating its folder). -1 (w->fd = -1) on failure. */
int wcache_begin(wcache_writer *w, const char *path, uint64_t key, int n_mats);

/* Append the next matrix: quantised ones with their bytes, stored ones as a
 * kind-0 entry. On a write error the writer stops (w->fd = -1). */
void wcache_put(wcache_writer *w, const qt_mat *m);

/* Append the next entry: an f32 array of n floats (kind 2). */
void wcache_put_f32(wcache_writer *w, const float *p, size_t n);

/* Finish: header, table, rename over path. -1 on failure (nothing left behind). */
int wcache_commit(wcache_writer *w);
void wcache_abort(wcache_writer *w);

/* Remove the cache files of model_dir (NULL: every cache file) in cache_dir;
 * the count removed, or -1 if cache_dir cannot be read. */
int wcache_clear(const char *cache_dir, const char *model_dir);

/* Call fn for each cache file of model_dir in cache_dir (path, bytes). */
int wcache_list(const char *cache_dir, const char *model_dir, void (*fn)(const char *path, int64_t bytes, void *u),
                 void *u);

#endif
