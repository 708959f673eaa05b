/* 1-D convolutions on channel-major f32 activations x[C][T] (PyTorch layout).
 * No implicit padding: callers prepend causal/left context themselves, which is
 * what makes exact streaming possible. Each output sample is one dot product
 * accumulated in a fixed order (input channel, then tap), independent of how
 * many time steps are computed in one call: decoding in chunks yields the same
 * bits as one pass. */
#ifndef QTTS_BACKEND_CPU_CONV_H
#define QTTS_BACKEND_CPU_CONV_H

/* Conv1d. w: [cout][cin/groups][k]; bias: [cout] or NULL.
 * t_out = (t_in - dilation*(k-1) - 1) / stride + 1 (caller ensures t_out >= 0).
 * y: [cout][t_out], row stride y_stride (>= t_out) so results can be written
 * into a larger buffer; x row stride x_stride (>= t_in). */
void ops_conv1d(const float *x, int cin, int t_in, int x_stride,
                const float *w, const float *bias, int cout, int k,
                int stride, int dilation, int groups,
                float *y, int y_stride);

/* ConvTranspose1d, full output (no trimming). w: [cin][cout/groups][k] (PyTorch);
 * t_out = (t_in - 1) * stride + k. y[o][t] = bias[o] + sum over (i, j) with
 * t = j*stride + tap of x[i][j] * w[i][o][tap]; the sum runs over input
 * channels in order, then over the contributing input steps j ascending. */
void ops_conv_transpose1d(const float *x, int cin, int t_in, int x_stride,
                          const float *w, const float *bias, int cout, int k,
                          int stride, int groups,
                          float *y, int y_stride);

#endif
