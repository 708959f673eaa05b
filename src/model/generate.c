/* qtts_context and the generation loop (see generate.h). */
#include "model/generate.h"
#include "model/lm_vulkan.h"
#include "model/voice.h"
#include "util/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

qtts_context_params qtts_context_default_params(void) {
    qtts_context_params p;
    p.n_ctx = 0;
    p.reuse_voice_prefix = 1;
    return p;
}

qtts_gen_debug qtts_gen_debug_default_params(void) {
    qtts_gen_debug d;
    d.newline_id = -1;
    d.user_id = -1;
    d.force_frames = 0;
    d.teacher_codes = NULL;
    d.n_teacher_frames = 0;
    return d;
}

/* The request's debug aids, or the defaults when it gives none. */
static qtts_gen_debug gen_debug(const qtts_gen_params *p) {
    return p->debug ? *p->debug : qtts_gen_debug_default_params();
}

qtts_gen_params qtts_gen_default_params(const qtts_model *m) {
    qtts_gen_params p;
    memset(&p, 0, sizeof p);
    p.language = "auto";
    p.text_mode = QTTS_TEXT_MODE_DEFAULT;
    p.auto_length_cap = 1;
    p.debug = NULL;
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

qtts_status step_scratch_init(step_scratch *s, const qtts_model *m, int max_streams, qtts_error *e) {
    memset(s, 0, sizeof *s);
    const qtts_config *cfg = &m->cfg;
    const int H = cfg->talker.hidden, V = cfg->talker.vocab, G = cfg->n_code_groups;
    s->max = max_streams;
    qtts_status st = tf_scratch_init(&s->tf, &cfg->talker, max_streams > 32 ? max_streams : 32, 64, e);
    if (!st) st = cp_scratch_init(&s->cp, &m->cp, H, max_streams, e);
    if (!st) {
        s->y = malloc(sizeof(float) * max_streams * H);
        s->x = malloc(sizeof(float) * max_streams * H);
        s->logits = malloc(sizeof(float) * max_streams * V);
        s->c0e = malloc(sizeof(float) * max_streams * H);
        s->frames = malloc(sizeof(int32_t) * max_streams * G);
        s->agree = malloc(sizeof(int) * max_streams * G);
        if (!s->y || !s->x || !s->logits || !s->c0e || !s->frames || !s->agree)
            st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (st) step_scratch_free(s);
    return st;
}

void step_scratch_free(step_scratch *s) {
    if (!s) return;
    tf_scratch_free(&s->tf);
    cp_scratch_free(&s->cp);
    free(s->y);
    free(s->x);
    free(s->logits);
    free(s->c0e);
    free(s->frames);
    free(s->agree);
    for (int i = 0; i < s->n_lmvb; i++) lmv_batch_free(s->lmvb[i]);
    free(s->lmvb);
    memset(s, 0, sizeof *s);
}

/* Grow the talker scratch to rows x max_pos (rare: geometric). */
static qtts_status tf_scratch_reserve(tf_scratch *t, const tf_config *cfg, int rows, int max_pos, qtts_error *e) {
    if (rows <= t->max_rows && max_pos <= t->max_pos) return QTTS_OK;
    if (rows < t->max_rows) rows = t->max_rows;
    if (max_pos < t->max_pos) max_pos = t->max_pos;
    tf_scratch_free(t);
    return tf_scratch_init(t, cfg, rows, max_pos, e);
}

qtts_status qtts_context_new(const qtts_model *m, const qtts_context_params *params, qtts_context **out,
                             char *errbuf, size_t errbuf_size) {
    qtts_error e;
    err_clear(&e);
    if (errbuf && errbuf_size) errbuf[0] = 0;
    if (out) *out = NULL;
    qtts_context *c = NULL;
    qtts_status s = QTTS_OK;
    if (!m || !out) s = err_set(&e, QTTS_ERR_INVALID_ARG, "qtts_context_new: NULL model or output");
    else if (!(c = calloc(1, sizeof *c))) s = err_set(&e, QTTS_ERR_NOMEM, "out of memory making a context");
    if (s) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", e.msg);
        return s;
    }
    c->model = m;
    c->params = params ? *params : qtts_context_default_params();
    const qtts_config *cfg = &m->cfg;
    if (c->params.n_ctx <= 0 || c->params.n_ctx > cfg->talker.max_pos) c->params.n_ctx = cfg->talker.max_pos;
    const int H = cfg->talker.hidden;
    s = kv_cache_init(&c->cache, &cfg->talker, 64, &e);
    if (!s) s = step_scratch_init(&c->ss, m, 1, &e);
    if (!s) s = cp_state_init(&c->cp, &m->cp, &e);
    if (!s) s = sampler_init(&c->rng, cfg->talker.vocab, 0, &e);
    if (!s) {
        c->y = malloc(sizeof(float) * H);
        c->hist_cap = 256;
        c->hist = malloc(sizeof(int32_t) * c->hist_cap);
        if (!c->y || !c->hist) s = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (!s && m->codec) s = codec_stream_new(m->codec, &c->codec, &e);
    if (!s && m->lmv) s = lmv_stream_new(m->lmv, &c->lmv, &e);
    if (!s && c->codec && c->lmv) { /* the decoder reads the frames' codes where they are made */
        cdv_code_ring ring;
        lmv_code_ring(c->lmv, &ring);
        s = codec_stream_link_codes(c->codec, &ring, &e);
    }
    if (s) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", e.msg);
        qtts_context_free(c);
        return s;
    }
    *out = c;
    return QTTS_OK;
}

void qtts_context_free(qtts_context *c) {
    if (!c) return;
    free(c->gs.codes);
    prompt_free(&c->gs.pr);
    kv_cache_free(&c->cache);
    step_scratch_free(&c->ss);
    cp_state_free(&c->cp);
    sampler_free(&c->rng);
    codec_stream_free(c->codec);
    lmv_stream_free(c->lmv);
    free(c->y);
    free(c->voice_rows);
    free(c->hist);
    free(c);
}

const char *qtts_context_last_error(const qtts_context *c) { return c ? c->err : ""; }
qtts_stop_reason qtts_context_stop_reason(const qtts_context *c) { return c ? c->stop_reason : QTTS_STOP_NONE; }
int qtts_context_n_capped_segments(const qtts_context *c) { return c ? c->n_capped : 0; }

void context_set_trace(qtts_context *ctx, const gen_trace *t) { ctx->trace = t; }

void qtts_context_get_stats(const qtts_context *c, qtts_stats *st) {
    if (!st) return;
    if (!c) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = c->stats;
}

/* ---------------------------------------------------------------- request */

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

/* gen_resolve, or with open_tpl the open template of incremental text. */
static qtts_status resolve(const qtts_model *m, const qtts_gen_params *p_in, const int32_t *open_tpl, int n_open,
                           gen_request *r, qtts_error *e) {
    memset(r, 0, sizeof *r);
    const qtts_gen_params *p = p_in;
    voice_spec vs;
    const qtts_config *cfg = &m->cfg;
    qtts_status s;
    const qtts_gen_debug dbg = gen_debug(p);
    const int nl = dbg.newline_id >= 0 ? dbg.newline_id : m->newline_id;
    int user = dbg.user_id;
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
    qtts_status vst = voice_resolve(m, p, &vs, e);
    if (vst) return vst;
    r->in.xvector = vs.xvector;
    r->in.ref_codes = vs.ref_codes;
    r->in.n_ref_frames = vs.n_ref_frames;
    if (vs.xvector)
        for (int i = 0; i < cfg->talker.hidden; i++)
            if (!isfinite(vs.xvector[i])) return err_set(e, QTTS_ERR_INPUT, "x-vector entry %d is not finite", i);
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
    if (open_tpl) {
        r->text_tpl = malloc(sizeof(int32_t) * (size_t)(n_open + 1));
        s = QTTS_OK;
        if (!r->text_tpl) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        else {
            memcpy(r->text_tpl, open_tpl, sizeof(int32_t) * (size_t)n_open);
            r->n_text_tpl = n_open;
            r->in.open = 1;
        }
    } else if (p->text_ids) {
        if (p->n_text_ids <= 0) return err_set(e, QTTS_ERR_INPUT, "empty text: nothing to say");
        s = wrap_ids(head, 3, p->text_ids, p->n_text_ids, tail, 5, &r->text_tpl, &r->n_text_tpl, e);
    } else {
        if (blank(p->text)) return err_set(e, QTTS_ERR_INPUT, "empty text: nothing to say");
        s = model_tokenize_tpl(m, "<|im_start|>assistant\n", p->text, "<|im_end|>\n<|im_start|>assistant\n", "the text",
                               &r->text_tpl, &r->n_text_tpl, e);
    }
    if (s) goto fail;
    if (r->n_text_tpl < (open_tpl ? 4 : 9)) {
        s = err_set(e, QTTS_ERR_INPUT, "the text tokenizes to nothing between the template tokens");
        goto fail;
    }
    /* instruction */
    const int has_instr = (p->instruct_ids && p->n_instruct_ids > 0) || (p->instruct && *p->instruct);
    if (!has_instr && cfg->type == QTTS_MODEL_VOICE_DESIGN) {
        s = err_set(e, QTTS_ERR_INPUT,
                    "a VoiceDesign model needs a description of the voice (instruct), e.g. \"A calm, low female voice\"");
        goto fail;
    }
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
            s = model_tokenize_tpl(m, "<|im_start|>user\n", p->instruct, "<|im_end|>\n", "the instruction",
                                   &r->instr_tpl, &r->n_instr_tpl, e);
        if (s) goto fail;
    }
    /* ICL reference transcript */
    if (vs.ref_codes) {
        const int32_t rt[2] = {cfg->im_end, nl};
        if (vs.ref_text_ids)
            s = wrap_ids(head, 3, vs.ref_text_ids, vs.n_ref_text_ids, rt, 2, &r->ref_tpl, &r->n_ref_tpl, e);
        else if (blank(vs.ref_text))
            s = err_set(e, QTTS_ERR_INPUT, "ICL voice cloning needs a non-empty reference transcript");
        else
            s = model_tokenize_tpl(m, "<|im_start|>assistant\n", vs.ref_text, "<|im_end|>\n", "the reference transcript",
                                   &r->ref_tpl, &r->n_ref_tpl, e);
        if (s) goto fail;
        if (r->n_ref_tpl < 6) {
            s = err_set(e, QTTS_ERR_INPUT, "the reference transcript tokenizes to nothing");
            goto fail;
        }
    }
    r->n_text_tokens = r->n_text_tpl - (open_tpl ? 3 : 8);
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

qtts_status gen_resolve(const qtts_model *m, const qtts_gen_params *p, gen_request *r, qtts_error *e) {
    return resolve(m, p, NULL, 0, r, e);
}

int gen_is_streaming(const qtts_model *m, const qtts_gen_params *p) {
    if (p->text_mode == QTTS_TEXT_MODE_STREAMING) return 1;
    if (p->text_mode == QTTS_TEXT_MODE_NON_STREAMING) return 0;
    return m->cfg.type == QTTS_MODEL_BASE;
}

void gen_request_free(gen_request *r) {
    if (!r) return;
    free(r->text_tpl);
    free(r->instr_tpl);
    free(r->ref_tpl);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- loop */

/* Positions of KV cache mapped ahead of the writes at a time (kv_cache_prefault). */
#define KV_PREFAULT_AHEAD 64

/* Make room for position n_pos - 1 in c's cache (geometric growth),
 * keeping its first `keep` positions. */
static qtts_status ensure_cache(qtts_context *c, int n_pos, int keep, qtts_error *e) {
    if (n_pos <= c->cache.cap) return QTTS_OK;
    int cap = c->cache.cap;
    while (cap < n_pos) cap *= 2;
    if (cap > c->params.n_ctx) cap = c->params.n_ctx;
    return kv_cache_reserve(&c->cache, cap, keep, e);
}

/* The golden tests' observers, as the Vulkan backend calls them. */
static int vulkan_go_on(int c0, void *user);

static lmv_trace vulkan_trace(const gen_trace *tr, qtts_context *c) {
    lmv_trace t;
    memset(&t, 0, sizeof t);
    if (!tr) return t;
    t.go_on = vulkan_go_on;
    t.go_on_user = c;
    t.user = tr->user;
    t.on_prefill_layer = tr->on_prefill_layer;
    t.on_step_hidden = tr->on_step_hidden;
    t.on_talker_logits = tr->on_talker_logits;
    t.cp_user = tr->cp.user;
    t.on_cp_inputs = tr->cp.on_inputs;
    t.on_cp_logits = tr->cp.on_logits;
    return t;
}

/* Keep the first nv rows of the prompt (its voice prefix) for the next
 * request's reuse check; returns the rows kept (0 without memory for them:
 * then there is just no reuse). */
static int keep_voice_rows(qtts_context *c, int nv) {
    const int H = c->model->cfg.talker.hidden;
    int keep_rows = c->params.reuse_voice_prefix ? nv : 0;
    if (keep_rows > c->voice_rows_cap) {
        float *vr = realloc(c->voice_rows, sizeof(float) * (size_t)keep_rows * H);
        if (vr) {
            c->voice_rows = vr;
            c->voice_rows_cap = keep_rows;
        } else keep_rows = 0;
    }
    if (keep_rows > 0) memcpy(c->voice_rows, c->gs.pr.embeds, sizeof(float) * (size_t)keep_rows * H);
    return keep_rows;
}

/* gen_begin's prefill on the Vulkan device (the prompt is built): positions
 * [reuse, P), the device cache keeping [0, reuse) from the last prompt;
 * *keep_rows gets the voice rows kept for the next request. */
static qtts_status begin_vulkan(qtts_context *c, const gen_trace *tr, int P, int reuse, int nv, int *keep_rows,
                                qtts_error *e) {
    gen_state *g = &c->gs;
    *keep_rows = keep_voice_rows(c, nv);
    /* frames this generation can make: the device caches are sized for them */
    int frames = g->max_new;
    if (g->cap_frames >= 0 && g->cap_frames + 1 < frames) frames = g->cap_frames + 1;
    if (c->params.n_ctx - P + 1 < frames) frames = c->params.n_ctx - P + 1;
    const lmv_request q = {g->pr.embeds, P, g->pr.queue, g->pr.n_queue, g->pr.tts_pad, frames, &g->p.talker,
                           &g->p.predictor, g->p.seed, g->forced > 0, g->dbg.teacher_codes,
                           g->dbg.teacher_codes ? g->dbg.n_teacher_frames : 0, reuse};
    const lmv_trace lt = vulkan_trace(tr, c);
    double gpu_ms = 0;
    qtts_status s = lmv_prefill(c->lmv, &q, tr ? &lt : NULL, &gpu_ms, e);
    c->stats.gpu_prefill_ms += gpu_ms;
    return s;
}

/* gen_begin's prefill on the CPU: the same contract as begin_vulkan, the
 * hidden state of the last position in c->y. */
static qtts_status begin_cpu(qtts_context *c, const gen_trace *tr, int P, int L, int nv, int *keep_rows,
                             qtts_error *e) {
    const qtts_model *m = c->model;
    const qtts_config *cfg = &m->cfg;
    gen_state *g = &c->gs;
    const int H = cfg->talker.hidden;
    /* reserve the prompt + headroom; the decode grows the cache geometrically */
    const int need = g->max_new > c->params.n_ctx - P ? c->params.n_ctx : P + g->max_new;
    const int first = P + 256 < need ? P + 256 : need;
    qtts_status s = QTTS_OK;
    tf_row *rows = malloc(sizeof(tf_row) * P);
    if (!rows) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    if (!s) s = ensure_cache(c, first, L, e); /* a new request: only the reused prefix to keep */
    if (!s) kv_cache_prefault(&c->cache, 0, P + KV_PREFAULT_AHEAD); /* the prefill writes [L, P) */
    if (!s) s = tf_scratch_reserve(&c->ss.tf, &cfg->talker, P, c->cache.cap, e);
    if (s) {
        free(rows);
        return s;
    }
    /* keep this prompt's voice rows for the next one (before the prefill
     * overwrites them) */
    *keep_rows = keep_voice_rows(c, nv);
    sampler_seed(&c->rng, g->p.seed);
    for (int i = L; i < P; i++) rows[i - L] = (tf_row){&c->cache, i};
    tf_forward(&m->ops, &m->talker.tf, &c->ss.tf, rows, g->pr.embeds + (size_t)L * H, P - L,
               tr ? tr->on_prefill_layer : NULL, tr ? tr->user : NULL);
    free(rows);
    tf_final_norm(&m->talker.tf, g->pr.embeds + (size_t)(P - 1) * H, c->y, 1);
    return QTTS_OK;
}

static qtts_status begin(qtts_context *c, const qtts_gen_params *p, const int32_t *open_tpl, int n_open,
                         qtts_frame_fn on_frame, void *user, int collect, int *need, qtts_error *e) {
    const qtts_model *m = c->model;
    const qtts_config *cfg = &m->cfg;
    const gen_trace *tr = c->trace;
    const int H = cfg->talker.hidden, G = cfg->n_code_groups;
    gen_state *g = &c->gs;
    free(g->codes);
    prompt_free(&g->pr);
    memset(g, 0, sizeof *g);
    qtts_status s;
    if ((s = sampling_validate(&p->talker, "talker", e)) || (s = sampling_validate(&p->predictor, "code predictor", e)))
        return s;
    if (p->max_new_tokens < 1)
        return err_set(e, QTTS_ERR_INVALID_ARG, "max_new_tokens must be >= 1 (got %d)", p->max_new_tokens);
    const qtts_gen_debug dbg = gen_debug(p);
    if (dbg.force_frames < 0 || dbg.n_teacher_frames < 0 || (dbg.teacher_codes && dbg.n_teacher_frames < 1))
        return err_set(e, QTTS_ERR_INVALID_ARG, "force_frames and n_teacher_frames must be >= 0 (teacher codes need frames)");
    for (int i = 0; dbg.teacher_codes && i < dbg.n_teacher_frames * G; i++)
        if (dbg.teacher_codes[i] < 0 || dbg.teacher_codes[i] >= cfg->cp.vocab)
            return err_set(e, QTTS_ERR_INPUT, "teacher code %d at frame %d is outside [0, %d)", dbg.teacher_codes[i],
                           i / G, cfg->cp.vocab);
    if (!c->keep_stats) memset(&c->stats, 0, sizeof c->stats);
    const double t_start = now_ms();
    c->stop_reason = QTTS_STOP_NONE;
    gen_request req;
    if (open_tpl && c->lmv)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "incremental text runs on the CPU backend only for now (the Vulkan backend uploads the text "
                       "queue once, at the prefill)");
    if ((s = resolve(m, p, open_tpl, n_open, &req, e))) return s;
    if (open_tpl) {
        const int needed = prompt_text_needed(&req.in);
        if (req.in.non_streaming) {
            gen_request_free(&req);
            return err_set(e, QTTS_ERR_UNSUPPORTED, "incremental text needs the streaming text mode");
        }
        if (req.n_text_tokens < needed) {
            *need = needed;
            gen_request_free(&req);
            return QTTS_OK;
        }
    }
    g->open = open_tpl != NULL;
    g->p = *p;
    g->p.debug = NULL;
    g->dbg = dbg;
    g->forced = dbg.teacher_codes ? dbg.n_teacher_frames : dbg.force_frames;
    g->n_text_tokens = req.n_text_tokens;
    /* runaway guard: frames allowed for this text */
    g->cap_frames = p->auto_length_cap && !g->forced ? 50 + 8 * g->n_text_tokens : -1;
    g->max_new = g->forced ? g->forced + 1 : p->max_new_tokens;
    s = prompt_build(&m->ops, cfg, &m->talker, &m->cp, &req.in, &g->pr, e);
    gen_request_free(&req);
    if (s) return s;
    if (tr && tr->on_prompt) tr->on_prompt(&g->pr, H, tr->user);
    const int P = g->P = g->pr.n_pos;
    if (P + 1 > c->params.n_ctx) {
        prompt_free(&g->pr);
        return err_set(e, QTTS_ERR_LIMIT, "the prompt has %d positions; the context holds %d", P, c->params.n_ctx);
    }
    /* positions [0, L) as the last prompt left them (never the last row: its
     * hidden state is needed; never with a trace, which sees every row) */
    int L = 0;
    const int nv = g->pr.n_voice < P ? g->pr.n_voice : P - 1;
    if (c->params.reuse_voice_prefix && !tr)
        while (L < nv && L < c->n_voice_rows &&
               !memcmp(c->voice_rows + (size_t)L * H, g->pr.embeds + (size_t)L * H, sizeof(float) * H))
            L++;
    c->n_voice_rows = 0; /* the cache below changes: valid again after the prefill */
    int keep_rows = 0;
    s = c->lmv ? begin_vulkan(c, tr, P, L, nv, &keep_rows, e) : begin_cpu(c, tr, P, L, nv, &keep_rows, e);
    if (s) {
        prompt_free(&g->pr);
        return s;
    }
    c->n_voice_rows = keep_rows;
    c->stats.n_prompt = P;
    c->stats.n_prompt_reused = L;
    c->stats.prefill_ms += now_ms() - t_start;
    g->on_frame = on_frame;
    g->user = user;
    g->collect = collect;
    g->active = 1;
    return QTTS_OK;
}

/* End c's generation with a status (error message already in gs.err). */
static void finish(qtts_context *c, qtts_status st) {
    c->gs.active = 0;
    c->gs.status = st;
}

/* Why c's generation stops after picking c0 at step k, or -1 to go on
 * (the stop rules of gen_step, shared by both backends). */
static int stop_reason_for(const qtts_context *c, int c0, int log) {
    const qtts_model *m = c->model;
    const gen_state *g = &c->gs;
    const int k = g->k, pos = g->P + k;
    if (c0 == m->cfg.codec_eos) return QTTS_STOP_EOS;
    if (k == g->max_new - 1) return g->forced ? QTTS_STOP_NONE : QTTS_STOP_MAX_TOKENS;
    if (pos >= c->params.n_ctx) {
        if (log)
            model_log(m, QTTS_LOG_WARN, "context full at %d positions: stopping after %d frames", c->params.n_ctx, k);
        return QTTS_STOP_CONTEXT_FULL;
    }
    if (g->cap_frames >= 0 && k >= g->cap_frames) {
        if (log)
            model_log(m, QTTS_LOG_WARN,
                  "no end of speech after %d frames (%.1f s) for a text of %d tokens: stopped at the length cap "
                  "and kept the audio so far (set max_new_tokens to override)",
                  k, k / 12.5, g->n_text_tokens);
        return QTTS_STOP_LENGTH_CAP;
    }
    return -1;
}

/* Keep a frame and hand it to on_frame (*t_cb += the callback's time: the
 * caller's, e.g. decoding between frames, not the talker's); 0 when
 * generation goes on. */
static int deliver(qtts_context *c, const int32_t *fr, int G, double *t_cb) {
    gen_state *g = &c->gs;
    c->stats.n_frames++;
    if (g->collect) {
        if (g->n_out == g->cap_out) {
            int cap = g->cap_out ? g->cap_out * 2 : 64;
            int32_t *nc = realloc(g->codes, sizeof(int32_t) * cap * G);
            if (!nc) {
                err_set(&g->err, QTTS_ERR_NOMEM, "out of memory");
                finish(c, QTTS_ERR_NOMEM);
                return 1;
            }
            g->codes = nc;
            g->cap_out = cap;
        }
        memcpy(g->codes + (size_t)g->n_out * G, fr, sizeof(int32_t) * G);
    }
    g->n_out++;
    const double tc = now_ms();
    const int stop = g->on_frame && g->on_frame(fr, g->n_out - 1, g->user);
    *t_cb += now_ms() - tc;
    if (stop) {
        err_set(&g->err, QTTS_ERR_CANCELLED, "stopped by the frame callback after %d frames", g->n_out);
        c->stop_reason = QTTS_STOP_CANCELLED;
        finish(c, QTTS_ERR_CANCELLED);
        return 1;
    }
    return 0;
}

/* After a stream's frame on the Vulkan device: its share of the step's
 * times, then the stop rules and the delivery, as on the CPU. wall: the
 * host time of the submission that made it, shared by `share` streams. */
static void vulkan_after_frame(qtts_context *c, qtts_status st, const int32_t *fr, const int *agree,
                               const lmv_times *t, double wall, int share) {
    gen_state *g = &c->gs;
    const int G = c->model->cfg.n_code_groups;
    /* one submission: its wall time split in the proportion of the device's
       phase times (all of it to the talker without timestamps), and all of
       it evenly over the streams it served */
    const double gpu = t->talker + t->predictor + t->sampling, part = gpu > 0 ? t->predictor / gpu : 0;
    c->stats.predictor_ms += wall * part / share;
    c->stats.talker_ms += wall * (1 - part) / share;
    c->stats.gpu_talker_ms += t->talker / share;
    c->stats.gpu_predictor_ms += t->predictor / share;
    c->stats.gpu_sampling_ms += t->sampling / share;
    if (st) {
        finish(c, st);
        return;
    }
    const int k = g->k;
    const int teach = g->dbg.teacher_codes && k < g->dbg.n_teacher_frames;
    if (teach) {
        c->stats.teacher_frames++;
        c->stats.teacher_agree[0] += agree[0];
    }
    if (c->trace && c->trace->on_talker_token) c->trace->on_talker_token(k, fr[0], c->trace->user);
    const int why = stop_reason_for(c, fr[0], 1);
    if (why >= 0) {
        c->stop_reason = (qtts_stop_reason)why;
        finish(c, QTTS_OK);
        return;
    }
    if (teach)
        for (int q = 1; q < G && q < 64; q++) c->stats.teacher_agree[q] += agree[q];
    double t_cb = 0;
    if (deliver(c, fr, G, &t_cb)) return;
    g->k++;
}

/* gen_step on the Vulkan device: the untraced active streams in groups of
 * up to LMV_BATCH_MAX, each group's frame one submission (lmv_batch_frame:
 * bit for bit each stream's frame alone); a group of one, a traced stream,
 * and every stream on a device without batched frames (lmv_can_batch),
 * through lmv_frame. Group i keeps its own batch, whose recordings (one per
 * size) replay for whatever streams the group holds. */
static void gen_step_vulkan(qtts_context **cs, int n, step_scratch *ss) {
    const int G = cs[0]->model->cfg.n_code_groups;
    qtts_context *grp[LMV_BATCH_MAX];
    lmv_stream *ls[LMV_BATCH_MAX];
    int32_t fr[LMV_BATCH_MAX * 64];
    int agree[LMV_BATCH_MAX * 64];
    int n_plain = 0;
    for (int i = 0; i < n; i++) n_plain += cs[i]->gs.active && !cs[i]->trace;
    /* balanced groups: ceil(n_plain / LMV_BATCH_MAX) of them */
    const int n_grp =
        n_plain >= 2 && lmv_can_batch(cs[0]->model->lmv) ? (n_plain + LMV_BATCH_MAX - 1) / LMV_BATCH_MAX : 0;
    if (n_grp > ss->n_lmvb) {
        struct lmv_batch **p = realloc(ss->lmvb, sizeof *p * n_grp);
        if (p) {
            for (int i = ss->n_lmvb; i < n_grp; i++) p[i] = NULL;
            ss->lmvb = p;
            ss->n_lmvb = n_grp;
        }
    }
    int next = 0; /* the first stream not yet stepped */
    for (int gi = 0; gi < n_grp; gi++) {
        const int want = n_plain / n_grp + (gi < n_plain % n_grp);
        int m = 0;
        for (; next < n && m < want; next++)
            if (cs[next]->gs.active && !cs[next]->trace) {
                grp[m] = cs[next];
                ls[m++] = cs[next]->lmv;
            }
        if (!m) break; /* the rest left during the step */
        qtts_error *e = &grp[0]->gs.err;
        qtts_status st = gi < ss->n_lmvb ? QTTS_OK : err_set(e, QTTS_ERR_NOMEM, "out of memory");
        if (!st && !ss->lmvb[gi]) st = lmv_batch_new(cs[0]->model->lmv, &ss->lmvb[gi], e);
        const double t0 = now_ms();
        lmv_times t;
        memset(&t, 0, sizeof t);
        if (!st) st = lmv_batch_frame(ss->lmvb[gi], ls, m, fr, agree, &t, e);
        const double wall = now_ms() - t0;
        for (int j = 0; j < m; j++) {
            if (st && j > 0) err_set(&grp[j]->gs.err, st, "%s", e->msg);
            vulkan_after_frame(grp[j], st, fr + j * G, agree + j * G, &t, wall, m);
        }
    }
    for (int i = 0; i < n; i++) {
        qtts_context *c = cs[i];
        if (!c->gs.active || (n_grp && !c->trace)) continue;
        const double t0 = now_ms();
        lmv_times t;
        const lmv_trace lt = vulkan_trace(c->trace, c);
        qtts_status st = lmv_frame(c->lmv, c->trace ? &lt : NULL, fr, agree, &t, &c->gs.err);
        vulkan_after_frame(c, st, fr, agree, &t, now_ms() - t0, 1);
    }
}

static int vulkan_go_on(int c0, void *user) { return stop_reason_for(user, c0, 0) < 0; }

int64_t gen_frame_serial(const qtts_context *c) { return c->lmv ? lmv_frames_made(c->lmv) - 1 : -1; }

void gen_step(qtts_context **cs, int n, step_scratch *ss) {
    if (n <= 0) return;
    if (cs[0]->lmv) {
        gen_step_vulkan(cs, n, ss);
        return;
    }
    const qtts_model *m = cs[0]->model;
    const qtts_config *cfg = &m->cfg;
    const int H = cfg->talker.hidden, V = cfg->talker.vocab, G = cfg->n_code_groups;
    const double t0 = now_ms();
    /* A. codec_head for every stream in one pass over the weights */
    for (int i = 0; i < n; i++) {
        qtts_context *c = cs[i];
        const gen_trace *tr = c->trace;
        if (tr && tr->on_step_hidden) tr->on_step_hidden(c->gs.k, c->y, H, tr->user);
        memcpy(ss->y + (size_t)i * H, c->y, sizeof(float) * H);
    }
    ops_matmul(&m->ops, &m->talker.codec_head, ss->y, n, NULL, ss->logits);
    /* B. per stream: processors, codebook 0, stop conditions */
    int go[CP_MAX_STREAMS], n_go = 0;
    for (int i = 0; i < n; i++) {
        qtts_context *c = cs[i];
        gen_state *g = &c->gs;
        const gen_trace *tr = c->trace;
        const int k = g->k;
        float *lg = ss->logits + (size_t)i * V;
        logits_repetition_penalty(lg, V, c->hist, k, g->p.talker.repetition_penalty);
        if (k < 2 || g->forced) lg[cfg->codec_eos] = -INFINITY;
        for (int t = cfg->cp.vocab; t < V; t++)
            if (t != cfg->codec_eos) lg[t] = -INFINITY;
        if (tr && tr->on_talker_logits) tr->on_talker_logits(k, lg, V, tr->user);
        int c0 = sample_token(&c->rng, lg, V, &g->p.talker);
        const int32_t *teach =
            g->dbg.teacher_codes && k < g->dbg.n_teacher_frames ? g->dbg.teacher_codes + (size_t)k * G : NULL;
        if (teach) {
            c->stats.teacher_frames++;
            c->stats.teacher_agree[0] += c0 == teach[0];
            c0 = teach[0];
        }
        if (tr && tr->on_talker_token) tr->on_talker_token(k, c0, tr->user);
        if (k >= c->hist_cap) {
            int32_t *h = realloc(c->hist, sizeof(int32_t) * c->hist_cap * 2);
            if (!h) {
                err_set(&g->err, QTTS_ERR_NOMEM, "out of memory");
                finish(c, QTTS_ERR_NOMEM);
                continue;
            }
            c->hist = h;
            c->hist_cap *= 2;
        }
        c->hist[k] = c0;
        const int why = stop_reason_for(c, c0, 1);
        if (why < 0) {
            int32_t *fr = ss->frames + (size_t)i * G;
            fr[0] = c0;
            go[n_go++] = i;
            continue;
        }
        c->stop_reason = (qtts_stop_reason)why;
        finish(c, QTTS_OK);
    }
    const double t1 = now_ms();
    /* C. code predictor for the continuing streams together */
    cp_job jobs[CP_MAX_STREAMS];
    for (int j = 0; j < n_go; j++) {
        const int i = go[j];
        qtts_context *c = cs[i];
        gen_state *g = &c->gs;
        int32_t *fr = ss->frames + (size_t)i * G;
        const int32_t *teach =
            g->dbg.teacher_codes && g->k < g->dbg.n_teacher_frames ? g->dbg.teacher_codes + (size_t)g->k * G : NULL;
        ops_get_row(&m->talker.codec_embedding, fr[0], ss->c0e + (size_t)i * H);
        jobs[j] = (cp_job){&c->cp, ss->y + (size_t)i * H, ss->c0e + (size_t)i * H, &g->p.predictor, &c->rng, fr + 1,
                           teach ? teach + 1 : NULL, ss->agree + (size_t)i * G, c->trace ? &c->trace->cp : NULL};
    }
    if (n_go) cp_predict(&m->ops, &m->cp, &ss->cp, jobs, n_go);
    const double t2 = now_ms();
    /* D. deliver the frames */
    double t_cb = 0; /* in on_frame callbacks */
    int rows_n = 0;
    tf_row rows[CP_MAX_STREAMS];
    int idx[CP_MAX_STREAMS];
    for (int j = 0; j < n_go; j++) {
        const int i = go[j];
        qtts_context *c = cs[i];
        gen_state *g = &c->gs;
        const int32_t *fr = ss->frames + (size_t)i * G;
        if (g->dbg.teacher_codes && g->k < g->dbg.n_teacher_frames)
            for (int q = 1; q < G && q < 64; q++) c->stats.teacher_agree[q] += ss->agree[(size_t)i * G + q - 1];
        if (deliver(c, fr, G, &t_cb)) continue;
        /* next talker input: frame embedding + next text vector */
        const int pos = g->P + g->k;
        qtts_status st = ensure_cache(c, pos + 1, pos, &g->err); /* positions 0..pos-1 are written */
        if (!st && pos >= c->cache.mapped) kv_cache_prefault(&c->cache, pos, pos + KV_PREFAULT_AHEAD);
        if (st) {
            finish(c, st);
            continue;
        }
        float *x = ss->x + (size_t)rows_n * H;
        frame_embed(&m->talker, &m->cp, fr, G, x);
        const float *tv = g->k < g->pr.n_queue ? g->pr.queue + (size_t)g->k * H : g->pr.tts_pad;
        for (int t = 0; t < H; t++) x[t] += tv[t];
        rows[rows_n] = (tf_row){&c->cache, pos};
        idx[rows_n++] = i;
    }
    /* E. talker step for every continuing stream together */
    if (rows_n) {
        int max_pos = 0;
        for (int r = 0; r < rows_n; r++)
            if (rows[r].cache->cap > max_pos) max_pos = rows[r].cache->cap;
        qtts_error e;
        qtts_status st = tf_scratch_reserve(&ss->tf, &cfg->talker, rows_n, max_pos, &e);
        if (st) {
            for (int r = 0; r < rows_n; r++) {
                cs[idx[r]]->gs.err = e;
                finish(cs[idx[r]], st);
            }
            rows_n = 0;
        } else {
            tf_forward(&m->ops, &m->talker.tf, &ss->tf, rows, ss->x, rows_n, NULL, NULL);
            tf_final_norm(&m->talker.tf, ss->x, ss->y, rows_n);
            for (int r = 0; r < rows_n; r++) {
                memcpy(cs[idx[r]]->y, ss->y + (size_t)r * H, sizeof(float) * H);
                cs[idx[r]]->gs.k++;
            }
        }
    }
    const double t3 = now_ms();
    for (int i = 0; i < n; i++) { /* each stream waited for the whole step */
        cs[i]->stats.talker_ms += (t1 - t0) + (t3 - t2) - t_cb;
        cs[i]->stats.predictor_ms += t2 - t1;
    }
}

qtts_status gen_begin(qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame, void *user, int collect,
                      qtts_error *e) {
    return begin(c, p, NULL, 0, on_frame, user, collect, NULL, e);
}

qtts_status gen_begin_open(qtts_context *c, const qtts_gen_params *p, const int32_t *tpl, int n_tpl,
                           qtts_frame_fn on_frame, void *user, int *need, qtts_error *e) {
    *need = 0;
    if (!tpl || n_tpl < 3) return err_set(e, QTTS_ERR_INTERNAL, "an open prompt needs the template's head");
    if (n_tpl < 4) { /* not even the first text token: no need to resolve anything yet */
        *need = 1;
        return QTTS_OK;
    }
    return begin(c, p, tpl, n_tpl, on_frame, user, 0, need, e);
}

/* The length cap follows the text known so far (the whole text's at its end). */
static void text_grew(gen_state *g, int n) {
    g->n_text_tokens += n;
    if (g->cap_frames >= 0) g->cap_frames = 50 + 8 * g->n_text_tokens;
}

qtts_status gen_text_append(qtts_context *c, const int32_t *ids, int n, qtts_error *e) {
    gen_state *g = &c->gs;
    if (!g->open) return err_set(e, QTTS_ERR_INTERNAL, "text appended to a generation whose text is closed");
    const qtts_model *m = c->model;
    qtts_status st = prompt_append_text(&m->ops, &m->cfg, &m->talker, &g->pr, ids, n, e);
    if (!st) text_grew(g, n);
    return st;
}

qtts_status gen_text_close(qtts_context *c, qtts_error *e) {
    gen_state *g = &c->gs;
    if (!g->open) return err_set(e, QTTS_ERR_INTERNAL, "text closed twice");
    const qtts_model *m = c->model;
    qtts_status st = prompt_close_text(&m->ops, &m->cfg, &m->talker, &g->pr, e);
    if (!st) g->open = 0;
    return st;
}

int gen_waits_for_text(const qtts_context *c) { return c->gs.active && c->gs.open && c->gs.k >= c->gs.pr.n_queue; }

qtts_status gen_end(qtts_context *c, int32_t **codes_out, int *n_frames, qtts_error *e) {
    gen_state *g = &c->gs;
    if (codes_out) {
        *codes_out = g->codes;
        g->codes = NULL;
    }
    if (n_frames) *n_frames = g->n_out;
    free(g->codes);
    g->codes = NULL;
    prompt_free(&g->pr);
    g->active = 0;
    if (g->status) *e = g->err;
    return g->status;
}

qtts_status qtts_generate_codes(qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame, void *user,
                                int32_t **codes_out, int *n_frames) {
    if (!c || !p) return QTTS_ERR_INVALID_ARG;
    if (codes_out) *codes_out = NULL;
    if (n_frames) *n_frames = 0;
    qtts_error e;
    err_clear(&e);
    qtts_status s = gen_begin(c, p, on_frame, user, codes_out != NULL, &e);
    if (!s) {
        while (c->gs.active) gen_step(&c, 1, &c->ss);
        s = gen_end(c, codes_out, n_frames, &e);
    }
    snprintf(c->err, sizeof c->err, "%s", s ? e.msg : "");
    return s;
}
