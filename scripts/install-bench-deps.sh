#!/bin/sh
# Installs what the quality arm of qtts-bench can use beyond the build
# dependencies: a speech recogniser (pocketsphinx with its US English model),
# recorded test speech (pocketsphinx-testdata), espeak-ng for synthetic
# speech, and sox for resampling. Debian/Ubuntu; run as root.
set -e
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y pocketsphinx pocketsphinx-en-us pocketsphinx-testdata espeak-ng sox
