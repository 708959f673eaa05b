#!/bin/sh
# Disk faults on the CLI's output (tiny test checkpoints): writing audio past
# a file-size limit (ulimit -f), to /dev/full and to a full filesystem (a
# 64 KiB tmpfs, when this user may mount one) fails with exit code 5 and a
# message naming the file, and the incomplete file is removed (WAV, FLAC and
# raw; whole and --stream). Saving a voice over an existing voice file when
# the write fails (a file-size limit, a full filesystem) or into an unwritable
# place leaves the existing file byte for byte as it was.
set -u
cd "$(dirname "$0")/../.."
QTTS="${BUILD:-build}/qtts"
if [ ! -x "$QTTS" ]; then
    echo "SKIP disk_faults: $QTTS not built (make)"
    exit 0
fi
T=$(mktemp -d /tmp/qtts-disk-faults-XXXXXX)
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
CV=tests/golden/data/e2e_string
BASE=tests/golden/data/base_clone
REF=$BASE/inputs/ref_audio.wav
TEXT="Hello there, this is a sentence long enough to make more than a few kilobytes of audio."

# run QTTS ARGS... under a file-size limit of $1 blocks of 512 bytes; stderr to
# $T/err (through a pipe, which the limit does not cover); sets rc
limited() {
    blocks=$1; shift
    rc=$( { sh -c 'ulimit -f "$0"; exec "$@" 2>&1 >/dev/null; ' "$blocks" "$QTTS" "$@"; echo "rc=$?" >&2; } 2>&1 >"$T/err" | sed -n 's/^rc=//p')
}

# audio output past a file-size limit
for fmt in wav flac raw; do
    for mode in whole stream; do
        out="$T/out.$fmt"
        rm -f "$out"
        if [ $mode = stream ]; then limited 8 -q --model $CV --speaker ryan --text "$TEXT" --stream -o "$out"
        else limited 8 -q --model $CV --speaker ryan --text "$TEXT" -o "$out"; fi
        if [ "$rc" = 5 ] && grep -q "$out" "$T/err" && grep -q "too large" "$T/err" && [ ! -e "$out" ]; then
            echo "ok disk_fault_size_limit_${fmt}_$mode"
        else
            echo "FAIL disk_fault_size_limit_${fmt}_$mode: exit $rc, file $(ls -la "$out" 2>&1), stderr: $(head -c 300 "$T/err")"
        fi
    done
done

# the same output with no limit: the test's setup works (the limit above is what failed)
if "$QTTS" -q --model $CV --speaker ryan --text "$TEXT" -o "$T/ok.wav" && [ "$(wc -c <"$T/ok.wav")" -gt 8192 ]; then
    echo "ok disk_fault_control_writes"
else
    echo "FAIL disk_fault_control_writes: without a limit the output is missing or under 8 KiB"
fi

# /dev/full: ENOSPC on every write; exit 5, and the device is left alone
"$QTTS" -q --model $CV --speaker ryan --text "$TEXT" --format raw -o /dev/full 2>"$T/err"
rc=$?
if [ "$rc" = 5 ] && grep -q "/dev/full" "$T/err" && [ -c /dev/full ]; then
    echo "ok disk_fault_dev_full"
else
    echo "FAIL disk_fault_dev_full: exit $rc, stderr: $(head -c 300 "$T/err")"
fi

# a full filesystem: a 64 KiB tmpfs (needs the right to mount)
mkdir "$T/mnt"
if mount -t tmpfs -o size=64k tmpfs "$T/mnt" 2>/dev/null; then
    MNT="$T/mnt"
    head -c 40000 /dev/zero >"$MNT/filler"
    "$QTTS" -q --model $CV --speaker ryan --text "$TEXT $TEXT" -o "$MNT/out.wav" 2>"$T/err"
    rc=$?
    if [ "$rc" = 5 ] && grep -q "out.wav" "$T/err" && [ ! -e "$MNT/out.wav" ]; then
        echo "ok disk_fault_full_fs"
    else
        echo "FAIL disk_fault_full_fs: exit $rc, file $(ls -la "$MNT/out.wav" 2>&1), stderr: $(head -c 300 "$T/err")"
    fi
else
    echo "SKIP disk_fault_full_fs: cannot mount a tmpfs here (needs root)"
fi

# voices: an existing voice file survives a failed save over it
if ! "$QTTS" -q --model $BASE --ref-audio $REF --xvector-only --save-voice "$T/v.qvoice" 2>"$T/err"; then
    echo "FAIL disk_fault_voice_setup: $(head -c 300 "$T/err")"
    exit 0
fi
cp "$T/v.qvoice" "$T/v.keep"
limited 0 -q --model $BASE --ref-audio $REF --ref-text hello --ref-text-ids "1 2 3" --save-voice "$T/v.qvoice"
if [ "$rc" = 5 ] && cmp -s "$T/v.qvoice" "$T/v.keep" && [ "$(ls "$T" | grep -c 'v.qvoice.tmp')" = 0 ]; then
    echo "ok disk_fault_voice_size_limit_keeps_old"
else
    echo "FAIL disk_fault_voice_size_limit_keeps_old: exit $rc, $(ls "$T"), stderr: $(head -c 300 "$T/err")"
fi
if [ -n "$MNT" ]; then
    rm -f "$MNT/filler" "$MNT"/out*
    cp "$T/v.keep" "$MNT/v.qvoice"
    head -c 65536 /dev/zero >"$MNT/filler" 2>/dev/null
    "$QTTS" -q --model $BASE --ref-audio $REF --ref-text hello --ref-text-ids "1 2 3" --save-voice "$MNT/v.qvoice" 2>"$T/err"
    rc=$?
    if [ "$rc" = 5 ] && cmp -s "$MNT/v.qvoice" "$T/v.keep" && [ "$(ls "$MNT" | grep -c 'tmp')" = 0 ]; then
        echo "ok disk_fault_voice_full_fs_keeps_old"
    else
        echo "FAIL disk_fault_voice_full_fs_keeps_old: exit $rc, $(ls "$MNT"), stderr: $(head -c 300 "$T/err")"
    fi
fi
"$QTTS" -q --model $BASE --ref-audio $REF --xvector-only --save-voice "$T/no/such/dir/v.qvoice" 2>"$T/err"
rc=$?
if [ "$rc" = 5 ] && grep -q "no/such/dir" "$T/err" && cmp -s "$T/v.qvoice" "$T/v.keep"; then
    echo "ok disk_fault_voice_unwritable_place"
else
    echo "FAIL disk_fault_voice_unwritable_place: exit $rc, stderr: $(head -c 300 "$T/err")"
fi
