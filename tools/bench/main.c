/* qtts-bench: command-line entry. Subcommands: run (default), make-model,
 * compare, quality, wer, bandwidth, peak, server (the load generator of
 * tools/common/loadgen.c, shared with `qtts-server --loadgen`), suite. See
 * usage() and docs/BENCH.md. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../common/loadgen.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: qtts-bench [run] -m DIR[,DIR...] [options]     speed runs, cross product of the lists\n"
            "       qtts-bench make-model --size 0.6b|1.7b --type custom_voice|base|voice_design [--seed N] DIR\n"
            "       qtts-bench compare A.json B.json [--metric rtf]\n"
            "       qtts-bench quality -m DIR [-w LIST] [--ref NAME] [--asr-cmd 'CMD {wav}']\n"
            "       qtts-bench suite -m DIR [--out DIR]        run + quality + table, JSON, CSV, plot\n"
            "       qtts-bench wer REF HYP                     normalised word error rate\n"
            "       qtts-bench bandwidth [-t LIST]             memory read bandwidth\n"
            "       qtts-bench peak [-t LIST] [--method M]     f32 and int8 arithmetic peak\n"
            "       qtts-bench server --url URL [options]      a running qtts-server under concurrent load\n"
            "       qtts-bench plot RESULTS.json OUT.svg       plot a JSON report\n"
            "       qtts-bench cold -m DIR [-w LIST] [--drop]  launch -> first PCM byte of qtts --stdout\n"
            "       qtts-bench textstream -m DIR [--rate 30,15]  text played in at a token rate vs the whole text\n"
            "Run 'qtts-bench help' or read docs/BENCH.md for every option.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        bench_help(stdout);
        return 0;
    }
    if (strcmp(cmd, "make-model") == 0) return cmd_make_model(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0) return cmd_compare(argc - 1, argv + 1);
    if (strcmp(cmd, "quality") == 0) return cmd_quality(argc - 1, argv + 1);
    if (strcmp(cmd, "suite") == 0) return cmd_suite(argc - 1, argv + 1);
    if (strcmp(cmd, "wer") == 0) return cmd_wer(argc - 1, argv + 1);
    if (strcmp(cmd, "bandwidth") == 0) return cmd_bandwidth(argc - 1, argv + 1);
    if (strcmp(cmd, "peak") == 0) return cmd_peak(argc - 1, argv + 1);
    if (strcmp(cmd, "server") == 0) return loadgen_main(argc - 1, argv + 1); /* tools/common/loadgen.c */
    if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "cold") == 0) return cmd_cold(argc - 1, argv + 1);
    if (strcmp(cmd, "textstream") == 0) return cmd_textstream(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (cmd[0] == '-') return cmd_run(argc, argv);
    fprintf(stderr, "qtts-bench: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
