/* Golden-prompt helper for the tests (see test.h); its own file so that test.c
 * has no dependency beyond libc (test_kernels cross-builds it for aarch64). */
#include <jansson.h>
#include <stdlib.h>

#include "test.h"

int32_t *test_ids_from_json(const json_t *a, int from, int drop, int *n) {
    int len = (int)json_array_size(a) - from - drop;
    int32_t *v = malloc(sizeof(int32_t) * (len > 0 ? len : 1));
    for (int i = 0; i < len; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, from + i));
    *n = len > 0 ? len : 0;
    return v;
}
