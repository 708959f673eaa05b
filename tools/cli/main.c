/* qtts: command-line front end of libqtts. Dispatches subcommands:
 *   qtts [speak] --model DIR --text STR ...   text -> codec frames (and audio)
 *   qtts tokenize --model DIR --text STR      text -> token ids */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cli_usage(void) {
    printf(
        "qtts: Qwen3-TTS text to speech in pure C\n"
        "\n"
        "usage: qtts [speak] --model DIR (--text STR | --text-file F | --text-ids \"I I ...\") [options]\n"
        "       qtts decode --model DIR --codes FILE (-o OUT | --stdout)   saved codes -> audio\n"
        "       qtts tokenize --model DIR --text STR                        print token ids\n"
        "       qtts script FILE --model DIR [--model DIR2 ...] --cast NAME=VOICE[,NAME=VOICE...] -o OUT\n"
        "                                  render a dialogue written as \"NAME: line\" per line; VOICE is a preset\n"
        "                                  speaker (CustomVoice model), a saved voice file (Base model) or a voice\n"
        "                                  description (VoiceDesign model); prefixes speaker:, voice:, design: force one\n"
        "       qtts cache clear|list [--model DIR] [--cache-dir DIR]      prepared-weights cache files (of one checkpoint)\n"
        "       qtts voices --model DIR                                     speakers and languages\n"
        "       qtts info --model DIR                                       variant, sizes, dtypes, files\n"
        "       qtts info --backend cpu|vulkan [--model DIR]                the backend's devices (and the model on it)\n"
        "\n"
        "input:\n"
        "  -m, --model DIR            checkpoint folder as published on Hugging Face (required)\n"
        "  -t, --text STR             text to speak (UTF-8); \"-\" reads standard input; with --stdout or\n"
        "                             --stream it is spoken as it arrives, a sentence per segment, before EOF\n"
        "                             (llm ... | qtts --text - --stdout | aplay ...)\n"
        "  --text-file F              read the text from file F (\"-\" = standard input); at most 1 MiB\n"
        "  --text-ids \"I I ...\"       already-tokenized text: the ids between the chat template's fixed tokens\n"
        "  --instruct STR             instruction / voice description (CustomVoice 1.7B, VoiceDesign)\n"
        "  --instruct-ids \"I I ...\"   already-tokenized instruction\n"
        "  --speaker NAME             preset speaker (CustomVoice models; see qtts voices)\n"
        "  --language NAME|auto       language of the text (default: auto)\n"
        "  --text-mode MODE           streaming | non-streaming (default: the official default of the model type:\n"
        "                             non-streaming for CustomVoice and VoiceDesign, streaming for Base)\n"
        "\n"
        "voice cloning (Base models):\n"
        "  --ref-audio F              reference recording (WAV, FLAC, OGG, MP3 where libsndfile has it; up to 60 s)\n"
        "  --ref-text STR             its transcript: in-context cloning (the official default)\n"
        "  --ref-text-ids \"I I ...\"   the transcript as ids\n"
        "  --xvector-only             clone from the speaker embedding alone (no transcript)\n"
        "  --save-voice FILE          save the voice for reuse (with no text: only save it)\n"
        "  --voice FILE               use a saved voice\n"

        "\n"
        "sampling (defaults from the model's generation_config.json; the official values are given):\n"
        "  --greedy                   argmax for the talker and the code predictor (default: sample; the\n"
        "                             repetition penalty still applies, as upstream)\n"
        "  --seed N                   RNG seed (default 0); same seed + same build = same output; segment i of a\n"
        "                             long text uses N + i\n"
        "  --temperature X            talker temperature (default 0.9)\n"
        "  --top-k N                  talker top-k, 0 = off (default 50)\n"
        "  --top-p X                  talker top-p, 1 = off (default 1.0)\n"
        "  --repetition-penalty X     talker repetition penalty, 1 = off (default 1.05)\n"
        "  --cp-temperature X         code predictor temperature (default 0.9)\n"
        "  --cp-top-k N               code predictor top-k (default 50)\n"
        "  --cp-top-p X               code predictor top-p (default 1.0)\n"
        "  --max-new-tokens N         talker token limit per segment; turns off the automatic length cap\n"
        "                             (default: 8192 from generation_config.json, with the cap of 50 + 8 x text\n"
        "                             tokens frames; at most N-1 frames are produced)\n"
        "\n"
        "output (at least one of -o, --stdout, --dump-codes):\n"
        "  -o, --output FILE          write audio (24 kHz mono); format from the extension: .wav .flac .raw\n"
        "  --format wav|flac|raw      override the format implied by the extension\n"
        "  --sample-format s16|f32    sample format (default s16; f32 for WAV and raw only)\n"
        "  --stdout                   raw PCM (s16le by default) to standard output, each chunk as soon as decoded\n"
        "  --stream                   write the file while generating: it grows chunk by chunk and is valid throughout\n"
        "  --chunk-frames N           frames per audio chunk after the first, 1-64 (default 4 = 320 ms; the first is 1)\n"
        "  --segment-chars N          long text is spoken sentence by sentence in segments of at most N\n"
        "                             characters (default 300); --no-split: the whole text as one utterance\n"
        "  --pause-ms N               silence between segments (default 300); script: --paragraph-pause-ms\n"
        "  --paragraph-pause-ms N     silence after a paragraph and between script turns (default 700)\n"
        "  --dump-codes FILE          write the frames to FILE: one line per frame, 16 codes, codebook 0 first\n"
        "\n"
        "other:\n"
        "  --threads N                compute threads (default 1)\n"
        "  --backend cpu|vulkan       where the language model runs (default: cpu, or $QTTS_BACKEND when set);\n"
        "                             the codec decoder runs there too\n"
        "  --device N                 device index of the backend, as qtts info --backend lists them (default 0,\n"
        "                             or $QTTS_DEVICE when set)\n"
        "  --weights native|q8|q4     talker (and code predictor) matrices in memory: as stored (BF16), int8 or\n"
        "                             int4, quantised at load (default native)\n"
        "  --predictor-weights F      the code predictor's format when it should differ (default: as --weights)\n"
        "  --codec-weights F          the codec decoder's precision on the CPU: f32 (default, matches the\n"
        "                             official decoder), bf16, q8 (int8 and int16 convs, bf16 Linear layers) or\n"
        "                             q8bf16 (q8's int8 convs, the rest bf16) (faster; docs/BENCH.md has what\n"
        "                             the audio loses)\n"
        "  --cast NAME=VOICE,...      qtts script: who speaks each name (repeatable)\n"
        "  --alt-regex                tokenizer: transformers-4.57 local-folder split regex instead of the stock Qwen2 one\n"
        "  --no-huge-pages            read stored weights in place from the file mapping instead of copying them into\n"
        "                             2 MiB pages at load (faster load, slower frames; see docs/BENCH.md); qtts decode\n"
        "                             never copies them (it reads none)\n"
        "  --cache-dir DIR            prepared-weights cache (q8/q4 matrices as the kernels use them, written at the\n"
        "                             first load, mapped by later ones; default $XDG_CACHE_HOME/qtts or ~/.cache/qtts)\n"
        "  --no-cache                 quantise at every load, write no cache\n"
        "  --timing                   print the start-up times on stderr (\"qtts timing: ...\", ms since launch)\n"
        "  --newline-id N, --user-id N  template ids for checkpoints without tokenizer files whose vocabulary is not\n"
        "                             Qwen's (default: from the tokenizer, else 198 / 872)\n"
        "  -q, --quiet                no diagnostics on stderr except errors\n"
        "  -h, --help                 this help\n"
        "\n"
        "exit codes: 0 ok, 2 usage error, 3 model error (missing/broken checkpoint), 4 input error (text, voice,\n"
        "language), 5 I/O error, 6 other runtime failure\n");
}

int main(int argc, char **argv) {
    /* past a file-size limit (ulimit -f) a write fails with EFBIG and is
     * reported as an I/O error (exit 5) instead of the signal killing us */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        cli_usage();
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(argc, argv, 2);
    if (!strcmp(argv[1], "speak")) return cmd_speak(argc, argv, 2);
    if (!strcmp(argv[1], "decode")) return cmd_decode(argc, argv, 2);
    if (!strcmp(argv[1], "voices")) return cmd_voices(argc, argv, 2);
    if (!strcmp(argv[1], "info")) return cmd_info(argc, argv, 2);
    if (!strcmp(argv[1], "script")) return cmd_script(argc, argv, 2);
    if (!strcmp(argv[1], "cache")) return cmd_cache(argc, argv, 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cli_usage();
        return EXIT_OK;
    }
    return cmd_speak(argc, argv, 1);
}
