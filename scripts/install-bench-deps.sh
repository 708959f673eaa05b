#!/bin/sh
# Installs what the quality arm of qtts-bench and its ASR test use beyond the
# build dependencies: a speech recogniser (pocketsphinx with its US English
# model), recorded test speech (pocketsphinx-testdata), espeak-ng for
# synthetic speech, and sox. Debian; idempotent (does nothing when they are
# installed); needs root or sudo.
set -e
PKGS="pocketsphinx pocketsphinx-en-us pocketsphinx-testdata espeak-ng sox"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
