#!/bin/sh
# qtts --backend / --device and qtts info --backend: an unknown backend or a
# bad device index is refused with a message naming what is accepted;
# qtts info --backend cpu lists the host; qtts info --backend vulkan lists at
# least one device with its name, or fails saying which package to install.
# Whether the Vulkan path makes audio is tested elsewhere.
set -u
cd "$(dirname "$0")/../.."
QTTS="${BUILD:-build}/qtts"
if [ ! -x "$QTTS" ]; then
    echo "SKIP cli_backend: $QTTS not built (make)"
    exit 0
fi
T=$(mktemp -d /tmp/qtts-cli-backend-XXXXXX)
trap 'rm -rf "$T"' EXIT

# an unknown backend: usage error (2) naming both backends
"$QTTS" --backend nosuch --model "$T" --text hi --dump-codes "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q cpu "$T/err" && grep -q vulkan "$T/err" && grep -q nosuch "$T/err"; then
    echo "ok cli_unknown_backend_refused"
else
    echo "FAIL cli_unknown_backend_refused: exit $rc, stderr: $(head -c 300 "$T/err")"
fi

# a bad device index: usage error naming the option
bad=""
for d in -1 x 1.5 ""; do
    "$QTTS" info --backend cpu --device "$d" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ne 2 ] || ! grep -q -- "--device" "$T/err"; then bad="$bad '$d' (exit $rc)"; fi
done
if [ -z "$bad" ]; then echo "ok cli_bad_device_refused"; else echo "FAIL cli_bad_device_refused:$bad"; fi

# --backend needs a value
"$QTTS" info --backend >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q -- "--backend" "$T/err"; then
    echo "ok cli_backend_needs_value"
else
    echo "FAIL cli_backend_needs_value: exit $rc, stderr: $(head -c 300 "$T/err")"
fi

# the CPU backend: always there
"$QTTS" info --backend cpu >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^backend: *cpu" "$T/out" && grep -q "^ *name:" "$T/out"; then
    echo "ok cli_info_backend_cpu"
else
    echo "FAIL cli_info_backend_cpu: exit $rc, stdout: $(head -c 300 "$T/out") stderr: $(head -c 300 "$T/err")"
fi

# Vulkan: devices with a name line, or an error that says what to install
"$QTTS" info --backend vulkan >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ]; then
    n=$(grep -c "^device [0-9]*:" "$T/out")
    if [ "$n" -ge 1 ] && grep -q "^ *name: *[^ ]" "$T/out" && grep -q "^ *usable: *" "$T/out"; then
        echo "ok cli_info_backend_vulkan: $n device(s), first: $(grep -m1 '^ *name:' "$T/out" | sed 's/^ *name: *//')"
    else
        echo "FAIL cli_info_backend_vulkan: exit 0 but no device with a name: $(head -c 300 "$T/out")"
    fi
elif [ "$rc" -eq 3 ] && grep -qi "install" "$T/err"; then
    echo "ok cli_info_backend_vulkan: no device, as reported: $(head -c 200 "$T/err")"
else
    echo "FAIL cli_info_backend_vulkan: exit $rc without a message naming what to install: $(head -c 300 "$T/err")"
fi

# --backend on a model command is parsed before the model is read: a missing
# folder is then the error, not the option
"$QTTS" info --backend cpu --device 0 --model "$T/missing" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 3 ] && ! grep -q "unknown option" "$T/err"; then
    echo "ok cli_backend_option_with_model"
else
    echo "FAIL cli_backend_option_with_model: exit $rc, stderr: $(head -c 300 "$T/err")"
fi
