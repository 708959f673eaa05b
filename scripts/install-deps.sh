#!/bin/sh
# Installs the Debian packages qtts needs to build and test. Idempotent: does
# nothing when every package is already installed. Needs root (or sudo).
# With --tests it also installs what the integration tests drive (nginx,
# Node.js + npm for the official openai client, pocketsphinx and espeak-ng,
# on x86-64 the aarch64 cross compiler and qemu-user for the NEON checks, and
# clang with its libFuzzer runtime for make fuzz).
# The base list includes the Vulkan loader headers, glslc and Mesa's drivers
# (lavapipe, the CPU Vulkan driver the Vulkan tests run on without a GPU).
set -e
if [ "${1:-}" = "--tests" ]; then
    sh "$(dirname "$0")/install-deps.sh"
    sh "$(dirname "$0")/install-server-test-deps.sh"
    sh "$(dirname "$0")/install-bench-deps.sh"
    sh "$(dirname "$0")/install-cross-test-deps.sh"
    sh "$(dirname "$0")/install-fuzz-deps.sh"
    exit 0
fi
PKGS="build-essential pkg-config curl ca-certificates libpcre2-dev libutf8proc-dev libjansson-dev libsndfile1-dev libsoxr-dev sox libmicrohttpd-dev libmp3lame-dev libopusenc-dev libopus-dev librubberband-dev libvulkan-dev glslc mesa-vulkan-drivers"
sh "$(dirname "$0")/apt-install.sh" $PKGS
