/* Scalar 1-D convolutions (see conv.h). */
#include "backend/cpu/conv.h"

void ops_conv1d(const float *x, int cin, int t_in, int x_stride,
                const float *w, const float *bias, int cout, int k,
                int stride, int dilation, int groups,
                float *y, int y_stride) {
    const int span = dilation * (k - 1) + 1;
    if (t_in < span) return;
    const int t_out = (t_in - span) / stride + 1;
    const int cin_g = cin / groups, cout_g = cout / groups;
    for (int o = 0; o < cout; o++) {
        const int g = o / cout_g;
        const float *wo = w + (long)o * cin_g * k;
        float *yo = y + (long)o * y_stride;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int i = 0; i < cin_g; i++) {
                const float *xi = x + (long)(g * cin_g + i) * x_stride + (long)t * stride;
                const float *wi = wo + (long)i * k;
                for (int tap = 0; tap < k; tap++) acc += wi[tap] * xi[tap * dilation];
            }
            yo[t] = acc + (bias ? bias[o] : 0.0f);
        }
    }
}

void ops_conv_transpose1d(const float *x, int cin, int t_in, int x_stride,
                          const float *w, const float *bias, int cout, int k,
                          int stride, int groups,
                          float *y, int y_stride) {
    const int t_out = (t_in - 1) * stride + k;
    const int cin_g = cin / groups, cout_g = cout / groups;
    for (int o = 0; o < cout; o++) {
        const int g = o / cout_g, og = o % cout_g;
        float *yo = y + (long)o * y_stride;
        for (int t = 0; t < t_out; t++) {
            /* input steps j with 0 <= t - j*stride < k */
            int j_hi = t / stride;
            if (j_hi > t_in - 1) j_hi = t_in - 1;
            int j_lo = (t - k + stride) / stride;
            if (t - k + 1 <= 0) j_lo = 0;
            else j_lo = (t - k + 1 + stride - 1) / stride;
            float acc = 0.0f;
            for (int i = 0; i < cin_g; i++) {
                const int ci = g * cin_g + i;
                const float *xi = x + (long)ci * x_stride;
                const float *wi = w + ((long)ci * cout_g + og) * k;
                for (int j = j_lo; j <= j_hi; j++) acc += xi[j] * wi[t - j * stride];
            }
            yo[t] = acc + (bias ? bias[o] : 0.0f);
        }
    }
}
