/* Talker weights and text projection (see talker.h). */
#include "model/talker.h"

#include <stdlib.h>
#include <string.h>

qtts_status talker_load(talker_weights *w, const st_set *st, const qtts_config *cfg, qtts_error *e) {
    memset(w, 0, sizeof *w);
    const int H = cfg->talker.hidden, D = cfg->text_hidden, V = cfg->talker.vocab;
    qtts_status s = load_mat(st, "talker.model.text_embedding.weight", cfg->text_vocab, D, &w->text_embedding, e);
    if (!s) s = load_mat(st, "talker.text_projection.linear_fc1.weight", D, D, &w->fc1, e);
    if (!s) s = load_vec(st, "talker.text_projection.linear_fc1.bias", D, &w->fc1_b, e);
    if (!s) s = load_mat(st, "talker.text_projection.linear_fc2.weight", H, D, &w->fc2, e);
    if (!s) s = load_vec(st, "talker.text_projection.linear_fc2.bias", H, &w->fc2_b, e);
    if (!s) s = load_mat(st, "talker.model.codec_embedding.weight", V, H, &w->codec_embedding, e);
    if (!s) s = load_mat(st, "talker.codec_head.weight", V, H, &w->codec_head, e);
    if (!s) s = tf_load(&w->tf, st, "talker.model.", &cfg->talker, e);
    if (s) talker_free(w);
    return s;
}

void talker_free(talker_weights *w) {
    if (!w) return;
    free(w->fc1_b);
    free(w->fc2_b);
    tf_free(&w->tf);
    memset(w, 0, sizeof *w);
}

void talker_text_project(const ops_ctx *ops, const talker_weights *w, const int32_t *ids, int n, float *tmp_a,
                         float *tmp_b, float *out) {
    const int D = w->fc1.cols;
    for (int i = 0; i < n; i++) ops_get_row(&w->text_embedding, ids[i], tmp_a + (size_t)i * D);
    ops_matmul(ops, &w->fc1, tmp_a, n, w->fc1_b, tmp_b);
    ops_silu(tmp_b, n * D);
    ops_matmul(ops, &w->fc2, tmp_b, n, w->fc2_b, out);
}
