/* The constants of the vector e^x that the AVX-512 and AVX2 tables share
 * (their SwiGLU; and expm1 for their ELU): one list, so the two sequences cannot drift apart.
 * x is clamped to [EXP_X_MIN, EXP_X_MAX] (beyond it e^x is 0 or overflows
 * anyway); x = n ln 2 + r with n = round(x log2 e), ln 2 in a 15-bit head (so
 * n ln2_hi is exact) and a tail; e^r by its Taylor series to r^7 in Horner
 * form, highest coefficient first: p = EXP_POLY[0], then p = p r + EXP_POLY[k]
 * for k = 1..7; then p 2^n. */
#ifndef QTTS_BACKEND_CPU_EXP_POLY_H
#define QTTS_BACKEND_CPU_EXP_POLY_H

#define EXP_X_MIN (-104.0f)
#define EXP_X_MAX 89.0f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693145751953125f
#define EXP_LN2_LO 1.428606765330187e-6f
#define EXP_POLY_N 8

static const float EXP_POLY[EXP_POLY_N] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                           1.0f / 6.0f,    0.5f,           1.0f,           1.0f};

/* expm1 on the ELU's negative side (x <= 0): below EXPM1_X_MIN expm1 is -1
 * in f32 (e^-87 < 2^-125). expm1(r) = r + r^2 p(r) with p the Taylor series
 * of (e^r - 1 - r) / r^2 to r^6 in Horner form, highest coefficient first. */
#define EXPM1_X_MIN (-87.0f)
#define EXPM1_POLY_N 7

static const float EXPM1_POLY[EXPM1_POLY_N] = {1.0f / 40320.0f, 1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f,
                                               1.0f / 24.0f,    1.0f / 6.0f,    0.5f};

#endif
