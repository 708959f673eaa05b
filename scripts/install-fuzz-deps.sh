#!/bin/sh
# Installs what `make fuzz` needs: clang and its libFuzzer + sanitizer runtime
# (libclang-rt-dev, the default clang's libclang_rt.fuzzer-*.a). Idempotent.
set -e
sh "$(dirname "$0")/apt-install.sh" clang libclang-rt-dev
