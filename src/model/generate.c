/* qtts_context and the generation loop (see generate.h). */
#include "model/generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

qtts_context_params qtts_context_default_params(void) {
    qtts_context_params p;
    p.n_ctx = 0;
    return p;
}

qtts_gen_params qtts_gen_default_params(const qtts_model *m) {
    qtts_gen_params p;
    memset(&p, 0, sizeof p);
    p.language = "auto";
    p.text_mode = QTTS_TEXT_MODE_DEFAULT;
    p.newline_id = -1;
    p.user_id = -1;
    p.auto_length_cap = 1;
    p.force_frames = 0;
    p.teacher_codes = NULL;
    p.n_teacher_frames = 0;
    if (m) {
        p.talker = m->gen.talker;
        p.predictor = m->gen.predictor;
        p.max_new_tokens = m->gen.max_new_tokens;
    } else {
        p.talker = (qtts_sampling){1, 0.9f, 50, 1.0f, 1.05f};
        p.predictor = (qtts_sampling){1, 0.9f, 50, 1.0f, 1.0f};
        p.max_new_tokens = 2048;
    }
    return p;
}

qtts_status qtts_context_new(qtts_model *m, const qtts_context_params *params, qtts_context **out) {
    qtts_error e;
    err_clear(&e);
    if (!m || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_context *c = calloc(1, sizeof *c);
    if (!c) return QTTS_ERR_NOMEM;
    c->model = m;
    c->params = params ? *params : qtts_context_default_params();
    const qtts_config *cfg = &m->cfg;
    if (c->params.n_ctx <= 0 || c->params.n_ctx > cfg->talker.max_pos) c->params.n_ctx = cfg->talker.max_pos;
    const int H = cfg->talker.hidden;
    qtts_status s = kv_cache_init(&c->cache, &cfg->talker, 64, &e);
    if (!s) s = tf_scratch_init(&c->scratch, &cfg->talker, 32, 64, &e);
    if (!s) s = cp_state_init(&c->cp, &m->cp, H, &e);
    if (!s) s = sampler_init(&c->rng, cfg->talker.vocab, 0, &e);
    if (!s) {
        c->x = malloc(sizeof(float) * H);
        c->y = malloc(sizeof(float) * H);
        c->c0e = malloc(sizeof(float) * H);
        c->logits = malloc(sizeof(float) * cfg->talker.vocab);
        c->hist_cap = 256;
        c->hist = malloc(sizeof(int32_t) * c->hist_cap);
        if (!c->x || !c->y || !c->c0e || !c->logits || !c->hist) s = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (!s && m->codec) s = codec_stream_new(m->codec, &c->codec, &e);
    if (s) {
        snprintf(m->err, sizeof m->err, "%s", e.msg);
        qtts_context_free(c);
        return s;
    }
    *out = c;
    return QTTS_OK;
}

void qtts_context_free(qtts_context *c) {
    if (!c) return;
    kv_cache_free(&c->cache);
    tf_scratch_free(&c->scratch);
    cp_state_free(&c->cp);
    sampler_free(&c->rng);
    codec_stream_free(c->codec);
    free(c->x);
    free(c->y);
    free(c->c0e);
    free(c->logits);
    free(c->hist);
    free(c);
}

const char *qtts_context_last_error(const qtts_context *c) { return c ? c->err : ""; }
qtts_stop_reason qtts_context_stop_reason(const qtts_context *c) { return c ? c->stop_reason : QTTS_STOP_NONE; }
int qtts_context_n_capped_pieces(const qtts_context *c) { return c ? c->n_capped : 0; }

void context_set_trace(qtts_context *ctx, const gen_trace *t) { ctx->trace = t; }

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void qtts_context_get_stats(const qtts_context *c, qtts_stats *st) {
    if (!st) return;
    if (!c) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = c->stats;
}

/* ---------------------------------------------------------------- request */

static qtts_status tokenize_tpl(const qtts_model *m, const char *pre, const char *text, const char *post,
                                int32_t **ids, int *n, qtts_error *e) {
    size_t len = strlen(pre) + strlen(text) + strlen(post) + 1;
    char *s = malloc(len);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    snprintf(s, len, "%s%s%s", pre, text, post);
    qtts_status st = model_tokenize(m, s, ids, n, e);
    free(s);
    return st;
}

/* [head...] + body + [tail...] */
static qtts_status wrap_ids(const int32_t *head, int nh, const int32_t *body, int nb, const int32_t *tail, int nt,
                            int32_t **ids, int *n, qtts_error *e) {
    int32_t *v = malloc(sizeof(int32_t) * (nh + nb + nt + 1));
    if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    memcpy(v, head, sizeof(int32_t) * nh);
    if (nb) memcpy(v + nh, body, sizeof(int32_t) * nb);
    memcpy(v + nh + nb, tail, sizeof(int32_t) * nt);
    *ids = v;
    *n = nh + nb + nt;
    return QTTS_OK;
}

static int blank(const char *s) {
    if (!s) return 1;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') return 0;
    return 1;
}

static void list_names(char *buf, size_t n, const name_id *t, int count, int skip_dialect, const char *first) {
    size_t k = 0;
    buf[0] = 0;
    if (first) k += snprintf(buf, n, "%s", first);
    for (int i = 0; i < count && k < n; i++) {
        if (skip_dialect && strstr(t[i].name, "dialect")) continue;
        k += snprintf(buf + k, n - k, "%s%s", k ? ", " : "", t[i].name);
    }
}

qtts_status gen_resolve(const qtts_model *m, const qtts_gen_params *p_in, gen_request *r, qtts_error *e) {
    memset(r, 0, sizeof *r);
    qtts_gen_params pv;
    const qtts_gen_params *p = p_in;
    if (p_in->voice) {
        if (p_in->xvector || p_in->ref_codes)
            return err_set(e, QTTS_ERR_INVALID_ARG, "give a voice or its parts (x-vector, reference codes), not both");
        pv = *p_in;
        voice_apply(p_in->voice, &pv);
        p = &pv;
    }
    const qtts_config *cfg = &m->cfg;
    qtts_status s;
    const int nl = p->newline_id >= 0 ? p->newline_id : m->newline_id;
    int user = p->user_id;
    if (user < 0) {
        user = 872; /* "user" in the Qwen vocabulary */
        if (m->tok) {
            int id = tok_token_id(m->tok, "user");
            if (id >= 0) user = id;
        }
    }
    const char *type_need = cfg->type == QTTS_MODEL_BASE ? "Base" :
                            cfg->type == QTTS_MODEL_CUSTOM_VOICE ? "CustomVoice" : "VoiceDesign";
    /* speaker */
    r->in.speaker_id = -1;
    const name_id *spk = NULL;
    if (p->speaker && *p->speaker) {
        if (cfg->type != QTTS_MODEL_CUSTOM_VOICE)
            return err_set(e, QTTS_ERR_INPUT,
                           "preset speaker \"%s\" needs a CustomVoice model; this is a %s model%s", p->speaker,
                           type_need, cfg->type == QTTS_MODEL_BASE ? " (clone a voice from a recording instead)" :
                           " (describe the voice with an instruction instead)");
        spk = config_speaker(cfg, p->speaker);
        if (!spk) {
            char names[1024];
            list_names(names, sizeof names, cfg->speakers, cfg->n_speakers, 0, NULL);
            return err_set(e, QTTS_ERR_INPUT, "unknown speaker \"%s\"; this model has: %s", p->speaker, names);
        }
        r->in.speaker_id = spk->id;
    }
    /* language */
    r->in.lang_id = -1;
    const char *lang = p->language && *p->language ? p->language : "auto";
    const int is_auto = strcasecmp(lang, "auto") == 0;
    if (!is_auto) {
        const name_id *l = config_language(cfg, lang);
        if (!l || strstr(l->name, "dialect")) {
            char names[1024];
            list_names(names, sizeof names, cfg->langs, cfg->n_langs, 1, "auto");
            return err_set(e, QTTS_ERR_INPUT, "unknown language \"%s\"; choose one of: %s", lang, names);
        }
        r->in.lang_id = l->id;
    }
    if (spk && spk->dialect[0] && (is_auto || strcasecmp(lang, "chinese") == 0)) {
        const name_id *d = config_language(cfg, spk->dialect);
        if (d) r->in.lang_id = d->id;
    }
    /* clone inputs */
    const int clone = p->xvector || p->ref_codes;
    if (clone && cfg->type != QTTS_MODEL_BASE)
        return err_set(e, QTTS_ERR_INPUT, "voice cloning (x-vector / reference codes) needs a Base model; this is a %s model",
                       type_need);
    if (p->ref_codes && (p->n_ref_frames <= 0 || (!p->ref_text && !p->ref_text_ids)))
        return err_set(e, QTTS_ERR_INPUT, "ICL voice cloning needs reference codes and the reference transcript");
    if (p->ref_codes && !p->xvector)
        return err_set(e, QTTS_ERR_INPUT, "ICL voice cloning also needs the reference x-vector");
    if (cfg->type == QTTS_MODEL_BASE && !p->xvector)
        return err_set(e, QTTS_ERR_INPUT,
                       "a Base model speaks in a cloned voice: give a reference recording (x-vector, optionally with "
                       "reference codes and transcript) or a saved voice");
    r->in.xvector = p->xvector;
    r->in.ref_codes = p->ref_codes;
    r->in.n_ref_frames = p->ref_codes ? p->n_ref_frames : 0;
    if (p->xvector)
        for (int i = 0; i < cfg->talker.hidden; i++)
            if (!isfinite(p->xvector[i])) return err_set(e, QTTS_ERR_INPUT, "x-vector entry %d is not finite", i);
    /* text mode */
    switch (p->text_mode) {
    case QTTS_TEXT_MODE_STREAMING: r->in.non_streaming = 0; break;
    case QTTS_TEXT_MODE_NON_STREAMING: r->in.non_streaming = 1; break;
    case QTTS_TEXT_MODE_DEFAULT: r->in.non_streaming = cfg->type != QTTS_MODEL_BASE; break;
    default: return err_set(e, QTTS_ERR_INVALID_ARG, "text_mode %d is not a qtts_text_mode", (int)p->text_mode);
    }
    /* target text */
    const int32_t head[3] = {cfg->im_start, cfg->assistant, nl};
    const int32_t tail[5] = {cfg->im_end, nl, cfg->im_start, cfg->assistant, nl};
    if (p->text_ids) {
        if (p->n_text_ids <= 0) return err_set(e, QTTS_ERR_INPUT, "empty text: nothing to say");
        s = wrap_ids(head, 3, p->text_ids, p->n_text_ids, tail, 5, &r->text_tpl, &r->n_text_tpl, e);
    } else {
        if (blank(p->text)) return err_set(e, QTTS_ERR_INPUT, "empty text: nothing to say");
        s = tokenize_tpl(m, "<|im_start|>assistant\n", p->text, "<|im_end|>\n<|im_start|>assistant\n", &r->text_tpl,
                         &r->n_text_tpl, e);
    }
    if (s) goto fail;
    if (r->n_text_tpl < 9) {
        s = err_set(e, QTTS_ERR_INPUT, "the text tokenizes to nothing between the template tokens");
        goto fail;
    }
    /* instruction */
    const int has_instr = (p->instruct_ids && p->n_instruct_ids > 0) || (p->instruct && *p->instruct);
    if (has_instr && cfg->type == QTTS_MODEL_BASE) {
        s = err_set(e, QTTS_ERR_INPUT, "instructions need a CustomVoice 1.7B or VoiceDesign model; this is a Base model");
        goto fail;
    }
    if (has_instr && cfg->type == QTTS_MODEL_CUSTOM_VOICE && strcmp(cfg->size_name, "0b6") == 0) {
        model_log(m, QTTS_LOG_WARN, "the 0.6B CustomVoice model ignores instructions (as the official wrapper does); dropping it");
    } else if (has_instr) {
        const int32_t ih[3] = {cfg->im_start, user, nl}, it[2] = {cfg->im_end, nl};
        if (p->instruct_ids)
            s = wrap_ids(ih, 3, p->instruct_ids, p->n_instruct_ids, it, 2, &r->instr_tpl, &r->n_instr_tpl, e);
        else
            s = tokenize_tpl(m, "<|im_start|>user\n", p->instruct, "<|im_end|>\n", &r->instr_tpl, &r->n_instr_tpl, e);
        if (s) goto fail;
    }
    /* ICL reference transcript */
    if (p->ref_codes) {
        const int32_t rt[2] = {cfg->im_end, nl};
        if (p->ref_text_ids)
            s = wrap_ids(head, 3, p->ref_text_ids, p->n_ref_text_ids, rt, 2, &r->ref_tpl, &r->n_ref_tpl, e);
        else if (blank(p->ref_text))
            s = err_set(e, QTTS_ERR_INPUT, "ICL voice cloning needs a non-empty reference transcript");
        else
            s = tokenize_tpl(m, "<|im_start|>assistant\n", p->ref_text, "<|im_end|>\n", &r->ref_tpl, &r->n_ref_tpl, e);
        if (s) goto fail;
        if (r->n_ref_tpl < 6) {
            s = err_set(e, QTTS_ERR_INPUT, "the reference transcript tokenizes to nothing");
            goto fail;
        }
    }
    r->n_text_tokens = r->n_text_tpl - 8;
    r->in.text_tpl = r->text_tpl;
    r->in.n_text_tpl = r->n_text_tpl;
    r->in.instr_tpl = r->instr_tpl;
    r->in.n_instr_tpl = r->n_instr_tpl;
    r->in.ref_tpl = r->ref_tpl;
    r->in.n_ref_tpl = r->n_ref_tpl;
    return QTTS_OK;
fail:
    gen_request_free(r);
    return s;
}

void gen_request_free(gen_request *r) {
    if (!r) return;
    free(r->text_tpl);
    free(r->instr_tpl);
    free(r->ref_tpl);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- loop */

static qtts_status ensure_capacity(qtts_context *c, int n_pos, int n_rows, qtts_error *e) {
    const tf_config *tc = &c->model->cfg.talker;
    if (n_pos > c->cache.cap) {
        int cap = c->cache.cap;
        while (cap < n_pos) cap *= 2;
        if (cap > c->params.n_ctx) cap = c->params.n_ctx;
        qtts_status s = kv_cache_reserve(&c->cache, cap, n_pos, e);
        if (s) return s;
    }
    if (n_rows > c->scratch.max_rows || c->cache.cap > c->scratch.max_pos) {
        int rows = n_rows > c->scratch.max_rows ? n_rows : c->scratch.max_rows;
        tf_scratch_free(&c->scratch);
        return tf_scratch_init(&c->scratch, tc, rows, c->cache.cap, e);
    }
    return QTTS_OK;
}

static qtts_status generate(qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame, void *user,
                            int32_t **codes_out, int *n_frames, qtts_error *e) {
    qtts_model *m = c->model;
    const qtts_config *cfg = &m->cfg;
    const gen_trace *tr = c->trace;
    const int H = cfg->talker.hidden, V = cfg->talker.vocab, G = cfg->n_code_groups;
    if (n_frames) *n_frames = 0;
    if (codes_out) *codes_out = NULL;
    qtts_status s;
    if ((s = sampling_validate(&p->talker, "talker", e)) || (s = sampling_validate(&p->predictor, "code predictor", e)))
        return s;
    if (p->max_new_tokens < 1)
        return err_set(e, QTTS_ERR_INVALID_ARG, "max_new_tokens must be >= 1 (got %d)", p->max_new_tokens);
    if (p->force_frames < 0 || p->n_teacher_frames < 0 || (p->teacher_codes && p->n_teacher_frames < 1))
        return err_set(e, QTTS_ERR_INVALID_ARG, "force_frames and n_teacher_frames must be >= 0 (teacher codes need frames)");
    for (int i = 0; p->teacher_codes && i < p->n_teacher_frames * G; i++) {
        if (p->teacher_codes[i] < 0 || p->teacher_codes[i] >= cfg->cp.vocab)
            return err_set(e, QTTS_ERR_INPUT, "teacher code %d at frame %d is outside [0, %d)", p->teacher_codes[i], i / G,
                           cfg->cp.vocab);
    }
    if (!c->keep_stats) memset(&c->stats, 0, sizeof c->stats);
    double t_start = now_ms();
    const int forced = p->teacher_codes ? p->n_teacher_frames : p->force_frames;
    c->stop_reason = QTTS_STOP_NONE;
    gen_request req;
    if ((s = gen_resolve(m, p, &req, e))) return s;
    /* runaway guard: frames allowed for this text */
    const int n_text_tokens = req.n_text_tokens;
    const int cap_frames = p->auto_length_cap && !forced ? 50 + 8 * n_text_tokens : -1;
    prompt_out pr;
    s = prompt_build(&m->ops, cfg, &m->talker, &m->cp, &req.in, &pr, e);
    gen_request_free(&req);
    if (s) return s;
    if (tr && tr->on_prompt) tr->on_prompt(&pr, H, tr->user);
    const int P = pr.n_pos;
    if (P + 1 > c->params.n_ctx) {
        prompt_free(&pr);
        return err_set(e, QTTS_ERR_LIMIT, "the prompt has %d positions; the context holds %d", P, c->params.n_ctx);
    }
    const int need = p->max_new_tokens > c->params.n_ctx - P ? c->params.n_ctx : P + p->max_new_tokens;
    /* reserve the prompt now (+ headroom); decode grows geometrically */
    int first = P + 256 < need ? P + 256 : need;
    if ((s = ensure_capacity(c, first, P, e))) goto done;
    sampler_seed(&c->rng, p->seed);
    /* prefill */
    tf_row *rows = malloc(sizeof(tf_row) * P);
    if (!rows) {
        s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < P; i++) rows[i] = (tf_row){&c->cache, i};
    tf_forward(&m->ops, &m->talker.tf, &c->scratch, rows, pr.embeds, P, tr ? tr->on_prefill_layer : NULL,
               tr ? tr->user : NULL);
    free(rows);
    tf_final_norm(&m->talker.tf, pr.embeds + (size_t)(P - 1) * H, c->y, 1);
    c->stats.n_prompt = P;
    double t_mark = now_ms();
    c->stats.prefill_ms += t_mark - t_start;

    int32_t *codes = NULL;
    int n_out = 0, cap_out = 0;
    int32_t frame[64];
    int agree[64];
    const int max_new = forced ? forced + 1 : p->max_new_tokens;
    for (int k = 0; k < max_new; k++) {
        if (tr && tr->on_step_hidden) tr->on_step_hidden(k, c->y, H, tr->user);
        ops_matmul(&m->ops, &m->talker.codec_head, c->y, 1, NULL, c->logits);
        logits_repetition_penalty(c->logits, V, c->hist, k, p->talker.repetition_penalty);
        if (k < 2 || forced) c->logits[cfg->codec_eos] = -INFINITY;
        for (int i = cfg->cp.vocab; i < V; i++)
            if (i != cfg->codec_eos) c->logits[i] = -INFINITY;
        if (tr && tr->on_talker_logits) tr->on_talker_logits(k, c->logits, V, tr->user);
        int c0 = sample_token(&c->rng, c->logits, V, &p->talker);
        const int32_t *teach = p->teacher_codes && k < p->n_teacher_frames ? p->teacher_codes + (size_t)k * G : NULL;
        if (teach) {
            c->stats.teacher_frames++;
            c->stats.teacher_agree[0] += c0 == teach[0];
            c0 = teach[0];
        }
        if (tr && tr->on_talker_token) tr->on_talker_token(k, c0, tr->user);
        if (k >= c->hist_cap) {
            int32_t *h = realloc(c->hist, sizeof(int32_t) * c->hist_cap * 2);
            if (!h) {
                s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
                break;
            }
            c->hist = h;
            c->hist_cap *= 2;
        }
        c->hist[k] = c0;
        if (c0 == cfg->codec_eos) {
            c->stop_reason = QTTS_STOP_EOS;
            break;
        }
        if (k == max_new - 1) {
            c->stop_reason = forced ? QTTS_STOP_NONE : QTTS_STOP_MAX_TOKENS;
            break;
        }
        const int pos = P + k;
        if (pos >= c->params.n_ctx) {
            model_log(m, QTTS_LOG_WARN, "context full at %d positions: stopping after %d frames", c->params.n_ctx, k);
            c->stop_reason = QTTS_STOP_CONTEXT_FULL;
            break;
        }
        if (cap_frames >= 0 && k >= cap_frames) {
            model_log(m, QTTS_LOG_WARN,
                      "no end of speech after %d frames (%.1f s) for a text of %d tokens: stopped at the length cap "
                      "and kept the audio so far (set max_new_tokens to override)",
                      k, k / 12.5, n_text_tokens);
            c->stop_reason = QTTS_STOP_LENGTH_CAP;
            break;
        }
        /* code predictor */
        frame[0] = c0;
        double t_cp = now_ms();
        c->stats.talker_ms += t_cp - t_mark;
        ops_get_row(&m->talker.codec_embedding, c0, c->c0e);
        cp_predict(&m->ops, &m->cp, &c->cp, c->y, c->c0e, &p->predictor, &c->rng, frame + 1, tr ? &tr->cp : NULL,
                   teach ? teach + 1 : NULL, agree);
        if (teach)
            for (int g = 1; g < G && g < 64; g++) c->stats.teacher_agree[g] += agree[g - 1];
        t_mark = now_ms();
        c->stats.predictor_ms += t_mark - t_cp;
        c->stats.n_frames++;
        if (codes_out) {
            if (n_out == cap_out) {
                cap_out = cap_out ? cap_out * 2 : 64;
                int32_t *nc = realloc(codes, sizeof(int32_t) * cap_out * G);
                if (!nc) {
                    s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
                    break;
                }
                codes = nc;
            }
            memcpy(codes + (size_t)n_out * G, frame, sizeof(int32_t) * G);
        }
        n_out++;
        if (on_frame && on_frame(frame, n_out - 1, user)) {
            s = err_set(e, QTTS_ERR_CANCELLED, "stopped by the frame callback after %d frames", n_out);
            c->stop_reason = QTTS_STOP_CANCELLED;
            break;
        }
        /* next talker input: frame embedding + next text vector */
        frame_embed(&m->talker, &m->cp, frame, G, c->x);
        const float *tv = k < pr.n_queue ? pr.queue + (size_t)k * H : pr.tts_pad;
        for (int i = 0; i < H; i++) c->x[i] += tv[i];
        if ((s = ensure_capacity(c, pos + 1, 1, e))) break;
        tf_row r = {&c->cache, pos};
        tf_forward(&m->ops, &m->talker.tf, &c->scratch, &r, c->x, 1, NULL, NULL);
        tf_final_norm(&m->talker.tf, c->x, c->y, 1);
    }
    c->stats.talker_ms += now_ms() - t_mark;
    if (codes_out) *codes_out = codes;
    else free(codes);
    if (n_frames) *n_frames = n_out;
done:
    prompt_free(&pr);
    return s;
}

qtts_status qtts_generate_codes(qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame, void *user,
                                int32_t **codes_out, int *n_frames) {
    if (!c || !p) return QTTS_ERR_INVALID_ARG;
    qtts_error e;
    err_clear(&e);
    qtts_status s = generate(c, p, on_frame, user, codes_out, n_frames, &e);
    snprintf(c->err, sizeof c->err, "%s", s ? e.msg : "");
    return s;
}
