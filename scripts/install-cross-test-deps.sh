#!/bin/sh
# Installs what test_kernels needs to check the NEON kernels on an x86-64
# machine: the aarch64 cross compiler (the NEON table must build without a
# warning) and qemu's user-mode emulator (test_kernels, built for aarch64,
# must pass under it). Debian; idempotent (does nothing when they are
# installed); needs root or sudo. Without them those two checks SKIP.
set -e
case "$(uname -m)" in
aarch64 | arm64) exit 0 ;; # the NEON kernels are built and tested natively
esac
PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
sh "$(dirname "$0")/apt-install.sh" $PKGS
