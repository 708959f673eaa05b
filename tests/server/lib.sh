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
