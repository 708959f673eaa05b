/* POST /v1/audio/speech: OpenAI's speech API plus qtts extensions.
 * Dataflow: JSON body -> validated job (voice, language, sampling, limits)
 * -> scheduler queue (429 when full) -> wait until the job runs (so errors of
 * the prefill still get a proper status) -> PCM from the job's buffer ->
 * optional time stretch (speed) -> encoder -> either the whole file with a
 * Content-Length, or a chunked stream of the file ("stream_format": "audio"),
 * or OpenAI-style server-sent events ("stream_format": "sse") carrying base64
 * pieces of it. A client that goes away is noticed within a poll interval
 * (20 ms) and its job leaves its slot before the next step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "metrics.h"
#include "scheduler.h"
#include "stretch.h"
#include "voices.h"

#define POLL_MS 20
#define READ_SAMPLES 16384

static const char *const known_fields[] = {
    "model", "input", "voice", "instructions", "response_format", "speed", "stream_format",
    /* qtts extensions */
    "language", "seed", "temperature", "top_k", "top_p", "repetition_penalty", "do_sample", "subtalker_temperature",
    "subtalker_top_k", "subtalker_top_p", "subtalker_do_sample", "chunk_frames", "first_chunk_frames",
    "max_new_tokens", "force_frames", "text_mode", NULL};

typedef struct speech {
    server *srv;
    struct MHD_Connection *conn;
    job *j;
    audio_format fmt;
    int streaming, sse;
    double speed;
    encoder *enc;
    stretcher *st;
    float *pcm;             /* [READ_SAMPLES] */
    bytebuf sse_out;        /* SSE events not yet sent */
    double t0, t_first, deadline;
    size_t samples_in;      /* samples fed to the encoder */
    int n_input_tokens;
    int segment;            /* text segment of the samples encoded last (SSE events carry it) */
    int finished;           /* everything encoded (and for SSE the done event queued) */
    int failed;             /* the job or the encoder failed */
    int gone;               /* the client went away or timed out */
    char err[512];
} speech;

static int http_status_of(qtts_status st) {
    switch (st) {
    case QTTS_ERR_INPUT:
    case QTTS_ERR_LIMIT:
    case QTTS_ERR_INVALID_ARG:
    case QTTS_ERR_FORMAT:
    case QTTS_ERR_UNSUPPORTED: return 400;
    case QTTS_ERR_CANCELLED: return 503;
    default: return 500;
    }
}

static void list_speakers(const qtts_model *m, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < qtts_model_n_speakers(m) && k + 2 < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", qtts_model_speaker(m, i));
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Fill j (and the output choices) from the body, or fill e. 0 ok. */
static int parse_object(server *s, json_t *o, job *j, speech *sp, int ws, api_error *e);

static int parse_request(http_req *r, job *j, speech *sp, api_error *e) {
    json_error_t je;
    json_t *o = json_loadb((const char *)r->body.p, r->body.n, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        API_BAD(e, "", "We could not parse the JSON body of your request: %s (line %d, column %d)", je.text, je.line,
                je.column);
        snprintf(e->code, sizeof e->code, "invalid_json");
        return -1;
    }
    const int rc = parse_object(r->srv, o, j, sp, 0, e);
    json_decref(o);
    return rc;
}

/* The request's fields into j and sp; ws: a WebSocket session's config (no
 * model or input required; the text comes later). o stays the caller's. */
static int parse_object(server *s, json_t *o, job *j, speech *sp, int ws, api_error *e) {
    const qtts_model *m = s->model;
    int rc = -1;
    if (!json_is_object(o)) {
        API_BAD(e, "", "The request body must be a JSON object");
        goto out;
    }
    const char *unknown = json_unknown_key(o, known_fields);
    if (unknown) {
        API_BAD(e, unknown, "Unrecognized request argument supplied: %s", unknown);
        snprintf(e->code, sizeof e->code, "unknown_parameter");
        goto out;
    }
    const char *model = NULL, *input = NULL, *voice = NULL, *instr = NULL, *fmt = NULL, *sfmt = NULL, *lang = NULL;
    if (json_opt_string(o, "model", &model, e) < 0 || json_opt_string(o, "input", &input, e) < 0 ||
        json_opt_string(o, "voice", &voice, e) < 0 || json_opt_string(o, "instructions", &instr, e) < 0 ||
        json_opt_string(o, "response_format", &fmt, e) < 0 || json_opt_string(o, "stream_format", &sfmt, e) < 0 ||
        json_opt_string(o, "language", &lang, e) < 0)
        goto out;
    if (ws) {
        if (input) {
            API_BAD(e, "input", "the text comes in input.text messages, not in the session config");
            goto out;
        }
        input = "";
    } else if (!model || !*model) {
        API_BAD(e, "model", "you must provide a model parameter");
        goto out;
    }
    if (!input) {
        API_BAD(e, "input", "Missing required parameter: 'input'");
        goto out;
    }
    if (!ws && strspn(input, " \t\r\n\f\v") == strlen(input)) {
        API_BAD(e, "input", "'input' is empty: there is nothing to say");
        goto out;
    }
    const size_t n_chars = utf8_length(input);
    if (n_chars > (size_t)s->cfg.max_input_chars) {
        API_BAD(e, "input", "'input' is %zu characters long; the limit is %d", n_chars, s->cfg.max_input_chars);
        snprintf(e->code, sizeof e->code, "string_above_max_length");
        goto out;
    }
    if (instr && utf8_length(instr) > (size_t)s->cfg.max_input_chars) {
        API_BAD(e, "instructions", "'instructions' is longer than %d characters", s->cfg.max_input_chars);
        snprintf(e->code, sizeof e->code, "string_above_max_length");
        goto out;
    }
    if (instr && !*instr) instr = NULL;
    int f = fmt ? audio_format_parse(fmt) : AF_MP3;
    if (f < 0) {
        API_BAD(e, "response_format", "Unsupported response_format '%s': use mp3, opus, flac, wav or pcm", fmt);
        snprintf(e->code, sizeof e->code, "unsupported_format");
        goto out;
    }
    sp->fmt = (audio_format)f;
    if (sfmt && strcmp(sfmt, "audio") && strcmp(sfmt, "sse")) {
        API_BAD(e, "stream_format", "stream_format must be 'audio' or 'sse' (got '%s')", sfmt);
        goto out;
    }
    sp->streaming = sfmt != NULL;
    sp->sse = sfmt && !strcmp(sfmt, "sse");
    sp->speed = 1.0;
    if (json_opt_number(o, "speed", STRETCH_MIN_SPEED, STRETCH_MAX_SPEED, &sp->speed, e) < 0) goto out;

    /* voice, by model type */
    qtts_gen_params gp = qtts_gen_default_params(m);
    const qtts_model_type type = s->info.type;
    if (type == QTTS_MODEL_CUSTOM_VOICE) {
        char list[1024];
        list_speakers(m, list, sizeof list);
        if (!voice || !*voice) {
            API_BAD(e, "voice", "Missing required parameter: 'voice' (a preset speaker: %s)", list);
            goto out;
        }
        int found = -1;
        for (int i = 0; i < qtts_model_n_speakers(m) && found < 0; i++)
            if (!strcasecmp(voice, qtts_model_speaker(m, i))) found = i;
        if (found < 0) {
            API_BAD(e, "voice", "Unknown voice '%s'; this model's speakers are: %s", voice, list);
            snprintf(e->code, sizeof e->code, "voice_not_found");
            goto out;
        }
        j->speaker = strdup(qtts_model_speaker(m, found));
        j->instruct = dup_or_null(instr);
    } else if (type == QTTS_MODEL_BASE) {
        if (instr) {
            API_BAD(e, "instructions", "Base (voice cloning) models take no instructions");
            goto out;
        }
        if (!voice || !*voice) {
            API_BAD(e, "voice", "Missing required parameter: 'voice' (the name of an uploaded voice; see GET "
                                "/v1/audio/voices, create one with POST /v1/audio/voices)");
            goto out;
        }
        j->voice = voice_store_get(s->voices, voice);
        if (!j->voice) {
            API_BAD(e, "voice", "Unknown voice '%s': upload it first with POST /v1/audio/voices (GET /v1/audio/voices "
                                "lists the voices)", voice);
            snprintf(e->code, sizeof e->code, "voice_not_found");
            goto out;
        }
        gp.voice = voice_ref_voice(j->voice);
    } else { /* VoiceDesign: the voice is the description; "voice" is ignored */
        if (!instr) {
            API_BAD(e, "instructions", "A VoiceDesign model needs 'instructions' describing the voice");
            goto out;
        }
        j->instruct = strdup(instr);
    }
    if (lang && *lang) {
        int found = -1;
        for (int i = 0; i < qtts_model_n_languages(m) && found < 0; i++)
            if (!strcasecmp(lang, qtts_model_language(m, i))) found = i;
        if (found < 0) {
            char list[1024];
            size_t k = 0;
            for (int i = 0; i < qtts_model_n_languages(m) && k + 2 < sizeof list; i++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", qtts_model_language(m, i));
            API_BAD(e, "language", "Unknown language '%s'; this model knows: %s", lang, list);
            goto out;
        }
        j->language = strdup(qtts_model_language(m, found));
    }
    /* sampling */
    double x;
    long long v;
    int b, p;
    if ((p = json_opt_number(o, "temperature", 1e-3, 10, &x, e)) < 0) goto out;
    if (p) gp.talker.temperature = (float)x;
    if ((p = json_opt_int(o, "top_k", 0, 1 << 20, &v, e)) < 0) goto out;
    if (p) gp.talker.top_k = (int)v;
    if ((p = json_opt_number(o, "top_p", 1e-6, 1, &x, e)) < 0) goto out;
    if (p) gp.talker.top_p = (float)x;
    if ((p = json_opt_number(o, "repetition_penalty", 1, 10, &x, e)) < 0) goto out;
    if (p) gp.talker.repetition_penalty = (float)x;
    if ((p = json_opt_bool(o, "do_sample", &b, e)) < 0) goto out;
    if (p) gp.talker.do_sample = b;
    if ((p = json_opt_number(o, "subtalker_temperature", 1e-3, 10, &x, e)) < 0) goto out;
    if (p) gp.predictor.temperature = (float)x;
    if ((p = json_opt_int(o, "subtalker_top_k", 0, 1 << 20, &v, e)) < 0) goto out;
    if (p) gp.predictor.top_k = (int)v;
    if ((p = json_opt_number(o, "subtalker_top_p", 1e-6, 1, &x, e)) < 0) goto out;
    if (p) gp.predictor.top_p = (float)x;
    if ((p = json_opt_bool(o, "subtalker_do_sample", &b, e)) < 0) goto out;
    if (p) gp.predictor.do_sample = b;
    if ((p = json_opt_int(o, "seed", 0, (long long)(~0ull >> 1), &v, e)) < 0) goto out;
    if (p) gp.seed = (uint64_t)v;
    else { /* a fresh seed, reported in X-Qtts-Seed so the result can be reproduced */
        uint64_t z = atomic_fetch_add(&s->seed_state, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        gp.seed = (z ^ (z >> 31)) >> 1;
    }
    /* the server's frame cap bounds what a request may ask; the model's
     * generation_config gives the default */
    const long long cap = s->cfg.max_frames > 0 ? s->cfg.max_frames + 1 : gp.max_new_tokens;
    if ((p = json_opt_int(o, "max_new_tokens", 1, cap, &v, e)) < 0) goto out;
    gp.max_new_tokens = (int)(p ? v : gp.max_new_tokens < cap ? gp.max_new_tokens : cap);
    /* measurement aid: exactly this many frames, end of speech ignored */
    if ((p = json_opt_int(o, "force_frames", 1, cap - 1, &v, e)) < 0) goto out;
    if (p) {
        j->debug = qtts_gen_debug_default_params();
        j->debug.force_frames = (int)v;
        gp.debug = &j->debug;
    }
    j->first_chunk_frames = s->cfg.first_chunk_frames;
    j->chunk_frames = s->cfg.chunk_frames;
    if ((p = json_opt_int(o, "chunk_frames", 1, 64, &v, e)) < 0) goto out;
    if (p) j->chunk_frames = (int)v;
    if ((p = json_opt_int(o, "first_chunk_frames", 1, 64, &v, e)) < 0) goto out;
    if (p) j->first_chunk_frames = (int)v;
    /* how the text enters the talker: the whole text in the prompt, or one
     * token per frame (a prompt of ~9 positions: the first audio sooner) */
    const char *tmode = NULL;
    if (json_opt_string(o, "text_mode", &tmode, e) < 0) goto out;
    if (tmode) {
        if (!strcmp(tmode, "streaming")) gp.text_mode = QTTS_TEXT_MODE_STREAMING;
        else if (!strcmp(tmode, "non_streaming")) gp.text_mode = QTTS_TEXT_MODE_NON_STREAMING;
        else if (strcmp(tmode, "default")) {
            API_BAD(e, "text_mode", "text_mode must be 'streaming', 'non_streaming' or 'default', got '%.40s'", tmode);
            goto out;
        }
    }

    j->text = ws ? NULL : strdup(input);
    if ((!ws && !j->text) || (instr && type != QTTS_MODEL_BASE && !j->instruct)) {
        api_error_set(e, 500, "server_error", "", "", "out of memory");
        goto out;
    }
    gp.text = j->text;
    gp.speaker = j->speaker;
    gp.instruct = j->instruct;
    gp.language = j->language ? j->language : "auto";
    j->gp = gp;
    if (sp->sse) { /* usage.input_tokens */
        int32_t *ids = NULL;
        int n = 0;
        if (!qtts_tokenize(s->model, j->text, &ids, &n, NULL, 0)) sp->n_input_tokens = n;
        free(ids);
    }
    rc = 0;
out:
    return rc;
}

int api_speech_config(server *s, json_t *o, job *j, int *format, double *speed, api_error *e) {
    speech sp;
    memset(&sp, 0, sizeof sp);
    const int rc = parse_object(s, o, j, &sp, 1, e);
    *format = (int)sp.fmt;
    *speed = sp.speed;
    return rc;
}

int api_speech_check(server *s, const char *body, size_t n, api_error *e) {
    http_req r;
    memset(&r, 0, sizeof r);
    r.srv = s;
    r.body.p = (unsigned char *)body;
    r.body.n = n;
    speech sp;
    memset(&sp, 0, sizeof sp);
    job *j = job_new();
    if (!j) {
        api_error_set(e, 500, "server_error", "", "", "out of memory");
        return -1;
    }
    const int rc = parse_request(&r, j, &sp, e);
    job_release(j);
    return rc;
}

/* ---------------------------------------------------------------- output */

static void sse_event(speech *sp, json_t *ev) {
    char *txt = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!txt || bytebuf_put(&sp->sse_out, "data: ", 6) || bytebuf_put(&sp->sse_out, txt, strlen(txt)) ||
        bytebuf_put(&sp->sse_out, "\n\n", 2))
        sp->failed = 1;
    free(txt);
}

/* Largest delta event payload: 4 frames of 16-bit PCM (320 ms). Splitting
 * what is ready into events of at most this size makes the event sequence
 * independent of how fast the client reads (a slow reader would otherwise
 * get one big event). */
#define SSE_MAX_DELTA_BYTES (4 * 1920 * 2)

/* Wrap what the encoder has made into delta events. */
static void sse_flush(speech *sp) {
    bytebuf *eb = encoder_output(sp->enc);
    while (eb->n && !sp->failed) {
        const size_t k = eb->n < SSE_MAX_DELTA_BYTES ? eb->n : SSE_MAX_DELTA_BYTES;
        bytebuf b64 = {0};
        if (base64_append(&b64, eb->p, k) || bytebuf_put(&b64, "", 1)) {
            sp->failed = 1;
            bytebuf_free(&b64);
            return;
        }
        bytebuf_consume(eb, k);
        json_t *ev = json_object();
        json_object_set_new(ev, "type", json_string("speech.audio.delta"));
        json_object_set_new(ev, "audio", json_string((const char *)b64.p));
        json_object_set_new(ev, "segment", json_integer(sp->segment));
        bytebuf_free(&b64);
        sse_event(sp, ev);
    }
}

static void encode(speech *sp, const float *pcm, size_t n, int final) {
    if (sp->st) {
        const float *o = NULL;
        size_t no = 0;
        if (stretch_process(sp->st, pcm, n, final, &o, &no)) {
            sp->failed = 1;
            snprintf(sp->err, sizeof sp->err, "out of memory stretching audio");
            return;
        }
        pcm = o;
        n = no;
    }
    if (n && encoder_write(sp->enc, pcm, n)) {
        sp->failed = 1;
        snprintf(sp->err, sizeof sp->err, "%s", encoder_error(sp->enc));
        return;
    }
    sp->samples_in += n;
    if (final && encoder_finish(sp->enc)) {
        sp->failed = 1;
        snprintf(sp->err, sizeof sp->err, "%s", encoder_error(sp->enc));
    }
}

/* Move the job's new samples through stretch and encoder, waiting up to
 * timeout_ms for them; at the job's end finish the file. */
static void pump(speech *sp, int timeout_ms) {
    if (sp->finished || sp->failed) return;
    int done = 0;
    int seg = 0;
    size_t n = job_read(sp->j, sp->pcm, READ_SAMPLES, timeout_ms, &done, &seg);
    if (n) {
        if (sp->sse && seg != sp->segment) sse_flush(sp); /* the events of one segment carry its index */
        sp->segment = seg;
        encode(sp, sp->pcm, n, 0);
    }
    while (!done && !sp->failed) { /* drain what else is there without waiting */
        n = job_read(sp->j, sp->pcm, READ_SAMPLES, 0, &done, &seg);
        if (!n) break;
        if (sp->sse && seg != sp->segment) sse_flush(sp);
        sp->segment = seg;
        encode(sp, sp->pcm, n, 0);
    }
    if (done && !sp->failed) {
        if (sp->j->status) {
            sp->failed = 1;
            snprintf(sp->err, sizeof sp->err, "%s", sp->j->err);
        } else {
            encode(sp, NULL, 0, 1);
            if (!sp->failed) sp->finished = 1;
        }
    }
    if (sp->sse) {
        sse_flush(sp);
        if (sp->finished) {
            json_t *ev = json_object(), *u = json_object();
            json_object_set_new(ev, "type", json_string("speech.audio.done"));
            json_object_set_new(ev, "segments", json_integer(sp->j->n_segments));
            json_object_set_new(u, "input_tokens", json_integer(sp->n_input_tokens));
            json_object_set_new(u, "output_tokens", json_integer(sp->j->n_frames));
            json_object_set_new(u, "total_tokens", json_integer(sp->n_input_tokens + sp->j->n_frames));
            json_object_set_new(ev, "usage", u);
            sse_event(sp, ev);
        }
    }
}

/* Client gone or out of time: cancel the job (it leaves its slot at the next step). */
static int check_abort(speech *sp) {
    if (sp->gone) return 1;
    if (http_peer_gone(sp->conn)) {
        sp->gone = 1;
        metrics_disconnect(sp->srv->mx);
    } else if (sp->deadline > 0 && tool_now_s() > sp->deadline) {
        sp->gone = 1;
        srv_log(sp->srv, 1, "a request ran past --request-timeout (%d s): cancelled", sp->srv->cfg.request_timeout_s);
    }
    if (sp->gone) job_cancel(sp->j);
    return sp->gone;
}

static void speech_free(speech *sp) {
    if (!sp) return;
    if (sp->j) {
        if (sp->streaming && !sp->finished && !sp->failed && !sp->gone)
            metrics_disconnect(sp->srv->mx); /* libmicrohttpd found the socket closed */
        job_cancel(sp->j); /* no-op once done */
        pthread_mutex_lock(&sp->j->mu);
        const double audio_s = sp->j->total_samples / 24000.0;
        const job_state state = sp->j->state;
        pthread_mutex_unlock(&sp->j->mu);
        const double t = tool_now_s() - sp->t0;
        if (state != JOB_NEW)
            metrics_speech(sp->srv->mx, audio_s, sp->streaming && sp->t_first > 0 ? sp->t_first - sp->t0 : -1,
                           audio_s > 0 && sp->finished ? t / audio_s : -1);
        job_release(sp->j);
    }
    atomic_fetch_sub(&sp->srv->n_speech, 1);
    encoder_free(sp->enc);
    stretch_free(sp->st);
    bytebuf_free(&sp->sse_out);
    free(sp->pcm);
    free(sp);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    speech *sp = cls;
    (void)pos;
    for (;;) {
        bytebuf *ob = sp->sse ? &sp->sse_out : encoder_output(sp->enc);
        if (ob->n) {
            size_t k = ob->n < max ? ob->n : max;
            memcpy(buf, ob->p, k);
            bytebuf_consume(ob, k);
            if (sp->t_first == 0 && sp->samples_in > 0) sp->t_first = tool_now_s();
            /* waiting here for the next chunk is the server's time: a slow
             * generation must not trip the idle timeout and cut the stream */
            http_touch(sp->conn, sp->srv->cfg.conn_timeout_s);
            return (ssize_t)k;
        }
        if (sp->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (sp->failed) {
            if (sp->sse && sp->err[0]) { /* tell an SSE client why, then end */
                api_error e;
                api_error_set(&e, http_status_of(sp->j->status), "server_error", "", "", "%s", sp->err);
                json_t *ev = json_object();
                json_object_set_new(ev, "type", json_string("error"));
                json_t *body = api_error_json(&e);
                json_object_set(ev, "error", json_object_get(body, "error"));
                json_decref(body);
                sse_event(sp, ev);
                sp->err[0] = 0;
                sp->finished = 1;
                continue;
            }
            srv_log(sp->srv, 1, "stream ended early: %s", sp->err);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (check_abort(sp)) return MHD_CONTENT_READER_END_WITH_ERROR;
        pump(sp, POLL_MS);
    }
}

static void stream_free(void *cls) { speech_free(cls); }

static enum MHD_Result fail(http_req *r, speech *sp, const api_error *e) {
    enum MHD_Result res = http_send_error(r, e);
    speech_free(sp);
    return res;
}

enum MHD_Result api_speech(http_req *r) {
    server *s = r->srv;
    api_error e;
    memset(&e, 0, sizeof e);
    atomic_fetch_add(&s->n_speech, 1);
    speech *sp = calloc(1, sizeof *sp);
    job *j = job_new();
    if (!sp || !j) {
        atomic_fetch_sub(&s->n_speech, 1);
        free(sp);
        job_release(j);
        return MHD_NO;
    }
    sp->srv = s;
    sp->conn = r->conn;
    sp->j = j;
    sp->t0 = r->t0;
    sp->deadline = s->cfg.request_timeout_s > 0 ? r->t0 + s->cfg.request_timeout_s : 0;
    if (atomic_load(&s->stopping)) {
        api_error_set(&e, 503, "server_error", "", "shutting_down", "The server is shutting down; retry elsewhere");
        e.retry_after_s = 1;
        return fail(r, sp, &e);
    }
    if (!sched_ready(s->sch)) {
        const char *why = sched_warmup_error(s->sch);
        api_error_set(&e, 503, "server_error", "", "not_ready", "%s", *why ? why : "The model is warming up; retry shortly");
        e.retry_after_s = 1;
        return fail(r, sp, &e);
    }
    if (parse_request(r, j, sp, &e)) return fail(r, sp, &e);
    char err[256];
    sp->pcm = malloc(sizeof(float) * READ_SAMPLES);
    if (!sp->pcm || encoder_new(&sp->enc, sp->fmt, 24000, sp->streaming, err, sizeof err)) {
        api_error_set(&e, 500, "server_error", "", "", "cannot start the %s encoder: %s", audio_format_name(sp->fmt),
                      sp->pcm ? err : "out of memory");
        return fail(r, sp, &e);
    }
    if (sp->speed != 1.0 && !(sp->st = stretch_new(sp->speed, 24000))) {
        api_error_set(&e, 500, "server_error", "speed", "", "cannot start the time stretcher");
        return fail(r, sp, &e);
    }
    int rc = sched_submit(s->sch, j);
    if (rc) {
        if (rc == -1) {
            metrics_rejected(s->mx);
            api_error_set(&e, 429, "rate_limit_error", "", "queue_full",
                          "The server is busy (%d slots and a queue of %d are full); retry later", s->cfg.n_slots,
                          s->cfg.queue_depth);
        } else {
            api_error_set(&e, 503, "server_error", "", "shutting_down", "The server is shutting down; retry elsewhere");
        }
        e.retry_after_s = 1;
        return fail(r, sp, &e); /* never queued: no speech metrics for it */
    }
    /* wait until it runs: errors of the prompt still get a status */
    job_state st;
    for (;;) {
        st = job_wait_started(j, POLL_MS);
        if (st == JOB_RUNNING || st == JOB_DONE) break;
        if (check_abort(sp)) {
            speech_free(sp);
            return MHD_NO; /* nobody to answer */
        }
    }
    if (st == JOB_DONE && j->status && j->total_samples == 0) { /* final once done */
        api_error_set(&e, http_status_of(j->status), http_status_of(j->status) == 400 ? "invalid_request_error"
                                                                                       : "server_error",
                      "", "", "%s", j->err);
        return fail(r, sp, &e);
    }
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->gp.seed);
    if (!sp->streaming) { /* whole file */
        while (!sp->finished && !sp->failed) {
            if (check_abort(sp)) {
                speech_free(sp);
                return MHD_NO;
            }
            pump(sp, POLL_MS);
        }
        if (sp->failed) {
            api_error_set(&e, http_status_of(j->status ? j->status : QTTS_ERR_INTERNAL), "server_error", "", "",
                          "%s", sp->err);
            return fail(r, sp, &e);
        }
        bytebuf *ob = encoder_output(sp->enc);
        struct MHD_Response *resp = MHD_create_response_from_buffer(ob->n, ob->p, MHD_RESPMEM_MUST_COPY);
        if (resp) {
            MHD_add_response_header(resp, "Content-Type", audio_format_mime(sp->fmt));
            MHD_add_response_header(resp, "X-Qtts-Seed", seed);
        }
        enum MHD_Result res = http_queue(r, 200, resp);
        speech_free(sp);
        return res;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, sp, stream_free);
    if (!resp) {
        speech_free(sp);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", sp->sse ? "text/event-stream" : audio_format_mime(sp->fmt));
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no"); /* nginx: pass chunks on at once */
    MHD_add_response_header(resp, "X-Qtts-Seed", seed);
    return http_queue(r, 200, resp);
}
