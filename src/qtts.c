/* Library lifecycle and status strings. */
#include "qtts.h"

const char *qtts_status_str(qtts_status st) {
    switch (st) {
    case QTTS_OK: return "ok";
    case QTTS_ERR_INVALID_ARG: return "invalid argument";
    case QTTS_ERR_IO: return "I/O error";
    case QTTS_ERR_FORMAT: return "malformed file";
    case QTTS_ERR_MODEL: return "model checkpoint error";
    case QTTS_ERR_INPUT: return "invalid input";
    case QTTS_ERR_NOMEM: return "out of memory";
    case QTTS_ERR_UNSUPPORTED: return "unsupported";
    case QTTS_ERR_LIMIT: return "limit exceeded";
    case QTTS_ERR_CANCELLED: return "cancelled";
    case QTTS_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
