#!/bin/sh
# Installs the Debian packages the server's integration tests use: nginx (the
# load-balancer test, tests/server/test_nginx.sh) and Node.js + npm (the
# official openai client test, tests/server/test_openai_node.sh). Idempotent:
# does nothing when the commands are already there (whatever package provides
# them: a nodesource nodejs bundles npm, and Debian's npm would conflict with
# it). Needs root (or sudo). The tests SKIP with a reason when these are
# missing, so this is optional.
set -e
missing=""
command -v nginx >/dev/null 2>&1 || missing="$missing nginx-light"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
sh "$(dirname "$0")/apt-install.sh" $missing
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# the Debian nginx package may start a system service on port 80; the tests
# run their own nginx on loopback ports and need nothing else
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
    $SUDO systemctl stop nginx || true
fi
exit 0
