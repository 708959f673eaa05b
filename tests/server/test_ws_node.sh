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
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP ws_node: node and npm are not installed (sh scripts/install-server-test-deps.sh)"
    exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 18 ]; then
    echo "SKIP ws_node: Node.js $(node --version) is too old (needs >= 18)"
    exit 0
fi
if [ ! -x "$BIN" ]; then
    echo "FAIL ws_node: $BIN is not built"
    exit 1
fi
want=$(node -p 'require("./'"$DIR"'/package.json").dependencies.ws')
have=$(node -p 'require("./'"$DIR"'/node_modules/ws/package.json").version' 2>/dev/null || echo none)
if [ "$have" != "$want" ]; then
    if ! (cd "$DIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
        echo "SKIP ws_node: npm could not install ws@$want (registry unreachable or offline?): $(tail -2 "$DIR/npm.log" | tr '\n' ' ')"
        rm -f "$DIR/npm.log"
        exit 0
    fi
    rm -f "$DIR/npm.log"
fi
T=$(mktemp -d /tmp/qtts-ws-XXXXXX)
SRV=""
cleanup() {
    [ -n "$SRV" ] && kill -9 "$SRV" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
KEY=ws-test-key
"$BIN" --model "$MODEL" --port 0 --port-file "$T/port" --api-key "$KEY" --threads 1 --timeout 3 2>"$T/log" &
SRV=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
PORT=$(cat "$T/port" 2>/dev/null)
if [ -z "$PORT" ]; then
    echo "FAIL ws_node/start: $(cat "$T/log")"
    exit 1
fi
i=0
while [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/ready")" != 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
QTTS_URL="http://127.0.0.1:$PORT" QTTS_KEY=$KEY timeout 300 node "$DIR/test.mjs"
rc=$?
[ $rc = 0 ] || echo "FAIL ws_node: node exited with $rc"
kill -TERM "$SRV"
wait "$SRV"
