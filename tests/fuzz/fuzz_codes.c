/* Fuzz target: the codes file of `qtts decode` (tools/cli/codes_file.c).
 * Input: byte 0 gives the codebooks per frame (1 + byte % 32; 16 is the
 * model's), the rest is the file. A parsed file has at least one frame. */
#include "cli.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int G = 1 + data[0] % 32;
    FILE *f = fmemopen((void *)(data + 1), size - 1, "r");
    if (!f) return 0;
    static FILE *null_out; /* the parser's messages: not wanted at 10^5 runs a second */
    if (!null_out && !(null_out = fopen("/dev/null", "w"))) abort();
    FILE *saved = stderr;
    stderr = null_out;
    int32_t *codes = NULL;
    int n = 0;
    const int rc = cli_read_codes(f, "fuzz", G, &codes, &n);
    stderr = saved;
    fclose(f);
    if (rc == 0) {
        FUZZ_CHECK(codes != NULL && n >= 1);
        volatile int32_t sink = codes[(size_t)n * G - 1];
        (void)sink;
    } else {
        FUZZ_CHECK(rc == EXIT_INPUT || rc == EXIT_RUNTIME);
    }
    free(codes);
    return 0;
}
