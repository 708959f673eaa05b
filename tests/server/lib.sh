# Shared by the server's shell tests (sourced from the repository root, never
# run on its own): the ok/FAIL lines tests/run_tests.sh counts, and waiting
# for a server started with --port-file to listen and to be ready.
FAILED=0
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; FAILED=1; }
# check NAME STATUS WHY: ok when STATUS is 0, else FAIL with WHY
check() { if [ "$2" = 0 ]; then ok "$1"; else fail "$1" "$3"; fi; }
# wait_port FILE: the port written by --port-file (up to 60 s; empty if none)
wait_port() {
    i=0
    while [ ! -s "$1" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    cat "$1" 2>/dev/null
}
# wait_ready URL: until URL/ready answers 200 (up to 60 s)
wait_ready() {
    i=0
    while [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/ready")" != 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
# temp_dir NAME: T = a fresh directory; on exit every process in PIDS is
# killed and T removed
temp_dir() {
    T=$(mktemp -d "/tmp/qtts-$1-XXXXXX")
    PIDS=""
    trap 'for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
}
# start_server NAME BIN ARGS...: BIN ARGS --port 0 --port-file $T/port in the
# background (stderr to $T/log), added to PIDS; sets SERVER_PID, PORT and URL
# and waits until it is ready; FAIL NAME/start and exit 1 if it never writes
# its port
start_server() {
    name=$1
    bin=$2
    shift 2
    rm -f "$T/port"
    "$bin" "$@" --port 0 --port-file "$T/port" 2>"$T/log" &
    SERVER_PID=$!
    PIDS="$PIDS $SERVER_PID"
    PORT=$(wait_port "$T/port")
    if [ -z "$PORT" ]; then
        fail "$name/start" "no port file: $(cat "$T/log")"
        exit 1
    fi
    URL="http://127.0.0.1:$PORT"
    wait_ready "$URL"
}
