#!/bin/sh
# Speech recogniser for qtts-bench --asr-cmd: prints the transcript of a WAV
# file (any rate; converted to 16 kHz mono for the en-us model) on standard
# output. Needs sox, pocketsphinx and pocketsphinx-en-us
# (scripts/install-bench-deps.sh). Usage:
#   qtts-bench quality ... --asr-cmd 'sh tools/bench/asr-pocketsphinx.sh {wav}'
# Half a second of silence is added at both ends: pocketsphinx's live
# cepstral mean normalisation needs a little silence to settle.
set -e
[ $# -eq 1 ] || { echo "usage: $0 FILE.wav" >&2; exit 2; }
for p in sox pocketsphinx_continuous; do
    command -v "$p" >/dev/null 2>&1 || { echo "$0: $p not installed (run scripts/install-bench-deps.sh)" >&2; exit 3; }
done
M=${POCKETSPHINX_MODEL:-/usr/share/pocketsphinx/model/en-us}
[ -d "$M/en-us" ] || { echo "$0: no pocketsphinx model in $M (apt-get install pocketsphinx-en-us)" >&2; exit 3; }
tmp=$(mktemp /tmp/qtts-asr-XXXXXX.wav)
trap 'rm -f "$tmp"' EXIT
# -D: no dither, so the same audio always gives the same transcript
sox -D "$1" -r 16000 -c 1 -b 16 "$tmp" pad 0.5 0.5
pocketsphinx_continuous -infile "$tmp" -hmm "$M/en-us" -lm "$M/en-us.lm.bin" -dict "$M/cmudict-en-us.dict" \
    -logfn /dev/null
