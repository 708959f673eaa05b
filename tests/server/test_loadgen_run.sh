#!/bin/sh
# The load generator end to end, through both of its entry points
# (`qtts-server --loadgen` and `qtts-bench server`), against a qtts-server it
# starts on a free port with the tiny e2e_string checkpoint: every request
# succeeds at each level, the tables have a row per level with the right
# counts, the ratio table starts at 1.00x, the per-request TTFA lines are
# there, the server's /metrics moved by the frames asked for; bad options are
# usage errors (exit 2) and a server that is not there is an error (exit 1).
# Needs curl.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SRV="$BUILD/qtts-server"
BENCH="$BUILD/qtts-bench"
MODEL=tests/golden/data/e2e_string
. tests/server/lib.sh
if [ ! -x "$SRV" ] || [ ! -x "$BENCH" ]; then
    echo "FAIL loadgen_run: $SRV or $BENCH is not built"
    exit 1
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP loadgen_run: needs curl"
    exit 0
fi
temp_dir loadgen
start_server loadgen_run "$SRV" --model "$MODEL" --threads 1 --slots 4 --queue 8
PID=$SERVER_PID

frames_total() { curl -s "$URL/metrics" | awk '$1 == "qtts_frames_generated_total" {print $2}'; }

# one sweep per entry point: levels 1 and 2, 2 requests each (2 at level 2), 3 forced frames, no cold request
for entry in server bench; do
    before=$(frames_total)
    if [ $entry = server ]; then
        "$SRV" --loadgen --url "$URL" --concurrency 1,2 --requests 2 --frames 3 --warmup 0 >"$T/out" 2>"$T/err"
    else
        "$BENCH" server --url "$URL" --concurrency 1,2 --requests 2 --frames 3 --warmup 0 >"$T/out" 2>"$T/err"
    fi
    rc=$?
    after=$(frames_total)
    check "loadgen_run/$entry/exit_0" "$([ $rc = 0 ]; echo $?)" "exit $rc: $(cat "$T/err")"
    # | concurrency | requests | ok | ...: every request ok at both levels
    check "loadgen_run/$entry/rows_all_ok" \
        "$(grep -q '^| 1 | 2 | 2 | ' "$T/out" && grep -q '^| 2 | 2 | 2 | ' "$T/out"; echo $?)" "$(grep '^| [12] |' "$T/out")"
    check "loadgen_run/$entry/ratio_table" "$(grep -q '^| 1 | 1.00x | 1.00x | 1.00x |' "$T/out"; echo $?)" \
        "$(grep 'x |' "$T/out")"
    check "loadgen_run/$entry/per_request_ttfa" \
        "$([ "$(grep -c 'TTFA ms in request order: [0-9]* [0-9]*$' "$T/out")" = 2 ]; echo $?)" \
        "$(grep 'TTFA ms' "$T/out")"
    check "loadgen_run/$entry/interpolated_median_stated" "$(grep -q 'linear' "$T/out"; echo $?)" "definition missing"
    # requests after the level's first C: the second at level 1, none at level 2 (R = C)
    check "loadgen_run/$entry/joiners_table" \
        "$(grep -q '^| 1 | 1 | [0-9.]* | [0-9.]*x |$' "$T/out" && ! grep -q '^| 2 | [0-9]* | [0-9.]* | [0-9.]*x |$' "$T/out"; echo $?)" \
        "$(grep -A4 'after the first C' "$T/out")"
    # 4 requests x 3 frames (4 = max(requests, concurrency) per level)
    check "loadgen_run/$entry/frames_generated" "$([ $((after - before)) = 12 ]; echo $?)" "$before -> $after"
done

# --frames auto: "Hi there." is 9 characters, 0.6 s at 15 a second, 7.5 frames -> 8 per request
before=$(frames_total)
"$BENCH" server --url "$URL" --concurrency 1 --requests 1 --warmup 0 --text "Hi there." --frames auto >"$T/out" 2>"$T/err"
rc=$?
after=$(frames_total)
check loadgen_run/frames_auto "$([ $rc = 0 ] && [ $((after - before)) = 8 ] && grep -q 'exactly 8 frames' "$T/out"; echo $?)" \
    "exit $rc, frames $before -> $after: $(grep frames "$T/out") $(cat "$T/err")"

# several --text: request i says text i mod 2, each forced to its own auto length
# ("Hi there." 8 frames, "Hi." 3 characters: 0.2 s, 2.5 -> 3 frames): 8 + 3
before=$(frames_total)
"$BENCH" server --url "$URL" --concurrency 1 --requests 2 --warmup 0 --text "Hi there." --text "Hi." --frames auto \
    >"$T/out" 2>"$T/err"
rc=$?
after=$(frames_total)
check loadgen_run/texts_cycle "$([ $rc = 0 ] && [ $((after - before)) = 11 ] && grep -q 'exactly 3 frames' "$T/out"; echo $?)" \
    "exit $rc, frames $before -> $after: $(grep frames "$T/out") $(cat "$T/err")"
# --mix: the 5 built-in texts (three languages), every request ok, no mismatch note for 5 requests
before=$(frames_total)
"$BENCH" server --url "$URL" --concurrency 1 --requests 5 --warmup 0 --mix --frames 2 >"$T/out" 2>"$T/err"
rc=$?
after=$(frames_total)
check loadgen_run/mix "$([ $rc = 0 ] && [ $((after - before)) = 10 ] && grep -q '^| 1 | 5 | 5 | ' "$T/out" &&
    [ "$(grep -c '^# text [1-5] of 5 ' "$T/out")" = 5 ] && ! grep -q 'different work' "$T/out"; echo $?)" \
    "exit $rc, frames $before -> $after: $(cat "$T/out" "$T/err")"
# 4 requests of 5 texts: the levels would not do the same work, and the report says so
"$BENCH" server --url "$URL" --concurrency 1 --requests 4 --warmup 0 --mix --frames 1 >"$T/out" 2>"$T/err"
check loadgen_run/mix_mismatch_noted "$(grep -q 'not a multiple of 5 texts' "$T/out"; echo $?)" "$(cat "$T/out")"
"$BENCH" server --url "$URL" --mix --text "x" >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/mix_and_text "$([ $rc = 2 ] && grep -q "exclude each other" "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"

# --text-mode reaches the server: streaming text, 3 forced frames, one request
before=$(frames_total)
"$BENCH" server --url "$URL" --concurrency 1 --requests 1 --warmup 0 --frames 3 --text-mode streaming >"$T/out" 2>"$T/err"
rc=$?
after=$(frames_total)
check loadgen_run/text_mode "$([ $rc = 0 ] && [ $((after - before)) = 3 ] && grep -q 'text_mode streaming' "$T/out"; echo $?)" \
    "exit $rc, frames $before -> $after: $(cat "$T/err")"
"$BENCH" server --url "$URL" --text-mode fast >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/bad_text_mode "$([ $rc = 2 ] && grep -q -- "--text-mode takes" "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"

"$BENCH" server --url "$URL" --requests many >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/bad_number "$([ $rc = 2 ] && grep -q -- "--requests takes a whole number" "$T/err"; echo $?)" \
    "exit $rc: $(cat "$T/err")"
"$BENCH" server --url "$URL" --concurrency 1,2x >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/bad_concurrency "$([ $rc = 2 ] && grep -q "bad --concurrency" "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"
"$SRV" --loadgen --url "http://127.0.0.1:x" >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/bad_url "$([ $rc = 2 ] && grep -q "bad --url" "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"
"$BENCH" server --url "$URL" --frobnicate 1 >/dev/null 2>"$T/err"
rc=$?
check loadgen_run/unknown_option "$([ $rc = 2 ] && grep -q frobnicate "$T/err"; echo $?)" "exit $rc"

kill -TERM "$PID"
wait "$PID"
rc=$?
PIDS=""
# nothing listens on the port now
"$BENCH" server --url "$URL" --concurrency 1 --requests 1 --frames 1 >/dev/null 2>"$T/err"
rc2=$?
check loadgen_run/no_server "$([ $rc2 = 1 ] && grep -q "no /metrics" "$T/err"; echo $?)" "exit $rc2: $(cat "$T/err")"
check loadgen_run/server_exit_0 "$([ $rc = 0 ]; echo $?)" "exit $rc"
