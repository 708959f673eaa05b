/* Minimal test harness shared by every test binary.
 * Each check prints one line: "ok NAME", "FAIL NAME: why" or "SKIP NAME: why";
 * tests/run_tests.sh counts them and prints "N passed, N failed, N skipped".
 * A binary's exit status is the number of failures (capped at 100). */
#ifndef QTTS_TESTS_TEST_H
#define QTTS_TESTS_TEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

typedef struct test_state {
    int passed, failed, skipped;
} test_state;

extern test_state g_test; /* tests only: one per binary, defined in test.c */

/* Report a named result; fmt explains a failure (ignored when ok). */
void test_report(const char *name, int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void test_skip(const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int test_finish(void); /* returns the exit status */

/* Path to the repository's tests/ folder (QTTS_TEST_DIR env, else "tests"). */
const char *test_dir(void);
/* snprintf into one of 64 rotating static buffers: test_path("golden/data/%s", x). */
const char *test_path(const char *fmt, ...);
/* dir/<vprintf(fmt, ap)> in the same rotating buffers (test_path's and test_tmp_path's). */
const char *test_vpath(const char *dir, const char *fmt, va_list ap);

/* max|a-b| / max|b| over n floats; entries where b is -inf must match exactly
 * (else returns +inf). Sets *max_abs to max|a-b| over finite entries. */
double rel_err(const float *a, const float *b, long n, double *max_abs);

/* ids [from, len - drop) of a JSON integer array (a golden prompt's template
 * ids), malloc'ed; *n gets the count. For the golden tests (needs jansson). */
struct json_t;
int32_t *test_ids_from_json(const struct json_t *a, int from, int drop, int *n);

#define CHECK(name, cond, ...) test_report((name), (cond) ? 1 : 0, __VA_ARGS__)

#endif
