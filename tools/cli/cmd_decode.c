/* qtts decode: a codes file (the --dump-codes format: one frame per line, 16
 * integers, codebook 0 first) to audio. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Open the codes file ("-" = stdin) and parse it; 0 or an exit code (message printed). */
static int read_codes(const char *path, int G, int32_t **codes, int *n_frames) {
    FILE *f = !strcmp(path, "-") ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "qtts: cannot open codes file %s: %s\n", path, strerror(errno));
        return EXIT_IO;
    }
    int rc = cli_read_codes(f, path, G, codes, n_frames);
    if (f != stdin) fclose(f);
    return rc;
}

int cmd_decode(int argc, char **argv, int first) {
    cli_opts o;
    int rc = cli_parse(argc, argv, first, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.model_dir || !o.codes_file || (!o.output && !o.to_stdout)) {
        fprintf(stderr, "qtts decode: needs --model DIR --codes FILE and -o OUT (or --stdout)\n");
        return EXIT_USAGE;
    }
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = o.n_threads;
    cli_apply_backend(&o, &mp);
    /* Decoding reads no talker or code predictor matrix, so nothing is copied
     * into 2 MiB pages: that copy is for generation, and it would cost this
     * command seconds of system time (0.6B BF16: about 1 GiB cleared and
     * copied; docs/MODEL.md). The codec decoder runs at the same speed from
     * either kind of page (docs/BENCH.md). */
    mp.huge_pages = 0;
    mp.load_codec = 1;
    mp.codec_weights = (qtts_codec_weights)o.codec_weights;
    qtts_model *m = NULL;
    qtts_context *ctx = NULL;
    int32_t *codes = NULL;
    float *pcm = NULL;
    size_t n = 0;
    int n_frames = 0;
    cli_audio_out ao;
    memset(&ao, 0, sizeof ao);
    char err[1024];
    qtts_status s = qtts_model_load(&m, o.model_dir, &mp, err, sizeof err);
    if (s) {
        fprintf(stderr, "qtts: %s\n", err);
        return s == QTTS_ERR_NOMEM ? EXIT_RUNTIME : EXIT_MODEL;
    }
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    if ((rc = read_codes(o.codes_file, info.n_code_groups, &codes, &n_frames))) goto out;
    if ((s = qtts_context_new(m, NULL, &ctx, err, sizeof err))) {
        fprintf(stderr, "qtts: %s\n", err);
        rc = cli_exit_code(s);
        goto out;
    }
    if ((s = qtts_decode_codes(ctx, codes, n_frames, &pcm, &n))) {
        fprintf(stderr, "qtts: %s: %s\n", o.codes_file, qtts_context_last_error(ctx));
        rc = cli_exit_code(s);
        goto out;
    }
    if ((rc = cli_audio_open(&o, &ao))) goto out;
    cli_audio_write(&ao, pcm, n);
    if ((rc = cli_audio_close(&ao))) goto out;
    if (!o.quiet) fprintf(stderr, "qtts: %d frames -> %.2f s of audio (%s)\n", n_frames, n / 24000.0, ao.name);
out:
    if (ao.w) cli_audio_close(&ao);
    free(codes);
    free(pcm);
    qtts_context_free(ctx);
    qtts_model_free(m);
    return rc;
}
