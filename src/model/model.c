/* qtts_model: loading a checkpoint folder and describing it.
 * Dataflow: config.json + generation_config.json -> model.safetensors (mmap,
 * every tensor checked against the config) -> tokenizer (optional). */
#include "model/model.h"

#include "backend/cpu/quant.h"
#include "model/lm_vulkan.h"
#include "model/weights_cache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "util/clock.h"

qtts_model_params qtts_model_default_params(void) {
    qtts_model_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 1;
    p.weights = QTTS_WEIGHTS_NATIVE;
    p.predictor_weights = QTTS_WEIGHTS_DEFAULT;
    p.tokenizer_alt_regex = 0;
    p.load_codec = 1;
    p.huge_pages = 1;
    /* the environment picks the default backend, so every test and tool runs
     * unchanged on either; an unknown name is kept as -1 and refused by
     * qtts_model_load with the list of names */
    const char *b = getenv("QTTS_BACKEND");
    p.backend = b && *b ? (qtts_backend)qtts_backend_from_name(b) : QTTS_BACKEND_CPU;
    const char *d = getenv("QTTS_DEVICE");
    p.device = d && *d ? atoi(d) : 0;
    return p;
}

int qtts_cache_default_dir(char *buf, size_t n) {
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int k = x && *x ? snprintf(buf, n, "%s/qtts", x) : h && *h ? snprintf(buf, n, "%s/.cache/qtts", h) : -1;
    return k > 0 && (size_t)k < n ? 0 : -1;
}

typedef struct list_cb {
    void (*fn)(const char *, long long, void *);
    void *user;
} list_cb;

static void list_one(const char *path, int64_t bytes, void *u) {
    list_cb *c = u;
    if (c->fn) c->fn(path, (long long)bytes, c->user);
}

int qtts_cache_list(const char *cache_dir, const char *model_dir, void (*fn)(const char *, long long, void *),
                    void *user) {
    if (!cache_dir) return -1;
    list_cb c = {fn, user};
    struct stat sb;
    if (stat(cache_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return -1;
    return wcache_list(cache_dir, model_dir, list_one, &c);
}

int qtts_cache_clear(const char *cache_dir, const char *model_dir) {
    return cache_dir ? wcache_clear(cache_dir, model_dir) : -1;
}

void model_log(const qtts_model *m, qtts_log_level level, const char *fmt, ...) {
    if (!m || !m->params.log) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    m->params.log(level, buf, m->params.log_user);
}

static int file_exists(const char *dir, const char *name) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static qtts_status load_tokenizer(qtts_model *m, qtts_error *e) {
    const int has_vocab = file_exists(m->dir, "vocab.json"), has_merges = file_exists(m->dir, "merges.txt");
    if (!has_vocab || !has_merges) {
        snprintf(m->tok_missing, sizeof m->tok_missing,
                 "%s has no %s%s%s: text input needs the Qwen tokenizer files; copy vocab.json, merges.txt and "
                 "tokenizer_config.json from the official checkpoint into it, or pass already-tokenized ids",
                 m->dir, has_vocab ? "" : "vocab.json", !has_vocab && !has_merges ? " or " : "",
                 has_merges ? "" : "merges.txt");
        model_log(m, QTTS_LOG_INFO, "%s", m->tok_missing);
        m->newline_id = 198;
        return QTTS_OK;
    }
    qtts_status s = tok_load(&m->tok, m->dir, m->params.tokenizer_alt_regex, e);
    if (s) return s;
    int32_t *ids = NULL;
    int n = 0;
    s = tok_encode(m->tok, "\n", 1, &ids, &n, e);
    if (s) return s;
    m->newline_id = n == 1 ? ids[0] : 198;
    free(ids);
    return QTTS_OK;
}

static int64_t mat_bytes(const qt_mat *w) {
    if (!qt_is_quant(w)) return (int64_t)w->rows * w->cols * (int64_t)dtype_size(w->dtype);
    const int64_t nb = qt_kpad(w->cols) / 32;
    const int64_t per_block = (w->dtype == DT_I8 ? 32 : 16) + 2 + (w->mins ? 2 : 0);
    return (int64_t)w->rows * nb * per_block;
}

static const char *format_name(qtts_weight_type t) {
    return t == QTTS_WEIGHTS_Q8 ? "q8" : t == QTTS_WEIGHTS_Q4 ? "q4" : "native";
}

/* Put a per-frame matrix that points into the mmap in its in-memory format t
 * (quantised, or as stored), in the huge-page arena when there is one, then
 * let the kernel drop the source pages from this process (they were only
 * read to copy or quantise), so resident memory holds each matrix once. */
static qtts_status quantize_mat(qtts_model *m, qt_mat *w, qtts_weight_type t, wcache_writer *wr, qtts_error *e) {
    if (t == QTTS_WEIGHTS_NATIVE) {
        if (wr) wcache_put(wr, w);
        /* as stored: a copy in the arena if there is one, the file's pages dropped
         * (read in place, generation measured 12-26 % more CPU per frame on 0.6B
         * BF16: the page cache is not reliably in 2 MiB folios) */
        const size_t nb = (size_t)w->rows * w->cols * dtype_size(w->dtype);
        void *p = huge_arena_copy(&m->weights_arena, w->data, nb);
        if (p) {
            st_release(&m->st, w->data, nb);
            w->data = p;
        }
        return QTTS_OK;
    }
    qt_mat q;
    memset(&q, 0, sizeof q);
    qtts_status s = qmat_quantize(w, t == QTTS_WEIGHTS_Q8 ? QT_Q8_B32 : QT_Q4M_B32, &q, e);
    if (s) return s;
    st_release(&m->st, w->data, (size_t)w->rows * w->cols * dtype_size(w->dtype));
    /* regrouped by 16 rows where the kernels have a fast path for it */
    if (m->params.backend == QTTS_BACKEND_CPU && m->ops.k->prefer_x16 &&
        (s = qmat_pack_x16(&q, m->ops.k->x16_q8_signed, e))) {
        qmat_free(&q);
        return s;
    }
    if (wr) wcache_put(wr, &q);
    (void)qmat_move_to_arena(&q, &m->weights_arena); /* no arena or no room: q keeps its buffer */
    *w = q;
    return QTTS_OK;
}

/* An upper bound of the arena bytes of w in format t: as stored, or quantised. */
static size_t arena_bytes_max(const qt_mat *w, qtts_weight_type t) {
    if (t == QTTS_WEIGHTS_NATIVE) return (size_t)w->rows * w->cols * dtype_size(w->dtype) + 64;
    return qmat_quant_bytes_max(w->rows, w->cols);
}

/* The per-frame matrices in load order, with the format each is kept in
 * (talker layers + codec_head; predictor layers, heads and projection).
 * Returns the count (at most cap). */
static int frame_mats(qtts_model *m, qtts_weight_type tt, qtts_weight_type pt, qt_mat **ms, qtts_weight_type *ts,
                      int cap) {
    int n = 0;
    tf_weights *tws[2] = {&m->talker.tf, &m->cp.tf};
    for (int k = 0; k < 2; k++) {
        for (int l = 0; l < tws[k]->cfg.n_layers; l++) {
            tf_layer *L = &tws[k]->layers[l];
            qt_mat *lm[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
            for (int i = 0; i < 7; i++)
                if (n < cap) ms[n] = lm[i], ts[n++] = k ? pt : tt;
        }
        if (k == 0 && n < cap) ms[n] = &m->talker.codec_head, ts[n++] = tt;
    }
    for (int g = 0; g < m->cp.n_groups; g++)
        if (n < cap) ms[n] = &m->cp.head[g], ts[n++] = pt;
    if (m->cp.has_proj && n < cap) ms[n] = &m->cp.proj, ts[n++] = pt;
    return n;
}

/* Point the matrices into a valid cache file: 1 on success (quantised ones
 * mapped, stored ones handled as usual); 0 when the file is missing or not
 * fit (why says why; nothing changed). */
static int use_cache(qtts_model *m, const char *path, uint64_t key, qt_mat **ms, qtts_weight_type *ts, int n,
                     char *why, size_t why_cap, qtts_error *e, qtts_status *st) {
    if (wcache_open(path, key, n, &m->wcache, why, why_cap)) return 0;
    for (int i = 0; i < n; i++) {
        qt_mat t = *ms[i];
        int r = wcache_get(&m->wcache, i, &t);
        if (r < 0 || (r == 1) != (ts[i] == QTTS_WEIGHTS_NATIVE)) {
            snprintf(why, why_cap, "cache file %s does not fit this checkpoint (matrix %d)", path, i);
            wcache_close(&m->wcache);
            return 0;
        }
    }
    *st = QTTS_OK;
    for (int i = 0; i < n && !*st; i++) {
        if (ts[i] == QTTS_WEIGHTS_NATIVE) {
            *st = quantize_mat(m, ms[i], QTTS_WEIGHTS_NATIVE, NULL, e);
        } else {
            const size_t nb = (size_t)ms[i]->rows * ms[i]->cols * dtype_size(ms[i]->dtype);
            const void *src = ms[i]->data;
            (void)wcache_get(&m->wcache, i, ms[i]);
            st_release(&m->st, src, nb); /* the checkpoint's pages of it are not needed */
        }
    }
    return 1;
}

/* Quantise the per-frame matrices as the params ask, or map them from the
 * prepared-weights cache (params.cache_dir, CPU backend, a quantised format). */
static qtts_status quantize_model(qtts_model *m, qtts_error *e) {
    const qtts_weight_type tt = m->params.weights;
    const qtts_weight_type pt = m->params.predictor_weights == QTTS_WEIGHTS_DEFAULT ? tt : m->params.predictor_weights;
    if ((tt < QTTS_WEIGHTS_NATIVE || tt > QTTS_WEIGHTS_Q4) || (pt < QTTS_WEIGHTS_NATIVE || pt > QTTS_WEIGHTS_Q4))
        return err_set(e, QTTS_ERR_INVALID_ARG, "unknown weight type (talker %d, predictor %d)", (int)tt, (int)pt);
    m->talker_format = format_name(tt);
    m->predictor_format = format_name(pt);
    const int cap = 2 * 7 * (m->talker.tf.cfg.n_layers + m->cp.tf.cfg.n_layers) + m->cp.n_groups + 4;
    qt_mat **ms = malloc(sizeof *ms * (size_t)cap);
    qtts_weight_type *ts = malloc(sizeof *ts * (size_t)cap);
    if (!ms || !ts) {
        free(ms), free(ts);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    const int n = frame_mats(m, tt, pt, ms, ts, cap);
    /* the cache: CPU backend, something to prepare */
    const int cached = m->params.cache_dir && *m->params.cache_dir && m->params.backend == QTTS_BACKEND_CPU &&
                       (tt != QTTS_WEIGHTS_NATIVE || pt != QTTS_WEIGHTS_NATIVE);
    snprintf(m->cache_status, sizeof m->cache_status, "%s",
             !m->params.cache_dir || !*m->params.cache_dir ? "off"
             : m->params.backend != QTTS_BACKEND_CPU   ? "off (not used by the Vulkan backend)"
                                                       : "off (native weights: nothing to prepare)");
    uint64_t key = 0;
    wcache_writer wr, *wrp = NULL;
    if (cached) {
        key = wcache_key(&m->st, m->talker_format, m->predictor_format, m->ops.k);
        if (wcache_path(m->params.cache_dir, m->dir, m->talker_format, m->predictor_format, m->ops.k->name,
                        m->cache_path, sizeof m->cache_path)) {
            snprintf(m->cache_status, sizeof m->cache_status, "off (cannot name a cache file in %s)",
                     m->params.cache_dir);
        } else {
            char why[4600];
            qtts_status st = QTTS_OK;
            /* native matrices in a mixed-format cache still go to the arena */
            if (m->params.huge_pages) {
                size_t reserve = 0;
                for (int i = 0; i < n; i++)
                    if (ts[i] == QTTS_WEIGHTS_NATIVE) reserve += arena_bytes_max(ms[i], ts[i]);
                if (reserve) (void)huge_arena_reserve(&m->weights_arena, reserve);
            }
            if (use_cache(m, m->cache_path, key, ms, ts, n, why, sizeof why, e, &st)) {
                snprintf(m->cache_status, sizeof m->cache_status, "mapped %s", m->cache_path);
                /* read in place, like the checkpoint: 2 MiB page-cache folios mapped whole */
                if (m->params.huge_pages) huge_advise(m->wcache.map, m->wcache.len);
                huge_arena_trim(&m->weights_arena);
                free(ms), free(ts);
                return st;
            }
            huge_arena_release(&m->weights_arena);
            model_log(m, QTTS_LOG_INFO, "prepared-weights cache: %s; preparing the weights", why);
            if (wcache_begin(&wr, m->cache_path, key, n) == 0) wrp = &wr;
            else
                model_log(m, QTTS_LOG_WARN, "prepared-weights cache: cannot write in %s", m->params.cache_dir);
        }
    }
    /* one huge-page arena for the per-frame matrices (virtual until used;
     * without it quantised matrices keep their own buffers and stored ones
     * stay in the file mapping) */
    if (m->params.huge_pages && m->params.backend == QTTS_BACKEND_CPU) {
        size_t reserve = 0;
        for (int i = 0; i < n; i++) reserve += arena_bytes_max(ms[i], ts[i]);
        (void)huge_arena_reserve(&m->weights_arena, reserve);
    }
    qtts_status s = QTTS_OK;
    for (int i = 0; i < n && !s; i++) s = quantize_mat(m, ms[i], ts[i], wrp, e);
    huge_arena_trim(&m->weights_arena);
    if (wrp) {
        if (s) wcache_abort(wrp);
        else if (wcache_commit(wrp) == 0) snprintf(m->cache_status, sizeof m->cache_status, "written %s", m->cache_path);
        else snprintf(m->cache_status, sizeof m->cache_status, "not written (%s)", m->cache_path);
    }
    free(ms), free(ts);
    return s;
}

static void free_quantized(qtts_model *m) {
    tf_weights *tws[2] = {&m->talker.tf, &m->cp.tf};
    for (int k = 0; k < 2; k++)
        for (int l = 0; tws[k]->layers && l < tws[k]->cfg.n_layers; l++) {
            tf_layer *L = &tws[k]->layers[l];
            qt_mat *ms[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
            for (int i = 0; i < 7; i++)
                if (qt_is_quant(ms[i])) qmat_free(ms[i]);
        }
    if (qt_is_quant(&m->talker.codec_head)) qmat_free(&m->talker.codec_head);
    for (int g = 0; m->cp.head && g < m->cp.n_groups; g++)
        if (qt_is_quant(&m->cp.head[g])) qmat_free(&m->cp.head[g]);
    if (qt_is_quant(&m->cp.proj)) qmat_free(&m->cp.proj);
}

static int64_t layers_bytes(const tf_weights *w) {
    int64_t b = 0;
    for (int l = 0; l < w->cfg.n_layers; l++) {
        const tf_layer *L = &w->layers[l];
        b += mat_bytes(&L->wq) + mat_bytes(&L->wk) + mat_bytes(&L->wv) + mat_bytes(&L->wo) + mat_bytes(&L->wgate) +
             mat_bytes(&L->wup) + mat_bytes(&L->wdown);
    }
    return b;
}

/* Weight bytes read per frame: the talker once (layers + codec_head); the
 * code predictor's layers 15 times (1 two-row prefill + 14 steps), each head
 * once and the projection for all 16 inputs. */
static void count_frame_bytes(qtts_model *m) {
    m->talker_bytes = layers_bytes(&m->talker.tf) + mat_bytes(&m->talker.codec_head);
    int64_t heads = 0;
    for (int g = 0; g < m->cp.n_groups; g++) heads += mat_bytes(&m->cp.head[g]);
    m->predictor_bytes = (int64_t)m->cp.n_groups * layers_bytes(&m->cp.tf) + heads +
                         (m->cp.has_proj ? (int64_t)(m->cp.n_groups + 1) * mat_bytes(&m->cp.proj) : 0);
    /* each matrix once, plus the tables and the text projection that every
     * utterance reads (not text_embedding: only its prompt rows are read) */
    int64_t embeds = 0;
    for (int g = 0; g < m->cp.n_groups; g++) embeds += mat_bytes(&m->cp.embed[g]);
    m->lm_bytes_in_use = m->talker_bytes + mat_bytes(&m->talker.codec_embedding) + mat_bytes(&m->talker.fc1) +
                         mat_bytes(&m->talker.fc2) + layers_bytes(&m->cp.tf) + heads + embeds +
                         (m->cp.has_proj ? mat_bytes(&m->cp.proj) : 0);
}

/* On a GPU backend the host needs none of the per-frame matrices after the
 * upload: quantised copies are freed (shapes kept for the byte counts) and
 * the file pages of stored ones dropped. */
static void release_mat(qtts_model *m, qt_mat *w) {
    if (qt_is_quant(w)) {
        free(w->owned);
        w->owned = NULL;
        w->data = NULL;
        w->scales = w->mins = NULL;
    } else if (w->data) {
        st_release(&m->st, w->data, (size_t)w->rows * w->cols * dtype_size(w->dtype));
    }
}

static void release_frame_mats(qtts_model *m) {
    tf_weights *tws[2] = {&m->talker.tf, &m->cp.tf};
    for (int k = 0; k < 2; k++)
        for (int l = 0; l < tws[k]->cfg.n_layers; l++) {
            tf_layer *L = &tws[k]->layers[l];
            qt_mat *ms[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
            for (int i = 0; i < 7; i++) release_mat(m, ms[i]);
        }
    release_mat(m, &m->talker.codec_head);
    for (int g = 0; g < m->cp.n_groups; g++) release_mat(m, &m->cp.head[g]);
    if (m->cp.has_proj) release_mat(m, &m->cp.proj);
}

static void count_weights(qtts_model *m) {
    int64_t bf16 = 0, f32 = 0, f16 = 0;
    for (int i = 0; i < m->st.n_tensors; i++) {
        const st_tensor *t = &m->st.tensors[i];
        m->n_params += t->n_elems;
        m->weight_bytes += (int64_t)t->nbytes;
        if (t->dtype == DT_BF16) bf16 += t->n_elems;
        else if (t->dtype == DT_F32) f32 += t->n_elems;
        else if (t->dtype == DT_F16) f16 += t->n_elems;
    }
    m->weight_dtype = bf16 >= f32 && bf16 >= f16 ? "BF16" : f32 >= f16 ? "F32" : "F16";
}

qtts_status qtts_model_load(qtts_model **out, const char *dir, const qtts_model_params *params, char *errbuf,
                            size_t errbuf_size) {
    qtts_error e;
    err_clear(&e);
    if (out) *out = NULL;
    if (errbuf && errbuf_size) errbuf[0] = 0;
    qtts_status s = QTTS_OK;
    qtts_model *m = NULL;
    const double t0 = now_ms();
    if (!out || !dir) {
        s = err_set(&e, QTTS_ERR_INVALID_ARG, "qtts_model_load: out and dir must not be NULL");
        goto fail;
    }
    m = calloc(1, sizeof *m);
    if (!m || !(m->dir = strdup(dir))) {
        s = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    m->params = params ? *params : qtts_model_default_params();
    if (m->params.n_threads < 1) {
        s = err_set(&e, QTTS_ERR_INVALID_ARG, "n_threads must be >= 1 (got %d)", m->params.n_threads);
        goto fail;
    }
    unsigned q8p, i16p, hp;
    if (codec_decoder_format_parts(m->params.codec_weights, &q8p, &i16p, &hp)) {
        s = err_set(&e, QTTS_ERR_INVALID_ARG, "codec_weights %d is not a codec decoder format (f32, bf16, q8, q8bf16)",
                    (int)m->params.codec_weights);
        goto fail;
    }
    if ((int)m->params.backend != QTTS_BACKEND_CPU && (int)m->params.backend != QTTS_BACKEND_VULKAN) {
        s = err_set(&e, QTTS_ERR_INVALID_ARG,
                    "unknown backend (QTTS_BACKEND or qtts_model_params.backend): choose cpu or vulkan");
        goto fail;
    }
    if (m->params.device < 0) {
        s = err_set(&e, QTTS_ERR_INVALID_ARG, "device must be >= 0 (got %d)", m->params.device);
        goto fail;
    }
    ops_init(&m->ops, m->params.n_threads, 0);
    if ((s = config_load(&m->cfg, dir, &e))) goto fail;
    if ((s = gen_config_load(&m->gen, dir, &e))) goto fail;
    if ((s = st_open(&m->st, dir, &e))) goto fail;
    if (m->params.huge_pages && m->params.backend == QTTS_BACKEND_CPU) st_advise_huge(&m->st);
    if ((s = talker_load(&m->talker, &m->st, &m->cfg, &e)) || (s = cp_load(&m->cp, &m->st, &m->cfg, &e))) {
        err_prefix(&e, "%s: ", dir);
        goto fail;
    }
    const double tq = now_ms();
    if ((s = quantize_model(m, &e))) goto fail;
    m->prepare_ms = now_ms() - tq;
#if defined(__GLIBC__)
    /* quantising frees a row-major copy per matrix; give those heap holes back to
     * the system (measured on 1.7B int8: 2.7 GB peak RSS -> 2.2 GB for 2.1 GB of weights) */
    if (m->params.weights != QTTS_WEIGHTS_NATIVE || m->params.predictor_weights > QTTS_WEIGHTS_NATIVE) malloc_trim(0);
#endif
    if ((s = load_tokenizer(m, &e))) goto fail;
    if (m->params.load_codec) {
        char sdir[4096];
        snprintf(sdir, sizeof sdir, "%s/speech_tokenizer", dir);
        /* the packed transposed convs in the prepared-weights cache too (any format or backend) */
        char cpath[4096] = "", cstat[4200];
        if (m->params.cache_dir && *m->params.cache_dir &&
            wcache_path(m->params.cache_dir, dir, "codec", "tconv", "f32", cpath, sizeof cpath))
            cpath[0] = 0;
        if ((s = codec_decoder_load_cached(&m->codec, sdir, m->params.huge_pages, cpath[0] ? cpath : NULL, cstat,
                                           sizeof cstat, &e)))
            goto fail;
        model_log(m, QTTS_LOG_INFO, "codec decoder prepared-weights cache: %s", cstat);
        if ((s = codec_decoder_set_forms(m->codec, q8p, i16p, hp, &e))) goto fail;
        /* the decoder runs beside generation (its own worker thread): half the threads, at least one;
         * measured on 2 cores: 2 decoder threads competing with generation were slower than 1 */
        codec_decoder_set_threads(m->codec, m->params.n_threads / 2 > 1 ? m->params.n_threads / 2 : 1);
        if (m->cfg.type == QTTS_MODEL_BASE && (s = codec_encoder_load(&m->codec_enc, sdir, &e))) goto fail;
        if (m->codec_enc) codec_encoder_set_threads(m->codec_enc, m->params.n_threads);
    }
    if (m->cfg.type == QTTS_MODEL_BASE) {
        char cfile[4096];
        snprintf(cfile, sizeof cfile, "%s/config.json", dir);
        speaker_encoder_config sc = speaker_encoder_default_config(m->cfg.talker.hidden);
        if ((s = speaker_encoder_config_from_file(&sc, cfile, &e)) ||
            (s = speaker_encoder_load_config(&m->spk_enc, &m->st, &sc, m->params.n_threads, &e))) {
            err_prefix(&e, "%s: speaker encoder: ", dir);
            goto fail;
        }
        if (sc.enc_dim != m->cfg.talker.hidden) {
            s = err_set(&e, QTTS_ERR_MODEL, "%s: speaker_encoder_config.enc_dim %d differs from the talker width %d", cfile,
                        sc.enc_dim, m->cfg.talker.hidden);
            goto fail;
        }
    }
    count_weights(m);
    count_frame_bytes(m);
    if (m->params.backend == QTTS_BACKEND_VULKAN) {
        if ((s = lmv_create(&m->lmv, m, m->params.device, &e))) {
            err_prefix(&e, "Vulkan backend: ");
            goto fail;
        }
        release_frame_mats(m);
        /* the codec decoder on the same device */
        if (m->codec && (s = codec_decoder_use_vulkan(m->codec, lmv_vk_dev(m->lmv), &e))) {
            err_prefix(&e, "Vulkan backend, codec decoder: ");
            goto fail;
        }
    }
    m->lang_list[m->n_lang_list++] = "auto";
    for (int i = 0; i < m->cfg.n_langs; i++)
        if (!strstr(m->cfg.langs[i].name, "dialect")) m->lang_list[m->n_lang_list++] = m->cfg.langs[i].name;
    model_log(m, QTTS_LOG_INFO, "loaded %s (%s, %s): %lld parameters, %s, kernels %s", dir, m->cfg.type_name,
              m->cfg.size_name, (long long)m->n_params, m->weight_dtype, m->ops.k->name);
    m->load_ms = now_ms() - t0;
    *out = m;
    return QTTS_OK;
fail:
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", e.msg);
    qtts_model_free(m);
    return s;
}

void qtts_model_free(qtts_model *m) {
    if (!m) return;
    if (m->codec) codec_decoder_use_vulkan(m->codec, NULL, NULL); /* before its device goes */
    lmv_free(m->lmv);
    free_quantized(m);
    wcache_close(&m->wcache);
    talker_free(&m->talker);
    cp_free(&m->cp);
    tok_free(m->tok);
    codec_decoder_free(m->codec);
    codec_encoder_free(m->codec_enc);
    speaker_encoder_free(m->spk_enc);
    st_close(&m->st);
    huge_arena_release(&m->weights_arena);
    ops_free(&m->ops);
    free(m->dir);
    free(m);
}

void qtts_model_get_info(const qtts_model *m, qtts_model_info *info) {
    memset(info, 0, sizeof *info);
    info->type = m->cfg.type;
    info->type_name = m->cfg.type_name;
    info->size_name = m->cfg.size_name;
    info->hidden_size = m->cfg.talker.hidden;
    info->n_layers = m->cfg.talker.n_layers;
    info->cp_hidden_size = m->cfg.cp.hidden;
    info->cp_n_layers = m->cfg.cp.n_layers;
    info->n_code_groups = m->cfg.n_code_groups;
    info->codebook_size = m->cfg.cp.vocab;
    info->sample_rate_hz = 24000;
    info->samples_per_frame = 1920;
    info->has_tokenizer = m->tok != NULL;
    info->has_codec = m->codec != NULL;
    info->has_speaker_encoder = m->spk_enc != NULL;
    info->talker_bytes = m->talker_bytes;
    info->predictor_bytes = m->predictor_bytes;
    info->codec_bytes = m->codec ? codec_decoder_weight_bytes(m->codec) : 0;
    info->weight_bytes_in_use = m->lm_bytes_in_use + info->codec_bytes;
    info->kernels = m->ops.k->name;
    info->n_threads = m->ops.n_threads;
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    info->weight_dtype = m->weight_dtype;
    info->talker_format = m->talker_format ? m->talker_format : "native";
    info->predictor_format = m->predictor_format ? m->predictor_format : "native";
    info->weights_cache = m->cache_status[0] ? m->cache_status : "off";
    info->load_ms = m->load_ms;
    info->prepare_ms = m->prepare_ms;
    info->backend = m->params.backend;
    info->device_name = "cpu";
    info->device_driver = "";
    if (m->lmv) {
        const qtts_device_info *d = lmv_device(m->lmv);
        info->device_name = d->name;
        info->device_driver = d->driver;
        info->device_bytes_allocated = lmv_bytes_allocated(m->lmv);
        info->device_bytes_reserved = lmv_bytes_reserved(m->lmv);
    }
}

int qtts_model_n_speakers(const qtts_model *m) { return m->cfg.n_speakers; }
const char *qtts_model_speaker(const qtts_model *m, int i) {
    return i >= 0 && i < m->cfg.n_speakers ? m->cfg.speakers[i].name : NULL;
}
const char *qtts_model_speaker_dialect(const qtts_model *m, int i) {
    return i >= 0 && i < m->cfg.n_speakers && m->cfg.speakers[i].dialect[0] ? m->cfg.speakers[i].dialect : NULL;
}
int qtts_model_n_languages(const qtts_model *m) { return m->n_lang_list; }
const char *qtts_model_language(const qtts_model *m, int i) {
    return i >= 0 && i < m->n_lang_list ? m->lang_list[i] : NULL;
}
qtts_status model_tokenize(const qtts_model *m, const char *text, int32_t **ids, int *n, qtts_error *e) {
    if (!m->tok) return err_set(e, QTTS_ERR_UNSUPPORTED, "%s", m->tok_missing);
    return tok_encode(m->tok, text, strlen(text), ids, n, e);
}

qtts_status model_tokenize_tpl(const qtts_model *m, const char *pre, const char *text, const char *post,
                               const char *what, int32_t **ids, int *n, qtts_error *e) {
    if (!m->tok) return err_set(e, QTTS_ERR_UNSUPPORTED, "%s", m->tok_missing);
    qtts_status st = tok_check_utf8(text, strlen(text), what, e);
    if (st) return st;
    size_t len = strlen(pre) + strlen(text) + strlen(post) + 1;
    char *s = malloc(len);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    snprintf(s, len, "%s%s%s", pre, text, post);
    st = model_tokenize(m, s, ids, n, e);
    free(s);
    return st;
}

qtts_status qtts_tokenize(const qtts_model *m, const char *text, int32_t **ids, int *n_ids, char *errbuf,
                          size_t errbuf_size) {
    qtts_error e;
    err_clear(&e);
    qtts_status s = !m || !text || !ids || !n_ids
                        ? err_set(&e, QTTS_ERR_INVALID_ARG, "qtts_tokenize: NULL model, text or output")
                        : model_tokenize(m, text, ids, n_ids, &e);
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", s ? e.msg : "");
    return s;
}
