#!/bin/sh
# Runs each test binary given as an argument, shows its lines, and ends with
# the summary line "N passed, N failed, N skipped". A binary that exits
# non-zero without reporting a failure (a crash, a sanitizer abort) counts as
# one failure. Exit status: 0 only when nothing failed.
passed=0; failed=0; skipped=0
# the CLI's prepared-weights cache defaults to $XDG_CACHE_HOME/qtts: keep the
# tests' caches in a folder of their own, never the user's ~/.cache
cache_home=$(mktemp -d "${TMPDIR:-/tmp}/qtts-test-cache.XXXXXX") || exit 1
export XDG_CACHE_HOME="$cache_home"
trap 'rm -rf "$cache_home"' EXIT
for t in "$@"; do
    t0=$(date +%s)
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -v '^# ' | sed "s|^|[$(basename "$t")] |"
    echo "[$(basename "$t")] took $(($(date +%s) - t0)) s"
    p=$(printf '%s\n' "$out" | grep -c '^ok ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    s=$(printf '%s\n' "$out" | grep -c '^SKIP ')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$(basename "$t")] FAIL $(basename "$t"): exited with status $rc"
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
