/* Element types and scalar conversions (see dtype.h). */
#include "util/dtype.h"

#include <math.h>

size_t dtype_size(qtts_dtype t) {
    switch (t) {
    case DT_F32: return 4;
    case DT_F16: return 2;
    case DT_BF16: return 2;
    case DT_F64: return 8;
    case DT_I64: return 8;
    case DT_I32: return 4;
    case DT_I16: return 2;
    case DT_I8: return 1;
    case DT_U8: return 1;
    case DT_BOOL: return 1;
    default: return 0;
    }
}

const char *dtype_name(qtts_dtype t) {
    static const char *names[DT_COUNT] = {"F32", "F16", "BF16", "F64", "I64",
                                          "I32", "I16", "I8",   "U8",  "BOOL"};
    return (t >= 0 && t < DT_COUNT) ? names[t] : "?";
}

int dtype_is_float(qtts_dtype t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: value = man * 2^-24 */
            float f = ldexpf((float)man, -24);
            memcpy(&u, &f, 4);
            u |= sign;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void dtype_to_f32(qtts_dtype t, const void *src, float *dst, size_t n) {
    switch (t) {
    case DT_F32: memcpy(dst, src, n * 4); break;
    case DT_BF16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
        break;
    }
    case DT_F16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
        break;
    }
    default:
        for (size_t i = 0; i < n; i++) dst[i] = 0.0f;
        break;
    }
}
