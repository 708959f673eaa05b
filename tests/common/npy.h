/* Reader for NumPy v1/v2 .npy files (little-endian, C order, <f4 / <i8 / <f8 /
 * <i4), used by the golden tests. Data is converted to f32 (floats) or i64. */
#ifndef QTTS_TESTS_NPY_H
#define QTTS_TESTS_NPY_H

#include <stdint.h>

typedef struct npy_array {
    int ndim;
    long shape[8];
    long n;          /* total elements */
    int is_int;      /* 1: i64 holds the data; 0: f32 holds it */
    float *f32;      /* owned, when !is_int */
    int64_t *i64;    /* owned, when is_int */
} npy_array;

/* 0 on success; -1 (message in err) otherwise. */
int npy_load(const char *path, npy_array *a, char *err, int err_size);
void npy_free(npy_array *a);

#endif
