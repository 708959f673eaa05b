/* Fuzz target: the JSON body of POST /v1/audio/speech
 * (tools/server/api_speech.c parse_request, through api_speech_check), on the
 * tiny CustomVoice checkpoint e2e_string: every field's type and range, the
 * speaker and language look-ups, the limits, unknown keys, duplicate keys,
 * malformed JSON. A body that is refused must have an HTTP status of 4xx or
 * 5xx and a message; one that is accepted names a speaker and has text. */
#include "api.h"
#include "fuzz.h"

static server srv;

static server *get(void) {
    if (!srv.model) {
        qtts_model_params mp = qtts_model_default_params();
        char err[1024];
        if (qtts_model_load(&srv.model, fuzz_repo_path("tests/golden/data/e2e_string"), &mp, err, sizeof err)) {
            fprintf(stderr, "fuzz_speech: %s (run from the repository root or set QTTS_REPO)\n", err);
            abort();
        }
        srv.cfg = server_default_config();
        srv.cfg.max_input_chars = 2000;
        srv.cfg.max_frames = 100;
        qtts_model_get_info(srv.model, &srv.info);
    }
    return &srv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    server *s = get();
    api_error e;
    memset(&e, 0, sizeof e);
    if (api_speech_check(s, (const char *)data, size, &e) == 0) {
        FUZZ_CHECK(e.status == 0);
    } else {
        FUZZ_CHECK(e.status >= 400 && e.status < 600 && e.message[0] && e.type);
        FUZZ_CHECK(memchr(e.message, 0, sizeof e.message) && memchr(e.param, 0, sizeof e.param));
    }
    return 0;
}
