/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c): each target defines
 * LLVMFuzzerTestOneInput, built twice: with clang's libFuzzer for `make fuzz`
 * (build-fuzz/fuzz/), and with replay.c's main for `make test`, which feeds it
 * every file of tests/fuzz/corpus/<target> and tests/fuzz/regress/<target>.
 * Helpers: a scratch folder on tmpfs for targets whose parser reads files,
 * splitting one input into several files, and the repository path of the
 * tiny test checkpoints. An invariant a target checks fails with FUZZ_CHECK,
 * which aborts (a finding for libFuzzer, a failed replay for make test). */
#ifndef QTTS_TESTS_FUZZ_H
#define QTTS_TESTS_FUZZ_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_CHECK(cond)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);    \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir_path[256];

static void fuzz_dir_remove(void) {
    DIR *d = opendir(fuzz_dir_path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(fuzz_dir_path);
}

/* A private scratch folder (on /dev/shm when there is one), made on the first
 * call and removed at exit. */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/qtts-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Write data[n] to fuzz_dir()/name; returns the path (static buffer per call
 * site is not needed: the caller copies or uses it at once). n == SIZE_MAX
 * removes the file instead. */
static inline const char *fuzz_file(const char *name, const void *data, size_t n) {
    static char path[8][512];
    static int k;
    char *p = path[k++ & 7];
    snprintf(p, sizeof path[0], "%s/%s", fuzz_dir(), name);
    if (n == SIZE_MAX) {
        unlink(p);
        return p;
    }
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
        perror(p);
        abort();
    }
    return p;
}

/* Cut data[size] at each occurrence of sep into at most max parts
 * (part[i], len[i]); returns the number of parts (>= 1). */
static inline int fuzz_split(const uint8_t *data, size_t size, const char *sep, const uint8_t **part, size_t *len,
                             int max) {
    const size_t ns = strlen(sep);
    int n = 0;
    const uint8_t *p = data, *end = data + size;
    while (n < max - 1) {
        const uint8_t *q = size ? memmem(p, (size_t)(end - p), sep, ns) : NULL;
        if (!q) break;
        part[n] = p;
        len[n++] = (size_t)(q - p);
        p = q + ns;
    }
    part[n] = p;
    len[n++] = (size_t)(end - p);
    return n;
}

/* A path under the repository root: $QTTS_REPO or the current folder (make
 * runs the targets from the root). */
static inline const char *fuzz_repo_path(const char *rel) {
    static char p[4][1024];
    static int k;
    char *b = p[k++ & 3];
    const char *root = getenv("QTTS_REPO");
    snprintf(b, sizeof p[0], "%s/%s", root && *root ? root : ".", rel);
    return b;
}

#endif
