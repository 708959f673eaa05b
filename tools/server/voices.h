/* The server's cloned voices (Base models): NAME -> qtts_voice, kept in
 * memory and on disk as DIR/NAME.qvoice (qtts_voice_save format), loaded at
 * start. A voice in use by a request stays alive (reference counted) even if
 * it is deleted meanwhile. Thread-safe. */
#ifndef QTTS_SERVER_VOICES_H
#define QTTS_SERVER_VOICES_H

#include <stddef.h>

#include "qtts.h"

typedef struct voice_store voice_store;
typedef struct voice_ref voice_ref;

/* Open (and create if needed, lazily on the first save) the folder and load
 * every NAME.qvoice in it; unreadable files are skipped with a message to
 * log (may be NULL). NULL only when out of memory. */
voice_store *voice_store_open(qtts_model *model, const char *dir, void (*log)(void *u, const char *msg), void *log_user);
void voice_store_free(voice_store *vs); /* accepts NULL; references must be released first */

/* 1 for names of [A-Za-z0-9_-], 1 to 64 characters. */
int voice_name_valid(const char *name);

/* A reference to voice NAME (exact match), or NULL. Release it. */
voice_ref *voice_store_get(voice_store *vs, const char *name);
const qtts_voice *voice_ref_voice(const voice_ref *r);
void voice_ref_release(voice_ref *r); /* accepts NULL */

/* Keep voice v (ownership passes to the store, also on failure) as NAME:
 * saved to disk first. Returns 0, -1 with err on an IO error, -2 if NAME
 * exists. */
int voice_store_add(voice_store *vs, const char *name, qtts_voice *v, char *err, size_t err_size);
/* Delete NAME from memory and disk; 0, or -1 if there is none. */
int voice_store_remove(voice_store *vs, const char *name);

/* Snapshot of the names (malloc'ed array of malloc'ed strings, sorted);
 * free with voice_names_free. *icl gets 1/0 per name when not NULL
 * (malloc'ed too). */
int voice_store_list(voice_store *vs, char ***names, int **icl);
void voice_names_free(char **names, int *icl, int n);

#endif
