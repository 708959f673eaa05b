#!/bin/sh
# Runs each test binary or script given as an argument, TEST_JOBS at a time
# (default: the number of CPUs), then shows each one's lines in the order
# given, with its seconds, and ends with the summary line "N passed, N failed,
# N skipped". A binary that exits non-zero without reporting a failure (a
# crash, a sanitizer abort) counts as one failure. Exit status: 0 only when
# nothing failed.
# Each test gets a cache folder of its own as XDG_CACHE_HOME (the CLI's
# prepared-weights cache defaults to $XDG_CACHE_HOME/qtts): never the user's
# ~/.cache, and never another test's, as tests run side by side.
jobs=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/qtts-tests.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# Mesa's shader cache (lavapipe compiles every pipeline at a model's load)
# stays shared by the run's tests, as under one XDG_CACHE_HOME
MESA_SHADER_CACHE_DIR=${MESA_SHADER_CACHE_DIR:-$work/mesa}
export MESA_SHADER_CACHE_DIR
i=0
for t in "$@"; do
    i=$((i + 1))
    printf '%s\n%s\n' "$i" "$t"
done | xargs -n 2 -P "$jobs" sh -c '
    mkdir -p "$0/cache$1"
    t0=$(date +%s)
    XDG_CACHE_HOME="$0/cache$1" "$2" >"$0/$1.out" 2>&1
    echo $? >"$0/$1.rc"
    echo $(($(date +%s) - t0)) >"$0/$1.time"' "$work"
passed=0; failed=0; skipped=0; i=0
for t in "$@"; do
    i=$((i + 1))
    name=$(basename "$t")
    rc=$(cat "$work/$i.rc" 2>/dev/null || echo 127)
    grep -v '^# ' "$work/$i.out" 2>/dev/null | sed "s|^|[$name] |"
    echo "[$name] took $(cat "$work/$i.time" 2>/dev/null || echo '?') s"
    p=$(grep -c '^ok ' "$work/$i.out" 2>/dev/null); p=${p:-0}
    f=$(grep -c '^FAIL ' "$work/$i.out" 2>/dev/null); f=${f:-0}
    s=$(grep -c '^SKIP ' "$work/$i.out" 2>/dev/null); s=${s:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$name] FAIL $name: exited with status $rc"
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
