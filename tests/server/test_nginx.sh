#!/bin/sh
# Scaling out: two qtts-server instances behind nginx on loopback, with the
# configuration docs/SERVER.md recommends (least_conn, no proxy buffering,
# retry on the next instance when one refuses: connection error, 503 while
# warming up or draining, 429 when full). Checks that requests spread across
# both, that audio through the proxy is byte-identical to a direct answer, that
# an instance draining after SIGTERM finishes its stream while new requests go
# to the other, and that everything still succeeds once it is gone.
# SKIP when nginx is not installed (scripts/install-server-test-deps.sh).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN="$(pwd)/$BUILD/qtts-server"
MODEL=tests/golden/data/e2e_string
. tests/server/lib.sh
NGINX=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null)
if [ -z "$NGINX" ]; then
    echo "SKIP nginx: nginx is not installed (sh scripts/install-server-test-deps.sh)"
    exit 0
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP nginx: needs curl"
    exit 0
fi
if [ ! -x "$BIN" ]; then
    echo "FAIL nginx: $BIN is not built"
    exit 1
fi
T=$(mktemp -d /tmp/qtts-nginx-XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    if [ "$FAILED" = 1 ]; then # what the instances and nginx said, for the failure above
        for f in "$T/a.log" "$T/b.log" "$T/ngx/error.log"; do
            [ -s "$f" ] && tail -n 15 "$f" | sed "s|^|nginx-diag $(basename "$f"): |"
        done
    fi
    rm -rf "$T"
}
trap cleanup EXIT

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    else
        echo $((20000 + $$ % 20000))
    fi
}
start_server() { # NAME: starts, sets PORT_NAME and PID_NAME
    "$BIN" --model "$MODEL" --port 0 --port-file "$T/$1.port" --slots 2 --queue 4 --drain 60 --threads 1 2>"$T/$1.log" &
    eval "PID_$1=$!"
    PIDS="$PIDS $!"
    eval "PORT_$1=$(wait_port "$T/$1.port")"
    eval "wait_ready http://127.0.0.1:\$PORT_$1"
}
speech_count() { # PORT: speech requests answered 200
    curl -s "http://127.0.0.1:$1/metrics" | awk '/^qtts_requests_total\{endpoint="speech",status="200"\}/ {print $2; f=1} END {if (!f) print 0}'
}

start_server a
start_server b
if [ -z "$PORT_a" ] || [ -z "$PORT_b" ]; then
    fail nginx/instances "could not start two servers: $(cat "$T/a.log" "$T/b.log")"
    exit 0
fi
PN=$(free_port)
mkdir -p "$T/ngx"
cat >"$T/nginx.conf" <<EOF
worker_processes 1;
pid $T/ngx/nginx.pid;
error_log $T/ngx/error.log warn;
events { worker_connections 256; }
http {
    access_log $T/ngx/access.log;
    client_body_temp_path $T/ngx/body;
    proxy_temp_path $T/ngx/proxy;
    fastcgi_temp_path $T/ngx/fastcgi;
    uwsgi_temp_path $T/ngx/uwsgi;
    scgi_temp_path $T/ngx/scgi;
    upstream qtts {
        least_conn;
        server 127.0.0.1:$PORT_a max_fails=1 fail_timeout=2s;
        server 127.0.0.1:$PORT_b max_fails=1 fail_timeout=2s;
        keepalive 8;
    }
    server {
        listen 127.0.0.1:$PN;
        client_max_body_size 32m;
        location / {
            proxy_pass http://qtts;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout http_503 http_429 non_idempotent;
            proxy_next_upstream_tries 3;
        }
    }
}
EOF
"$NGINX" -p "$T/ngx" -c "$T/nginx.conf" -e "$T/ngx/error.log" -g 'daemon off;' 2>"$T/nginx.out" &
NGX=$!
PIDS="$PIDS $NGX"
LB="http://127.0.0.1:$PN"
i=0
while [ "$(curl -s -o /dev/null -w '%{http_code}' "$LB/health")" != 200 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ $i -ge 100 ]; then
    fail nginx/start "nginx did not answer on port $PN: $(cat "$T/nginx.out" "$T/ngx/error.log" 2>/dev/null | tail -5)"
    exit 0
fi
BODY='{"model":"m","input":"Hello from behind the balancer.","voice":"vivian","response_format":"pcm","seed":11,"do_sample":true}'

# requests spread over both instances
burst() { # N TAG: N requests through nginx, 4 at a time; prints how many were not 200
    n=0
    j=0
    while [ $j -lt "$1" ]; do
        for k in 1 2 3 4; do
            curl -s -o "$T/$2.$j.$k.pcm" -w '%{http_code}\n' "$LB/v1/audio/speech" -d "$BODY" >"$T/$2.$j.$k.code" &
        done
        wait
        for k in 1 2 3 4; do [ "$(cat "$T/$2.$j.$k.code")" = 200 ] || n=$((n + 1)); done
        j=$((j + 4))
    done
    echo $n
}
a0=$(speech_count "$PORT_a")
b0=$(speech_count "$PORT_b")
bad=$(burst 12 spread)
a1=$(speech_count "$PORT_a")
b1=$(speech_count "$PORT_b")
check nginx/all_answered "$([ "$bad" = 0 ]; echo $?)" "$bad of 12 failed"
check nginx/spread_across_instances "$([ $((a1 - a0)) -ge 1 ] && [ $((b1 - b0)) -ge 1 ] && [ $((a1 - a0 + b1 - b0)) = 12 ]; echo $?)" "instance a took $((a1 - a0)), b took $((b1 - b0))"
curl -s -o "$T/direct.pcm" "http://127.0.0.1:$PORT_a/v1/audio/speech" -d "$BODY"
check nginx/same_bytes_as_direct "$(cmp -s "$T/direct.pcm" "$T/spread.0.1.pcm"; echo $?)" "audio through nginx differs from a direct answer"

# a long stream, then SIGTERM to the instance serving it: it drains, the other serves new requests
FRAMES=400
curl -s -N -o "$T/long.pcm" "$LB/v1/audio/speech" -d "{\"model\":\"m\",\"input\":\"A long answer.\",\"voice\":\"ryan\",\"response_format\":\"pcm\",\"stream_format\":\"audio\",\"force_frames\":$FRAMES}" &
LONG=$!
i=0
while [ ! -s "$T/long.pcm" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
busy_a=$(curl -s "http://127.0.0.1:$PORT_a/metrics" | awk '/^qtts_active_slots / {print $2}')
if [ "$busy_a" = 1 ]; then VICTIM=$PID_a; SURVIVOR=$PORT_b; else VICTIM=$PID_b; SURVIVOR=$PORT_a; fi
s0=$(speech_count "$SURVIVOR")
kill -TERM "$VICTIM"
bad=$(burst 8 drain)
wait $LONG
size=$(wc -c <"$T/long.pcm")
s1=$(speech_count "$SURVIVOR")
check nginx/draining_instance_skipped "$([ "$bad" = 0 ] && [ $((s1 - s0)) = 8 ]; echo $?)" "$bad of 8 failed, survivor took $((s1 - s0))"
check nginx/draining_instance_finishes_its_stream "$([ "$size" = $((FRAMES * 3840)) ]; echo $?)" "$size of $((FRAMES * 3840)) bytes"
wait "$VICTIM"
rc=$?
check nginx/stopped_instance_exit_0 "$([ $rc = 0 ]; echo $?)" "exit $rc"

# the instance is gone: requests still succeed
bad=$(burst 8 gone)
check nginx/survives_a_stopped_instance "$([ "$bad" = 0 ]; echo $?)" "$bad of 8 failed"
kill -TERM $NGX 2>/dev/null
wait $NGX 2>/dev/null
exit 0
