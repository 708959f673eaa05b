#!/bin/sh
# make soak SOAK_MINUTES=N: qtts-server on a Base checkpoint (SOAK_MODEL, by
# default the tiny base_clone with the tiny tokenizer; any Base checkpoint
# folder works, e.g. a 0.6B-geometry one from qtts-bench) with 2 slots and a
# queue of 2, so 8 clients hit the queue limit; tests/server/soak.c drives
# 8 clients with faults for N minutes (default 20) and checks everything it
# can see; then SIGTERM must stop the server with exit 0 (under the
# sanitizers: no leak, no report). BUILD picks the binaries (build-debug for
# the ASan + UBSan variant, make soak-ci; SOAK_RSS_TOLERANCE widens the RSS
# bound, 0.05 by default). Loopback only; bounded in time.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MINUTES=${SOAK_MINUTES:-20}
BIN="$BUILD/qtts-server"
SOAK="$BUILD/soak"
. tests/server/lib.sh
if [ ! -x "$BIN" ] || [ ! -x "$SOAK" ]; then
    echo "FAIL soak: $BIN or $SOAK is not built (make soak builds them)"
    exit 1
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP soak: needs curl"
    exit 0
fi
temp_dir soak
MODEL=${SOAK_MODEL:-}
if [ -z "$MODEL" ]; then
    MODEL="$T/model"
    mkdir "$MODEL"
    for f in "$(pwd)"/tests/golden/data/base_clone/* "$(pwd)"/tests/golden/tiny_tokenizer/*; do
        ln -s "$f" "$MODEL/$(basename "$f")"
    done
fi
mkdir "$T/voices"
start_server soak "$BIN" --model "$MODEL" --voices-dir "$T/voices" --slots 2 --queue 2 --threads 1 \
    --max-body-bytes 65536 --max-upload-bytes 1048576 --timeout 10 --request-timeout 120 --max-frames 64
echo "soak: $MINUTES min on $MODEL, server pid $SERVER_PID, port $PORT"
"$SOAK" --port "$PORT" --pid "$SERVER_PID" --minutes "$MINUTES" --clients 8 --max-body 65536 \
    --ref tests/golden/data/base_clone/inputs/ref_audio.wav --seed "${SOAK_SEED:-1}" \
    --rss-tolerance "${SOAK_RSS_TOLERANCE:-0.05}"
rc=$?
kill -TERM "$SERVER_PID" 2>/dev/null
i=0
while kill -0 "$SERVER_PID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$SERVER_PID" 2>/dev/null; then
    fail soak/stop "the server did not stop within 30 s of SIGTERM"
else
    wait "$SERVER_PID"
    src=$?
    check soak/clean_exit "$([ "$src" = 0 ]; echo $?)" "exit $src: $(tail -c 2000 "$T/log")"
fi
if grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$T/log"; then
    fail soak/sanitizers "$(grep -A5 "ERROR\|runtime error" "$T/log" | head -20)"
fi
[ "$rc" = 0 ] && [ "$FAILED" = 0 ]
