/* make test's run of a fuzz target without libFuzzer: feeds the target every
 * file of tests/fuzz/corpus/<target> and tests/fuzz/regress/<target> (the
 * seeds and every input a fuzzing campaign found a bug with), or the files
 * and folders given as arguments. A crash or a sanitizer report (make
 * debug-test builds it with ASan + UBSan) fails the test; so does a target's
 * FUZZ_CHECK. Prints "ok fuzz_<target>: N inputs". FUZZ_TARGET is the
 * target's name, set by the Makefile. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return -1;
    /* an exact-size copy, so that ASan sees reads past the end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

/* A file, or every plain file of a folder in name order; returns the count
 * run, -1 when path cannot be read (a missing folder counts 0). */
static int run_path(const char *path) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (!S_ISDIR(st.st_mode)) return run_file(path) ? -1 : 1;
    DIR *d = opendir(path);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, sizeof *names * (size_t)cap);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, by_name);
    int count = 0;
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (!stat(p, &st) && S_ISREG(st.st_mode)) {
            if (run_file(p)) {
                fprintf(stderr, "cannot read %s\n", p);
                count = -1;
                break;
            }
            count++;
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return count;
}

int main(int argc, char **argv) {
    int total = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            int c = run_path(argv[i]);
            if (c < 0) {
                printf("FAIL fuzz_%s: cannot read %s\n", FUZZ_TARGET, argv[i]);
                return 1;
            }
            total += c;
        }
    } else {
        const char *const kinds[] = {"corpus", "regress"};
        for (int k = 0; k < 2; k++) {
            char rel[256];
            snprintf(rel, sizeof rel, "tests/fuzz/%s/%s", kinds[k], FUZZ_TARGET);
            int c = run_path(fuzz_repo_path(rel));
            if (c < 0) {
                printf("FAIL fuzz_%s: cannot read %s\n", FUZZ_TARGET, rel);
                return 1;
            }
            total += c;
        }
        if (total == 0) {
            printf("FAIL fuzz_%s: no inputs under tests/fuzz/{corpus,regress}/%s (run from the repository root "
                   "or set QTTS_REPO)\n", FUZZ_TARGET, FUZZ_TARGET);
            return 1;
        }
    }
    printf("ok fuzz_%s: %d inputs replayed\n", FUZZ_TARGET, total);
    return 0;
}
