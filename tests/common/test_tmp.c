/* Scratch folder and whole-file helpers (see test_tmp.h). */
#include "test_tmp.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "test.h"

static char g_tmp_dir[256]; /* tests only: one folder per binary */

int test_tmp_make(const char *prefix) {
    snprintf(g_tmp_dir, sizeof g_tmp_dir, "/tmp/%s_XXXXXX", prefix);
    if (!mkdtemp(g_tmp_dir)) {
        test_report("mkdtemp", 0, "cannot create a temp folder %s", g_tmp_dir);
        g_tmp_dir[0] = '\0';
        return -1;
    }
    return 0;
}

const char *test_tmp_dir(void) { return g_tmp_dir; }

const char *test_tmp_path(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *b = test_vpath(g_tmp_dir, fmt, ap);
    va_end(ap);
    return b;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void test_tmp_remove(void) {
    if (g_tmp_dir[0]) nftw(g_tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const size_t w = n ? fwrite(data, 1, n, f) : 0;
    const int rc = fclose(f);
    return w == n && rc == 0 ? 0 : -1;
}

unsigned char *test_read_file(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0) sz = ftell(f);
    unsigned char *b = sz >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)sz + 1) : NULL;
    if (b && (sz > 0 ? fread(b, 1, (size_t)sz, f) : 0) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[sz] = 0;
        *n = (size_t)sz;
    }
    return b;
}
