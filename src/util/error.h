/* Internal error record: a status plus a human message that says what to do.
 * Every fallible internal call takes a qtts_error* and fills it on failure;
 * the public API copies the message into the object that owns it. */
#ifndef QTTS_UTIL_ERROR_H
#define QTTS_UTIL_ERROR_H

#include "qtts.h"

#define QTTS_ERROR_MSG_MAX 1024

typedef struct qtts_error {
    qtts_status status;
    char msg[QTTS_ERROR_MSG_MAX];
} qtts_error;

/* Record status st with a printf-style message; returns st so callers can
 * write `return err_set(e, QTTS_ERR_FORMAT, "...")`. e may be NULL. */
qtts_status err_set(qtts_error *e, qtts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix the existing message with more context ("file X: " + old). */
qtts_status err_prefix(qtts_error *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void err_clear(qtts_error *e);

#endif
