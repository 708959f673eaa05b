/* The Vulkan backend as a library user meets it (the goldens themselves run
 * on it through QTTS_BACKEND=vulkan, see .ci/run): a sampled run repeats
 * with the same seed on the same device and changes with another; the
 * device time of every phase and the device memory are reported; a device
 * index that does not exist is refused with a message; the CPU backend
 * reports no device memory. SKIP without Vulkan in the build or a device. */
#include <stdlib.h>
#include <string.h>

#include "qtts.h"
#include "test.h"

static qtts_status gen(qtts_model *m, uint64_t seed, int32_t **codes, int *n, qtts_stats *st) {
    qtts_context *ctx = NULL;
    qtts_status s = qtts_context_new(m, NULL, &ctx, NULL, 0);
    if (s) return s;
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.text = "Hello there, how are you today?";
    gp.speaker = "vivian";
    gp.seed = seed;
    qtts_gen_debug dbg = qtts_gen_debug_default_params();
    dbg.force_frames = 12; /* the same length for every seed */
    gp.debug = &dbg;
    /* sampled (the golden checkpoints' generation_config is greedy), with
       every warper: temperature, top-k, top-p */
    gp.talker.do_sample = gp.predictor.do_sample = 1;
    gp.talker.temperature = gp.predictor.temperature = 1.5f;
    gp.talker.top_p = 0.95f;
    s = qtts_generate_codes(ctx, &gp, NULL, NULL, codes, n);
    if (!s && st) qtts_context_get_stats(ctx, st);
    qtts_context_free(ctx);
    return s;
}

int main(void) {
    char err[1024];
    qtts_device_info dev[8];
    int n_dev = 0;
    if (qtts_backend_devices(QTTS_BACKEND_VULKAN, dev, 8, &n_dev, err, sizeof err) || n_dev == 0) {
        test_skip("vulkan", "%s", err[0] ? err : "no Vulkan device");
        return test_finish();
    }
    const char *dir = test_path("golden/data/e2e_string");
    qtts_model_params mp = qtts_model_default_params();
    mp.backend = QTTS_BACKEND_VULKAN;
    mp.load_codec = 0;
    qtts_model *m = NULL;
    qtts_status s = qtts_model_load(&m, dir, &mp, err, sizeof err);
    test_report("vulkan/load", s == QTTS_OK, "%s", err);
    if (s) return test_finish();

    int32_t *a = NULL, *b = NULL, *c = NULL;
    int na = 0, nb = 0, nc = 0;
    qtts_stats st;
    memset(&st, 0, sizeof st);
    const qtts_status sa = gen(m, 7, &a, &na, &st), sb = gen(m, 7, &b, &nb, NULL), sc = gen(m, 8, &c, &nc, NULL);
    test_report("vulkan/sampled_runs", !sa && !sb && !sc, "status %d %d %d", sa, sb, sc);
    if (!sa && !sb && !sc) {
        test_report("vulkan/same_seed_same_codes", na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * 16 * na),
                    "%d and %d frames differ", na, nb);
        test_report("vulkan/other_seed_other_codes", nc == na && memcmp(a, c, sizeof(int32_t) * 16 * na) != 0,
                    "seeds 7 and 8 gave the same %d frames", na);
        int in_range = 1;
        for (int i = 0; i < na * 16; i++) in_range &= a[i] >= 0 && a[i] < 2048;
        test_report("vulkan/codes_in_range", in_range, "a code outside [0, 2048)");
        test_report("vulkan/gpu_phase_times",
                    st.gpu_prefill_ms > 0 && st.gpu_talker_ms > 0 && st.gpu_predictor_ms > 0 && st.gpu_sampling_ms > 0,
                    "prefill %g talker %g predictor %g sampling %g ms", st.gpu_prefill_ms, st.gpu_talker_ms,
                    st.gpu_predictor_ms, st.gpu_sampling_ms);
        test_report("vulkan/wall_split", st.talker_ms > 0 && st.predictor_ms > 0, "talker %g predictor %g ms",
                    st.talker_ms, st.predictor_ms);
    }
    free(a);
    free(b);
    free(c);
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    test_report("vulkan/info", info.backend == QTTS_BACKEND_VULKAN && !strcmp(info.device_name, dev[0].name) &&
                                   info.device_bytes_allocated > 0 &&
                                   info.device_bytes_reserved >= info.device_bytes_allocated,
                "backend %d device %s allocated %lld reserved %lld", (int)info.backend, info.device_name,
                (long long)info.device_bytes_allocated, (long long)info.device_bytes_reserved);
    qtts_model_free(m);

    /* a device that does not exist */
    mp.device = n_dev + 3;
    s = qtts_model_load(&m, dir, &mp, err, sizeof err);
    test_report("vulkan/bad_device", s != QTTS_OK && m == NULL && strstr(err, "device"), "status %d: %s", s, err);
    qtts_model_free(m);
    m = NULL;

    /* the CPU backend has no device memory */
    mp.backend = QTTS_BACKEND_CPU;
    mp.device = 0;
    s = qtts_model_load(&m, dir, &mp, err, sizeof err);
    if (!s) {
        qtts_model_get_info(m, &info);
        test_report("cpu/info", info.backend == QTTS_BACKEND_CPU && info.device_bytes_allocated == 0, "backend %d",
                    (int)info.backend);
    } else {
        test_report("cpu/load", 0, "%s", err);
    }
    qtts_model_free(m);
    return test_finish();
}
