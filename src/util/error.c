/* Internal error record (see error.h). */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

qtts_status err_set(qtts_error *e, qtts_status st, const char *fmt, ...) {
    if (!e) return st;
    e->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return st;
}

qtts_status err_prefix(qtts_error *e, const char *fmt, ...) {
    if (!e) return QTTS_ERR_INTERNAL;
    char pre[QTTS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t pl = strlen(pre), ol = strlen(e->msg);
    if (pl >= sizeof e->msg) pl = sizeof e->msg - 1;
    if (pl + ol >= sizeof e->msg) ol = sizeof e->msg - 1 - pl;
    memmove(e->msg + pl, e->msg, ol);
    memcpy(e->msg, pre, pl);
    e->msg[pl + ol] = '\0';
    return e->status;
}

void err_clear(qtts_error *e) {
    if (!e) return;
    e->status = QTTS_OK;
    e->msg[0] = '\0';
}
