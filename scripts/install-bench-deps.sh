#!/bin/sh
# Installs what the quality arm of qtts-bench and its ASR test use beyond the
# build dependencies: a speech recogniser (pocketsphinx with its US English
# model), recorded test speech (pocketsphinx-testdata), espeak-ng for
# synthetic speech, and sox. Debian; idempotent (does nothing when they are
# installed); needs root or sudo.
set -e
PKGS="pocketsphinx pocketsphinx-en-us pocketsphinx-testdata espeak-ng sox"
sh "$(dirname "$0")/apt-install.sh" $PKGS
