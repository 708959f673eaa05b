/* The HTTP daemon of the server (libmicrohttpd, thread per connection). */
#ifndef QTTS_SERVER_HTTP_H
#define QTTS_SERVER_HTTP_H

#include <stddef.h>

#include "server.h"

/* Bind cfg.host:cfg.port and start serving; sets s->port. 0 ok, -1 with err. */
int http_start(server *s, char *err, size_t err_size);
/* Close the listening socket and every connection, join their threads. */
void http_stop(server *s);

#endif
