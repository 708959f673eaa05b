/* JSON helpers for request bodies (jansson): typed optional fields whose
 * errors read like OpenAI's ("Invalid type for 'speed': expected a number,
 * but got a string instead."), the error body, UTF-8 length and base64. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api.h"

void api_error_set(api_error *e, int status, const char *type, const char *param, const char *code, const char *fmt,
                   ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->retry_after_s = 0;
}

json_t *api_error_json(const api_error *e) {
    json_t *in = json_object();
    json_object_set_new(in, "message", json_string(e->message));
    json_object_set_new(in, "type", json_string(e->type ? e->type : "server_error"));
    json_object_set_new(in, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(in, "code", e->code[0] ? json_string(e->code) : json_null());
    json_t *o = json_object();
    json_object_set_new(o, "error", in);
    return o;
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int bad_type(api_error *e, const char *key, const char *want, const json_t *v) {
    API_BAD(e, key, "Invalid type for '%s': expected %s, but got %s instead.", key, want, type_name(v));
    snprintf(e->code, sizeof e->code, "invalid_type");
    return -1;
}

int json_opt_string(json_t *o, const char *key, const char **out, api_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return bad_type(e, key, "a string", v);
    *out = json_string_value(v);
    if (strlen(*out) != json_string_length(v)) {
        API_BAD(e, key, "'%s' contains a NUL character", key);
        return -1;
    }
    return 1;
}

int json_opt_number(json_t *o, const char *key, double lo, double hi, double *out, api_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad_type(e, key, "a number", v);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        API_BAD(e, key, "'%s' must be between %g and %g (got %g)", key, lo, hi, x);
        snprintf(e->code, sizeof e->code, "invalid_value");
        return -1;
    }
    *out = x;
    return 1;
}

int json_opt_int(json_t *o, const char *key, long long lo, long long hi, long long *out, api_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (json_is_real(v)) { /* 4.0 is an integer too */
        double x = json_real_value(v);
        if (x != floor(x) || x < (double)lo || x > (double)hi) return bad_type(e, key, "an integer", v);
        *out = (long long)x;
        return 1;
    }
    if (!json_is_integer(v)) return bad_type(e, key, "an integer", v);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        API_BAD(e, key, "'%s' must be between %lld and %lld (got %lld)", key, lo, hi, x);
        snprintf(e->code, sizeof e->code, "invalid_value");
        return -1;
    }
    *out = x;
    return 1;
}

int json_opt_bool(json_t *o, const char *key, int *out, api_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad_type(e, key, "a boolean", v);
    *out = json_is_true(v);
    return 1;
}

const char *json_unknown_key(json_t *o, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        (void)v;
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) ok = !strcmp(key, known[i]);
        if (!ok) return key;
    }
    return NULL;
}

size_t utf8_length(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

int base64_append(bytebuf *out, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4 * 256];
    size_t i = 0;
    while (i < n) {
        size_t k = 0;
        for (; i < n && k + 4 <= sizeof q; i += 3) {
            unsigned v = (unsigned)p[i] << 16;
            if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
            if (i + 2 < n) v |= p[i + 2];
            q[k++] = tab[(v >> 18) & 63];
            q[k++] = tab[(v >> 12) & 63];
            q[k++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
            q[k++] = i + 2 < n ? tab[v & 63] : '=';
        }
        if (bytebuf_put(out, q, k)) return -1;
    }
    return 0;
}
