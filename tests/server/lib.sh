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
# npm_client NAME DIR PKG BIN: returns once DIR/node_modules holds the version
# of PKG that DIR/package.json pins (npm ci installs it); else ends the test:
# SKIP NAME when node >= 18 or npm is missing or npm cannot install PKG
# (offline), FAIL NAME when BIN is not built
npm_client() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "SKIP $1: node and npm are not installed (sh scripts/install-server-test-deps.sh)"
        exit 0
    fi
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$major" -lt 18 ]; then
        echo "SKIP $1: Node.js $(node --version) is too old for the $3 package (needs >= 18)"
        exit 0
    fi
    if [ ! -x "$4" ]; then
        echo "FAIL $1: $4 is not built"
        exit 1
    fi
    want=$(node -p 'require("./'"$2"'/package.json").dependencies["'"$3"'"]')
    have=$(node -p 'require("./'"$2"'/node_modules/'"$3"'/package.json").version' 2>/dev/null || echo none)
    if [ "$have" != "$want" ]; then
        if ! (cd "$2" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
            echo "SKIP $1: npm could not install $3@$want (registry unreachable or offline?): $(tail -2 "$2/npm.log" | tr '\n' ' ')"
            rm -f "$2/npm.log"
            exit 0
        fi
        rm -f "$2/npm.log"
    fi
}
# node_client NAME DIR PKG BIN ARGS...: DIR/test.mjs (a client of the npm
# package PKG, npm_client) against BIN ARGS --api-key (started with
# start_server, QTTS_URL and QTTS_KEY in its environment); FAIL NAME when it
# exits non-zero, then NAME/server_clean_exit when the server stops with 0 on
# SIGTERM
node_client() {
    nc_name=$1 nc_dir=$2 nc_pkg=$3 nc_bin=$4
    shift 4
    npm_client "$nc_name" "$nc_dir" "$nc_pkg" "$nc_bin"
    temp_dir "$nc_name"
    start_server "$nc_name" "$nc_bin" "$@" --api-key "$nc_name-test-key"
    QTTS_URL="$URL" QTTS_KEY="$nc_name-test-key" timeout 300 node "$nc_dir/test.mjs"
    rc=$?
    [ $rc = 0 ] || fail "$nc_name" "node exited with $rc"
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID"
    check "$nc_name/server_clean_exit" $? "exit code non-zero: $(tail -5 "$T/log")"
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
