/* One measured synthesis: qtts_synthesize on one case with one
 * configuration, timed from the caller's side (wall clock around the call,
 * a timestamp per PCM chunk in the audio callback) and from the library's
 * side (qtts_context_get_stats: per-phase times). The decode placement picks
 * qtts_audio_params.overlap (inline 0, worker 1: a decode thread that parks
 * one of the model's workers while it decodes), or with none calls
 * qtts_generate_codes with the same generation parameters and makes no audio.
 * Dataflow: case + config -> qtts_gen_params / qtts_audio_params -> chunk
 * timestamps + stats -> run_metrics (RTF, TTFA, cadence, underruns, phases,
 * GPU phases on a GPU backend, RSS, GB/s, MHz). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *const decode_names[] = {"inline", "worker", "none"};

int bench_parse_decode(const char *s, bench_decode *d) {
    for (int i = 0; i < (int)(sizeof decode_names / sizeof decode_names[0]); i++)
        if (strcmp(s, decode_names[i]) == 0) {
            *d = (bench_decode)i;
            return 0;
        }
    return -1;
}

int bench_parse_backend(const char *opt, const char *v, bench_backend *b) {
    if (strcmp(opt, "--backend") == 0) {
        const int k = v ? qtts_backend_from_name(v) : -1;
        if (k < 0) {
            fprintf(stderr, "qtts-bench: --backend takes cpu or vulkan (got '%s')\n", v ? v : "");
            return -1;
        }
        b->have_backend = 1;
        b->backend = (qtts_backend)k;
        return 0;
    }
    char *end = NULL;
    const long d = v ? strtol(v, &end, 10) : -1;
    if (!v || !*v || *end || d < 0 || d > 1023) {
        fprintf(stderr, "qtts-bench: --device takes a device index N >= 0, as qtts info --backend lists them "
                        "(got '%s')\n", v ? v : "");
        return -1;
    }
    b->have_device = 1;
    b->device = (int)d;
    return 0;
}

void bench_apply_backend(const bench_backend *b, qtts_model_params *mp) {
    if (b->have_backend) mp->backend = b->backend;
    if (b->have_device) mp->device = b->device;
}

const char *bench_decode_name(bench_decode d) {
    return d >= 0 && d < (int)(sizeof decode_names / sizeof decode_names[0]) ? decode_names[d] : "?";
}

typedef struct chunk_log {
    double t0;
    pthread_t caller;             /* the thread that called qtts_synthesize */
    int off_thread;               /* chunks delivered on another thread */
    double t[RUN_MAX_CHUNKS];     /* arrival, ms since the call */
    size_t n[RUN_MAX_CHUNKS];     /* samples */
    int count;
    int overflow;
    float *pcm;
    size_t n_pcm, cap_pcm;
    int keep;
    int32_t *codes;
    int n_codes, cap_codes;
    int keep_codes;
    double sumsq, peak;      /* over every delivered sample */
    long nonfinite;
} chunk_log;

static int on_audio(const float *pcm, size_t n, void *user) {
    chunk_log *l = user;
    const double t = tool_now_ms() - l->t0;
    if (!pthread_equal(pthread_self(), l->caller)) l->off_thread++;
    if (l->count < RUN_MAX_CHUNKS) {
        l->t[l->count] = t;
        l->n[l->count] = n;
        l->count++;
    } else {
        l->overflow = 1;
    }
    for (size_t i = 0; i < n; i++) {
        const double v = pcm[i];
        if (!isfinite(v)) {
            l->nonfinite++;
            continue;
        }
        l->sumsq += v * v;
        if (fabs(v) > l->peak) l->peak = fabs(v);
    }
    if (l->keep) {
        if (l->n_pcm + n > l->cap_pcm) {
            size_t cap = l->cap_pcm ? l->cap_pcm * 2 : 1 << 16;
            while (cap < l->n_pcm + n) cap *= 2;
            float *p = realloc(l->pcm, cap * sizeof(float));
            if (!p) return 1;
            l->pcm = p;
            l->cap_pcm = cap;
        }
        memcpy(l->pcm + l->n_pcm, pcm, n * sizeof(float));
        l->n_pcm += n;
    }
    return 0;
}

static int on_frame(const int32_t *codes, int frame_index, void *user) {
    chunk_log *l = user;
    if (!l->keep_codes) return 0;
    if (l->n_codes == l->cap_codes) {
        int cap = l->cap_codes ? l->cap_codes * 2 : 256;
        int32_t *c = realloc(l->codes, sizeof(int32_t) * 16 * (size_t)cap);
        if (!c) return 1;
        l->codes = c;
        l->cap_codes = cap;
    }
    memcpy(l->codes + (size_t)l->n_codes * 16, codes, sizeof(int32_t) * 16);
    l->n_codes++;
    (void)frame_index;
    return 0;
}

void bench_gen_params(qtts_model *model, const bench_config *cfg, const run_request *rq, qtts_gen_params *gp,
                      qtts_gen_debug *dbg) {
    qtts_model_info info;
    qtts_model_get_info(model, &info);
    *gp = qtts_gen_default_params(model);
    gp->text = rq->c->text;
    gp->language = rq->c->language;
    gp->text_mode = cfg->mode;
    gp->seed = rq->seed;
    if (rq->greedy) gp->talker.do_sample = 0, gp->predictor.do_sample = 0;
    *dbg = qtts_gen_debug_default_params();
    dbg->force_frames = rq->frames;
    dbg->teacher_codes = rq->teacher;
    dbg->n_teacher_frames = rq->n_teacher;
    gp->debug = dbg;
    if (info.type == QTTS_MODEL_CUSTOM_VOICE) {
        gp->speaker = strcmp(rq->c->language, "chinese") == 0 ? "vivian"
                      : strcmp(rq->c->language, "japanese") == 0 ? "ono_anna"
                                                                  : "ryan";
    } else if (info.type == QTTS_MODEL_VOICE_DESIGN) {
        gp->instruct = "A calm middle-aged voice, speaking clearly at a moderate pace.";
    } else {
        gp->voice = rq->voice;
    }
}

void run_set_probe(run_metrics *m, double probe_gbps) {
    m->probe_gbps = probe_gbps > 0 ? probe_gbps : NAN;
    m->roofline = probe_gbps > 0 ? m->gbps / probe_gbps : NAN;
}

int bench_run_once(qtts_model *model, const bench_config *cfg, const run_request *rq, double bw_gbps,
                   run_output *out) {
    memset(out, 0, sizeof *out);
    run_metrics *m = &out->m;
    qtts_model_info info;
    qtts_model_get_info(model, &info);
    qtts_context *ctx = NULL;
    qtts_context_params cp = qtts_context_default_params();
    if (rq->frames > 0) cp.n_ctx = rq->frames + 2048; /* prompt + frames: KV cache sized to the run */
    char why[sizeof out->err - sizeof "context: " + 1];
    qtts_status st = qtts_context_new(model, &cp, &ctx, why, sizeof why);
    if (st) {
        snprintf(out->err, sizeof out->err, "context: %s", why);
        m->status = st;
        return -1;
    }
    qtts_gen_params gp;
    qtts_gen_debug dbg;
    bench_gen_params(model, cfg, rq, &gp, &dbg);
    qtts_audio_params ap = qtts_audio_default_params();
    ap.first_chunk_frames = cfg->first_chunk;
    ap.chunk_frames = cfg->chunk;
    ap.overlap = cfg->decode == BENCH_DECODE_WORKER;
    ap.split.enabled = 0; /* one segment: the forced frame count is the whole utterance */
    ap.on_frame = on_frame;
    chunk_log *log = calloc(1, sizeof *log);
    if (!log) {
        qtts_context_free(ctx);
        return -1;
    }
    log->keep = rq->keep_audio;
    log->keep_codes = rq->keep_codes;
    ap.frame_user = log;
    log->caller = pthread_self();
    const int no_audio = cfg->decode == BENCH_DECODE_NONE;
    int n_gen = 0;
    rss_reset_peak();
    mhz_sampler *mz = mhz_start(100);
    log->t0 = tool_now_ms();
    if (no_audio) st = qtts_generate_codes(ctx, &gp, on_frame, log, NULL, &n_gen);
    else st = qtts_synthesize(ctx, &gp, &ap, on_audio, log, NULL, NULL);
    const double t1 = tool_now_ms();
    mhz_stop(mz, &m->mhz_mean, &m->mhz_min, &m->mhz_max);
    m->peak_rss_mib = rss_peak_mib();
    m->status = st;
    if (st) snprintf(out->err, sizeof out->err, "%s: %s", qtts_status_str(st), qtts_context_last_error(ctx));
    qtts_stats s;
    qtts_context_get_stats(ctx, &s);
    out->stats = s;
    qtts_model_info live; /* device memory while the run's context still holds its buffers */
    qtts_model_get_info(model, &live);
    out->device_bytes_allocated = live.device_bytes_allocated;
    out->device_bytes_reserved = live.device_bytes_reserved;
    qtts_context_free(ctx);

    size_t total = 0;
    for (int i = 0; i < log->count; i++) total += log->n[i];
    m->wall_ms = t1 - log->t0;
    /* no audio: the audio the frames stand for, 80 ms each */
    m->audio_s = no_audio ? s.n_frames * 0.08 : total / 24000.0;
    m->rtf = m->audio_s > 0 ? m->wall_ms / 1000.0 / m->audio_s : NAN;
    m->rtfx = m->rtf > 0 ? 1.0 / m->rtf : NAN;
    m->n_chunks = no_audio ? NAN : log->count;
    m->audio_rms = total ? sqrt(log->sumsq / (double)total) : NAN;
    m->audio_peak = total ? log->peak : NAN;
    m->nonfinite = no_audio ? NAN : (double)log->nonfinite;
    out->chunks_off_thread = log->off_thread;
    m->ttfa_ms = log->count ? log->t[0] : NAN;
    /* cadence and streaming viability: a player starts at the first chunk and
     * plays continuously; a chunk arriving after the audio before it has run
     * out is a stall (it then restarts the clock). Underrun as defined in
     * ../shared/BENCHMARKING.md: the gap before a chunk exceeds the audio of the chunk
     * before it. */
    double *gaps = malloc(sizeof(double) * (size_t)(log->count > 1 ? log->count : 1));
    int ng = 0, under = 0, on_time = log->count ? 1 : 0;
    double play_end = log->count ? log->t[0] + log->n[0] / 24.0 : 0, gmax = NAN;
    for (int i = 1; i < log->count && gaps; i++) {
        const double g = log->t[i] - log->t[i - 1];
        gaps[ng++] = g;
        if (isnan(gmax) || g > gmax) gmax = g;
        if (g > log->n[i - 1] / 24.0) under++;
        if (log->t[i] <= play_end) on_time++, play_end += log->n[i] / 24.0;
        else play_end = log->t[i] + log->n[i] / 24.0;
    }
    bench_summary gs = bench_summarize(gaps, ng);
    free(gaps);
    m->cadence_ms = gs.median;
    m->cadence_max_ms = gmax;
    m->underruns = no_audio ? NAN : under;
    m->viability = log->count ? (double)on_time / log->count : NAN;
    m->n_frames = s.n_frames;
    const double nf = s.n_frames > 0 ? s.n_frames : NAN;
    m->prefill_ms = s.prefill_ms;
    m->talker_ms_f = s.talker_ms / nf;
    m->predictor_ms_f = s.predictor_ms / nf;
    m->decode_ms = no_audio ? NAN : s.decode_ms;
    m->decode_ms_f = no_audio ? NAN : s.decode_ms / nf;
    const int gpu = info.backend != QTTS_BACKEND_CPU;
    m->gpu_prefill_ms = gpu ? s.gpu_prefill_ms : NAN;
    m->gpu_talker_ms_f = gpu ? s.gpu_talker_ms / nf : NAN;
    m->gpu_predictor_ms_f = gpu ? s.gpu_predictor_ms / nf : NAN;
    m->gpu_sampling_ms_f = gpu ? s.gpu_sampling_ms / nf : NAN;
    m->rss_over_weights = info.weight_bytes_in_use > 0 && m->peak_rss_mib > 0
                              ? m->peak_rss_mib * 1048576.0 / (double)info.weight_bytes_in_use
                              : NAN;
    /* the same per-frame formula for every placement; with none nothing else
     * runs, so it is the bandwidth of generation alone */
    const double lm_s = (s.talker_ms + s.predictor_ms) / 1000.0;
    m->gbps = lm_s > 0 ? (double)(info.talker_bytes + info.predictor_bytes) * s.n_frames / lm_s / 1e9 : NAN;
    m->roofline = bw_gbps > 0 ? m->gbps / bw_gbps : NAN;
    m->probe_gbps = NAN;
    if (rq->keep_audio) {
        out->pcm = log->pcm;
        out->n_pcm = log->n_pcm;
        log->pcm = NULL;
    }
    if (rq->keep_codes) {
        out->codes = log->codes;
        out->n_codes_frames = log->n_codes;
        log->codes = NULL;
    }
    free(log->pcm);
    free(log->codes);
    free(log);
    return st ? -1 : 0;
}

void run_output_free(run_output *o) {
    if (!o) return;
    free(o->pcm);
    free(o->codes);
    o->pcm = NULL;
    o->codes = NULL;
}
