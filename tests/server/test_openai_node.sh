#!/bin/sh
# A real client: the official openai npm package (pinned in
# tests/server/client/package.json, installed here into
# tests/server/client/node_modules with npm ci) against qtts-server with an
# API key: whole and streamed responses, SSE, errors (tests/server/client/test.mjs).
# SKIP with the reason when node/npm are missing (scripts/install-server-test-deps.sh)
# or the npm registry cannot be reached.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN="$(pwd)/$BUILD/qtts-server"
MODEL=tests/golden/data/e2e_string
DIR=tests/server/client
. tests/server/lib.sh
node_client openai_node "$DIR" openai "$BIN" --model "$MODEL" --threads 1
[ "$FAILED" = 0 ]
