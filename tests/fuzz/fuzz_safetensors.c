/* Fuzz target: the safetensors reader (src/io/safetensors.c), on one file or
 * on a sharded set. Input: byte 0 picks the layout; bit 0 clear: the rest is
 * model.safetensors; set: the rest is split at "\n==SHARD==\n" into
 * model.safetensors.index.json and the shards model-0000{1,2}-of-00002.safetensors.
 * Every tensor the reader accepts must lie inside its file's map, with
 * nbytes = elements x dtype size: its first and last bytes are read (ASan
 * catches an out-of-map pointer) and lookups by name must find it. */
#include "fuzz.h"
#include "io/safetensors.h"

static const char *const shard_names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int sharded = data[0] & 1;
    data++;
    size--;
    fuzz_file("model.safetensors", NULL, SIZE_MAX);
    fuzz_file("model.safetensors.index.json", NULL, SIZE_MAX);
    if (!sharded) {
        fuzz_file("model.safetensors", data, size);
    } else {
        const uint8_t *part[3];
        size_t len[3];
        int n = fuzz_split(data, size, "\n==SHARD==\n", part, len, 3);
        fuzz_file("model.safetensors.index.json", part[0], len[0]);
        for (int i = 0; i < 2; i++) {
            if (i + 1 < n) fuzz_file(shard_names[i], part[i + 1], len[i + 1]);
            else fuzz_file(shard_names[i], NULL, SIZE_MAX);
        }
    }
    st_set s;
    memset(&s, 0, sizeof s);
    qtts_error e;
    memset(&e, 0, sizeof e);
    if (st_open(&s, fuzz_dir(), &e) == QTTS_OK) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < s.n_tensors; i++) {
            const st_tensor *t = &s.tensors[i];
            FUZZ_CHECK(t->file_index >= 0 && t->file_index < s.n_files);
            FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
            FUZZ_CHECK(t->nbytes == (size_t)t->n_elems * dtype_size(t->dtype));
            const uint8_t *base = s.maps[t->file_index], *p = t->data;
            if (t->nbytes) {
                FUZZ_CHECK(p >= base && p + t->nbytes <= base + s.map_sizes[t->file_index]);
                sink ^= p[0];
                sink ^= p[t->nbytes - 1];
            }
            FUZZ_CHECK(st_find(&s, t->name) != NULL);
            const st_tensor *out = NULL;
            st_get_float(&s, t->name, t->ndim, t->shape, &out, &e);
        }
        (void)sink;
    }
    st_close(&s);
    return 0;
}
