#!/bin/sh
# The main job in one command: install the build dependencies, build qtts,
# fetch the default model (Qwen3-TTS-12Hz-0.6B-CustomVoice) if it is not there
# yet, and speak a sentence to hello.wav.
#
#   sh scripts/quickstart.sh ["text to speak"] [MODEL_DIR]
set -eu
cd "$(dirname "$0")/.."
TEXT=${1:-"Hello! This is qtts, speaking Qwen3-TTS in plain C."}
MODEL=${2:-models/Qwen3-TTS-12Hz-0.6B-CustomVoice}
sh scripts/install-deps.sh
make -j"$(nproc 2>/dev/null || echo 2)"
if [ ! -f "$MODEL/model.safetensors" ] || [ ! -f "$MODEL/speech_tokenizer/model.safetensors" ]; then
    sh scripts/fetch-model.sh 0.6B-CustomVoice "$MODEL"
fi
build/qtts --model "$MODEL" --speaker ryan --language english --text "$TEXT" -o hello.wav
echo "quickstart: wrote hello.wav"
