/* Voice store of the server (see voices.h): a small array under a mutex;
 * entries are reference counted so a deleted voice lives on until the last
 * request using it ends. Files are written to NAME.qvoice.tmp and renamed, so
 * a crash never leaves a half-written voice behind. */
#include "voices.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct voice_ref {
    voice_store *vs;
    char name[65];
    qtts_voice *voice;
    int refs;     /* the store's own reference counts as one while listed */
    int listed;
};

struct voice_store {
    qtts_model *model;
    char *dir;
    pthread_mutex_t mu;
    voice_ref **v;
    int n, cap;
};

int voice_name_valid(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static void unref_locked(voice_ref *r) {
    if (--r->refs == 0) {
        qtts_voice_free(r->voice);
        free(r);
    }
}

static int insert_locked(voice_store *vs, const char *name, qtts_voice *v) {
    if (vs->n == vs->cap) {
        int cap = vs->cap ? vs->cap * 2 : 16;
        voice_ref **p = realloc(vs->v, sizeof(*p) * (size_t)cap);
        if (!p) return -1;
        vs->v = p;
        vs->cap = cap;
    }
    voice_ref *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->vs = vs;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->voice = v;
    r->refs = 1;
    r->listed = 1;
    vs->v[vs->n++] = r;
    return 0;
}

static int find_locked(const voice_store *vs, const char *name) {
    for (int i = 0; i < vs->n; i++)
        if (!strcmp(vs->v[i]->name, name)) return i;
    return -1;
}

voice_store *voice_store_open(qtts_model *m, const char *dir, void (*log)(void *, const char *), void *lu) {
    voice_store *vs = calloc(1, sizeof *vs);
    if (!vs) return NULL;
    vs->model = m;
    vs->dir = strdup(dir ? dir : "qtts-voices");
    if (!vs->dir) {
        free(vs);
        return NULL;
    }
    pthread_mutex_init(&vs->mu, NULL);
    DIR *d = opendir(vs->dir);
    if (!d) return vs; /* created on the first upload */
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 8 || strcmp(de->d_name + l - 7, ".qvoice")) continue;
        char name[80];
        if (l - 7 >= sizeof name) continue;
        memcpy(name, de->d_name, l - 7);
        name[l - 7] = 0;
        char path[4096], err[512], msg[4700];
        if (!voice_name_valid(name)) continue;
        snprintf(path, sizeof path, "%s/%s", vs->dir, de->d_name);
        qtts_voice *v = NULL;
        if (qtts_voice_load(m, path, &v, err, sizeof err)) {
            snprintf(msg, sizeof msg, "skipping voice %s: %s", path, err);
            if (log) log(lu, msg);
            continue;
        }
        if (find_locked(vs, name) >= 0 || insert_locked(vs, name, v)) qtts_voice_free(v);
    }
    closedir(d);
    return vs;
}

void voice_store_free(voice_store *vs) {
    if (!vs) return;
    for (int i = 0; i < vs->n; i++) {
        vs->v[i]->listed = 0;
        unref_locked(vs->v[i]);
    }
    free(vs->v);
    free(vs->dir);
    pthread_mutex_destroy(&vs->mu);
    free(vs);
}

voice_ref *voice_store_get(voice_store *vs, const char *name) {
    if (!vs || !name) return NULL;
    pthread_mutex_lock(&vs->mu);
    int i = find_locked(vs, name);
    voice_ref *r = i >= 0 ? vs->v[i] : NULL;
    if (r) r->refs++;
    pthread_mutex_unlock(&vs->mu);
    return r;
}

const qtts_voice *voice_ref_voice(const voice_ref *r) { return r ? r->voice : NULL; }

void voice_ref_release(voice_ref *r) {
    if (!r) return;
    voice_store *vs = r->vs;
    pthread_mutex_lock(&vs->mu);
    unref_locked(r);
    pthread_mutex_unlock(&vs->mu);
}

int voice_store_add(voice_store *vs, const char *name, qtts_voice *v, char *err, size_t n) {
    pthread_mutex_lock(&vs->mu);
    int rc = 0;
    if (find_locked(vs, name) >= 0) {
        rc = -2;
        snprintf(err, n, "a voice named '%s' exists already", name);
        goto out;
    }
    if (mkdir(vs->dir, 0755) && errno != EEXIST) {
        rc = -1;
        snprintf(err, n, "cannot create the voices folder %s: %s", vs->dir, strerror(errno));
        goto out;
    }
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s.qvoice", vs->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    char e2[512];
    if (qtts_voice_save(v, tmp, e2, sizeof e2)) {
        rc = -1;
        snprintf(err, n, "%s", e2);
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path)) {
        rc = -1;
        snprintf(err, n, "cannot rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (insert_locked(vs, name, v)) {
        rc = -1;
        snprintf(err, n, "out of memory");
        unlink(path);
        goto out;
    }
    v = NULL;
out:
    pthread_mutex_unlock(&vs->mu);
    qtts_voice_free(v);
    return rc;
}

int voice_store_remove(voice_store *vs, const char *name) {
    pthread_mutex_lock(&vs->mu);
    int i = find_locked(vs, name);
    if (i < 0) {
        pthread_mutex_unlock(&vs->mu);
        return -1;
    }
    voice_ref *r = vs->v[i];
    memmove(&vs->v[i], &vs->v[i + 1], sizeof(vs->v[0]) * (size_t)(vs->n - i - 1));
    vs->n--;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.qvoice", vs->dir, name);
    unlink(path);
    r->listed = 0;
    unref_locked(r);
    pthread_mutex_unlock(&vs->mu);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int voice_store_list(voice_store *vs, char ***names, int **icl) {
    *names = NULL;
    if (icl) *icl = NULL;
    pthread_mutex_lock(&vs->mu);
    int n = vs->n;
    char **out = calloc((size_t)(n ? n : 1), sizeof *out);
    int *ic = icl ? calloc((size_t)(n ? n : 1), sizeof *ic) : NULL;
    for (int i = 0; out && i < n; i++) out[i] = strdup(vs->v[i]->name);
    pthread_mutex_unlock(&vs->mu);
    int ok = out && (!icl || ic);
    for (int i = 0; ok && i < n; i++) ok = out[i] != NULL;
    if (!ok) {
        voice_names_free(out, ic, out ? n : 0);
        return 0;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_str);
    if (ic)
        for (int i = 0; i < n; i++) {
            voice_ref *r = voice_store_get(vs, out[i]);
            ic[i] = r ? qtts_voice_is_icl(r->voice) : 0;
            voice_ref_release(r);
        }
    *names = out;
    if (icl) *icl = ic;
    return n;
}

void voice_names_free(char **names, int *icl, int n) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(icl);
}
