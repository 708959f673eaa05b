/* The codes file of qtts decode (the --dump-codes format): one frame per
 * line, G integers separated by spaces, tabs or commas, codebook 0 first;
 * blank lines and lines starting with '#' are skipped; a line is at most
 * 4095 bytes. Ranges are not checked here: qtts_decode_codes refuses codes
 * outside the codebook. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_read_codes(FILE *f, const char *path, int G, int32_t **codes, int *n_frames) {
    int cap = 256, n = 0, line_no = 0, rc = 0;
    int32_t *v = malloc(sizeof(int32_t) * cap * G);
    char line[4096];
    while (v && fgets(line, sizeof line, f)) {
        line_no++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "qtts: %s line %d is too long\n", path, line_no);
            rc = EXIT_INPUT;
            break;
        }
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') continue;
        if (n == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, sizeof(int32_t) * cap * G);
            if (!nv) break;
            v = nv;
        }
        int k = 0;
        for (;;) {
            while (*p == ' ' || *p == '\t' || *p == ',') p++;
            if (!*p || *p == '\n' || *p == '\r') break;
            char *end;
            errno = 0;
            long x = strtol(p, &end, 10);
            if (end == p || errno || k >= G) {
                k = -1;
                break;
            }
            v[(size_t)n * G + k++] = (int32_t)x;
            p = end;
        }
        if (k != G) {
            fprintf(stderr, "qtts: %s line %d: expected %d integers (one frame, codebook 0 first)\n", path, line_no, G);
            rc = EXIT_INPUT;
            break;
        }
        n++;
    }
    if (!v) return EXIT_RUNTIME;
    if (!rc && n == 0) {
        fprintf(stderr, "qtts: %s holds no frames\n", path);
        rc = EXIT_INPUT;
    }
    if (rc) {
        free(v);
        return rc;
    }
    *codes = v;
    *n_frames = n;
    return 0;
}
