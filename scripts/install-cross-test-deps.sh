#!/bin/sh
# Installs what the tests need to check the kernels this x86-64 machine may
# not run itself: the aarch64 cross compiler (the NEON table must build
# without a warning) and qemu's user-mode emulator (test_kernels, built for
# aarch64, must pass under it); musl and Bochs with its BIOSes and a display
# library (test_kernels and test_ops, static with musl, run on Bochs's
# AVX-512 CPU: tests/emu/test_avx512_bochs.sh; bochs-term is named so that
# apt does not pick the wx one). Debian; idempotent (does nothing when they are
# installed); needs root or sudo. Without them those checks SKIP.
set -e
case "$(uname -m)" in
aarch64 | arm64) exit 0 ;; # the NEON kernels are built and tested natively
esac
PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user musl-tools bochs bochs-term bochsbios vgabios"
sh "$(dirname "$0")/apt-install.sh" $PKGS
