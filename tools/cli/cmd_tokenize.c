/* qtts tokenize: print the token ids of a text, space-separated. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv, int first) {
    cli_opts o;
    int rc = cli_parse(argc, argv, first, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.model_dir || (!o.text && !o.text_file)) {
        fprintf(stderr, "qtts tokenize: needs --model DIR and --text STR (or --text-file F)\n");
        return EXIT_USAGE;
    }
    char *text = NULL;
    if ((rc = cli_read_text(&o, &text))) return rc;
    qtts_model_params mp = qtts_model_default_params();
    mp.load_codec = 0;
    cli_apply_backend(&o, &mp);
    mp.tokenizer_alt_regex = o.alt_regex;
    qtts_model *m = NULL;
    char err[1024];
    qtts_status s = qtts_model_load(&m, o.model_dir, &mp, err, sizeof err);
    if (s) {
        fprintf(stderr, "qtts: %s\n", err);
        free(text);
        return s == QTTS_ERR_NOMEM ? EXIT_RUNTIME : EXIT_MODEL;
    }
    int32_t *ids = NULL;
    int n = 0;
    s = qtts_tokenize(m, text, &ids, &n, err, sizeof err);
    if (s) {
        fprintf(stderr, "qtts: %s\n", err);
    } else {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    free(text);
    qtts_model_free(m);
    return cli_exit_code(s);
}
