/* Prometheus metrics of the server (see metrics.h). Histograms have fixed
 * buckets chosen for speech: TTFA from 10 ms to 10 s, RTF from 0.05 to 5. */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TTFA 12
#define N_RTF 12
#define N_REQ 32

static const double ttfa_le[N_TTFA] = {0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10};
static const double rtf_le[N_RTF] = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5};

typedef struct hist {
    unsigned long long bucket[16]; /* cumulative counts are made at render time */
    unsigned long long count;
    double sum;
} hist;

typedef struct req_count {
    char endpoint[24];
    int status;
    unsigned long long n;
} req_count;

struct metrics {
    pthread_mutex_t mu;
    req_count req[N_REQ];
    int n_req;
    hist ttfa, rtf;
    double audio_s;
    unsigned long long n_speech, disconnects, rejected;
    unsigned long long steps, stream_steps, frames;
    double step_s, decode_s, prefill_s;
    unsigned long long n_prefill, prompt_pos, prompt_reused;
    int queue_depth, active, slots, ready, warm_slots;
    char info[512];
    char backend_labels[640];          /* backend="...",device="..." (escaped) */
    long long device_allocated, device_reserved;
    double gpu_s[4];                   /* device time: prefill, talker, predictor, sampling */
};

metrics *metrics_new(void) {
    metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void metrics_request(metrics *m, const char *endpoint, int status) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    int i;
    for (i = 0; i < m->n_req; i++)
        if (m->req[i].status == status && !strcmp(m->req[i].endpoint, endpoint)) break;
    if (i == m->n_req && m->n_req < N_REQ) {
        snprintf(m->req[i].endpoint, sizeof m->req[i].endpoint, "%s", endpoint);
        m->req[i].status = status;
        m->n_req++;
    }
    if (i < m->n_req) m->req[i].n++;
    pthread_mutex_unlock(&m->mu);
}

static void hist_add(hist *h, const double *le, int n, double v) {
    for (int i = 0; i < n; i++)
        if (v <= le[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

void metrics_speech(metrics *m, double audio_s, double ttfa_s, double rtf) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->n_speech++;
    if (audio_s > 0) m->audio_s += audio_s;
    if (ttfa_s >= 0) hist_add(&m->ttfa, ttfa_le, N_TTFA, ttfa_s);
    if (rtf >= 0 && isfinite(rtf)) hist_add(&m->rtf, rtf_le, N_RTF, rtf);
    pthread_mutex_unlock(&m->mu);
}

void metrics_disconnect(metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->disconnects++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_rejected(metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->rejected++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_step(metrics *m, int n, int n_frames, double step_s, double decode_s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->steps++;
    m->stream_steps += (unsigned long long)n;
    m->frames += (unsigned long long)n_frames;
    m->step_s += step_s;
    m->decode_s += decode_s;
    pthread_mutex_unlock(&m->mu);
}

void metrics_prefill(metrics *m, double s, int n_prompt, int n_reused, int n_prefills) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->n_prefill += (unsigned long long)(n_prefills > 0 ? n_prefills : 0);
    m->prefill_s += s;
    m->prompt_pos += (unsigned long long)(n_prompt > 0 ? n_prompt : 0);
    m->prompt_reused += (unsigned long long)(n_reused > 0 ? n_reused : 0);
    pthread_mutex_unlock(&m->mu);
}

void metrics_decode(metrics *m, double s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->decode_s += s;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_gauges(metrics *m, int queue_depth, int active) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->queue_depth = queue_depth;
    m->active = active;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_slots(metrics *m, int n) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->slots = n;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_warm_slots(metrics *m, int n) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->warm_slots = n;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_ready(metrics *m, int ready) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->ready = ready;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_info(metrics *m, const char *labels) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    snprintf(m->info, sizeof m->info, "%s", labels);
    pthread_mutex_unlock(&m->mu);
}

/* a label value in the exposition format: \\ \" and \n escaped */
static void put_label_value(char *out, size_t n, const char *v) {
    size_t k = 0;
    for (; v && *v && k + 3 < n; v++) {
        if (*v == '\\' || *v == '"') out[k++] = '\\', out[k++] = *v;
        else if (*v == '\n') out[k++] = '\\', out[k++] = 'n';
        else out[k++] = *v;
    }
    if (n) out[k < n ? k : n - 1] = 0;
}

void metrics_set_backend(metrics *m, const char *backend, const char *device) {
    if (!m) return;
    char b[64], d[512];
    put_label_value(b, sizeof b, backend);
    put_label_value(d, sizeof d, device);
    pthread_mutex_lock(&m->mu);
    snprintf(m->backend_labels, sizeof m->backend_labels, "backend=\"%s\",device=\"%s\"", b, d);
    pthread_mutex_unlock(&m->mu);
}

void metrics_gpu(metrics *m, double prefill_s, double talker_s, double predictor_s, double sampling_s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->gpu_s[0] += prefill_s;
    m->gpu_s[1] += talker_s;
    m->gpu_s[2] += predictor_s;
    m->gpu_s[3] += sampling_s;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_device_bytes(metrics *m, long long allocated, long long reserved) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->device_allocated = allocated;
    m->device_reserved = reserved;
    pthread_mutex_unlock(&m->mu);
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)k;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void put_hist(sbuf *b, const char *name, const char *help, const hist *h, const double *le, int n) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long c = 0;
    for (int i = 0; i < n; i++) {
        c += h->bucket[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, le[i], c);
    }
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, h->count, name, h->sum, name, h->count);
}

char *metrics_render(metrics *m) {
    sbuf b = {malloc(4096), 0, 4096, 0};
    if (!b.p) return NULL;
    b.p[0] = 0;
    pthread_mutex_lock(&m->mu);
    if (m->info[0])
        put(&b, "# HELP qtts_info The model and build being served.\n# TYPE qtts_info gauge\nqtts_info{%s} 1\n", m->info);
    if (m->backend_labels[0])
        put(&b, "# HELP qtts_backend_info Where the language model runs: the backend and its device.\n"
                "# TYPE qtts_backend_info gauge\nqtts_backend_info{%s} 1\n", m->backend_labels);
    put(&b, "# HELP qtts_device_bytes_allocated Device memory in use by the model's and its contexts' buffers "
            "(0 on the CPU backend).\n# TYPE qtts_device_bytes_allocated gauge\nqtts_device_bytes_allocated %lld\n"
            "# HELP qtts_device_bytes_reserved Device memory allocations the model holds (>= allocated; 0 on the CPU "
            "backend).\n# TYPE qtts_device_bytes_reserved gauge\nqtts_device_bytes_reserved %lld\n",
        m->device_allocated, m->device_reserved);
    put(&b, "# HELP qtts_gpu_seconds_total Device time of finished requests by phase, from timestamp queries (0 on "
            "the CPU backend).\n# TYPE qtts_gpu_seconds_total counter\n");
    static const char *const phases[4] = {"prefill", "talker", "predictor", "sampling"};
    for (int i = 0; i < 4; i++) put(&b, "qtts_gpu_seconds_total{phase=\"%s\"} %.6f\n", phases[i], m->gpu_s[i]);
    put(&b, "# HELP qtts_requests_total HTTP requests answered, by endpoint and status code.\n"
            "# TYPE qtts_requests_total counter\n");
    for (int i = 0; i < m->n_req; i++)
        put(&b, "qtts_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->req[i].endpoint, m->req[i].status,
            m->req[i].n);
    put(&b, "# HELP qtts_speech_requests_total Speech requests that ran (or started) to their end.\n"
            "# TYPE qtts_speech_requests_total counter\nqtts_speech_requests_total %llu\n", m->n_speech);
    put(&b, "# HELP qtts_rejected_total Requests refused because the queue was full (429).\n"
            "# TYPE qtts_rejected_total counter\nqtts_rejected_total %llu\n", m->rejected);
    put(&b, "# HELP qtts_disconnects_total Clients that went away before their audio ended.\n"
            "# TYPE qtts_disconnects_total counter\nqtts_disconnects_total %llu\n", m->disconnects);
    put(&b, "# HELP qtts_queue_depth Requests waiting for a slot.\n# TYPE qtts_queue_depth gauge\nqtts_queue_depth %d\n",
        m->queue_depth);
    put(&b, "# HELP qtts_active_slots Slots with a request in progress.\n# TYPE qtts_active_slots gauge\n"
            "qtts_active_slots %d\n", m->active);
    put(&b, "# HELP qtts_slots Slots stepped together (batch capacity).\n# TYPE qtts_slots gauge\nqtts_slots %d\n",
        m->slots);
    put(&b, "# HELP qtts_warm_slots Slots whose context served a warm-up request before the server was ready.\n"
            "# TYPE qtts_warm_slots gauge\nqtts_warm_slots %d\n", m->warm_slots);
    put(&b, "# HELP qtts_ready 1 when the model is loaded and warmed up.\n# TYPE qtts_ready gauge\nqtts_ready %d\n",
        m->ready);
    put(&b, "# HELP qtts_audio_seconds_total Seconds of audio produced (24 kHz samples / 24000).\n"
            "# TYPE qtts_audio_seconds_total counter\nqtts_audio_seconds_total %.6f\n", m->audio_s);
    put(&b, "# HELP qtts_frames_generated_total Codec frames generated (80 ms each), all slots.\n"
            "# TYPE qtts_frames_generated_total counter\nqtts_frames_generated_total %llu\n", m->frames);
    put(&b, "# HELP qtts_engine_stream_steps_total Sum over batched steps of the streams in each (mean batch = "
            "this / qtts_engine_steps_total).\n# TYPE qtts_engine_stream_steps_total counter\n"
            "qtts_engine_stream_steps_total %llu\n", m->stream_steps);
    put(&b, "# HELP qtts_engine_steps_total Batched steps (one frame for every active slot).\n"
            "# TYPE qtts_engine_steps_total counter\nqtts_engine_steps_total %llu\n", m->steps);
    put(&b, "# HELP qtts_engine_step_seconds_total Engine time in batched generation steps (talker + code "
            "predictor + sampling), decode excluded.\n# TYPE qtts_engine_step_seconds_total counter\n"
            "qtts_engine_step_seconds_total %.6f\n", m->step_s);
    put(&b, "# HELP qtts_engine_decode_seconds_total Time in the codec decoder (decode workers, beside generation).\n"
            "# TYPE qtts_engine_decode_seconds_total counter\nqtts_engine_decode_seconds_total %.6f\n", m->decode_s);
    put(&b, "# HELP qtts_engine_prefill_seconds_total Engine time in prompt building and prefill.\n"
            "# TYPE qtts_engine_prefill_seconds_total counter\nqtts_engine_prefill_seconds_total %.6f\n"
            "# HELP qtts_engine_prefills_total Requests prefilled.\n# TYPE qtts_engine_prefills_total counter\n"
            "qtts_engine_prefills_total %llu\n", m->prefill_s, m->n_prefill);
    put(&b, "# HELP qtts_prompt_positions_total Talker prompt positions of the requests prefilled.\n"
            "# TYPE qtts_prompt_positions_total counter\nqtts_prompt_positions_total %llu\n"
            "# HELP qtts_prompt_positions_reused_total Of those, voice-prefix positions whose K/V the slot's "
            "context kept from its previous request with the same voice (not prefilled again).\n"
            "# TYPE qtts_prompt_positions_reused_total counter\nqtts_prompt_positions_reused_total %llu\n",
        m->prompt_pos, m->prompt_reused);
    put_hist(&b, "qtts_ttfa_seconds",
             "Time to first audio of streamed requests: arrival to the first audio bytes handed to the socket.",
             &m->ttfa, ttfa_le, N_TTFA);
    put_hist(&b, "qtts_rtf", "Real-time factor per speech request: request seconds / audio seconds (lower is faster).",
             &m->rtf, rtf_le, N_RTF);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

double metrics_value(const char *text, const char *name) {
    if (!text || !name) return -1;
    const size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (*p == '#') continue;
        if (!strncmp(p, name, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    }
    return -1;
}
