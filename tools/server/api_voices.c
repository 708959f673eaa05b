/* Voices: GET /v1/audio/voices lists the preset speakers (CustomVoice) and
 * the uploaded voices (Base); POST /v1/audio/voices takes a multipart form
 * (audio = the recording, name, optional text = its transcript for
 * in-context cloning, optional xvector_only) and makes a voice once, on the
 * engine thread (it runs the speaker and codec encoders), keeps it on disk
 * and in memory; DELETE /v1/audio/voices/NAME removes one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "scheduler.h"
#include "voices.h"

typedef struct upload {
    bytebuf audio, name, text, xv;
    char filename[128];
    int bad;
    char err[256];
} upload;

static enum MHD_Result iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                            const char *content_type, const char *transfer_encoding, const char *data, uint64_t off,
                            size_t size) {
    http_req *r = cls;
    upload *u = r->upload;
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    (void)off;
    if (u->bad) return MHD_YES;
    if (!key) { /* a part without a name (libmicrohttpd passes NULL) */
        u->bad = 1;
        snprintf(u->err, sizeof u->err, "A form field has no name (expected audio, name, text, xvector_only)");
        return MHD_YES;
    }
    bytebuf *dst = NULL;
    size_t limit = 4096;
    if (!strcmp(key, "audio") || !strcmp(key, "file")) {
        dst = &u->audio;
        limit = r->limit;
        if (filename && !u->filename[0]) snprintf(u->filename, sizeof u->filename, "%s", filename);
    } else if (!strcmp(key, "name")) {
        dst = &u->name;
    } else if (!strcmp(key, "text") || !strcmp(key, "ref_text") || !strcmp(key, "reference_text")) {
        dst = &u->text;
        limit = (size_t)r->srv->cfg.max_input_chars * 4;
    } else if (!strcmp(key, "xvector_only")) {
        dst = &u->xv;
        limit = 16;
    } else {
        u->bad = 1;
        snprintf(u->err, sizeof u->err, "Unrecognized form field '%s' (expected audio, name, text, xvector_only)", key);
        return MHD_YES;
    }
    if (dst->n + size > limit) {
        u->bad = 1;
        snprintf(u->err, sizeof u->err, "form field '%s' is too long (limit %zu bytes)", key, limit);
        return MHD_YES;
    }
    if (bytebuf_put(dst, data, size)) return MHD_NO;
    return MHD_YES;
}

int api_voices_upload_begin(http_req *r) {
    server *s = r->srv;
    api_error e;
    if (s->info.type != QTTS_MODEL_BASE) {
        api_error_set(&e, 400, "invalid_request_error", "", "cloning_unsupported",
                      "Voice cloning needs a Base model; this server runs a %s model (see GET /v1/audio/voices)",
                      s->info.type_name);
        http_send_error(r, &e);
        return 0;
    }
    upload *u = calloc(1, sizeof *u);
    if (!u) return 0;
    r->upload = u;
    r->pp = MHD_create_post_processor(r->conn, 64 * 1024, iter, r);
    if (!r->pp) {
        API_BAD(&e, "", "Send the voice as multipart/form-data with the fields audio (the recording), name, and "
                        "optionally text (its transcript) or xvector_only=true");
        http_send_error(r, &e);
        return 0;
    }
    return 1;
}

int api_voices_upload_data(http_req *r, const char *data, size_t n) {
    if (!r->pp) return 0;
    return MHD_post_process(r->pp, data, n) == MHD_YES;
}

void api_voices_upload_free(http_req *r) {
    if (r->pp) MHD_destroy_post_processor(r->pp);
    r->pp = NULL;
    upload *u = r->upload;
    if (!u) return;
    bytebuf_free(&u->audio);
    bytebuf_free(&u->name);
    bytebuf_free(&u->text);
    bytebuf_free(&u->xv);
    free(u);
    r->upload = NULL;
}

typedef struct clone_task {
    qtts_model *model;
    const upload *u;
    const char *text;
    int xvector_only;
    qtts_voice *voice;
    qtts_status status;
    char err[1024];
} clone_task;

static void run_clone(void *arg) {
    clone_task *t = arg;
    qtts_voice_params vp = qtts_voice_default_params();
    vp.ref_text = t->text;
    vp.xvector_only = t->xvector_only;
    t->status = qtts_voice_from_memory(t->model, t->u->audio.p, t->u->audio.n,
                                       t->u->filename[0] ? t->u->filename : "upload", &vp, &t->voice, t->err,
                                       sizeof t->err);
}

static char *cstr(bytebuf *b) {
    if (bytebuf_put(b, "", 1)) return NULL;
    b->n--;
    return (char *)b->p;
}

enum MHD_Result api_voices_upload_end(http_req *r) {
    server *s = r->srv;
    upload *u = r->upload;
    api_error e;
    if (!u || !r->pp) return MHD_NO;
    if (MHD_destroy_post_processor(r->pp) != MHD_YES && !u->bad) {
        u->bad = 1;
        snprintf(u->err, sizeof u->err, "the multipart body is malformed or incomplete");
    }
    r->pp = NULL;
    if (u->bad) {
        API_BAD(&e, "", "%s", u->err);
        return http_send_error(r, &e);
    }
    if (atomic_load(&s->stopping)) {
        api_error_set(&e, 503, "server_error", "", "shutting_down", "The server is shutting down");
        e.retry_after_s = 1;
        return http_send_error(r, &e);
    }
    const char *name = u->name.n ? cstr(&u->name) : NULL;
    const char *text = u->text.n ? cstr(&u->text) : NULL;
    const char *xv = u->xv.n ? cstr(&u->xv) : NULL;
    if (!name || !voice_name_valid(name)) {
        API_BAD(&e, "name", "Give the voice a 'name' of 1 to 64 letters, digits, '_' or '-'");
        return http_send_error(r, &e);
    }
    if (!u->audio.n) {
        API_BAD(&e, "audio", "The form has no 'audio' file (the reference recording: WAV, FLAC, OGG or MP3)");
        return http_send_error(r, &e);
    }
    int xvector_only = xv && (!strcmp(xv, "true") || !strcmp(xv, "1"));
    if (xv && !xvector_only && strcmp(xv, "false") && strcmp(xv, "0")) {
        API_BAD(&e, "xvector_only", "'xvector_only' must be true or false");
        return http_send_error(r, &e);
    }
    if (text && strspn(text, " \t\r\n") == strlen(text)) text = NULL;
    if (!text) xvector_only = 1; /* no transcript: speaker embedding only */
    voice_ref *old = voice_store_get(s->voices, name);
    if (old) {
        voice_ref_release(old);
        api_error_set(&e, 409, "invalid_request_error", "name", "voice_exists",
                      "A voice named '%s' exists already; delete it first (DELETE /v1/audio/voices/%s)", name, name);
        return http_send_error(r, &e);
    }
    clone_task t;
    memset(&t, 0, sizeof t);
    t.model = s->model;
    t.u = u;
    t.text = xvector_only ? NULL : text;
    t.xvector_only = xvector_only;
    if (sched_run_task(s->sch, run_clone, &t)) {
        api_error_set(&e, 503, "server_error", "", "shutting_down", "The server is shutting down");
        return http_send_error(r, &e);
    }
    if (t.status) {
        const int bad = t.status == QTTS_ERR_INPUT || t.status == QTTS_ERR_FORMAT || t.status == QTTS_ERR_LIMIT ||
                        t.status == QTTS_ERR_IO || t.status == QTTS_ERR_INVALID_ARG;
        api_error_set(&e, bad ? 400 : 500, bad ? "invalid_request_error" : "server_error", "audio",
                      bad ? "invalid_audio" : "", "%s", t.err);
        return http_send_error(r, &e);
    }
    const int icl = qtts_voice_is_icl(t.voice);
    const int n_ref = qtts_voice_n_ref_frames(t.voice);
    char err[512];
    int rc = voice_store_add(s->voices, name, t.voice, err, sizeof err);
    if (rc) {
        api_error_set(&e, rc == -2 ? 409 : 500, rc == -2 ? "invalid_request_error" : "server_error", "name",
                      rc == -2 ? "voice_exists" : "", "%s", err);
        return http_send_error(r, &e);
    }
    srv_log(s, 2, "voice '%s' created (%s)", name, icl ? "in-context" : "x-vector");
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(name));
    json_object_set_new(o, "object", json_string("voice"));
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "type", json_string("cloned"));
    json_object_set_new(o, "mode", json_string(icl ? "icl" : "xvector"));
    if (icl) json_object_set_new(o, "ref_seconds", json_real(n_ref / 12.5));
    return http_send_json(r, 201, o);
}

enum MHD_Result api_voices_list(http_req *r) {
    server *s = r->srv;
    json_t *data = json_array();
    for (int i = 0; i < qtts_model_n_speakers(s->model); i++) {
        json_t *v = json_object();
        json_object_set_new(v, "id", json_string(qtts_model_speaker(s->model, i)));
        json_object_set_new(v, "object", json_string("voice"));
        json_object_set_new(v, "type", json_string("preset"));
        const char *d = qtts_model_speaker_dialect(s->model, i);
        if (d) json_object_set_new(v, "dialect", json_string(d));
        json_array_append_new(data, v);
    }
    if (s->voices) {
        char **names = NULL;
        int *icl = NULL;
        int n = voice_store_list(s->voices, &names, &icl);
        for (int i = 0; i < n; i++) {
            json_t *v = json_object();
            json_object_set_new(v, "id", json_string(names[i]));
            json_object_set_new(v, "object", json_string("voice"));
            json_object_set_new(v, "type", json_string("cloned"));
            json_object_set_new(v, "mode", json_string(icl[i] ? "icl" : "xvector"));
            json_array_append_new(data, v);
        }
        voice_names_free(names, icl, n);
    }
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    json_object_set_new(o, "model_type", json_string(s->info.type_name));
    json_object_set_new(o, "voice_from_instructions", json_boolean(s->info.type == QTTS_MODEL_VOICE_DESIGN));
    return http_send_json(r, 200, o);
}

enum MHD_Result api_voices_delete(http_req *r, const char *name) {
    server *s = r->srv;
    api_error e;
    if (!s->voices || !voice_name_valid(name) || voice_store_remove(s->voices, name)) {
        api_error_set(&e, 404, "invalid_request_error", "voice", "voice_not_found", "No uploaded voice named '%s'",
                      name);
        return http_send_error(r, &e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(name));
    json_object_set_new(o, "object", json_string("voice"));
    json_object_set_new(o, "deleted", json_true());
    return http_send_json(r, 200, o);
}
