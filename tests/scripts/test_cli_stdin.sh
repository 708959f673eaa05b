#!/bin/sh
# qtts --text - --stdout speaks standard input as it arrives: the raw PCM of
# a pipe is byte for byte that of the same text given with --text, whether
# the text comes at once or a few bytes at a time with pauses, and audio is
# written while the writer still holds standard input open (before EOF).
set -u
cd "$(dirname "$0")/../.."
QTTS="${BUILD:-build}/qtts"
M=tests/golden/data/e2e_string
if [ ! -x "$QTTS" ]; then
    echo "SKIP cli_stdin: $QTTS not built (make)"
    exit 0
fi
T=$(mktemp -d /tmp/qtts-cli-stdin-XXXXXX)
trap 'rm -rf "$T"' EXIT
ARGS="--model $M --speaker vivian --language english --text-mode streaming --seed 5 --max-new-tokens 40 --quiet --stdout"
TEXT="Speech starts before the text ends, because the rest comes later"

"$QTTS" $ARGS --text "$TEXT" >"$T/ref.raw" 2>"$T/err"
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$T/ref.raw" ]; then
    echo "FAIL cli_stdin_reference: exit $rc: $(head -c 300 "$T/err")"
    exit 0
fi

printf '%s' "$TEXT" | "$QTTS" $ARGS --text - >"$T/once.raw" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$T/ref.raw" "$T/once.raw"; then
    echo "ok cli_stdin_whole_pipe_identical"
else
    echo "FAIL cli_stdin_whole_pipe_identical: exit $rc, $(wc -c <"$T/once.raw") vs $(wc -c <"$T/ref.raw") bytes: $(head -c 300 "$T/err")"
fi

# a few bytes at a time, with pauses (the generation catches up and waits)
(for w in $TEXT; do printf '%s' "$w"; sleep 0.05; [ "$w" = later ] || printf ' '; done) |
    "$QTTS" $ARGS --text - >"$T/slow.raw" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$T/ref.raw" "$T/slow.raw"; then
    echo "ok cli_stdin_slow_pipe_identical"
else
    echo "FAIL cli_stdin_slow_pipe_identical: exit $rc, $(wc -c <"$T/slow.raw") vs $(wc -c <"$T/ref.raw") bytes: $(head -c 300 "$T/err")"
fi

# audio before EOF: the writer holds standard input open for 8 s
(printf 'Speech starts before the text ends, because'; sleep 8; printf ' the rest comes later') |
    "$QTTS" $ARGS --text - >"$T/live.raw" 2>"$T/err" &
pid=$!
early=0
i=0
while [ $i -lt 60 ]; do
    if [ -s "$T/live.raw" ]; then early=$(wc -c <"$T/live.raw"); break; fi
    sleep 0.1
    i=$((i + 1))
done
wait $pid
rc=$?
if [ "$rc" -eq 0 ] && [ "$early" -gt 0 ] && cmp -s "$T/ref.raw" "$T/live.raw"; then
    echo "ok cli_stdin_speaks_before_eof: $early bytes out before EOF"
else
    echo "FAIL cli_stdin_speaks_before_eof: exit $rc, $early bytes before EOF, $(wc -c <"$T/live.raw") vs $(wc -c <"$T/ref.raw") bytes: $(head -c 300 "$T/err")"
fi
