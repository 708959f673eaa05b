#!/bin/sh
# make fuzz: runs each libFuzzer target of BUILD_DIR/fuzz/ for FUZZ_SECONDS
# seconds (default 60), niced, on a working copy of its seed corpus
# (BUILD_DIR/fuzz-work/<target>/corpus: the committed seeds stay as they are)
# plus the kept findings, and prints per target: executions, coverage
# (edges: libFuzzer's cov), corpus size and findings; tests/fuzz/<target>.dict,
# when there is one, is the target's libFuzzer dictionary. A finding's input is
# left in BUILD_DIR/fuzz-work/<target>/ (crash-*, leak-*, timeout-*, oom-*):
# fix the bug, then copy the input to tests/fuzz/regress/<target>/ so that
# make test replays it. Exit status 1 when anything was found. FUZZ_JOBS
# targets run at a time (default: the number of CPUs), each on one core.
# Usage: sh tests/fuzz/run.sh BUILD_DIR TARGET...
set -u
export LSAN_OPTIONS="suppressions=$(pwd)/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
build=$1; shift
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac

# fuzz_one TARGET: runs it, then writes its summary line to
# $build/fuzz-work/TARGET/summary.txt (and what it found before it)
fuzz_one() {
    t=$1
    bin=$build/fuzz/fuzz_$t
    work=$build/fuzz-work/$t
    mkdir -p "$work/corpus"
    log=$work/log.txt
    seeds=""
    for d in tests/fuzz/corpus/$t tests/fuzz/regress/$t; do [ -d "$d" ] && seeds="$seeds $d"; done
    rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-* "$work/summary.txt"
    dict=""
    [ -f tests/fuzz/$t.dict ] && dict="-dict=tests/fuzz/$t.dict"
    # -rss_limit_mb: the targets that load the tiny checkpoints need ~1 GB under ASan
    # shellcheck disable=SC2086
    nice -n 10 "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -max_len=65536 $dict \
        -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" $seeds >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    units=$(ls "$work/corpus" | wc -l)
    n=$(ls "$work" | grep -c -E '^(crash|leak|timeout|oom)-')
    if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then n=1; fi
    {
        [ "$n" -ne 0 ] && grep -E 'ERROR|SUMMARY|fuzz check failed|==[0-9]+==' "$log" | head -5
        printf '%-12s %12s execs %6s edges %6s corpus %3s findings\n' "$t" "${execs:-?}" "${cov:-?}" "$units" "$n"
    } >"$work/summary.txt"
}

# FUZZ_JOBS at a time: each group runs for the same FUZZ_SECONDS
targets="$*"
while [ $# -gt 0 ]; do
    k=0
    while [ $# -gt 0 ] && [ $k -lt "$jobs" ]; do
        echo "== fuzz_$1: $secs s =="
        fuzz_one "$1" &
        shift
        k=$((k + 1))
    done
    wait
done
found=0
echo "== fuzz summary ($secs s per target, $jobs at a time; logs and findings under $build/fuzz-work/) =="
for t in $targets; do
    f=$build/fuzz-work/$t/summary.txt
    if [ -f "$f" ]; then
        cat "$f"
        tail -n 1 "$f" | grep -q ' 0 findings$' || found=1
    else
        echo "$t: no summary (the run did not finish)"
        found=1
    fi
done
exit $found
