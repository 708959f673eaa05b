/* Element types of stored tensors and the scalar conversions to f32.
 * BF16 widening is exact (upper 16 bits of an f32); F16 follows IEEE 754 half. */
#ifndef QTTS_UTIL_DTYPE_H
#define QTTS_UTIL_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum qtts_dtype {
    DT_F32 = 0,
    DT_F16,
    DT_BF16,
    DT_F64,
    DT_I64,
    DT_I32,
    DT_I16,
    DT_I8,
    DT_U8,
    DT_BOOL,
    DT_COUNT
} qtts_dtype;

size_t dtype_size(qtts_dtype t);
const char *dtype_name(qtts_dtype t);
int dtype_is_float(qtts_dtype t); /* F32, F16, BF16 */

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even f32 -> bf16 (NaN kept quiet). */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);

/* Convert n elements of a float-typed buffer to f32. */
void dtype_to_f32(qtts_dtype t, const void *src, float *dst, size_t n);

#endif
