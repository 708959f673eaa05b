/* A test binary's scratch folder under /tmp and whole-file helpers (tests
 * only). test_tmp_make creates the folder; test_tmp_remove deletes it with
 * everything in it. */
#ifndef QTTS_TESTS_TEST_TMP_H
#define QTTS_TESTS_TEST_TMP_H

#include <stddef.h>

/* mkdtemp /tmp/<prefix>_XXXXXX: 0, or -1 after a FAIL line named "mkdtemp". */
int test_tmp_make(const char *prefix);
/* The folder ("" before test_tmp_make). */
const char *test_tmp_dir(void);
/* <folder>/<printf(fmt, ...)> in one of test_path's 64 rotating buffers. */
const char *test_tmp_path(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* rm -rf of the folder (no-op before test_tmp_make). */
void test_tmp_remove(void);

/* Write n bytes to path (created or truncated): 0, or -1. */
int test_write_file(const char *path, const void *data, size_t n);
/* The whole file, malloc'ed with a NUL byte after it (so an empty file gives
 * a buffer and *n = 0); NULL when it cannot be opened or read in full. */
unsigned char *test_read_file(const char *path, size_t *n);

#endif
