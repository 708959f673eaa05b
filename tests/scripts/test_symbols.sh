#!/bin/sh
# libqtts.a exports only the public qtts_* names: the library's internal
# functions cannot clash with a program's own.
cd "$(dirname "$0")/../.."
LIB="${BUILD:-build}/libqtts.a"
if [ ! -f "$LIB" ] || ! command -v nm >/dev/null 2>&1; then
    echo "SKIP library_exports_only_public_names: $LIB or nm missing"
    exit 0
fi
bad=$(nm -g --defined-only "$LIB" | awk 'NF == 3 {print $3}' | grep -v '^qtts_' | head -5)
n=$(nm -g --defined-only "$LIB" | awk 'NF == 3' | wc -l)
if [ -z "$bad" ] && [ "$n" -gt 20 ]; then
    echo "ok library_exports_only_public_names"
else
    echo "FAIL library_exports_only_public_names: $n exported, non-public: $bad"
fi
