/* Talker prompt construction (see prompt.h). */
#include "model/prompt.h"

#include <stdlib.h>
#include <string.h>

void frame_embed(const talker_weights *tw, const cp_weights *cw, const int32_t *codes, int n_groups, float *out) {
    ops_get_row(&tw->codec_embedding, codes[0], out);
    for (int g = 1; g < n_groups; g++) ops_add_row(&cw->embed[g - 1], codes[g], out);
}

/* Tp for a list of ids into out[n][H] (allocates its own temporaries). */
static qtts_status text_vecs(const ops_ctx *ops, const talker_weights *tw, const int32_t *ids, int n, float *out,
                             qtts_error *e) {
    if (n <= 0) return QTTS_OK;
    const int D = tw->fc1.cols;
    float *a = malloc(sizeof(float) * n * D), *b = malloc(sizeof(float) * n * D);
    if (!a || !b) {
        free(a);
        free(b);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory building the prompt");
    }
    talker_text_project(ops, tw, ids, n, a, b, out);
    free(a);
    free(b);
    return QTTS_OK;
}

static void add_codec(const talker_weights *tw, int id, float *dst) { ops_add_row(&tw->codec_embedding, id, dst); }

static void vcopy(float *d, const float *s, int H) { memcpy(d, s, sizeof(float) * H); }
static void vadd(float *d, const float *s, int H) {
    for (int i = 0; i < H; i++) d[i] += s[i];
}

qtts_status prompt_build(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, const cp_weights *cw,
                         const prompt_input *in, prompt_out *out, qtts_error *e) {
    memset(out, 0, sizeof *out);
    const int H = cfg->talker.hidden, G = cfg->n_code_groups;
    const int open = in->open;
    if (open && in->non_streaming)
        return err_set(e, QTTS_ERR_UNSUPPORTED, "incremental text needs the streaming text mode");
    if (open && (in->n_text_tpl < 3 + prompt_text_needed(in)))
        return err_set(e, QTTS_ERR_INTERNAL, "an open prompt needs %d text ids before its prefill (got %d)",
                       prompt_text_needed(in), in->n_text_tpl - 3);
    /* validate the template shapes the official slicing assumes */
    if (!open && in->n_text_tpl < 9)
        return err_set(e, QTTS_ERR_INPUT, "text template has %d ids; it needs the 8 fixed ids plus at least one text id",
                       in->n_text_tpl);
    if (in->ref_codes && in->n_ref_tpl < 6)
        return err_set(e, QTTS_ERR_INPUT, "reference-text template has %d ids; it needs the 5 fixed ids plus at least one text id",
                       in->n_ref_tpl);
    const int32_t *lists[3] = {in->text_tpl, in->instr_tpl, in->ref_tpl};
    const int lens[3] = {in->n_text_tpl, in->instr_tpl ? in->n_instr_tpl : 0, in->ref_tpl ? in->n_ref_tpl : 0};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < lens[l]; i++)
            if (lists[l][i] < 0 || lists[l][i] >= cfg->text_vocab)
                return err_set(e, QTTS_ERR_INPUT, "text id %d is outside the text vocabulary [0, %d)", lists[l][i],
                               cfg->text_vocab);
    for (int i = 0; in->ref_codes && i < in->n_ref_frames * G; i++)
        if (in->ref_codes[i] < 0 || in->ref_codes[i] >= cfg->cp.vocab)
            return err_set(e, QTTS_ERR_INPUT, "reference code %d at frame %d is outside [0, %d)", in->ref_codes[i],
                           i / G, cfg->cp.vocab);

    const int n_instr = lens[1];
    const int32_t *text = in->text_tpl + 3; /* t1..tN */
    const int N = open ? in->n_text_tpl - 3 : in->n_text_tpl - 8;
    const int32_t *ref = in->ref_tpl ? in->ref_tpl + 3 : NULL; /* r1..rM */
    const int M = in->ref_tpl ? in->n_ref_tpl - 5 : 0;
    const int icl = in->ref_codes != NULL;
    const int T = icl ? in->n_ref_frames : 0;

    /* codec control list K */
    int P_ids[4], nP = 0;
    if (in->lang_id < 0) {
        P_ids[nP++] = cfg->codec_nothink;
        P_ids[nP++] = cfg->codec_think_bos;
        P_ids[nP++] = cfg->codec_think_eos;
    } else {
        P_ids[nP++] = cfg->codec_think;
        P_ids[nP++] = cfg->codec_think_bos;
        P_ids[nP++] = in->lang_id;
        P_ids[nP++] = cfg->codec_think_eos;
    }
    const int has_s = in->speaker_id >= 0 || in->xvector != NULL;
    const int Lc = nP + has_s + 2;

    /* text-track vectors: all ids through the projection in one batch */
    const int n_tp = n_instr + 3 + N + M + 3; /* instr, role, text, ref, pad/bos/eos */
    int32_t *ids = malloc(sizeof(int32_t) * n_tp);
    float *tp = malloc(sizeof(float) * (size_t)n_tp * H);
    if (!ids || !tp) {
        free(ids);
        free(tp);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory building the prompt");
    }
    int k = 0;
    for (int i = 0; i < n_instr; i++) ids[k++] = in->instr_tpl[i];
    for (int i = 0; i < 3; i++) ids[k++] = in->text_tpl[i];
    for (int i = 0; i < N; i++) ids[k++] = text[i];
    for (int i = 0; i < M; i++) ids[k++] = ref[i];
    ids[k++] = cfg->tts_pad;
    ids[k++] = cfg->tts_bos;
    ids[k++] = cfg->tts_eos;
    qtts_status st = text_vecs(ops, tw, ids, n_tp, tp, e);
    free(ids);
    if (st) {
        free(tp);
        return st;
    }
    const float *Tinstr = tp, *Trole = tp + (size_t)n_instr * H, *Ttext = Trole + 3 * H, *Tref = Ttext + (size_t)N * H;
    const float *pad = Tref + (size_t)M * H, *bos = pad + H, *eos = bos + H;

    /* positions: instr + role + (Lc-1) + text block */
    int n_text_pos, n_queue;
    const int X_len = M + N + !open, Y_len = T + 1; /* open: no end of text yet */
    if (icl) {
        if (open) { /* prompt_text_needed: X fills the codec positions */
            n_text_pos = Y_len;
            n_queue = X_len - Y_len;
        } else if (in->non_streaming) {
            n_text_pos = X_len + Y_len;
            n_queue = 1;
        } else if (X_len > Y_len) {
            n_text_pos = Y_len;
            n_queue = X_len - Y_len;
        } else {
            n_text_pos = Y_len;
            n_queue = 1;
        }
    } else if (in->non_streaming) {
        n_text_pos = N + 2;
        n_queue = 1;
    } else {
        n_text_pos = 1;
        n_queue = open ? N - 1 : N; /* t2..tN, eos (open: not yet) */
    }
    const int P = n_instr + 3 + (Lc - 1) + n_text_pos;
    out->n_pos = P;
    /* the text block starts after the control block; with ICL its first
     * positions carry the reference transcript (and reference codes), not
     * the text */
    out->n_voice = n_instr + 3 + (Lc - 1) + (icl ? (M < n_text_pos ? M : n_text_pos) : 0);
    out->n_queue = n_queue;
    out->embeds = calloc((size_t)P * H, sizeof(float));
    out->queue_cap = n_queue > 16 ? n_queue : 16;
    out->queue = calloc((size_t)out->queue_cap * H, sizeof(float));
    out->tts_pad = malloc(sizeof(float) * H);
    float *X = NULL; /* ICL text track [X_len][H] */
    float *Y = NULL; /* ICL codec track [Y_len][H] */
    if (icl) {
        X = malloc(sizeof(float) * (size_t)X_len * H);
        Y = calloc((size_t)Y_len * H, sizeof(float));
    }
    if (!out->embeds || !out->queue || !out->tts_pad || (icl && (!X || !Y))) {
        free(X);
        free(Y);
        free(tp);
        prompt_free(out);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory building the prompt");
    }
    vcopy(out->tts_pad, pad, H);
    float *p = out->embeds;
    for (int i = 0; i < n_instr; i++, p += H) vcopy(p, Tinstr + (size_t)i * H, H);
    for (int i = 0; i < 3; i++, p += H) vcopy(p, Trole + (size_t)i * H, H);
    /* control block: K[0..Lc-2] with text [pad x (Lc-2), bos] */
    for (int j = 0; j < Lc - 1; j++, p += H) {
        vcopy(p, j < Lc - 2 ? pad : bos, H);
        if (j < nP) add_codec(tw, P_ids[j], p);
        else if (has_s && j == nP) {
            if (in->xvector) vadd(p, in->xvector, H);
            else add_codec(tw, in->speaker_id, p);
        } else add_codec(tw, cfg->codec_pad, p); /* the last entry of K[0..Lc-2] is Ce(pad) */
    }
    if (icl) {
        for (int i = 0; i < M; i++) vcopy(X + (size_t)i * H, Tref + (size_t)i * H, H);
        for (int i = 0; i < N; i++) vcopy(X + (size_t)(M + i) * H, Ttext + (size_t)i * H, H);
        if (!open) vcopy(X + (size_t)(M + N) * H, eos, H);
        add_codec(tw, cfg->codec_bos, Y);
        for (int t = 0; t < T; t++) frame_embed(tw, cw, in->ref_codes + (size_t)t * G, G, Y + (size_t)(t + 1) * H);
        if (in->non_streaming) {
            for (int i = 0; i < X_len; i++, p += H) {
                vcopy(p, X + (size_t)i * H, H);
                add_codec(tw, cfg->codec_pad, p);
            }
            for (int j = 0; j < Y_len; j++, p += H) {
                vcopy(p, Y + (size_t)j * H, H);
                vadd(p, pad, H);
            }
            vcopy(out->queue, pad, H);
        } else {
            for (int j = 0; j < Y_len; j++, p += H) {
                vcopy(p, j < X_len ? X + (size_t)j * H : pad, H);
                vadd(p, Y + (size_t)j * H, H);
            }
            if (X_len > Y_len)
                for (int q = 0; q < n_queue; q++) vcopy(out->queue + (size_t)q * H, X + (size_t)(Y_len + q) * H, H);
            else
                vcopy(out->queue, pad, H);
        }
    } else if (in->non_streaming) {
        for (int i = 0; i < N; i++, p += H) {
            vcopy(p, Ttext + (size_t)i * H, H);
            add_codec(tw, cfg->codec_pad, p);
        }
        vcopy(p, eos, H);
        add_codec(tw, cfg->codec_pad, p);
        p += H;
        vcopy(p, pad, H);
        add_codec(tw, cfg->codec_bos, p);
        p += H;
        vcopy(out->queue, pad, H);
    } else {
        vcopy(p, Ttext, H);
        add_codec(tw, cfg->codec_bos, p);
        p += H;
        for (int i = 1; i < N; i++) vcopy(out->queue + (size_t)(i - 1) * H, Ttext + (size_t)i * H, H);
        if (!open) vcopy(out->queue + (size_t)(N - 1) * H, eos, H);
    }
    free(X);
    free(Y);
    free(tp);
    return QTTS_OK;
}

int prompt_text_needed(const prompt_input *in) {
    if (!in->ref_codes) return 1;
    const int M = in->ref_tpl ? in->n_ref_tpl - 5 : 0, need = in->n_ref_frames + 1 - M;
    return need > 1 ? need : 1;
}

/* Append the rows of ids (or, ids NULL, the end of text) to the queue. */
static qtts_status queue_add(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, prompt_out *p,
                             const int32_t *ids, int n, qtts_error *e) {
    const int H = cfg->talker.hidden;
    const int32_t eos = cfg->tts_eos;
    if (!ids) {
        ids = &eos;
        n = 1;
    }
    if (n <= 0) return QTTS_OK;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= cfg->text_vocab)
            return err_set(e, QTTS_ERR_INPUT, "text id %d is outside the text vocabulary [0, %d)", ids[i],
                           cfg->text_vocab);
    if (p->n_queue + n > p->queue_cap) {
        int cap = p->queue_cap ? p->queue_cap : 16;
        while (cap < p->n_queue + n) cap *= 2;
        float *q = realloc(p->queue, sizeof(float) * (size_t)cap * H);
        if (!q) return err_set(e, QTTS_ERR_NOMEM, "out of memory growing the text queue");
        p->queue = q;
        p->queue_cap = cap;
    }
    qtts_status st = text_vecs(ops, tw, ids, n, p->queue + (size_t)p->n_queue * H, e);
    if (!st) p->n_queue += n;
    return st;
}

qtts_status prompt_append_text(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, prompt_out *p,
                               const int32_t *ids, int n, qtts_error *e) {
    if (!ids) return QTTS_OK;
    return queue_add(ops, cfg, tw, p, ids, n, e);
}

qtts_status prompt_close_text(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, prompt_out *p,
                              qtts_error *e) {
    return queue_add(ops, cfg, tw, p, NULL, 0, e);
}

void prompt_free(prompt_out *p) {
    if (!p) return;
    free(p->embeds);
    free(p->queue);
    free(p->tts_pad);
    memset(p, 0, sizeof *p);
}
