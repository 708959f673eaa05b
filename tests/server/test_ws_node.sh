#!/bin/sh
# A real WebSocket client: the ws npm package (pinned in
# tests/server/ws-client/package.json, installed there with npm ci) against
# qtts-server's GET /v1/audio/speech/stream (tests/server/ws-client/test.mjs).
# SKIP with the reason when node/npm are missing or the npm registry cannot
# be reached.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN="$(pwd)/$BUILD/qtts-server"
MODEL=tests/golden/data/e2e_string
DIR=tests/server/ws-client
. tests/server/lib.sh
node_client ws_node "$DIR" ws "$BIN" --model "$MODEL" --threads 1 --timeout 3
[ "$FAILED" = 0 ]
