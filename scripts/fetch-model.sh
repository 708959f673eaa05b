#!/bin/sh
# Fetch an official Qwen3-TTS checkpoint folder for qtts.
#
#   sh scripts/fetch-model.sh [NAME] [DIR]
#
# NAME: 0.6B-CustomVoice (default), 0.6B-Base, 1.7B-CustomVoice, 1.7B-Base,
#       1.7B-VoiceDesign, or Tokenizer (the 12 Hz speech tokenizer alone).
# DIR:  destination (default models/Qwen3-TTS-12Hz-NAME).
#
# Resumable: partial files are kept as FILE.part and continued on the next run.
# Every file is checked against the size the server announces, and the folder
# is finally loaded by `qtts info` when build/qtts exists. Without network it
# stops with the list of files needed and where to put them.
set -eu
NAME=${1:-0.6B-CustomVoice}
case "$NAME" in
    0.6B-CustomVoice|0.6B-Base|1.7B-CustomVoice|1.7B-Base|1.7B-VoiceDesign) REPO="Qwen/Qwen3-TTS-12Hz-$NAME" ;;
    Tokenizer) REPO="Qwen/Qwen3-TTS-Tokenizer-12Hz" ;;
    *) echo "fetch-model: unknown model \"$NAME\"; choose 0.6B-CustomVoice, 0.6B-Base, 1.7B-CustomVoice, 1.7B-Base, 1.7B-VoiceDesign or Tokenizer" >&2; exit 2 ;;
esac
DIR=${2:-models/$(basename "$REPO")}
BASE_URL=${QTTS_HF_ENDPOINT:-https://huggingface.co}/$REPO/resolve/main

if [ "$NAME" = Tokenizer ]; then
    FILES="config.json configuration.json preprocessor_config.json model.safetensors"
else
    FILES="config.json generation_config.json model.safetensors vocab.json merges.txt tokenizer_config.json
           preprocessor_config.json speech_tokenizer/config.json speech_tokenizer/configuration.json
           speech_tokenizer/preprocessor_config.json speech_tokenizer/model.safetensors"
fi
# files qtts cannot run without (the rest are fetched when available)
REQUIRED="config.json model.safetensors"
[ "$NAME" = Tokenizer ] || REQUIRED="$REQUIRED generation_config.json vocab.json merges.txt tokenizer_config.json speech_tokenizer/config.json speech_tokenizer/model.safetensors"

offline_help() {
    echo "fetch-model: cannot reach the model server ($1)." >&2
    echo "Download $REPO on a machine with internet access and copy these files into $DIR:" >&2
    for f in $REQUIRED; do echo "    $DIR/$f" >&2; done
    echo "or point qtts at an existing checkpoint folder with --model DIR." >&2
    exit 3
}

command -v curl >/dev/null 2>&1 || { echo "fetch-model: needs curl (apt-get install curl)" >&2; exit 2; }
mkdir -p "$DIR/speech_tokenizer"
for f in $FILES; do
    dest="$DIR/$f"
    # announced size (follows redirects; the last Content-Length wins)
    size=$(curl -sSIL --connect-timeout 10 "$BASE_URL/$f" 2>/dev/null | tr -d '\r' |
           awk 'tolower($1)=="content-length:"{n=$2} tolower($1)~/^http/{code=$2} END{if(code==200)print n}') || size=""
    if [ -z "$size" ]; then
        if ! curl -sSI --connect-timeout 10 "${QTTS_HF_ENDPOINT:-https://huggingface.co}" >/dev/null 2>&1; then
            offline_help "no network"
        fi
        case " $(echo $REQUIRED) " in
            *" $f "*) echo "fetch-model: $REPO has no $f" >&2; exit 4 ;;
            *) echo "fetch-model: $f not offered (optional), skipped" >&2; continue ;;
        esac
    fi
    if [ -f "$dest" ] && [ "$(wc -c < "$dest")" -eq "$size" ]; then
        echo "fetch-model: $f already complete"
        continue
    fi
    echo "fetch-model: $f ($size bytes)"
    curl -fL --retry 3 --connect-timeout 10 -C - -o "$dest.part" "$BASE_URL/$f" || offline_help "download of $f failed"
    got=$(wc -c < "$dest.part")
    if [ "$got" -ne "$size" ]; then
        echo "fetch-model: $f has $got bytes, expected $size; run the script again to resume" >&2
        exit 5
    fi
    mv "$dest.part" "$dest"
done
for f in $REQUIRED; do
    [ -s "$DIR/$f" ] || { echo "fetch-model: $DIR/$f is missing" >&2; exit 5; }
done
if [ "$NAME" != Tokenizer ] && [ -x build/qtts ]; then
    build/qtts info --model "$DIR" >/dev/null || { echo "fetch-model: $DIR does not load; see the message above" >&2; exit 5; }
fi
echo "fetch-model: $DIR is ready"
