/* The qtts command-line tool run as a process: every text-to-codes golden run
 * that needs no reference audio reproduces the official greedy codes through
 * `qtts --dump-codes`, from ids (tiny-vocabulary cases) and from UTF-8 strings
 * (e2e case); bad invocations exit with the documented code and a message;
 * `qtts voices` lists speaker names as the checkpoint spells them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sndfile.h>

#include "npy.h"
#include "test.h"

static char g_tmp[256];

static const char *qtts_bin(void) {
    static char b[512];
    const char *d = getenv("BUILD");
    snprintf(b, sizeof b, "%s/qtts", d && *d ? d : "build");
    return b;
}

/* Shell-quote s into a static rotating buffer. */
static const char *q(const char *s) {
    static char bufs[8][8192];
    static int k;
    char *b = bufs[k++ & 7], *p = b;
    *p++ = '\'';
    for (; *s && p < b + sizeof bufs[0] - 8; s++) {
        if (*s == '\'') {
            memcpy(p, "'\\''", 4);
            p += 4;
        } else *p++ = *s;
    }
    *p++ = '\'';
    *p = 0;
    return b;
}

/* Run a shell command; returns the exit status, stderr captured to err. */
static int run_cmd(const char *cmd, char *err, size_t n) {
    char full[16384], errfile[300];
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", g_tmp);
    snprintf(full, sizeof full, "%s 2>%s", cmd, errfile);
    int st = system(full);
    FILE *f = fopen(errfile, "rb");
    size_t r = f ? fread(err, 1, n - 1, f) : 0;
    err[r] = 0;
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void ids_str(json_t *a, int from, int drop, char *out, size_t n) {
    size_t k = 0;
    out[0] = 0;
    int len = (int)json_array_size(a);
    for (int i = from; i < len - drop && k < n; i++)
        k += snprintf(out + k, n - k, "%s%lld", i > from ? " " : "", (long long)json_integer_value(json_array_get(a, i)));
}

static int codes_match(const char *file, const char *golden, char *why, size_t n) {
    npy_array a;
    char err[512];
    if (npy_load(golden, &a, err, sizeof err)) {
        snprintf(why, n, "%.200s", err);
        return 0;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(why, n, "no codes file");
        npy_free(&a);
        return 0;
    }
    long i = 0;
    long long v;
    int ok = 1;
    while (fscanf(f, "%lld", &v) == 1) {
        if (i >= a.n || v != a.i64[i]) {
            ok = 0;
            snprintf(why, n, "code %ld differs or is extra", i);
            break;
        }
        i++;
    }
    if (ok && i != a.n) {
        ok = 0;
        snprintf(why, n, "%ld codes written, golden has %ld", i, a.n);
    }
    fclose(f);
    npy_free(&a);
    return ok;
}

static void golden_runs(const char *cs) {
    json_error_t je;
    json_t *prompts = json_load_file(test_path("golden/data/%s/inputs/prompts.json", cs), 0, &je);
    if (!prompts) {
        test_report(cs, 0, "cannot read prompts.json: %s", je.text);
        return;
    }
    const char *run;
    json_t *pj;
    json_object_foreach(prompts, run, pj) {
        const char *kind = json_string_value(json_object_get(pj, "kind"));
        if (!kind || (strcmp(kind, "tts") && strcmp(kind, "e2e"))) continue;
        char cmd[16384], ids[4096], iids[4096] = "", err[4096], codes[300], name[256];
        snprintf(codes, sizeof codes, "%s/%s.codes", g_tmp, run);
        json_t *in = json_object_get(pj, "input_ids"), *ins = json_object_get(pj, "instruct_ids");
        json_t *spk = json_object_get(pj, "speaker"), *lang = json_object_get(pj, "language");
        int k = snprintf(cmd, sizeof cmd, "%s --model %s --greedy --quiet --max-new-tokens %lld --repetition-penalty %g "
                         "--language %s --text-mode %s --dump-codes %s",
                         qtts_bin(), q(test_path("golden/data/%s", cs)),
                         (long long)json_integer_value(json_object_get(pj, "max_new_tokens")),
                         json_number_value(json_object_get(pj, "repetition_penalty")), json_string_value(lang),
                         json_is_true(json_object_get(pj, "non_streaming_mode")) ? "non-streaming" : "streaming", codes);
        if (json_is_string(spk)) k += snprintf(cmd + k, sizeof cmd - k, " --speaker %s", q(json_string_value(spk)));
        if (!strcmp(kind, "e2e")) {
            json_t *s = json_object_get(pj, "strings");
            k += snprintf(cmd + k, sizeof cmd - k, " --text %s", q(json_string_value(json_object_get(s, "text"))));
            if (json_object_get(s, "instruct"))
                k += snprintf(cmd + k, sizeof cmd - k, " --instruct %s", q(json_string_value(json_object_get(s, "instruct"))));
        } else {
            ids_str(in, 3, 5, ids, sizeof ids);
            k += snprintf(cmd + k, sizeof cmd - k, " --text-ids %s --newline-id %lld", q(ids),
                          (long long)json_integer_value(json_array_get(in, 2)));
            if (ins) {
                ids_str(ins, 3, 2, iids, sizeof iids);
                k += snprintf(cmd + k, sizeof cmd - k, " --instruct-ids %s --user-id %lld", q(iids),
                              (long long)json_integer_value(json_array_get(ins, 1)));
            }
        }
        int rc = run_cmd(cmd, err, sizeof err);
        snprintf(name, sizeof name, "cli/%s/%s/exit0", cs, run);
        test_report(name, rc == 0, "exit %d: %s", rc, err);
        char why[256] = "";
        snprintf(name, sizeof name, "cli/%s/%s/codes_exact", cs, run);
        test_report(name, rc == 0 && codes_match(codes, test_path("golden/data/%s/golden/%s/codes.npy", cs, run), why, sizeof why),
                    "%s", why);
    }
    json_decref(prompts);
}

/* A failing invocation: expected exit code and a substring of stderr. */
static void expect_fail(const char *name, const char *args, int want_rc, const char *want_msg) {
    char cmd[8192], err[8192];
    snprintf(cmd, sizeof cmd, "%s %s", qtts_bin(), args);
    int rc = run_cmd(cmd, err, sizeof err);
    test_report(name, rc == want_rc && strstr(err, want_msg) != NULL, "exit %d (want %d), stderr: %s (want \"%s\")", rc,
                want_rc, err, want_msg);
}

/* Read a sound file with libsndfile: rate, frames, format; samples as float. */
static int read_sound(const char *path, SF_INFO *info, float **pcm) {
    memset(info, 0, sizeof *info);
    SNDFILE *f = sf_open(path, SFM_READ, info);
    if (!f) return 0;
    *pcm = malloc(sizeof(float) * (info->frames + 1));
    sf_count_t r = sf_readf_float(f, *pcm, info->frames);
    sf_close(f);
    return r == info->frames;
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Audio output: every format, streaming, stdout, decode. */
static void audio_tests(void) {
    char cmd[8192], err[4096], path[512], path2[512];
    const char *e2e = test_path("golden/data/e2e_string");
    const char *base = "--speaker vivian --language english --greedy --quiet --text-mode non-streaming";
    const char *text = "Hello! It's 3:45 pm, are you ready? Let's go.";
    npy_array wave = {0};
    npy_load(test_path("golden/data/e2e_string/golden/e2e_noinstruct_vivian_nonstream/waveform.npy"), &wave, err, sizeof err);
    struct { const char *ext, *extra; int sf_major, sf_sub; double tol; } fmts[] = {
        {"wav", "", SF_FORMAT_WAV, SF_FORMAT_PCM_16, 1.0 / 32767 + 1e-4},
        {"wav", "--sample-format f32", SF_FORMAT_WAV, SF_FORMAT_FLOAT, 1e-4},
        {"flac", "", SF_FORMAT_FLAC, SF_FORMAT_PCM_16, 1.0 / 32767 + 1e-4},
    };
    for (int i = 0; i < 3; i++) {
        for (int stream = 0; stream <= 1; stream++) {
            snprintf(path, sizeof path, "%s/out%d_%d.%s", g_tmp, i, stream, fmts[i].ext);
            snprintf(cmd, sizeof cmd, "%s --model %s --text %s %s %s %s -o %s", qtts_bin(), q(e2e), q(text), base,
                     fmts[i].extra, stream ? "--stream --chunk-frames 3" : "", path);
            int rc = run_cmd(cmd, err, sizeof err);
            SF_INFO info;
            float *pcm = NULL;
            int ok = rc == 0 && read_sound(path, &info, &pcm);
            double mabs = INFINITY;
            if (ok && info.frames == wave.n) rel_err(pcm, wave.f32, wave.n, &mabs);
            char name[128];
            snprintf(name, sizeof name, "cli/audio/%s%s%s", fmts[i].ext, fmts[i].extra[0] ? "_f32" : "", stream ? "_stream" : "");
            test_report(name, ok && info.samplerate == 24000 && info.channels == 1 && info.frames == wave.n &&
                                  (info.format & SF_FORMAT_TYPEMASK) == fmts[i].sf_major &&
                                  (info.format & SF_FORMAT_SUBMASK) == fmts[i].sf_sub && mabs <= fmts[i].tol,
                        "exit %d (%s), rate %d, frames %lld (want %ld), format %x, max|d| %.3g", rc, err, info.samplerate,
                        (long long)info.frames, wave.n, info.format, mabs);
            free(pcm);
        }
    }
    /* soxi (Debian sox) reads the WAV with the right rate, length and encoding */
    snprintf(path, sizeof path, "%s/out0_0.wav", g_tmp);
    if (system("command -v soxi >/dev/null 2>&1") == 0) {
        char out[512];
        snprintf(out, sizeof out, "%s/soxi.txt", g_tmp);
        snprintf(cmd, sizeof cmd, "soxi -r %s > %s && soxi -s %s >> %s && soxi -b %s >> %s", path, out, path, out, path, out);
        int rc = run_cmd(cmd, err, sizeof err);
        FILE *f = fopen(out, "r");
        long r = 0, n = 0, b = 0;
        int got = f ? fscanf(f, "%ld %ld %ld", &r, &n, &b) : 0;
        if (f) fclose(f);
        test_report("cli/audio/soxi", rc == 0 && got == 3 && r == 24000 && n == wave.n && b == 16,
                    "exit %d, rate %ld, samples %ld, bits %ld", rc, r, n, b);
    } else {
        test_skip("cli/audio/soxi", "soxi not installed (apt-get install sox)");
    }
    /* raw PCM on stdout: 2 bytes per sample, equal to the WAV's samples */
    snprintf(path2, sizeof path2, "%s/out.raw", g_tmp);
    snprintf(cmd, sizeof cmd, "%s --model %s --text %s %s --stdout --chunk-frames 2 > %s", qtts_bin(), q(e2e), q(text),
             base, path2);
    int rc = run_cmd(cmd, err, sizeof err);
    long raw_n = file_size(path2);
    int same = 0;
    if (rc == 0 && raw_n == 2 * wave.n) {
        SF_INFO info;
        float *pcm = NULL;
        if (read_sound(path, &info, &pcm)) {
            FILE *f = fopen(path2, "rb");
            same = 1;
            for (long i = 0; i < wave.n && same; i++) {
                int lo = fgetc(f), hi = fgetc(f);
                int16_t v = (int16_t)(lo | (hi << 8));
                if (fabsf(v / 32767.0f - pcm[i]) > 1.5f / 32767) same = 0;
            }
            fclose(f);
        }
        free(pcm);
    }
    test_report("cli/audio/stdout_raw", same, "exit %d (%s), %ld bytes (want %ld)", rc, err, raw_n, 2 * wave.n);
    /* decode: saved codes -> the golden waveform */
    snprintf(path, sizeof path, "%s/dec.codes", g_tmp);
    snprintf(path2, sizeof path2, "%s/dec.wav", g_tmp);
    snprintf(cmd, sizeof cmd, "%s --model %s --text %s %s --dump-codes %s && %s decode --model %s --codes %s -o %s "
             "--sample-format f32 --quiet", qtts_bin(), q(e2e), q(text), base, path, qtts_bin(), q(e2e), path, path2);
    rc = run_cmd(cmd, err, sizeof err);
    SF_INFO info;
    float *pcm = NULL;
    double mabs = INFINITY;
    if (rc == 0 && read_sound(path2, &info, &pcm) && info.frames == wave.n) rel_err(pcm, wave.f32, wave.n, &mabs);
    test_report("cli/decode", rc == 0 && mabs <= 1e-4, "exit %d (%s), max|d| %.3g", rc, err, mabs);
    free(pcm);
    /* bad codes files */
    FILE *f = fopen(path, "w");
    fprintf(f, "1 2 3\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "--model %s --codes %s -o %s", q(e2e), path, path2);
    char dcmd[8200];
    snprintf(dcmd, sizeof dcmd, "decode %s", cmd);
    expect_fail("cli/decode/short_line", dcmd, 4, "line 1");
    f = fopen(path, "w");
    fprintf(f, "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 99999\n");
    fclose(f);
    expect_fail("cli/decode/code_out_of_range", dcmd, 4, "99999");
    snprintf(cmd, sizeof cmd, "--model %s --text hi --speaker vivian -o %s/x.mp4", q(e2e), g_tmp);
    expect_fail("cli/audio/unknown_extension", cmd, 2, "extension");
    snprintf(cmd, sizeof cmd, "--model %s --text hi --speaker vivian -o %s/x.flac --sample-format f32", q(e2e), g_tmp);
    expect_fail("cli/audio/flac_f32", cmd, 2, "FLAC");
    npy_free(&wave);
}

/* Run a command and capture its stdout into out (NUL-terminated). */
static int run_out(const char *cmd, char *out, size_t n, char *err, size_t en) {
    char full[16384], of[300];
    snprintf(of, sizeof of, "%s/stdout.txt", g_tmp);
    snprintf(full, sizeof full, "%s > %s", cmd, of);
    int rc = run_cmd(full, err, en);
    FILE *f = fopen(of, "rb");
    size_t r = f ? fread(out, 1, n - 1, f) : 0;
    out[r] = 0;
    if (f) fclose(f);
    return rc;
}

/* The main job's behaviours: voices/info, quiet output off a terminal, a
 * progress line on one, long text from a file, the length-cap warning, model
 * type errors. */
static void main_job_tests(void) {
    char cmd[8192], out[16384], err[8192];
    const char *cv = test_path("golden/data/custom_voice"), *e2e = test_path("golden/data/e2e_string"),
               *vd = test_path("golden/data/voice_design"), *bc = test_path("golden/data/base_clone");
    snprintf(cmd, sizeof cmd, "%s voices --model %s", qtts_bin(), q(cv));
    int rc = run_out(cmd, out, sizeof out, err, sizeof err);
    test_report("cli/voices", rc == 0 && strstr(out, "ryan") && strstr(out, "uncle_fu") && strstr(out, "english") &&
                                  strstr(out, "auto") && strstr(out, "sichuan_dialect") && !strstr(out, "  beijing_dialect\n"),
                "exit %d: %s", rc, out);
    /* a fine-tuned checkpoint's speaker spelled with capitals is listed as written */
    char capdir[512];
    snprintf(capdir, sizeof capdir, "%s/caps", g_tmp);
    json_error_t je;
    json_t *cfg = json_load_file(test_path("golden/data/custom_voice/config.json"), 0, &je);
    json_t *spk = cfg ? json_object_get(json_object_get(cfg, "talker_config"), "spk_id") : NULL;
    int made = spk && json_object_set_new(spk, "MyVoice", json_integer(3000)) == 0;
    char cv_abs[1024], cwd[512];
    if (cv[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(cv_abs, sizeof cv_abs, "%s", cv);
    else snprintf(cv_abs, sizeof cv_abs, "%s/%s", cwd, cv);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && for f in generation_config.json model.safetensors speech_tokenizer; "
             "do ln -s %s/$f %s/$f || exit 1; done", q(capdir), q(cv_abs), q(capdir));
    if (made) made = system(cmd) == 0;
    if (made) {
        char cfg_path[600];
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", capdir);
        made = json_dump_file(cfg, cfg_path, JSON_INDENT(1)) == 0;
    }
    json_decref(cfg);
    snprintf(cmd, sizeof cmd, "%s voices --model %s", qtts_bin(), q(capdir));
    rc = made ? run_out(cmd, out, sizeof out, err, sizeof err) : -1;
    test_report("cli/voices_as_written", rc == 0 && strstr(out, "  MyVoice\n") && !strstr(out, "myvoice") && strstr(out, "  ryan\n"),
                "exit %d: %s%s", rc, out, err);
    snprintf(cmd, sizeof cmd, "%s info --model %s", qtts_bin(), q(bc));
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    test_report("cli/info", rc == 0 && strstr(out, "base") && strstr(out, "BF16") && strstr(out, "hidden 64") &&
                                strstr(out, "speaker encoder: yes") && strstr(out, "vocab.json") && strstr(out, "missing"),
                "exit %d: %s", rc, out);
    /* not a terminal: a successful run prints nothing on stderr */
    snprintf(cmd, sizeof cmd, "%s --model %s --speaker vivian --text %s -o %s/q.wav", qtts_bin(), q(e2e), q("Hi there."),
             g_tmp);
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    test_report("cli/quiet_off_terminal", rc == 0 && err[0] == 0 && out[0] == 0, "exit %d, stderr \"%s\"", rc, err);
    /* --no-huge-pages: weights read in place, the same audio bytes */
    snprintf(cmd, sizeof cmd, "%s --model %s --speaker vivian --greedy --text %s -o %s/q.wav", qtts_bin(), q(e2e),
             q("Hi there."), g_tmp);
    const int rc1 = run_out(cmd, out, sizeof out, err, sizeof err);
    rc = -1;
    snprintf(cmd, sizeof cmd,
             "%s --model %s --speaker vivian --greedy --text %s --no-huge-pages -o %s/q2.wav && cmp -s %s/q.wav %s/q2.wav",
             qtts_bin(), q(e2e), q("Hi there."), g_tmp, g_tmp, g_tmp);
    if (rc1 == 0) rc = run_out(cmd, out, sizeof out, err, sizeof err);
    test_report("cli/no_huge_pages_same_audio", rc1 == 0 && rc == 0, "exit %d / %d (cmp: 1 = the audio differs): %s", rc1, rc, err);
    /* on a terminal (script(1) gives a pty): a progress line with RTF and a summary */
    if (system("command -v script >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "script -qec \"%s --model %s --speaker vivian --text 'Hi there.' -o %s/p.wav\" /dev/null",
                 qtts_bin(), e2e, g_tmp);
        rc = run_out(cmd, out, sizeof out, err, sizeof err);
        test_report("cli/progress_on_terminal", rc == 0 && strstr(out, "frames") && strstr(out, "RTF") &&
                                                    strstr(out, "s of audio"),
                    "exit %d, terminal output \"%s\"", rc, out);
        snprintf(cmd, sizeof cmd, "script -qec \"%s --model %s --speaker vivian --text 'Hi there.' -o %s/p.wav -q\" /dev/null",
                 qtts_bin(), e2e, g_tmp);
        rc = run_out(cmd, out, sizeof out, err, sizeof err);
        test_report("cli/quiet_flag_on_terminal", rc == 0 && !strstr(out, "RTF"), "exit %d, output \"%s\"", rc, out);
    } else {
        test_skip("cli/progress_on_terminal", "script(1) not installed (package bsdutils)");
    }
    /* long text from a file: split into pieces; every piece hits the length cap (EOS never fires in the
     * test checkpoints), which is said on stderr, and the audio is kept */
    char tf[300];
    snprintf(tf, sizeof tf, "%s/long.txt", g_tmp);
    FILE *f = fopen(tf, "w");
    for (int i = 0; i < 3; i++) fprintf(f, "This is sentence number %d of a longer text. ", i + 1);
    fprintf(f, "\n\nUn nouveau paragraphe commence ici.\n");
    fclose(f);
    /* a copy of the e2e checkpoint (links) with the official max_new_tokens of 8192 */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/e2e8k && for f in %s/*; do ln -sf \"$(cd \"$(dirname \"$f\")\" && pwd)/$(basename \"$f\")\" %s/e2e8k/; done && "
             "rm %s/e2e8k/generation_config.json && sed 's/\"max_new_tokens\": 9/\"max_new_tokens\": 8192/' "
             "%s/generation_config.json > %s/e2e8k/generation_config.json && grep -q 8192 %s/e2e8k/generation_config.json",
             g_tmp, q(e2e), g_tmp, g_tmp, q(e2e), g_tmp, g_tmp);
    rc = run_cmd(cmd, err, sizeof err);
    if (rc) test_report("cli/long_text_setup", 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s --model %s/e2e8k --speaker vivian --text-file %s -o %s/long.wav", qtts_bin(), g_tmp, tf, g_tmp);
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    SF_INFO info;
    float *pcm = NULL;
    char wav[300];
    snprintf(wav, sizeof wav, "%s/long.wav", g_tmp);
    int ok = rc == 0 && read_sound(wav, &info, &pcm);
    test_report("cli/long_text_capped", ok && info.frames > 24000 * 10 && strstr(err, "length cap"),
                "exit %d, %lld samples, stderr \"%.300s\"", rc, ok ? (long long)info.frames : -1LL, err);
    free(pcm);
    /* --max-new-tokens overrides the cap: no warning, exactly N-1 frames */
    snprintf(cmd, sizeof cmd, "%s --model %s --speaker vivian --text %s --max-new-tokens 6 -o %s/m.wav", qtts_bin(),
             q(e2e), q("Short."), g_tmp);
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    snprintf(wav, sizeof wav, "%s/m.wav", g_tmp);
    pcm = NULL;
    ok = rc == 0 && read_sound(wav, &info, &pcm);
    test_report("cli/max_new_tokens", ok && info.frames == 5 * 1920 && !strstr(err, "cap"), "exit %d, %lld samples, %s",
                rc, ok ? (long long)info.frames : -1LL, err);
    free(pcm);
    /* model-type errors name the fix */
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --speaker ryan -o %s/x.wav", q(vd), g_tmp);
    expect_fail("cli/input/speaker_on_voice_design", cmd, 4, "CustomVoice");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --speaker ryan -o %s/x.wav", q(bc), g_tmp);
    expect_fail("cli/input/speaker_on_base", cmd, 4, "CustomVoice");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' -o %s/x.wav", q(bc), g_tmp);
    expect_fail("cli/input/base_without_voice", cmd, 4, "reference recording");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 -o %s/x.wav", q(vd), g_tmp);
    expect_fail("cli/input/voice_design_needs_description", cmd, 4, "description");
    /* a very long text (about 60 KB, hundreds of pieces) from a file: bounded, quiet, complete */
    char big[300];
    snprintf(big, sizeof big, "%s/big.txt", g_tmp);
    FILE *bf = fopen(big, "w");
    for (int i = 0; i < 1000; i++) fprintf(bf, "Sentence %d is here, with a comma. ", i);
    fclose(bf);
    snprintf(cmd, sizeof cmd, "%s --model %s --speaker vivian --text-file %s -o %s/big.wav", qtts_bin(), q(e2e), big, g_tmp);
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    char bigwav[300];
    snprintf(bigwav, sizeof bigwav, "%s/big.wav", g_tmp);
    SF_INFO binfo;
    float *bpcm = NULL;
    int bok = rc == 0 && read_sound(bigwav, &binfo, &bpcm);
    test_report("cli/very_long_text", bok && binfo.frames > 24000L * 100 && err[0] == 0, "exit %d, %lld samples, stderr %.200s",
                rc, bok ? (long long)binfo.frames : -1LL, err);
    free(bpcm);
    /* instruction on a 0.6B CustomVoice: dropped with a warning, as upstream */
    snprintf(cmd, sizeof cmd, "cp -r %s %s/cv06 && sed -i 's/\"1b7\"/\"0b6\"/' %s/cv06/config.json && "
             "%s --model %s/cv06 --text-ids '17 300' --speaker ryan --instruct-ids '5 6' --newline-id 10 --dump-codes %s/i.codes",
             q(cv), g_tmp, g_tmp, qtts_bin(), g_tmp, g_tmp);
    rc = run_out(cmd, out, sizeof out, err, sizeof err);
    test_report("cli/input/instruct_on_0b6_warns", rc == 0 && strstr(err, "ignores instructions"), "exit %d: %s", rc, err);
    /* --timing: every figure present and >= 0, and the first audio since main
       the sum of the parts (each printed to 0.1 ms) */
    snprintf(cmd, sizeof cmd, "%s --model %s --text hi --speaker vivian --stdout --timing -q --max-new-tokens 2 >/dev/null",
             qtts_bin(), q(e2e));
    rc = run_cmd(cmd, err, sizeof err);
    static const char *const keys[] = {"load_ms ", "prepare_ms ", "voice_ms ", "setup_ms ", "prefill_ms ",
                                       "first_frame_ms ", "first_decode_ms ", "first_audio_ms "};
    double v[8];
    int all = 1;
    const char *line = strstr(err, "qtts timing:");
    for (int i = 0; i < 8; i++) {
        const char *k = line ? strstr(line, keys[i]) : NULL;
        v[i] = k ? atof(k + strlen(keys[i])) : -1;
        all &= k && v[i] >= 0;
    }
    const double parts = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6];
    test_report("cli/timing_split", rc == 0 && all && fabs(v[7] - parts) <= 0.5, "exit %d, parts %.1f vs first audio %.1f: %s",
                rc, parts, v[7], err);
}

/* Voice cloning from the command line: x-vector-only and ICL from the golden
 * reference recordings reproduce the official codes; saved voices reproduce
 * them again; misuse is a clear error. */
static void clone_tests(void) {
    char cmd[8192], out[4096], err[8192], codes[300], why[256];
    char bc[512], cv[512]; /* test_path's buffers rotate: keep copies */
    snprintf(bc, sizeof bc, "%s", test_path("golden/data/base_clone"));
    snprintf(cv, sizeof cv, "%s", test_path("golden/data/custom_voice"));
    const char *common = "--text-ids '17 300 45 999 2 511 64 8' --newline-id 10 --greedy --quiet";
    struct { const char *run, *voice_args, *lang, *mode; } runs[] = {
        {"xvec_en", "--xvector-only", "english", "streaming"},
        {"icl_stream_en", "--ref-text-ids '250 251 9 700 41'", "english", "streaming"},
        {"icl_stream_shortref_en", "--ref-text-ids '250 251 9 700 41'", "english", "streaming"},
        {"icl_nonstream_auto", "--ref-text-ids '250 251 9 700 41'", "auto", "non-streaming"},
    };
    for (int i = 0; i < 4; i++) {
        char wav[600], voice[300], name[128];
        snprintf(wav, sizeof wav, "%s", test_path("golden/data/base_clone/golden/%s/ref_audio.wav", runs[i].run));
        snprintf(codes, sizeof codes, "%s/clone_%d.codes", g_tmp, i);
        snprintf(voice, sizeof voice, "%s/clone_%d.qvoice", g_tmp, i);
        snprintf(cmd, sizeof cmd, "%s --model %s %s --language %s --text-mode %s --ref-audio %s %s --save-voice %s --dump-codes %s",
                 qtts_bin(), q(bc), common, runs[i].lang, runs[i].mode, q(wav), runs[i].voice_args, voice, codes);
        int rc = run_cmd(cmd, err, sizeof err);
        snprintf(name, sizeof name, "cli/clone/%s/codes_exact", runs[i].run);
        test_report(name, rc == 0 && codes_match(codes, test_path("golden/data/base_clone/golden/%s/codes.npy", runs[i].run), why, sizeof why),
                    "exit %d (%s) %s", rc, err, why);
        snprintf(cmd, sizeof cmd, "%s --model %s %s --language %s --text-mode %s --voice %s --dump-codes %s", qtts_bin(),
                 q(bc), common, runs[i].lang, runs[i].mode, voice, codes);
        rc = run_cmd(cmd, err, sizeof err);
        snprintf(name, sizeof name, "cli/clone/%s/saved_voice_same_codes", runs[i].run);
        test_report(name, rc == 0 && codes_match(codes, test_path("golden/data/base_clone/golden/%s/codes.npy", runs[i].run), why, sizeof why),
                    "exit %d (%s) %s", rc, err, why);
    }
    /* make a voice without speaking */
    char voice[300];
    snprintf(voice, sizeof voice, "%s/only.qvoice", g_tmp);
    snprintf(cmd, sizeof cmd, "%s --model %s --ref-audio %s --xvector-only --save-voice %s", qtts_bin(), q(bc),
             q(test_path("golden/data/base_clone/inputs/ref_audio.wav")), voice);
    int rc = run_cmd(cmd, err, sizeof err);
    test_report("cli/clone/save_only", rc == 0 && file_size(voice) > 64, "exit %d: %s", rc, err);
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 --ref-audio %s --xvector-only --dump-codes /dev/null",
             q(cv), q(test_path("golden/data/base_clone/inputs/ref_audio.wav")));
    expect_fail("cli/clone/ref_audio_on_custom_voice", cmd, 4, "Base model");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 --ref-audio %s --dump-codes /dev/null", q(bc),
             q(test_path("golden/data/base_clone/inputs/ref_audio.wav")));
    expect_fail("cli/clone/needs_transcript_or_xvector_only", cmd, 2, "--xvector-only");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 --voice %s/nonexistent.qvoice --dump-codes /dev/null",
             q(bc), g_tmp);
    expect_fail("cli/clone/missing_voice_file", cmd, 5, "nonexistent.qvoice");
    FILE *f = fopen(voice, "r+b");
    if (f) {
        fseek(f, 70, SEEK_SET);
        fputc(0x55, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 --voice %s --dump-codes /dev/null", q(bc), voice);
    expect_fail("cli/clone/corrupted_voice_file", cmd, 4, "corrupt");
    snprintf(cmd, sizeof cmd, "--model %s --text-ids '17 300' --newline-id 10 --ref-audio %s --ref-text hi --dump-codes /dev/null",
             q(bc), q(test_path("golden/data/base_clone/config.json")));
    expect_fail("cli/clone/not_audio", cmd, 4, "config.json");
    (void)out;
}

/* qtts script: three voices from three model types in one file; unknown
 * names are listed; a cast that fits no loaded model is a clear error. The
 * tiny Base and VoiceDesign checkpoints get tests/golden/tiny_tokenizer (their
 * 1024-id vocabulary) so that they can read text. */
static void script_tests(void) {
    char cmd[16384], err[8192], out[4096];
    char e2e[512], bc[512], vd[512], tok[512];
    snprintf(e2e, sizeof e2e, "%s", test_path("golden/data/e2e_string"));
    snprintf(bc, sizeof bc, "%s", test_path("golden/data/base_clone"));
    snprintf(vd, sizeof vd, "%s", test_path("golden/data/voice_design"));
    snprintf(tok, sizeof tok, "%s", test_path("golden/tiny_tokenizer"));
    snprintf(cmd, sizeof cmd,
             "set -e; for m in bc vd; do mkdir -p %s/$m; done; "
             "for f in %s/*; do ln -sf \"$(cd \"$(dirname \"$f\")\" && pwd)/$(basename \"$f\")\" %s/bc/; done; "
             "for f in %s/*; do ln -sf \"$(cd \"$(dirname \"$f\")\" && pwd)/$(basename \"$f\")\" %s/vd/; done; "
             "cp %s/* %s/bc/; cp %s/* %s/vd/",
             g_tmp, q(bc), g_tmp, q(vd), g_tmp, q(tok), g_tmp, q(tok), g_tmp);
    int rc = run_cmd(cmd, err, sizeof err);
    if (rc) {
        test_report("cli/script/setup", 0, "%s", err);
        return;
    }
    char voice[300], script[300], wav[300], alone[300];
    snprintf(voice, sizeof voice, "%s/bob.qvoice", g_tmp);
    snprintf(script, sizeof script, "%s/dialogue.txt", g_tmp);
    snprintf(wav, sizeof wav, "%s/dialogue.wav", g_tmp);
    snprintf(alone, sizeof alone, "%s/alice.wav", g_tmp);
    snprintf(cmd, sizeof cmd, "%s --model %s/bc --ref-audio %s --ref-text 'Hi there' --save-voice %s", qtts_bin(), g_tmp,
             q(test_path("golden/data/base_clone/inputs/ref_audio.wav")), voice);
    rc = run_cmd(cmd, err, sizeof err);
    test_report("cli/script/make_voice_with_text_transcript", rc == 0, "exit %d: %s", rc, err);
    FILE *f = fopen(script, "w");
    fprintf(f, "# a short scene\nALICE: Hello Bob, how are you?\nBOB: Fine, thanks.\n\nCAROL: Welcome to the show!\n");
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s script %s --model %s --model %s/bc --model %s/vd --cast 'ALICE=vivian, BOB=%s' "
             "--cast 'CAROL=design:A calm, low voice' -o %s --language english",
             qtts_bin(), script, q(e2e), g_tmp, g_tmp, voice, wav);
    rc = run_cmd(cmd, err, sizeof err);
    SF_INFO info;
    float *pcm = NULL;
    int ok = rc == 0 && read_sound(wav, &info, &pcm);
    const long want = 3 * 15360 + 2 * 16800; /* 8 frames per turn (max_new_tokens 9), 700 ms pauses (a paragraph's) */
    test_report("cli/script/three_model_types", ok && info.frames == want, "exit %d (%s), %lld samples, want %ld", rc, err,
                ok ? (long long)info.frames : -1LL, want);
    /* the first turn equals ALICE's line spoken alone */
    snprintf(cmd, sizeof cmd, "%s --model %s --speaker vivian --language english --text 'Hello Bob, how are you?' -o %s "
             "--sample-format f32", qtts_bin(), q(e2e), alone);
    float *a = NULL;
    rc = run_cmd(cmd, err, sizeof err);
    SF_INFO ia;
    int same = ok && rc == 0 && read_sound(alone, &ia, &a) && ia.frames == 15360;
    for (long i = 0; same && i < 15360; i++)
        if (fabsf(a[i] - pcm[i]) > 1.5f / 32767) same = 0;
    test_report("cli/script/turn_equals_solo", same, "exit %d: %s", rc, err);
    int silent = ok && info.frames == want;
    for (long i = 15360; silent && i < 15360 + 16800; i++)
        if (pcm[i] != 0.0f) silent = 0;
    test_report("cli/script/pause_between_turns", silent, "no silent gap after the first turn");
    free(a);
    free(pcm);
    f = fopen(script, "w");
    fprintf(f, "ALICE: Hi.\nZED: Who am I?\nYUKI: Me neither.\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "script %s --model %s --cast ALICE=vivian -o %s", script, q(e2e), wav);
    expect_fail("cli/script/unknown_names", cmd, 4, "ZED (line 2), YUKI (line 3)");
    snprintf(cmd, sizeof cmd, "script %s --model %s --cast ALICE=design:calm,ZED=ryan,YUKI=ryan -o %s", script, q(e2e), wav);
    expect_fail("cli/script/cast_needs_voice_design", cmd, 4, "VoiceDesign");
    snprintf(cmd, sizeof cmd, "script %s --model %s --cast ALICE=%s,ZED=ryan,YUKI=ryan -o %s", script, q(e2e), voice, wav);
    expect_fail("cli/script/voice_needs_base", cmd, 4, "Base");
    (void)out;
}

/* qtts --help documents every option the parser accepts (read from tools/cli/args.c). */
static void help_tests(void) {
    char cmd[4096], out[32768], err[4096];
    snprintf(cmd, sizeof cmd, "%s --help", qtts_bin());
    int rc = run_out(cmd, out, sizeof out, err, sizeof err);
    FILE *f = fopen(test_path("../tools/cli/args.c"), "r");
    if (!f) {
        test_report("cli/help_documents_every_option", 0, "cannot read tools/cli/args.c");
        return;
    }
    char line[1024], missing[2048] = "";
    int n_opts = 0;
    size_t k = 0;
    while (fgets(line, sizeof line, f)) {
        for (char *p = line; (p = strstr(p, "\"--")) != NULL;) {
            char *e = strchr(p + 1, '"');
            if (!e) break;
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)(e - p - 1), p + 1);
            p = e + 1;
            if (!strchr(opt, ' ') && strlen(opt) > 2) {
                n_opts++;
                if (!strstr(out, opt)) k += snprintf(missing + k, k < sizeof missing ? sizeof missing - k : 0, " %s", opt);
            }
        }
    }
    fclose(f);
    test_report("cli/help_documents_every_option", rc == 0 && n_opts > 30 && !missing[0], "exit %d, %d options, missing:%s",
                rc, n_opts, missing);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/qtts-cli-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        test_report("mkdtemp", 0, "cannot create a temp folder");
        return test_finish();
    }
    golden_runs("custom_voice");
    golden_runs("voice_design");
    golden_runs("e2e_string");
    audio_tests();
    main_job_tests();
    clone_tests();
    script_tests();
    help_tests();

    char a[4096];
    const char *cv = test_path("golden/data/custom_voice"), *e2e = test_path("golden/data/e2e_string");
    expect_fail("cli/usage/unknown_option", "--frobnicate", 2, "unknown option");
    expect_fail("cli/usage/no_model", "--text hi --dump-codes /dev/null", 2, "--model");
    snprintf(a, sizeof a, "--model %s/nope --text hi --dump-codes /dev/null", q(g_tmp));
    expect_fail("cli/model/missing_folder", a, 3, "nope");
    snprintf(a, sizeof a, "--model %s --text hello --dump-codes /dev/null", q(cv));
    expect_fail("cli/model/no_tokenizer_text", a, 3, "vocab.json");
    snprintf(a, sizeof a, "--model %s --text hello --speaker nobody --dump-codes /dev/null", q(e2e));
    expect_fail("cli/input/unknown_speaker", a, 4, "vivian");
    snprintf(a, sizeof a, "--model %s --text hello --speaker vivian --language klingon --dump-codes /dev/null", q(e2e));
    expect_fail("cli/input/unknown_language", a, 4, "english");
    snprintf(a, sizeof a, "--model %s --text '   ' --speaker vivian --dump-codes /dev/null", q(e2e));
    expect_fail("cli/input/empty_text", a, 4, "empty text");
    snprintf(a, sizeof a, "--model %s --text \"$(printf 'bad \\377 byte')\" --speaker vivian --dump-codes /dev/null", q(e2e));
    expect_fail("cli/input/bad_utf8", a, 4, "not valid UTF-8 at byte offset 4 ("); /* in the text given */
    snprintf(a, sizeof a, "--model %s --text-ids '1 x 2' --dump-codes /dev/null", q(cv));
    expect_fail("cli/usage/bad_ids", a, 2, "--text-ids");
    snprintf(a, sizeof a, "--model %s --text-ids '1 2' --top-p 1.5 --dump-codes /dev/null", q(cv));
    expect_fail("cli/usage/top_p_range", a, 2, "--top-p");
    snprintf(a, sizeof a, "--model %s --text-ids '1 2' --speaker ryan --dump-codes %s/no/such/dir/x", q(cv), q(g_tmp));
    expect_fail("cli/io/unwritable_output", a, 5, "cannot write");
    /* tokenize */
    char cmd[8192], err[4096], out[300];
    snprintf(out, sizeof out, "%s/tok.txt", g_tmp);
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --text %s > %s", qtts_bin(), q(e2e), q("Hello! It's 3:45 pm"), out);
    int rc = run_cmd(cmd, err, sizeof err);
    FILE *f = fopen(out, "r");
    char line[512] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    test_report("cli/tokenize", rc == 0 && !strcmp(line, "9707 0 1084 594 220 18 25 19 20 8836\n"), "exit %d, got %s", rc, line);
    /* stdin text */
    snprintf(cmd, sizeof cmd, "printf 'Hello! It' | %s tokenize --model %s --text-file - > %s", qtts_bin(), q(e2e), out);
    rc = run_cmd(cmd, err, sizeof err);
    f = fopen(out, "r");
    line[0] = 0;
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    test_report("cli/tokenize_stdin", rc == 0 && !strcmp(line, "9707 0 1084\n"), "exit %d, got %s", rc, line);
    snprintf(cmd, sizeof cmd, "rm -rf %s", q(g_tmp));
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_tmp);
    return test_finish();
}
