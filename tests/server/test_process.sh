#!/bin/sh
# qtts-server as a process: usage errors and exit codes, --port 0 with
# --port-file, a port already in use, and a clean stop on SIGTERM (running
# stream finishes, /ready says draining, new requests get 503, exit 0 with no
# leak reported under the sanitizers) and on SIGINT. Needs curl.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN="$BUILD/qtts-server"
MODEL=tests/golden/data/e2e_string
. tests/server/lib.sh
if [ ! -x "$BIN" ]; then
    echo "FAIL server_process: $BIN is not built"
    exit 1
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP server_process: needs curl"
    exit 0
fi
temp_dir server-proc


"$BIN" --help >"$T/help" 2>&1
rc=$?
grep -q -- "--slots" "$T/help" && grep -q -- "--api-key" "$T/help" && grep -q -- "--prefill-budget-ms" "$T/help"
check process/help $((rc + $?)) "exit $rc or options missing"
"$BIN" >/dev/null 2>"$T/err"
rc=$?
check process/needs_model "$([ $rc = 2 ] && grep -q -- "--model" "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"
"$BIN" --model "$MODEL" --frobnicate >/dev/null 2>"$T/err"
rc=$?
check process/unknown_option "$([ $rc = 2 ] && grep -q frobnicate "$T/err"; echo $?)" "exit $rc"
"$BIN" --model "$MODEL" --port 70000 >/dev/null 2>"$T/err"
rc=$?
check process/bad_port "$([ $rc = 2 ]; echo $?)" "exit $rc"
"$BIN" --model "$MODEL" --prefill-budget-ms -1 >/dev/null 2>"$T/err"
rc=$?
check process/bad_prefill_budget "$([ $rc = 2 ] && grep -q -- "--prefill-budget-ms needs an integer in \[0," "$T/err"; echo $?)" "exit $rc: $(cat "$T/err")"
"$BIN" --model "$T/nothing-here" --port 0 >/dev/null 2>"$T/err"
rc=$?
check process/missing_model_folder "$([ $rc = 1 ] && [ -s "$T/err" ]; echo $?)" "exit $rc"

start_server process "$BIN" --model "$MODEL" --drain 60 --threads 1
SRV=$SERVER_PID
code=$(curl -s -o "$T/h" -w '%{http_code}' "$URL/health")
check process/port_file_and_health "$([ "$code" = 200 ]; echo $?)" "health $code"

"$BIN" --model "$MODEL" --port "$PORT" >/dev/null 2>"$T/err2"
rc=$?
check process/port_in_use "$([ $rc = 1 ] && grep -q "cannot listen" "$T/err2"; echo $?)" "exit $rc: $(cat "$T/err2")"

# a stream in flight while SIGTERM arrives: it finishes, the rest is refused
FRAMES=600
curl -s -N -o "$T/stream.pcm" "$URL/v1/audio/speech" -d "{\"model\":\"m\",\"input\":\"Draining stream.\",\"voice\":\"ryan\",\"response_format\":\"pcm\",\"stream_format\":\"audio\",\"force_frames\":$FRAMES,\"seed\":1}" &
CURL=$!
PIDS="$PIDS $CURL"
i=0
while [ ! -s "$T/stream.pcm" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM $SRV
ready=$(curl -s -o "$T/ready" -w '%{http_code}' "$URL/ready")
new=$(curl -s -D "$T/hdr" -o "$T/new" -w '%{http_code}' "$URL/v1/audio/speech" -d '{"model":"m","input":"Too late.","voice":"ryan","response_format":"pcm"}')
wait $CURL
wait $SRV
rc=$?
size=$(wc -c <"$T/stream.pcm")
check process/sigterm_exit_0 "$([ $rc = 0 ]; echo $?)" "exit $rc: $(tail -5 "$T/log")"
check process/sigterm_drains_running_stream "$([ "$size" = $((FRAMES * 3840)) ]; echo $?)" "$size bytes of $((FRAMES * 3840))"
check process/draining_not_ready "$([ "$ready" = 503 ] && grep -q draining "$T/ready"; echo $?)" "ready $ready: $(cat "$T/ready")"
check process/draining_refuses_new "$([ "$new" = 503 ] && grep -qi "^retry-after" "$T/hdr" && grep -q '"error"' "$T/new"; echo $?)" "status $new: $(cat "$T/new")"
if grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)" "$T/log"; then fail process/no_sanitizer_report "$(grep -A5 Sanitizer "$T/log" | head -20)"; else ok process/no_sanitizer_report; fi

rm -f "$T/port"
"$BIN" --model "$MODEL" --port 0 --port-file "$T/port" 2>"$T/log2" &
SRV=$!
PIDS="$PIDS $SRV"
PORT=$(wait_port "$T/port")
kill -INT $SRV
wait $SRV
rc=$?
check process/sigint_exit_0 "$([ -n "$PORT" ] && [ $rc = 0 ]; echo $?)" "exit $rc: $(tail -5 "$T/log2")"
exit 0
