/* Cloned voices (Base models): reference recording -> 24 kHz mono ->
 * speaker encoder x-vector (+ codec encoder reference codes and tokenized
 * transcript for ICL), as the official create_voice_clone_prompt does; saved
 * and loaded through the versioned voice file (model/voice_file.c). Also the
 * one place a request's voice is resolved (voice_resolve) and an utterance's
 * audio is primed with it (voice_prime); see voice.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/audio_reader.h"
#include "model/voice.h"
#include "model/voice_file.h"

struct qtts_voice {
    voice_data d;
    /* ICL: the codec stream primed with the reference frames, made at first
     * use and restored for every later utterance (guarded by mu). */
    pthread_mutex_t mu;
    codec_snapshot primed;
    float ref_last;
};

static qtts_voice *voice_alloc(void) {
    qtts_voice *v = calloc(1, sizeof *v);
    if (v) pthread_mutex_init(&v->mu, NULL);
    return v;
}

/* Prime s with a voice object's reference frames, from its cached primed
 * state when it was made for the same decoder. */
static qtts_status prime_cached(const qtts_voice *cv, codec_stream *s, float *ref_last, qtts_error *e) {
    qtts_voice *v = (qtts_voice *)cv; /* the cache is internal state: the voice stays logically immutable */
    pthread_mutex_lock(&v->mu);
    qtts_status st = QTTS_OK;
    const codec_decoder *dec = codec_stream_decoder(s);
    if (!v->primed.state && v->d.primed_state && v->d.primed_key == codec_decoder_state_key(dec)) {
        /* a saved voice's primed state, made by a decoder with the same key:
         * adopt it instead of decoding the reference frames again */
        v->primed.d = dec;
        v->primed.pos = v->d.primed_pos;
        v->primed.kv_len = v->d.primed_kv_len;
        v->primed.n = v->d.primed_n;
        v->primed.state = v->d.primed_state;
        v->ref_last = v->d.primed_ref_last;
        v->d.primed_state = NULL;
        v->d.primed_n = 0;
    }
    if (v->primed.state && v->primed.d == dec) {
        codec_stream_restore(s, &v->primed);
    } else {
        codec_stream_reset(s);
        st = codec_stream_prime(s, v->d.ref_codes, v->d.n_ref_frames, &v->ref_last, e);
        if (!st) st = codec_stream_save(s, &v->primed, e);
    }
    if (!st && ref_last) *ref_last = v->ref_last;
    pthread_mutex_unlock(&v->mu);
    return st;
}

qtts_status voice_resolve(const qtts_model *m, const qtts_gen_params *p, voice_spec *v, qtts_error *e) {
    memset(v, 0, sizeof *v);
    if (p->voice) {
        if (p->xvector || p->ref_codes)
            return err_set(e, QTTS_ERR_INVALID_ARG, "give a voice or its parts (x-vector, reference codes), not both");
        const voice_data *d = &p->voice->d;
        v->voice = p->voice;
        v->xvector = d->xvector;
        if (d->icl) {
            v->ref_codes = d->ref_codes;
            v->n_ref_frames = d->n_ref_frames;
            v->ref_text_ids = d->ref_text_ids;
            v->n_ref_text_ids = d->n_ref_text_ids;
        }
    } else {
        v->xvector = p->xvector;
        v->ref_codes = p->ref_codes;
        v->n_ref_frames = p->ref_codes ? p->n_ref_frames : 0;
        v->ref_text = p->ref_text;
        v->ref_text_ids = p->ref_text_ids;
        v->n_ref_text_ids = p->n_ref_text_ids;
    }
    const qtts_config *cfg = &m->cfg;
    if ((v->xvector || v->ref_codes) && cfg->type != QTTS_MODEL_BASE)
        return err_set(e, QTTS_ERR_INPUT, "voice cloning (x-vector / reference codes) needs a Base model; this is a %s model",
                       cfg->type == QTTS_MODEL_CUSTOM_VOICE ? "CustomVoice" : "VoiceDesign");
    if (v->ref_codes && (v->n_ref_frames <= 0 || (!v->ref_text && !v->ref_text_ids)))
        return err_set(e, QTTS_ERR_INPUT, "ICL voice cloning needs reference codes and the reference transcript");
    if (v->ref_codes && !v->xvector)
        return err_set(e, QTTS_ERR_INPUT, "ICL voice cloning also needs the reference x-vector");
    if (cfg->type == QTTS_MODEL_BASE && !v->xvector)
        return err_set(e, QTTS_ERR_INPUT,
                       "a Base model speaks in a cloned voice: give a reference recording (x-vector, optionally with "
                       "reference codes and transcript) or a saved voice");
    return QTTS_OK;
}

int voice_is_icl(const voice_spec *v) { return v->ref_codes && v->n_ref_frames > 0; }

qtts_status voice_prime(const voice_spec *v, codec_stream *s, float *ref_last, qtts_error *e) {
    if (ref_last) *ref_last = 0.0f;
    codec_stream_reset(s);
    if (!voice_is_icl(v)) return QTTS_OK;
    if (v->voice) return prime_cached(v->voice, s, ref_last, e);
    return codec_stream_prime(s, v->ref_codes, v->n_ref_frames, ref_last, e);
}

qtts_voice_params qtts_voice_default_params(void) {
    qtts_voice_params p;
    memset(&p, 0, sizeof p);
    p.max_ref_seconds = 60.0;
    return p;
}

static qtts_status fail(qtts_error *e, char *errbuf, size_t n) {
    if (errbuf && n) snprintf(errbuf, n, "%s", e->msg);
    return e->status;
}

static qtts_status need_base(const qtts_model *m, qtts_error *e) {
    if (m->cfg.type != QTTS_MODEL_BASE)
        return err_set(e, QTTS_ERR_INPUT, "voice cloning needs a Base model; this is a %s model",
                       m->cfg.type == QTTS_MODEL_CUSTOM_VOICE ? "CustomVoice (use --speaker)" :
                                                                "VoiceDesign (describe the voice with --instruct)");
    if (!m->spk_enc) return err_set(e, QTTS_ERR_MODEL, "%s: the checkpoint has no speaker encoder", m->dir);
    return QTTS_OK;
}

/* pcm is 24 kHz mono. */
static qtts_status make_voice(const qtts_model *m, const float *pcm, size_t n, const qtts_voice_params *p, qtts_voice **out,
                              qtts_error *e) {
    const int icl = !p->xvector_only;
    if (icl && !(p->ref_text && *p->ref_text) && !(p->ref_text_ids && p->n_ref_text_ids > 0))
        return err_set(e, QTTS_ERR_INPUT,
                       "in-context cloning needs the transcript of the reference recording (ref_text); "
                       "or ask for x-vector-only cloning");
    if (icl && !m->codec_enc)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "in-context cloning needs the codec encoder of speech_tokenizer/ (load the model with its codec)");
    qtts_voice *v = voice_alloc();
    if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    voice_data *d = &v->d;
    snprintf(d->model_type, sizeof d->model_type, "%.15s", m->cfg.type_name);
    snprintf(d->model_size, sizeof d->model_size, "%.15s", m->cfg.size_name);
    d->hidden_size = m->cfg.talker.hidden;
    d->n_codebooks = m->cfg.n_code_groups;
    d->codebook_size = m->cfg.cp.vocab;
    d->icl = icl;
    d->xvector_len = m->cfg.talker.hidden;
    d->xvector = malloc(sizeof(float) * d->xvector_len);
    qtts_status s = d->xvector ? QTTS_OK : err_set(e, QTTS_ERR_NOMEM, "out of memory");
    if (!s) s = speaker_encoder_embed(m->spk_enc, pcm, n, d->xvector, e);
    if (!s && icl) {
        s = codec_encoder_encode(m->codec_enc, pcm, n, &d->ref_codes, &d->n_ref_frames, e);
        if (!s && d->n_ref_frames < 1) s = err_set(e, QTTS_ERR_INPUT, "the reference recording is too short");
    }
    if (!s && icl) {
        if (p->ref_text_ids && p->n_ref_text_ids > 0) {
            d->ref_text_ids = malloc(sizeof(int32_t) * p->n_ref_text_ids);
            if (!d->ref_text_ids) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
            else {
                memcpy(d->ref_text_ids, p->ref_text_ids, sizeof(int32_t) * p->n_ref_text_ids);
                d->n_ref_text_ids = p->n_ref_text_ids;
            }
        } else {
            /* tokenize the whole template as the wrapper does, keep ids [3:-2] */
            int32_t *ids = NULL;
            int k = 0;
            s = model_tokenize_tpl(m, "<|im_start|>assistant\n", p->ref_text, "<|im_end|>\n", "the reference transcript",
                                   &ids, &k, e);
            if (!s && k < 6) s = err_set(e, QTTS_ERR_INPUT, "the reference transcript is empty");
            if (!s) {
                d->n_ref_text_ids = k - 5;
                d->ref_text_ids = malloc(sizeof(int32_t) * d->n_ref_text_ids);
                if (!d->ref_text_ids) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
                else memcpy(d->ref_text_ids, ids + 3, sizeof(int32_t) * d->n_ref_text_ids);
            }
            free(ids);
        }
        if (!s && p->ref_text && !(d->ref_text = strdup(p->ref_text))) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (!s && icl && m->codec) {
        /* prime the decoder once now, so that a saved voice carries the state */
        codec_stream *cs = NULL;
        s = codec_stream_new(m->codec, &cs, e);
        if (!s) {
            codec_stream_set_ops(cs, &m->ops);
            s = prime_cached(v, cs, NULL, e);
        }
        codec_stream_free(cs);
    }
    if (s) {
        qtts_voice_free(v);
        return s;
    }
    *out = v;
    return QTTS_OK;
}

static audio_read_params read_params(const qtts_voice_params *p) {
    audio_read_params rp = audio_read_default_params();
    if (p->max_ref_seconds > 0) rp.max_seconds = p->max_ref_seconds;
    return rp;
}

qtts_status qtts_voice_from_file(const qtts_model *m, const char *path, const qtts_voice_params *params, qtts_voice **out,
                                 char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!m || !path || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_voice_params p = params ? *params : qtts_voice_default_params();
    if (need_base(m, &e)) return fail(&e, errbuf, n);
    audio_read_params rp = read_params(&p);
    float *pcm = NULL;
    size_t ns = 0;
    if (audio_read_24k(path, &rp, &pcm, &ns, NULL, &e)) return fail(&e, errbuf, n);
    qtts_status s = make_voice(m, pcm, ns, &p, out, &e);
    free(pcm);
    if (s) err_prefix(&e, "%s: ", path);
    return s ? fail(&e, errbuf, n) : QTTS_OK;
}

qtts_status qtts_voice_from_memory(const qtts_model *m, const void *data, size_t size, const char *name,
                                   const qtts_voice_params *params, qtts_voice **out, char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!m || !data || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_voice_params p = params ? *params : qtts_voice_default_params();
    if (need_base(m, &e)) return fail(&e, errbuf, n);
    audio_read_params rp = read_params(&p);
    float *pcm = NULL;
    size_t ns = 0;
    if (audio_decode_24k_mem(data, size, name ? name : "upload", &rp, &pcm, &ns, NULL, &e)) return fail(&e, errbuf, n);
    qtts_status s = make_voice(m, pcm, ns, &p, out, &e);
    free(pcm);
    return s ? fail(&e, errbuf, n) : QTTS_OK;
}

qtts_status qtts_voice_from_pcm(const qtts_model *m, const float *pcm, size_t ns, int rate, const qtts_voice_params *params,
                                qtts_voice **out, char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!m || !pcm || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_voice_params p = params ? *params : qtts_voice_default_params();
    if (need_base(m, &e)) return fail(&e, errbuf, n);
    if (rate <= 0) {
        err_set(&e, QTTS_ERR_INVALID_ARG, "sample rate must be > 0 (got %d)", rate);
        return fail(&e, errbuf, n);
    }
    if ((double)ns / rate > (p.max_ref_seconds > 0 ? p.max_ref_seconds : 60.0)) {
        err_set(&e, QTTS_ERR_LIMIT, "the reference is %.1f s long; the limit is %.1f s: use a shorter clip",
                (double)ns / rate, p.max_ref_seconds > 0 ? p.max_ref_seconds : 60.0);
        return fail(&e, errbuf, n);
    }
    float *r = NULL;
    size_t nr = ns;
    qtts_status s = QTTS_OK;
    if (rate != 24000) {
        if ((s = audio_resample_24k(pcm, ns, rate, &r, &nr, &e))) return fail(&e, errbuf, n);
    }
    s = make_voice(m, r ? r : pcm, nr, &p, out, &e);
    free(r);
    return s ? fail(&e, errbuf, n) : QTTS_OK;
}

/* v's data as saved: with the primed decoder state it holds (made here or
 * loaded), keyed by the decoder that made it. Borrows v's arrays; call with
 * v->mu held. */
static voice_data save_view(const qtts_voice *v) {
    voice_data d = v->d;
    if (v->primed.state && v->primed.d) {
        d.primed_key = codec_decoder_state_key(v->primed.d);
        d.primed_ref_last = v->ref_last;
        d.primed_pos = v->primed.pos;
        d.primed_kv_len = v->primed.kv_len;
        d.primed_n = v->primed.n;
        d.primed_state = v->primed.state;
    }
    return d;
}

qtts_status qtts_voice_save(const qtts_voice *v, const char *path, char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!v || !path) return QTTS_ERR_INVALID_ARG;
    qtts_voice *mv = (qtts_voice *)v; /* the lock only */
    pthread_mutex_lock(&mv->mu);
    voice_data d = save_view(v);
    qtts_status s = voice_save(path, &d, &e);
    pthread_mutex_unlock(&mv->mu);
    return s ? fail(&e, errbuf, n) : QTTS_OK;
}

qtts_status qtts_voice_save_memory(const qtts_voice *v, unsigned char **data, size_t *size, char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!v || !data || !size) return QTTS_ERR_INVALID_ARG;
    qtts_voice *mv = (qtts_voice *)v;
    pthread_mutex_lock(&mv->mu);
    voice_data d = save_view(v);
    qtts_status s = voice_save_mem(&d, data, size, &e);
    pthread_mutex_unlock(&mv->mu);
    return s ? fail(&e, errbuf, n) : QTTS_OK;
}

static qtts_status check(const qtts_model *m, qtts_voice *v, qtts_error *e) {
    return voice_check_compatible(&v->d, m->cfg.type_name, m->cfg.size_name, m->cfg.talker.hidden,
                                  m->cfg.n_code_groups, m->cfg.cp.vocab, e);
}

qtts_status qtts_voice_load(const qtts_model *m, const char *path, qtts_voice **out, char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!m || !path || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_voice *v = voice_alloc();
    if (!v) return QTTS_ERR_NOMEM;
    qtts_status s = voice_load(path, &v->d, &e);
    if (!s && (s = check(m, v, &e))) err_prefix(&e, "%s: ", path);
    if (s) {
        qtts_voice_free(v);
        return fail(&e, errbuf, n);
    }
    *out = v;
    return QTTS_OK;
}

qtts_status qtts_voice_load_memory(const qtts_model *m, const void *data, size_t size, const char *name, qtts_voice **out,
                                   char *errbuf, size_t n) {
    qtts_error e;
    err_clear(&e);
    if (!m || !data || !out) return QTTS_ERR_INVALID_ARG;
    *out = NULL;
    qtts_voice *v = voice_alloc();
    if (!v) return QTTS_ERR_NOMEM;
    qtts_status s = voice_load_mem(data, size, name ? name : "voice", &v->d, &e);
    if (!s) s = check(m, v, &e);
    if (s) {
        qtts_voice_free(v);
        return fail(&e, errbuf, n);
    }
    *out = v;
    return QTTS_OK;
}

void qtts_voice_free(qtts_voice *v) {
    if (!v) return;
    codec_snapshot_free(&v->primed);
    pthread_mutex_destroy(&v->mu);
    voice_free(&v->d);
    free(v);
}

int qtts_voice_is_icl(const qtts_voice *v) { return v && v->d.icl; }
int qtts_voice_has_primed_state(const qtts_voice *v) {
    if (!v) return 0;
    qtts_voice *mv = (qtts_voice *)v; /* the lock only */
    pthread_mutex_lock(&mv->mu);
    int r = v->primed.state || v->d.primed_state;
    pthread_mutex_unlock(&mv->mu);
    return r;
}
int qtts_voice_n_ref_frames(const qtts_voice *v) { return v ? v->d.n_ref_frames : 0; }
const char *qtts_voice_ref_text(const qtts_voice *v) { return v && v->d.ref_text ? v->d.ref_text : ""; }
