/* Tests of qtts-bench (tools/bench): make-model's geometry against the spec's
 * parameter counts and the golden checkpoints' tensor names, shapes and
 * dtypes; determinism and the synthetic marker; synthesis on tiny synthetic
 * checkpoints (sane audio, forced frame counts, run metrics); the report
 * formats (markdown, JSON round trip, CSV, SVG); compare on two real runs;
 * the decode placements (inline, worker, none) and RSS/weights; the
 * bandwidth probe's read loops; the quality arm and the recogniser plumbing.
 * Seconds, not minutes: the models written here use the tiny geometry
 * (make-model --tiny). */
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "test.h"

static char tmpdir[256];

/* snprintf into one of 32 rotating buffers (paths and test names) */
static const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static const char *fmt(const char *f, ...) {
    static char bufs[32][1024];
    static int k;
    char *b = bufs[k++ & 31];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof bufs[0], f, ap);
    va_end(ap);
    return b;
}

static const char *tmp(const char *name) { return fmt("%s/%s", tmpdir, name); }

static json_t *st_header(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char n8[8];
    json_t *j = NULL;
    if (fread(n8, 1, 8, f) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | n8[i];
        char *h = n < (1u << 26) ? malloc(n + 1) : NULL;
        if (h && fread(h, 1, n, f) == n) {
            json_error_t e;
            j = json_loadb(h, n, 0, &e);
        }
        free(h);
    }
    fclose(f);
    return j;
}

static int files_equal(const char *a, const char *b) {
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int eq = x && y;
    while (eq) {
        const int c = fgetc(x), d = fgetc(y);
        if (c != d) eq = 0;
        if (c == EOF || d == EOF) break;
    }
    if (x) fclose(x);
    if (y) fclose(y);
    return eq;
}

/* Every golden tensor (except the text embedding and projection, whose width
 * the tiny geometry changes for the real vocabulary) has the same dtype and
 * shape in the tiny synthetic file, and the synthetic file has no others. */
static void same_tensors(const char *name, const char *golden, const char *synth) {
    json_t *g = st_header(golden), *s = st_header(synth);
    if (!g || !s) {
        CHECK(name, 0, "cannot read %s or %s", golden, synth);
        json_decref(g), json_decref(s);
        return;
    }
    int bad = 0, n = 0;
    char why[512] = "";
    const char *k;
    json_t *v;
    json_object_foreach(g, k, v) {
        if (strcmp(k, "__metadata__") == 0 || strstr(k, "text_embedding") || strstr(k, "text_projection")) continue;
        n++;
        json_t *w = json_object_get(s, k);
        if (!w) {
            if (!bad++) snprintf(why, sizeof why, "missing %s", k);
            continue;
        }
        if (!json_equal(json_object_get(v, "dtype"), json_object_get(w, "dtype")) ||
            !json_equal(json_object_get(v, "shape"), json_object_get(w, "shape"))) {
            if (!bad++) snprintf(why, sizeof why, "%s differs in dtype or shape", k);
        }
    }
    json_object_foreach(s, k, v) {
        if (strcmp(k, "__metadata__") && !json_object_get(g, k) && !bad++)
            snprintf(why, sizeof why, "extra tensor %s", k);
    }
    CHECK(name, bad == 0 && n > 0, "%d differences over %d tensors, first: %s", bad, n, why);
    json_decref(g);
    json_decref(s);
}

static void test_geometry(void) {
    /* lm.md 3.6: 905 788 672 (0.6B LM) and 1 916 676 352 (1.7B, VoiceDesign: no speaker encoder) */
    int64_t nt = 0;
    const int64_t p06 = mm_count_params("0.6b", "custom_voice", 0, &nt);
    CHECK("0.6B talker + code predictor parameters = spec", p06 == 905788672LL, "%lld", (long long)p06);
    const int64_t p17 = mm_count_params("1.7b", "voice_design", 0, NULL);
    CHECK("1.7B talker + code predictor parameters = spec", p17 == 1916676352LL, "%lld", (long long)p17);
    /* ECAPA (codec.md 6.2): conv0 + 3 SE-Res2Net blocks + MFA + ASP + fc(enc_dim) */
    const int64_t block = (512LL * 512 + 512) * 2 + 7 * (64LL * 64 * 3 + 64) + (128LL * 512 + 128) + (512LL * 128 + 512);
    const int64_t common = 512LL * 128 * 5 + 512 + 3 * block + 1536LL * 1536 + 1536 + 128LL * 4608 + 128 +
                           1536LL * 128 + 1536;
    const int64_t e06 = mm_count_params("0.6b", "base", 0, NULL) - p06;
    const int64_t e17 = mm_count_params("1.7b", "base", 0, NULL) - p17;
    CHECK("0.6B speaker encoder parameters", e06 == common + 1024LL * 3072 + 1024, "%lld", (long long)e06);
    CHECK("1.7B speaker encoder parameters", e17 == common + 2048LL * 3072 + 2048, "%lld", (long long)e17);
    CHECK("1.7B has the small_to_mtp projection", mm_count_params("1.7b", "custom_voice", 0, NULL) == p17,
          "custom_voice and voice_design differ");
    /* codec decoder: codec.md 3.1 counted by hand */
    int64_t dec = 16LL * (2048 * 256 + 2048) + 2 * (256LL * 512 * 2) + 1024LL * 512 * 3 + 1024 + 512LL * 1024 + 512 +
                  8 * (512LL + 3 * 1024 * 512 + 512 * 1024 + 512 + 512 + 2 * 1024 * 512 + 512 * 1024 + 512) + 512 +
                  1024LL * 512 + 1024 + 2 * (1024LL * 1024 * 2 + 1024 + 1024 * 7 + 1024 + 2048 + 4096 * 1024 + 4096 +
                                             1024 * 4096 + 1024 + 1024) +
                  1536LL * 1024 * 7 + 1536;
    const int rates[4] = {8, 5, 4, 3};
    int64_t cin = 1536;
    for (int b = 0; b < 4; b++) {
        const int64_t co = cin / 2;
        dec += 2 * cin + cin * co * 2 * rates[b] + co + 3 * (4 * co + co * co * 7 + co + co * co + co);
        cin = co;
    }
    dec += 2 * 96 + 96 * 7 + 1;
    const int64_t pc = mm_count_params("0.6b", "custom_voice", 1, &nt);
    CHECK("codec decoder parameters = spec shapes", pc == dec, "%lld, want %lld", (long long)pc, (long long)dec);
    CHECK("codec decoder does not depend on the size", mm_count_params("1.7b", "custom_voice", 1, NULL) == pc, "differs");
}

static void test_make_model(void) {
    mm_options o = {"tiny", "base", 5, test_path("golden/data/e2e_string"), 1};
    char err[512] = "";
    int rc = mm_make_model(tmp("b5"), &o, err, sizeof err);
    CHECK("make-model tiny base", rc == 0, "%s", err);
    rc = mm_make_model(tmp("b5again"), &o, err, sizeof err);
    o.seed = 6;
    rc |= mm_make_model(tmp("b6"), &o, err, sizeof err);
    o.type = "custom_voice";
    o.seed = 5;
    rc |= mm_make_model(tmp("cv5"), &o, err, sizeof err);
    CHECK("make-model more folders", rc == 0, "%s", err);
    CHECK("same seed, same bytes", files_equal(fmt("%s/model.safetensors", tmp("b5")),
                                               fmt("%s/model.safetensors", tmp("b5again"))) &&
                                       files_equal(fmt("%s/speech_tokenizer/model.safetensors", tmp("b5")),
                                                   fmt("%s/speech_tokenizer/model.safetensors", tmp("b5again"))),
          "differ");
    CHECK("another seed, other bytes",
          !files_equal(fmt("%s/model.safetensors", tmp("b5")), fmt("%s/model.safetensors", tmp("b6"))),
          "identical");
    same_tensors("tiny base tensors = golden base_clone", test_path("golden/data/base_clone/model.safetensors"),
                 fmt("%s/model.safetensors", tmp("b5")));
    same_tensors("tiny codec tensors = golden base_clone codec",
                 test_path("golden/data/base_clone/speech_tokenizer/model.safetensors"),
                 fmt("%s/speech_tokenizer/model.safetensors", tmp("b5")));
    json_error_t je;
    json_t *c = json_load_file(fmt("%s/config.json", tmp("b5")), 0, &je);
    json_t *sc = json_load_file(fmt("%s/speech_tokenizer/config.json", tmp("b5")), 0, &je);
    json_t *h = st_header(fmt("%s/model.safetensors", tmp("b5")));
    CHECK("synthetic marker in both configs and the safetensors metadata",
          c && sc && h && json_object_get(c, "qtts_synthetic") && json_object_get(sc, "qtts_synthetic") &&
              json_object_get(json_object_get(h, "__metadata__"), "qtts_synthetic"),
          "marker missing");
    json_decref(c), json_decref(sc), json_decref(h);
    CHECK("tokenizer files copied", access(fmt("%s/vocab.json", tmp("b5")), R_OK) == 0 &&
                                        access(fmt("%s/merges.txt", tmp("b5")), R_OK) == 0,
          "missing");
    o.size = "2b";
    CHECK("unknown size refused", mm_make_model(tmp("bad"), &o, err, sizeof err) != 0 && strstr(err, "size"), "%s", err);
}

static float rms(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return n ? (float)sqrt(s / n) : 0;
}

static void test_synthesis(void) {
    static const char *const dirs[2] = {"cv5", "b5"};
    for (int d = 0; d < 2; d++) {
        qtts_model *m = NULL;
        char err[512];
        qtts_model_params mp = qtts_model_default_params();
        mp.n_threads = d == 0 ? 2 : 1;
        if (qtts_model_load(&m, tmp(dirs[d]), &mp, err, sizeof err)) {
            CHECK(fmt("load synthetic %s", dirs[d]), 0, "%s", err);
            continue;
        }
        qtts_model_info info;
        qtts_model_get_info(m, &info);
        CHECK(fmt("synthetic %s loads with tokenizer and codec", dirs[d]),
              info.has_tokenizer && info.has_codec && info.hidden_size == 64 && info.has_speaker_encoder == (d == 1),
              "tokenizer %d codec %d hidden %d spk %d", info.has_tokenizer, info.has_codec, info.hidden_size,
              info.has_speaker_encoder);
        qtts_voice *voice = NULL;
        if (d == 1) {
            float *pcm;
            size_t n;
            const char *tr;
            bench_ref_clip(&pcm, &n, &tr);
            qtts_voice_params vp = qtts_voice_default_params();
            vp.ref_text = tr;
            CHECK("ICL voice from the fixed reference clip", qtts_voice_from_pcm(m, pcm, n, 24000, &vp, &voice, err,
                                                                                sizeof err) == QTTS_OK,
                  "%s", err);
            free(pcm);
        }
        for (int ci = 0; ci < bench_n_cases; ci++) {
            const bench_case *c = &bench_cases[ci];
            if (c->clone && d == 0) continue;
            bench_config cfg = {tmp(dirs[d]), QTTS_WEIGHTS_NATIVE, "native", 2, 1, 3, QTTS_TEXT_MODE_DEFAULT,
                                "default", BENCH_DECODE_INLINE};
            run_request rq = {c, 7, 1, 1, voice, NULL, 0, 1, 1};
            run_output out;
            const int rc = bench_run_once(m, &cfg, &rq, 10.0, &out);
            int finite = 1;
            float peak = 0;
            for (size_t i = 0; i < out.n_pcm; i++) {
                if (!isfinite(out.pcm[i])) finite = 0;
                if (fabsf(out.pcm[i]) > peak) peak = fabsf(out.pcm[i]);
            }
            const float r = rms(out.pcm, out.n_pcm);
            const run_metrics *mm = &out.m;
            CHECK(fmt("%s %s: 7 forced frames of finite audio in [-1, 1]", dirs[d], c->name),
                  rc == 0 && out.n_codes_frames == 7 && out.n_pcm == 7 * 1920 && finite && peak <= 1.0f && r > 1e-3f,
                  "rc %d (%s) frames %d samples %zu finite %d peak %.3f rms %.4f", rc, out.err, out.n_codes_frames,
                  out.n_pcm, finite, peak, r);
            /* chunks 1, then 3: 1 + 3 + 3 */
            CHECK(fmt("%s %s: run metrics", dirs[d], c->name),
                  mm->n_frames == 7 && fabs(mm->audio_s - 0.56) < 1e-9 && mm->n_chunks == 3 && mm->rtf > 0 &&
                      fabs(mm->rtf * mm->rtfx - 1) < 1e-9 && mm->ttfa_ms > 0 && mm->ttfa_ms <= mm->wall_ms &&
                      mm->cadence_ms >= 0 && mm->viability > 0 && mm->viability <= 1 && mm->talker_ms_f > 0 &&
                      mm->predictor_ms_f > 0 && mm->decode_ms_f > 0 && mm->peak_rss_mib > 0 && mm->gbps > 0 &&
                      fabs(mm->roofline - mm->gbps / 10.0) < 1e-9 && mm->mhz_mean >= 0 && mm->nonfinite == 0 &&
                      info.weight_bytes_in_use > 0 &&
                      fabs(mm->rss_over_weights - mm->peak_rss_mib * 1048576.0 / info.weight_bytes_in_use) < 1e-9 &&
                      fabs(mm->audio_rms - r) < 1e-4 && fabs(mm->audio_peak - peak) < 1e-6,
                  "frames %g audio %g chunks %g rtf %g ttfa %g wall %g viab %g tk %g cp %g dec %g rss %g gbps %g",
                  mm->n_frames, mm->audio_s, mm->n_chunks, mm->rtf, mm->ttfa_ms, mm->wall_ms, mm->viability,
                  mm->talker_ms_f, mm->predictor_ms_f, mm->decode_ms_f, mm->peak_rss_mib, mm->gbps);
            run_output_free(&out);
            if (d == 1 && ci > 1 && !c->clone) ci = bench_n_cases - 2; /* Base: two text cases and the clone case */
        }
        qtts_voice_free(voice);
        qtts_model_free(m);
    }
}

static int run_bench(const char *json, const char *extra_md) {
    char models[600];
    snprintf(models, sizeof models, "%s,%s", tmp("cv5"), tmp("b5"));
    char *argv[] = {"run",         "-m",    models,        "--frames", "4",      "-r",    "2",
                    "--cases",     "short_en,medium_de,clone_en", "-c", "1/2,3", "-t", "1",
                    "-o",          "none",  "-q",          "--json",   (char *)json, "--csv",
                    (char *)tmp("r.csv"), "--md", (char *)extra_md, "--plot", (char *)tmp("r.svg")};
    return cmd_run((int)(sizeof argv / sizeof argv[0]), argv);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void test_reports_and_compare(void) {
    const int rc1 = run_bench(tmp("a.json"), tmp("a.md"));
    const int rc2 = run_bench(tmp("b.json"), tmp("b.md"));
    CHECK("two bench runs", rc1 == 0 && rc2 == 0, "rc %d %d", rc1, rc2);
    bench_report a, b;
    char err[512];
    const int ra = report_read_json(tmp("a.json"), &a, err, sizeof err);
    const int rb = ra ? -1 : report_read_json(tmp("b.json"), &b, err, sizeof err);
    CHECK("JSON reports read back", ra == 0 && rb == 0, "%s", err);
    if (ra || rb) return;
    /* cross product: 2 models x 2 chunks x 3 cases; the clone case is skipped on the CustomVoice model */
    int ok = 0, skipped = 0;
    for (int i = 0; i < a.n_rec; i++) {
        if (a.rec[i].n_runs == 2 && a.rec[i].runs[0].n_frames == 4) ok++;
        if (strstr(a.rec[i].error, "Base")) skipped++;
    }
    CHECK("JSON: cross product of models, chunks and cases", a.n_rec == 12 && ok == 10 && skipped == 2,
          "%d records, %d with 2 runs of 4 frames, %d skipped", a.n_rec, ok, skipped);
    /* the weight pages of the runs: default 2 MiB; --no-huge-pages in place, said in JSON and markdown */
    {
        char *argv[] = {"run", "-m", (char *)tmp("cv5"), "--frames", "2", "-r", "1", "--cases", "short_en", "-t", "1",
                        "-o", "none", "-q", "--no-huge-pages", "--json", (char *)tmp("nh.json"), "--md",
                        (char *)tmp("nh.md")};
        const int rc = cmd_run((int)(sizeof argv / sizeof argv[0]), argv);
        bench_report nh;
        char *md = slurp(tmp("nh.md"));
        const int rn = rc ? -1 : report_read_json(tmp("nh.json"), &nh, err, sizeof err);
        CHECK("JSON and markdown: weight pages", a.huge_pages == 1 && rn == 0 && nh.huge_pages == 0 && md &&
                                                     strstr(md, "| weight pages | stored weights read in place"),
              "default %d, --no-huge-pages run rc %d read %d pages %d", a.huge_pages, rc, rn, rn ? -1 : nh.huge_pages);
        if (rn == 0) report_free(&nh);
        free(md);
    }
    const bench_summary s = record_summary(&a.rec[0], bench_metric("rtf"));
    CHECK("JSON: summaries recomputed from the runs", s.n == 2 && s.median > 0 && s.p95 >= s.median, "n %d", s.n);
    json_error_t je;
    json_t *j = json_load_file(tmp("a.json"), 0, &je);
    json_t *r0 = json_array_get(json_object_get(j, "records"), 0);
    CHECK("JSON: machine, bandwidth, forced frames and per-record build info",
          j && json_object_get(json_object_get(j, "machine"), "read_bandwidth") &&
              json_integer_value(json_object_get(json_object_get(j, "run"), "frames")) == 4 &&
              json_object_get(r0, "cflags") && json_object_get(r0, "isa") && json_object_get(r0, "commit") &&
              json_object_get(json_object_get(json_object_get(r0, "summary"), "rtf"), "p95") &&
              json_is_object(json_object_get(r0, "cold")),
          "fields missing");
    json_decref(j);
    char *md = slurp(tmp("a.md")), *csv = slurp(tmp("r.csv")), *svg = slurp(tmp("r.svg"));
    CHECK("markdown: definitions, cold line, medians, forced frames",
          md && strstr(md, "RTFx = 1 / RTF") && strstr(md, "| cold |") && strstr(md, "median [p95] of 2") &&
              strstr(md, "forced to 4 per case, EOS ignored") && strstr(md, "read bandwidth") &&
              strstr(md, "*synthetic*"),
          "content missing");
    int lines = 0;
    for (const char *p = csv; p && *p; p++) lines += *p == '\n';
    /* cold runs only before the first case: 4 configurations */
    CHECK("CSV: header + cold and measured rows", csv && strncmp(csv, "model,size,type", 15) == 0 && lines == 1 + 10 + 4,
          "%d lines", lines);
    CHECK("SVG: both panels and every case",
          svg && strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>") && strstr(svg, "RTF per case") &&
              strstr(svg, "Time per frame by phase") && strstr(svg, "short_en") && strstr(svg, "clone_en"),
          "content missing");
    free(md), free(csv), free(svg);
    FILE *f = tmpfile();
    const int cr = f ? compare_reports(&a, &b, "rtf", NULL, f) : -1;
    char out[16384] = "";
    if (f) {
        rewind(f);
        out[fread(out, 1, sizeof out - 1, f)] = 0;
        fclose(f);
    }
    CHECK("compare two real runs", cr == 0 && strstr(out, "matched 10 pairs") && strstr(out, "median change") &&
                                       strstr(out, "weighted change") && strstr(out, "faster"),
          "rc %d: %.300s", cr, out);
    /* known values: B is 10% faster on every pair */
    for (int i = 0; i < b.n_rec; i++)
        for (int k = 0; k < b.rec[i].n_runs; k++) {
            a.rec[i].runs[k].rtf = 2.0;
            b.rec[i].runs[k].rtf = 1.8;
        }
    f = tmpfile();
    compare_reports(&a, &b, "rtf", NULL, f);
    rewind(f);
    out[fread(out, 1, sizeof out - 1, f)] = 0;
    fclose(f);
    CHECK("compare arithmetic", strstr(out, "median change -10.00%, mean change -10.00%, weighted change -10.00%") &&
                                    strstr(out, "10 faster, 0 slower"),
          "%.400s", out);
    report_free(&a);
    report_free(&b);
}

/* One case on the tiny CustomVoice model with each decode placement: the same
 * frames every time; inline and worker make the same samples, the worker's
 * chunks come from another thread; none makes no audio and has no audio
 * figures, but RTF over the frames' 80 ms each. */
static void test_decode_placements(void) {
    qtts_model *m = NULL;
    char err[512];
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = 2;
    if (qtts_model_load(&m, tmp("cv5"), &mp, err, sizeof err)) {
        CHECK("load the tiny model for the decode placements", 0, "%s", err);
        return;
    }
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    CHECK("weight_bytes_in_use includes the codec decoder", info.weight_bytes_in_use > info.codec_bytes,
          "in use %lld, codec %lld", (long long)info.weight_bytes_in_use, (long long)info.codec_bytes);
    run_request rq = {&bench_cases[0], 7, 1, 1, NULL, NULL, 0, 1, 1};
    run_output out[3];
    int rc[3];
    for (int p = 0; p < 3; p++) {
        const bench_config cfg = {tmp("cv5"), QTTS_WEIGHTS_NATIVE, "native", 2, 1, 3, QTTS_TEXT_MODE_DEFAULT,
                                  "default", (bench_decode)p};
        rc[p] = bench_run_once(m, &cfg, &rq, 10.0, &out[p]);
    }
    const run_metrics *in = &out[0].m, *wk = &out[1].m, *no = &out[2].m;
    CHECK("decode inline: 3 chunks, all on the calling thread",
          rc[0] == 0 && in->n_chunks == 3 && out[0].chunks_off_thread == 0 && out[0].n_pcm == 7 * 1920 &&
              in->decode_ms_f > 0 && in->ttfa_ms > 0,
          "rc %d (%s) chunks %g off-thread %d samples %zu", rc[0], out[0].err, in->n_chunks, out[0].chunks_off_thread,
          out[0].n_pcm);
    /* overlap lends a worker of the model's pool for the chunks after the first (the first
     * is decoded on all threads for the earliest audio); the second is ready at frame 4 */
    CHECK("decode worker: 3 chunks, the second or more from a lent worker, the same samples as inline",
          rc[1] == 0 && wk->n_chunks == 3 && out[1].chunks_off_thread >= 1 && out[1].chunks_off_thread <= 2 &&
              out[1].n_pcm == out[0].n_pcm &&
              out[0].pcm && out[1].pcm && memcmp(out[0].pcm, out[1].pcm, sizeof(float) * out[0].n_pcm) == 0 &&
              wk->decode_ms_f > 0,
          "rc %d (%s) chunks %g off-thread %d samples %zu", rc[1], out[1].err, wk->n_chunks, out[1].chunks_off_thread,
          out[1].n_pcm);
    CHECK("decode none: the same 7 forced frames, no audio",
          rc[2] == 0 && out[2].n_codes_frames == 7 && out[0].n_codes_frames == 7 && out[2].n_pcm == 0 &&
              out[0].codes && out[2].codes && memcmp(out[0].codes, out[2].codes, sizeof(int32_t) * 16 * 7) == 0 &&
              no->n_frames == 7 && out[2].chunks_off_thread == 0,
          "rc %d (%s) frames %d / %g samples %zu", rc[2], out[2].err, out[2].n_codes_frames, no->n_frames, out[2].n_pcm);
    CHECK("decode none: RTF = wall / (frames x 80 ms); audio, TTFA and decode figures empty",
          fabs(no->audio_s - 0.56) < 1e-9 && no->wall_ms > 0 && fabs(no->rtf - no->wall_ms / 560.0) < 1e-9 &&
              fabs(no->rtf * no->rtfx - 1) < 1e-9 && isnan(no->ttfa_ms) && isnan(no->cadence_ms) &&
              isnan(no->cadence_max_ms) && isnan(no->underruns) && isnan(no->viability) && isnan(no->n_chunks) &&
              isnan(no->decode_ms) && isnan(no->decode_ms_f) && isnan(no->audio_rms) && isnan(no->audio_peak) &&
              isnan(no->nonfinite),
          "audio %g wall %g rtf %g ttfa %g chunks %g decode %g rms %g", no->audio_s, no->wall_ms, no->rtf, no->ttfa_ms,
          no->n_chunks, no->decode_ms_f, no->audio_rms);
    CHECK("decode none: generation figures, GB/s, roofline and RSS/weights",
          no->prefill_ms > 0 && no->talker_ms_f > 0 && no->predictor_ms_f > 0 && no->gbps > 0 &&
              fabs(no->roofline - no->gbps / 10.0) < 1e-9 && no->peak_rss_mib > 0 &&
              fabs(no->rss_over_weights - no->peak_rss_mib * 1048576.0 / info.weight_bytes_in_use) < 1e-9,
          "prefill %g tk %g cp %g gbps %g rss %g rss/w %g", no->prefill_ms, no->talker_ms_f, no->predictor_ms_f,
          no->gbps, no->peak_rss_mib, no->rss_over_weights);
    for (int p = 0; p < 3; p++) run_output_free(&out[p]);
    qtts_model_free(m);
}

static int run_decode_bench_probe(const char *decode, const char *run_mib) {
    char *argv[] = {"run", "-m", (char *)tmp("cv5"), "--frames", "4", "-r", "1", "--cases", "short_en",
                    "-c", "2", "-t", "1", "-o", "none", "-q", "--decode", (char *)decode, "--bw-mib", "64",
                    "--bw-run-mib", (char *)run_mib,
                    "--json", (char *)tmp("d.json"), "--csv", (char *)tmp("d.csv"), "--md", (char *)tmp("d.md"),
                    "--plot", (char *)tmp("d.svg")};
    return cmd_run((int)(sizeof argv / sizeof argv[0]), argv);
}

static int run_decode_bench(const char *decode) { return run_decode_bench_probe(decode, "64"); }

static int jnull(json_t *o, const char *k) { return json_is_null(json_object_get(o, k)); }
static double jnum_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* --backend / --device: refused when wrong; on the CPU every record says so,
 * with no device memory and no GPU times; a record from a GPU backend gets
 * the GPU columns and a device line in markdown, and its fields survive the
 * JSON round trip (a report made by hand: no GPU needed). */
static int run_backend_bench(const char *opt, const char *val) {
    char *argv[] = {"run", "-m", (char *)tmp("cv5"), "--frames", "2", "-r", "1", "--cases", "short_en", "-t", "1",
                    "-o", "none", "-q", "--bw-mib", "64", "--bw-run-mib", "0", "--json", (char *)tmp("be.json"),
                    "--csv", (char *)tmp("be.csv"), "--md", (char *)tmp("be.md"), (char *)opt, (char *)val};
    return cmd_run((int)(sizeof argv / sizeof argv[0]), argv);
}

static void test_backend_option(void) {
    CHECK("--backend: an unknown name is a usage error", run_backend_bench("--backend", "nosuch") == 2, "not refused");
    CHECK("--device: a negative or non-numeric index is a usage error",
          run_backend_bench("--device", "-1") == 2 && run_backend_bench("--device", "x") == 2 &&
              run_backend_bench("--device", "") == 2,
          "not refused");
    const int rc = run_backend_bench("--backend", "cpu");
    CHECK("--backend cpu runs", rc == 0, "rc %d", rc);
    if (rc == 0) {
        json_error_t je;
        json_t *j = json_load_file(tmp("be.json"), 0, &je);
        json_t *r0 = json_array_get(json_object_get(j, "records"), 0);
        json_t *run0 = json_array_get(json_object_get(r0, "runs"), 0);
        json_t *sum = json_object_get(r0, "summary");
        const char *be = json_string_value(json_object_get(r0, "backend"));
        CHECK("JSON on the CPU: backend, device, no device memory, no GPU times",
              be && !strcmp(be, "cpu") && json_is_string(json_object_get(r0, "device")) &&
                  json_is_string(json_object_get(r0, "device_driver")) &&
                  json_integer_value(json_object_get(r0, "device_index")) == 0 &&
                  json_is_integer(json_object_get(r0, "device_bytes_allocated")) &&
                  json_integer_value(json_object_get(r0, "device_bytes_allocated")) == 0 &&
                  json_integer_value(json_object_get(r0, "device_bytes_reserved")) == 0 && run0 &&
                  jnull(run0, "gpu_prefill_ms") && jnull(run0, "gpu_talker_ms_per_frame") &&
                  jnull(run0, "gpu_predictor_ms_per_frame") && jnull(run0, "gpu_sampling_ms_per_frame") &&
                  json_is_object(json_object_get(sum, "gpu_talker_ms_per_frame")) &&
                  jnum_of(run0, "talker_ms_per_frame") > 0,
              "backend %s", be ? be : "(none)");
        json_decref(j);
        char *md = slurp(tmp("be.md")), *csv = slurp(tmp("be.csv"));
        const char *nl = csv ? strchr(csv, '\n') : NULL;
        CHECK("markdown and CSV on the CPU: no GPU columns in the table, backend columns in CSV",
              md && !strstr(md, "GPU talker") && !strstr(md, "| device |") && nl &&
                  !strncmp(nl - strlen(",device_bytes_reserved"), ",device_bytes_reserved", 22) &&
                  strstr(nl, ",cpu,"),
              "md %d csv %d", md != NULL, csv != NULL);
        free(md), free(csv);
    }
    /* a record as a Vulkan run makes it */
    bench_report r;
    memset(&r, 0, sizeof r);
    r.reps = 2;
    r.rec = calloc(1, sizeof *r.rec);
    if (!r.rec) return;
    r.n_rec = 1;
    bench_record *rec = &r.rec[0];
    snprintf(rec->model, sizeof rec->model, "/m/cv");
    snprintf(rec->model_name, sizeof rec->model_name, "cv");
    snprintf(rec->weights, sizeof rec->weights, "q8");
    snprintf(rec->kernels, sizeof rec->kernels, "avx2");
    snprintf(rec->case_name, sizeof rec->case_name, "short_en");
    snprintf(rec->backend, sizeof rec->backend, "vulkan");
    snprintf(rec->device_name, sizeof rec->device_name, "llvmpipe (LLVM 15.0.6, 256 bits)");
    snprintf(rec->device_driver, sizeof rec->device_driver, "llvmpipe Mesa 22.3.6");
    rec->device = 1;
    rec->device_bytes_allocated = 3 * 1048576;
    rec->device_bytes_reserved = 4 * 1048576;
    rec->n_runs = 2;
    for (int k = 0; k < 2; k++) {
        run_metrics *m = &rec->runs[k];
        for (int i = 0; i < bench_n_metrics; i++) *(double *)((char *)m + bench_metrics[i].offset) = NAN;
        m->n_frames = 4, m->rtf = 0.5, m->talker_ms_f = 3;
        m->gpu_prefill_ms = 10 + k, m->gpu_talker_ms_f = 1.25 + k, m->gpu_predictor_ms_f = 2.5, m->gpu_sampling_ms_f = 0.5;
    }
    FILE *f = tmpfile();
    report_write(&r, "md", f);
    rewind(f);
    static char out[65536];
    out[fread(out, 1, sizeof out - 1, f)] = 0;
    fclose(f);
    CHECK("markdown on a GPU backend: GPU columns, device line, backend beside the ISA",
          strstr(out, " GPU prefill ms | GPU talker ms/f | GPU CP ms/f | GPU sampling ms/f |") &&
              strstr(out, "| device | cv q8: vulkan device 1, llvmpipe (LLVM 15.0.6, 256 bits) (driver llvmpipe Mesa "
                          "22.3.6); 3.0 MiB allocated, 4.0 MiB reserved |") &&
              strstr(out, "| vulkan + avx2 |") && strstr(out, " 1.75 [") && strstr(out, " 2.50 [2.50] |"),
          "%.2000s", out);
    const int wj = report_write_file(&r, "json", tmp("gpu.json"));
    bench_report back;
    char err[256] = "";
    const int rj = wj ? -1 : report_read_json(tmp("gpu.json"), &back, err, sizeof err);
    CHECK("JSON round trip of a GPU record",
          rj == 0 && back.n_rec == 1 && !strcmp(back.rec[0].backend, "vulkan") &&
              !strcmp(back.rec[0].device_name, rec->device_name) && !strcmp(back.rec[0].device_driver, rec->device_driver) &&
              back.rec[0].device == 1 && back.rec[0].device_bytes_allocated == 3 * 1048576 &&
              back.rec[0].device_bytes_reserved == 4 * 1048576 && back.rec[0].n_runs == 2 &&
              back.rec[0].runs[1].gpu_talker_ms_f == 2.25 && back.rec[0].runs[0].gpu_prefill_ms == 10 &&
              back.rec[0].runs[0].gpu_sampling_ms_f == 0.5,
          "write %d read %d %s", wj, rj, err);
    if (rj == 0) report_free(&back);
    report_free(&r);
}

/* --decode as a crossed dimension through every report format and compare */
static void test_decode_option(void) {
    CHECK("--decode: an unknown placement is a usage error", run_decode_bench("inline,sideways") == 2, "not refused");
    CHECK("--decode: an empty list is a usage error", run_decode_bench("") == 2, "not refused");
    CHECK("--bw-run-mib: a buffer the caches could hold, or junk, is a usage error",
          run_decode_bench_probe("none", "16") == 2 && run_decode_bench_probe("none", "64x") == 2 &&
              run_decode_bench_probe("none", "-1") == 2,
          "not refused");
    const int rc = run_decode_bench("inline,worker,none");
    CHECK("--decode inline,worker,none runs", rc == 0, "rc %d", rc);
    if (rc) return;
    json_error_t je;
    json_t *j = json_load_file(tmp("d.json"), 0, &je);
    json_t *recs = json_object_get(j, "records");
    static const char *const want[3] = {"inline", "worker", "none"};
    int ok = json_array_size(recs) == 3;
    char why[256] = "";
    for (int i = 0; ok && i < 3; i++) {
        json_t *r = json_array_get(recs, (size_t)i), *r0 = json_array_get(json_object_get(r, "runs"), 0);
        const char *d = json_string_value(json_object_get(r, "decode"));
        const double wmib = jnum_of(r, "weights_in_use_mib"), wb = jnum_of(r, "weights_in_use_bytes");
        ok = d && strcmp(d, want[i]) == 0 && wmib > 0 && fabs(wmib - wb / 1048576.0) < 1e-3 * wmib &&
             jnum_of(r0, "rss_over_weights") > 0 && jnum_of(r0, "n_frames") == 4 &&
             json_is_number(json_object_get(json_object_get(json_object_get(r, "summary"), "rss_over_weights"),
                                            "median"));
        if (!ok) snprintf(why, sizeof why, "record %d: decode %s, weights in use %g MiB", i, d ? d : "(none)", wmib);
    }
    CHECK("JSON: one record per placement, with decode, weights_in_use_mib and rss_over_weights", ok, "%s%s", why,
          json_array_size(recs) == 3 ? "" : " (not 3 records)");
    json_t *rin = json_array_get(json_object_get(json_array_get(recs, 0), "runs"), 0);
    json_t *rno = json_array_get(json_object_get(json_array_get(recs, 2), "runs"), 0);
    CHECK("JSON: decode none has frames and RTF but no audio fields",
          rno && jnum_of(rno, "n_frames") == 4 && jnum_of(rno, "rtf") > 0 && jnum_of(rno, "gbps") > 0 &&
              fabs(jnum_of(rno, "audio_s") - 0.32) < 1e-9 && jnull(rno, "ttfa_ms") && jnull(rno, "cadence_ms") &&
              jnull(rno, "decode_ms") && jnull(rno, "decode_ms_per_frame") && jnull(rno, "n_chunks") &&
              jnull(rno, "audio_rms") && jnull(rno, "underruns") && jnull(rno, "viability"),
          "fields wrong");
    /* every run's roofline is against the probes made around it, not the opening one */
    int probed = 1;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) { /* the measured run and the cold one */
            json_t *r = json_array_get(recs, (size_t)i);
            json_t *m = k ? json_object_get(r, "cold") : json_array_get(json_object_get(r, "runs"), 0);
            const double pg = jnum_of(m, "probe_gbps"), g = jnum_of(m, "gbps"), rl = jnum_of(m, "roofline");
            if (!(pg > 0 && g > 0 && fabs(rl - g / pg) < 1e-4 * rl)) probed = 0; /* JSON keeps 6 digits */
        }
    CHECK("JSON: each run's roofline = GB/s / the mean of the probes around it (--bw-run-mib)",
          probed && jnum_of(json_object_get(j, "machine"), "bandwidth_run_probe_mib") == 64, "not per run");
    CHECK("JSON: decode inline has the audio fields",
          rin && jnum_of(rin, "ttfa_ms") > 0 && jnum_of(rin, "decode_ms_per_frame") > 0 && jnum_of(rin, "n_chunks") == 2,
          "fields missing");
    const char *meth = json_string_value(json_object_get(json_object_get(j, "machine"), "bandwidth_method"));
    CHECK("JSON: the bandwidth probe's read loop", meth && strcmp(meth, bw_method_name(bw_method_best())) == 0, "%s",
          meth ? meth : "(missing)");
    {
        json_t *mach = json_object_get(j, "machine"), *pk = json_object_get(mach, "compute_peak");
        json_t *p0 = json_array_get(pk, 0);
        const char *id = json_string_value(json_object_get(mach, "cpu_id"));
        const char *fm = json_string_value(json_object_get(p0, "f32_method"));
        CHECK("JSON: the CPU's id and the arithmetic peak of the run's threads",
              id && id[0] && json_array_size(pk) == 1 && jnum_of(p0, "threads") == 1 && jnum_of(p0, "f32_gmacs") > 0 &&
                  fm && strcmp(fm, peak_method_name(PK_F32, peak_method_best(PK_F32))) == 0 &&
                  (jnum_of(p0, "int8_gmacs") > 0) == peak_method_supported(PK_INT8, peak_method_best(PK_INT8)),
              "cpu_id %s, %zu peaks, f32 %g (%s)", id ? id : "(missing)", json_array_size(pk),
              jnum_of(p0, "f32_gmacs"), fm ? fm : "(missing)");
    }
    json_decref(j);
    char *md = slurp(tmp("d.md")), *csv = slurp(tmp("d.csv")), *svg = slurp(tmp("d.svg"));
    CHECK("markdown: decode and RSS/weights columns, a row per placement, the probe's loop, weights in use",
          md && strstr(md, "| mode | decode | case |") && strstr(md, " RSS/weights |") &&
              strstr(md, "| default | inline | short_en |") && strstr(md, "| default | worker | short_en |") &&
              strstr(md, "| default | none | short_en |") && strstr(md, bw_method_name(bw_method_best())) &&
              strstr(md, "| weights in use | cv5 native: ") && strstr(md, "RSS/weights = peak RSS bytes") &&
              strstr(md, "none calls qtts_generate_codes") && strstr(md, " probe GB/s |") &&
              strstr(md, "| roofline denominator | per run: probes of 64 MiB") &&
              strstr(md, "| arithmetic peak | 1 thread: f32 ") && strstr(md, "multiply-adds/s"),
          "content missing");
    CHECK("CSV: decode column, weights in use and rss_over_weights",
          csv && strstr(csv, ",mode,decode,case,") && strstr(csv, ",weights_in_use_mib") &&
              strstr(csv, ",rss_over_weights_median,") && strstr(csv, ",default,none,short_en,") &&
              strstr(csv, ",default,worker,short_en,"),
          "content missing");
    CHECK("SVG: configurations labelled by decode placement",
          svg && strstr(svg, "decode inline") && strstr(svg, "decode worker") && strstr(svg, "decode none"),
          "labels missing");
    free(md), free(csv), free(svg);
    /* compare: configurations match on the decode placement too */
    bench_report a, b;
    char err[512];
    if (report_read_json(tmp("d.json"), &a, err, sizeof err)) {
        CHECK("decode report reads back", 0, "%s", err);
        return;
    }
    if (report_read_json(tmp("d.json"), &b, err, sizeof err)) {
        CHECK("decode report reads back", 0, "%s", err);
        report_free(&a);
        return;
    }
    CHECK("JSON in: decode, weights in use and the probe's loop",
          a.n_rec == 3 && strcmp(a.rec[2].decode, "none") == 0 && a.rec[0].weights_in_use > 0 &&
              strcmp(a.bw_method, bw_method_name(bw_method_best())) == 0,
          "%d records, decode %s", a.n_rec, a.n_rec == 3 ? a.rec[2].decode : "?");
    char out[8192];
    int cr[3];
    int matched[3] = {-1, -1, -1};
    for (int k = 0; k < 3; k++) {
        if (k == 1)
            for (int i = 0; i < b.n_rec; i++) snprintf(b.rec[i].decode, sizeof b.rec[i].decode, "inline");
        FILE *f = tmpfile();
        cr[k] = f ? compare_reports(&a, &b, "rtf", k == 2 ? "decode" : NULL, f) : -2;
        out[0] = 0;
        if (f) {
            rewind(f);
            out[fread(out, 1, sizeof out - 1, f)] = 0;
            fclose(f);
        }
        const char *p = strstr(out, "matched ");
        if (p) matched[k] = atoi(p + 8);
    }
    CHECK("compare: each placement matches its own", cr[0] == 0 && matched[0] == 3, "rc %d, %d pairs", cr[0],
          matched[0]);
    CHECK("compare: other placements do not match", cr[1] == 0 && matched[1] == 1, "rc %d, %d pairs", cr[1],
          matched[1]);
    CHECK("compare --ignore decode matches across placements", cr[2] == 0 && matched[2] == 3, "rc %d, %d pairs", cr[2],
          matched[2]);
    report_free(&a);
    report_free(&b);
}

/* Every read loop of the bandwidth probe reads every word once: the XOR of
 * any span, at any alignment, equals a plain loop's. */
static void test_bandwidth_probe(void) {
    enum { N = 1037 };
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (N + 8) * sizeof(uint64_t))) {
        CHECK("bandwidth probe buffer", 0, "no memory");
        return;
    }
    uint64_t *buf = mem, x = 0x243f6a8885a308d3ull;
    for (int i = 0; i < N + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = x;
    }
    static const size_t lens[] = {0, 1, 5, 31, 32, 33, 63, 64, 257, N - 3};
    for (int m = 0; m < BW_N_METHODS; m++) {
        const char *name = bw_method_name((bw_method)m);
        if (!bw_method_supported((bw_method)m)) {
            test_skip(fmt("bandwidth probe: %s", name), "this CPU or build has no %s", name);
            continue;
        }
        int bad = 0;
        char why[128] = "";
        for (size_t off = 0; off < 4; off++)
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                uint64_t want = 0;
                for (size_t i = 0; i < lens[k]; i++) want ^= buf[off + i];
                if (bw_read_xor((bw_method)m, buf + off, lens[k]) != want && !bad++)
                    snprintf(why, sizeof why, "offset %zu, %zu words", off, lens[k]);
            }
        CHECK(fmt("bandwidth probe: %s read every word once", name), bad == 0, "%d spans wrong, first: %s", bad, why);
    }
    free(mem);
    const bw_method best = bw_method_best();
    bw_method parsed = BW_SCALAR;
    CHECK("bandwidth probe: the widest supported loop is chosen",
          bw_method_supported(best) && (best == BW_N_METHODS - 1 || !bw_method_supported((bw_method)(best + 1))) &&
              bw_parse_method("auto", &parsed) == 0 && parsed == best && bw_parse_method("avx1024", &parsed) == -1,
          "best %s", bw_method_name(best));
#if defined(__x86_64__)
    CHECK("bandwidth probe: AVX-512 chosen where the CPU has it",
          !__builtin_cpu_supports("avx512f") || best == BW_AVX512, "best %s", bw_method_name(best));
#endif
    CHECK("bandwidth probe: a small measurement", measure_read_bandwidth(8u << 20, 1, 1, best) > 0, "0 GB/s");
    char *argv[] = {"bandwidth", "--method", "avx1024"};
    CHECK("bandwidth: an unknown --method is a usage error", cmd_bandwidth(3, argv) == 2, "not refused");
}

/* The peak probe's loops do the arithmetic they are timed for: with inputs of
 * 1 every accumulator must end at a known value (a loop that skipped or
 * folded work would not). */
static void test_peak_probe(void) {
    static const long iters[] = {1, 7, 1000};
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < PK_N_METHODS; m++) {
            if (k == PK_INT8 && m == PK_SCALAR) continue; /* no such loop: the scalar int8 path has no one instruction */
            const char *name = peak_method_name((peak_kind)k, (peak_method)m);
            if (!peak_method_supported((peak_kind)k, (peak_method)m)) {
                test_skip(fmt("peak probe: %s %s", k ? "int8" : "f32", name), "this CPU or build has no such loop");
                continue;
            }
            int bad = 0;
            double got = 0, want = 0;
            for (int i = 0; i < 3 && !bad; i++) {
                got = peak_loop((peak_kind)k, (peak_method)m, iters[i]);
                want = peak_loop_expected((peak_kind)k, (peak_method)m, iters[i]);
                bad = got != want;
            }
            CHECK(fmt("peak probe: %s does the arithmetic it counts", name), !bad, "checksum %.0f, want %.0f", got,
                  want);
        }
    const peak_method bf = peak_method_best(PK_F32);
    CHECK("peak probe: the widest supported f32 loop is chosen",
          peak_method_supported(PK_F32, bf) &&
              (bf == PK_N_METHODS - 1 || !peak_method_supported(PK_F32, (peak_method)(bf + 1))),
          "best %s", peak_method_name(PK_F32, bf));
#if defined(__x86_64__)
    CHECK("peak probe: the int8 loop is vpdpbusd where the CPU has AVX-512 VNNI",
          !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni")) ||
              peak_method_best(PK_INT8) == PK_AVX512,
          "best %s", peak_method_name(PK_INT8, peak_method_best(PK_INT8)));
#endif
    CHECK("peak probe: a measurement", measure_peak(PK_F32, bf, 1, 1) > 0, "0 G/s");
    int pm = 7;
    CHECK("peak: --method names parse", peak_parse_method("auto", &pm) == 0 && pm == -1 &&
                                            peak_parse_method("avx2", &pm) == 0 && pm == PK_AVX2 &&
                                            peak_parse_method("avx1024", &pm) == -1,
          "%d", pm);
    peak_result pr;
    measure_peaks_with(1, 1, PK_SCALAR, &pr);
    CHECK("peak: --method scalar measures the scalar f32 loop and no int8 one",
          pr.f32_gmacs > 0 && !strcmp(pr.f32_method, peak_method_name(PK_F32, PK_SCALAR)) && pr.int8_gmacs == 0 &&
              !strcmp(pr.int8_method, "none"),
          "%s %.1f, %s %.1f", pr.f32_method, pr.f32_gmacs, pr.int8_method, pr.int8_gmacs);
    if (peak_method_supported(PK_F32, PK_AVX2)) {
        measure_peaks_with(1, 1, PK_AVX2, &pr);
        CHECK("peak: --method avx2 measures the AVX2 loops", pr.f32_gmacs > 0 && pr.int8_gmacs > 0 &&
                                                                  !strcmp(pr.f32_method, peak_method_name(PK_F32, PK_AVX2)) &&
                                                                  !strcmp(pr.int8_method, peak_method_name(PK_INT8, PK_AVX2)),
              "%s %.1f, %s %.1f", pr.f32_method, pr.f32_gmacs, pr.int8_method, pr.int8_gmacs);
    } else {
        test_skip("peak: --method avx2 measures the AVX2 loops", "this CPU or build has no AVX2 loop");
    }
    char *a1[] = {"peak", "-t", "0"}, *a2[] = {"peak", "--fast"}, *a3[] = {"peak", "--method", "avx1024"};
    CHECK("peak: a bad thread count, an unknown option and an unknown method are usage errors",
          cmd_peak(3, a1) == 2 && cmd_peak(2, a2) == 2 && cmd_peak(3, a3) == 2, "not refused");
}

static void test_quality(void) {
    bench_report r;
    memset(&r, 0, sizeof r);
    const char *w[1] = {"native"};
    const bench_case *cases[2] = {&bench_cases[0], &bench_cases[bench_n_cases - 1]};
    quality_options qo = {"native", "printf 'hello doctor smith is the meeting still at three o\\047clock\\n' # {wav}", 5,
                          1, 3, NULL, {0}};
    /* one thread: cheap on a 2-core machine where other tests run too */
    const int rc = quality_run(tmp("b5"), w, 1, cases, 2, &qo, &r);
    CHECK("quality arm on a Base model", rc == 0 && r.n_q == 2, "rc %d, %d records", rc, r.n_q);
    for (int i = 0; i < r.n_q; i++) {
        const quality_record *q = &r.q[i];
        int all = q->n_groups == 16;
        for (int g = 0; g < 16; g++) all &= q->agree[g] == 1.0;
        CHECK(fmt("quality %s: the reference path agrees with itself", q->case_name),
              !q->error[0] && all && q->teacher_frames == 5 && isinf(q->snr_db) && fabs(q->mel_corr - 1) < 1e-9,
              "%s agree %.3f frames %d snr %g mel %g", q->error, q->agree_mean, q->teacher_frames, q->snr_db,
              q->mel_corr);
        CHECK(fmt("quality %s: speaker similarity of output vs reference clip", q->case_name),
              isfinite(q->spk_sim_ref) && q->spk_sim_ref >= -1 && q->spk_sim_ref <= 1 &&
                  q->spk_sim_ref == q->spk_sim_test,
              "%g %g", q->spk_sim_ref, q->spk_sim_test);
        CHECK(fmt("quality %s: WER through the recogniser command", q->case_name),
              strcmp(q->hyp_test, "hello doctor smith is the meeting still at three o'clock") == 0 &&
                  (i == 1 || q->wer_test == 0.0) && (i == 0 || q->wer_test > 0.5),
              "hyp \"%s\" WER %g", q->hyp_test, q->wer_test);
    }
    report_free(&r);
    char err[256];
    char *t = asr_transcribe("false {wav}", "/nonexistent.wav", err, sizeof err);
    CHECK("a failing recogniser is reported", t == NULL && strstr(err, "status"), "%s", err);
    free(t);
    t = asr_transcribe("echo x", "/x.wav", err, sizeof err);
    CHECK("a recogniser command without {wav} is refused", t == NULL && strstr(err, "{wav}"), "%s", err);
    free(t);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qtts-test-bench-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        test_report("temporary folder", 0, "mkdtemp failed");
        return test_finish();
    }
    test_geometry();
    test_make_model();
    test_synthesis();
    test_reports_and_compare();
    test_backend_option();
    test_decode_placements();
    test_decode_option();
    test_bandwidth_probe();
    test_peak_probe();
    test_quality();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "# could not remove %s\n", tmpdir);
    return test_finish();
}
