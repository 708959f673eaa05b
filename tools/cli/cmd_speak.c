/* qtts speak: text -> model, voice and context -> qtts_synthesize (audio to
 * -o FILE or --stdout, streamed or whole) or, with codes only,
 * qtts_generate_codes; --dump-codes writes each frame's 16 codes, and a
 * progress line goes to stderr on a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "../common/clock.h"

static void log_stderr(qtts_log_level level, const char *msg, void *user) {
    const int quiet = *(const int *)user;
    if (level == QTTS_LOG_ERROR) fprintf(stderr, "qtts: error: %s\n", msg);
    else if (level == QTTS_LOG_WARN && !quiet) fprintf(stderr, "qtts: warning: %s\n", msg);
}

typedef struct dump_ctx {
    FILE *f;
    int n_groups;
    int io_error;
    /* progress line (stderr on a terminal) */
    int progress;
    double t0;
    long frames;          /* frames of all segments so far */
    double t_first_frame; /* tool_now_s() when the first frame came (0: none yet) */
    int segment, n_segments;
    size_t chars_total, chars_done, chars_cur;
} dump_ctx;

static void show_progress(dump_ctx *d) {
    const double el = tool_now_s() - d->t0, audio = d->frames / 12.5;
    char eta[32] = "";
    if (d->n_segments > 1 && d->chars_done > 0) {
        double left = el * (double)(d->chars_total - d->chars_done) / (double)d->chars_done;
        snprintf(eta, sizeof eta, "  ETA %d:%02d", (int)left / 60, (int)left % 60);
    }
    char seg[48] = "";
    if (d->n_segments > 1) snprintf(seg, sizeof seg, "segment %d/%d  ", d->segment + 1, d->n_segments);
    fprintf(stderr, "\r\033[Kqtts: %s%ld frames  %.1f s audio  RTF %.2f%s", seg, d->frames, audio,
            audio > 0 ? el / audio : 0.0, eta);
    fflush(stderr);
}

static int on_frame(const int32_t *codes, int idx, void *user) {
    dump_ctx *d = user;
    if (d->frames++ == 0) d->t_first_frame = tool_now_s();
    if (d->progress && (d->frames % 4 == 0 || d->frames == 1)) show_progress(d);
    if (!d->f) return 0;
    for (int g = 0; g < d->n_groups; g++)
        if (fprintf(d->f, g ? " %d" : "%d", codes[g]) < 0) d->io_error = 1;
    if (fputc('\n', d->f) == EOF) d->io_error = 1;
    return d->io_error; /* stop on a write failure */
}

static int on_segment(int segment, int n_segments, const char *text, void *user) {
    dump_ctx *d = user;
    d->chars_done += d->chars_cur;
    d->chars_cur = strlen(text);
    d->segment = segment;
    d->n_segments = n_segments;
    return 0;
}

typedef struct audio_sink {
    cli_audio_out *out;
    int stream;
    double t_first_audio; /* tool_now_s() when the first PCM came (0: none yet) */
} audio_sink;

static int on_audio(const float *pcm, size_t n, void *user) {
    audio_sink *a = user;
    if (n > 0 && a->t_first_audio == 0) a->t_first_audio = tool_now_s();
    return a->stream ? cli_audio_write(a->out, pcm, n) : 0;
}

int cmd_speak(int argc, char **argv, int first) {
    cli_opts o;
    int rc = cli_parse(argc, argv, first, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.model_dir) {
        fprintf(stderr, "qtts: --model DIR is required (see qtts --help)\n");
        return EXIT_USAGE;
    }
    const int n_src = !!o.text + !!o.text_file + !!o.text_ids;
    const int voice_only = n_src == 0 && o.save_voice; /* just make and save a voice */
    if (n_src != 1 && !voice_only) {
        fprintf(stderr, "qtts: give exactly one of --text, --text-file, --text-ids\n");
        return EXIT_USAGE;
    }
    if (o.voice && o.ref_audio) {
        fprintf(stderr, "qtts: give --voice FILE or --ref-audio F, not both\n");
        return EXIT_USAGE;
    }
    if (o.save_voice && !o.ref_audio) {
        fprintf(stderr, "qtts: --save-voice needs --ref-audio F (the recording to clone)\n");
        return EXIT_USAGE;
    }
    if ((o.ref_text || o.ref_text_ids || o.xvector_only) && !o.ref_audio) {
        fprintf(stderr, "qtts: --ref-text, --ref-text-ids and --xvector-only go with --ref-audio F\n");
        return EXIT_USAGE;
    }
    if (o.ref_audio && o.xvector_only == !!(o.ref_text || o.ref_text_ids)) {
        fprintf(stderr, "qtts: with --ref-audio give its transcript (--ref-text STR or --ref-text-ids) for in-context "
                        "cloning, or --xvector-only\n");
        return EXIT_USAGE;
    }
    if (o.instruct && o.instruct_ids) {
        fprintf(stderr, "qtts: give --instruct or --instruct-ids, not both\n");
        return EXIT_USAGE;
    }
    if (!o.dump_codes && !o.output && !o.to_stdout && !voice_only) {
        fprintf(stderr, "qtts: nothing to write: give -o FILE, --stdout or --dump-codes FILE\n");
        return EXIT_USAGE;
    }
    const int want_audio = o.output || o.to_stdout;
    /* standard input spoken as it arrives */
    const int from_stdin = o.text && !strcmp(o.text, "-") && (o.to_stdout || o.stream);
    char *text = NULL;
    int32_t *text_ids = NULL, *instr_ids = NULL, *ref_ids = NULL;
    int n_text_ids = 0, n_instr_ids = 0, n_ref_ids = 0;
    qtts_voice *voice = NULL;
    qtts_model *m = NULL;
    qtts_context *ctx = NULL;
    dump_ctx d = {0};
    cli_audio_out ao;
    memset(&ao, 0, sizeof ao);
    float *pcm = NULL;
    if (o.text_ids) rc = cli_parse_ids(o.text_ids, "--text-ids", &text_ids, &n_text_ids);
    else if (!voice_only && !from_stdin) rc = cli_read_text(&o, &text);
    if (!rc && o.instruct_ids) rc = cli_parse_ids(o.instruct_ids, "--instruct-ids", &instr_ids, &n_instr_ids);
    if (!rc && o.ref_text_ids) rc = cli_parse_ids(o.ref_text_ids, "--ref-text-ids", &ref_ids, &n_ref_ids);
    if (rc) goto out;

    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = o.n_threads;
    cli_apply_backend(&o, &mp);
    mp.weights = (qtts_weight_type)o.weights;
    mp.predictor_weights = (qtts_weight_type)o.predictor_weights;
    mp.tokenizer_alt_regex = o.alt_regex;
    mp.codec_weights = (qtts_codec_weights)o.codec_weights;
    mp.huge_pages = !o.no_huge_pages;
    mp.load_codec = want_audio || (o.ref_audio && !o.xvector_only);
    mp.log = log_stderr;
    mp.log_user = &o.quiet;
    char err[1024];
    const double t_main = tool_now_s(); /* ~ process launch: the library is static, nothing ran before main */
    double t_voice = 0;
    qtts_status s = qtts_model_load(&m, o.model_dir, &mp, err, sizeof err);
    const double t_loaded = tool_now_s();
    if (s) {
        fprintf(stderr, "qtts: %s\n", err);
        rc = s == QTTS_ERR_NOMEM ? EXIT_RUNTIME : EXIT_MODEL;
        goto out;
    }
    if (o.ref_audio || o.voice) {
        qtts_voice_params vp = qtts_voice_default_params();
        vp.ref_text = o.ref_text;
        vp.ref_text_ids = ref_ids;
        vp.n_ref_text_ids = n_ref_ids;
        vp.xvector_only = o.xvector_only;
        s = o.voice ? qtts_voice_load(m, o.voice, &voice, err, sizeof err)
                    : qtts_voice_from_file(m, o.ref_audio, &vp, &voice, err, sizeof err);
        if (s) {
            fprintf(stderr, "qtts: %s\n", err);
            rc = s == QTTS_ERR_IO ? EXIT_IO : s == QTTS_ERR_FORMAT ? EXIT_INPUT : cli_exit_code(s);
            goto out;
        }
        t_voice = tool_now_s() - t_loaded;
        if (o.save_voice && (s = qtts_voice_save(voice, o.save_voice, err, sizeof err))) {
            fprintf(stderr, "qtts: %s\n", err);
            rc = EXIT_IO;
            goto out;
        }
        if (voice_only) {
            if (!o.quiet)
                fprintf(stderr, "qtts: saved a %s voice to %s\n", qtts_voice_is_icl(voice) ? "in-context" : "x-vector",
                        o.save_voice);
            rc = 0;
            goto out;
        }
    }
    qtts_gen_params gp = qtts_gen_default_params(m);
    gp.voice = voice;
    gp.text = text;
    gp.text_ids = text_ids;
    gp.n_text_ids = n_text_ids;
    gp.instruct = o.instruct;
    gp.instruct_ids = instr_ids;
    gp.n_instruct_ids = n_instr_ids;
    gp.speaker = o.speaker;
    if (o.language) gp.language = o.language;
    if (o.text_mode)
        gp.text_mode = !strcmp(o.text_mode, "streaming") ? QTTS_TEXT_MODE_STREAMING : QTTS_TEXT_MODE_NON_STREAMING;
    if (o.greedy) gp.talker.do_sample = gp.predictor.do_sample = 0;
    if (o.have_seed) gp.seed = o.seed;
    if (o.set_temperature) gp.talker.temperature = o.temperature;
    if (o.set_top_k) gp.talker.top_k = o.top_k;
    if (o.set_top_p) gp.talker.top_p = o.top_p;
    if (o.set_rep_pen) gp.talker.repetition_penalty = o.rep_pen;
    if (o.set_cp_temperature) gp.predictor.temperature = o.cp_temperature;
    if (o.set_cp_top_k) gp.predictor.top_k = o.cp_top_k;
    if (o.set_cp_top_p) gp.predictor.top_p = o.cp_top_p;
    if (o.max_new_tokens) {
        gp.max_new_tokens = o.max_new_tokens;
        gp.auto_length_cap = 0; /* an explicit limit overrides the runaway guard */
    }
    gp.debug = &o.debug;

    if ((s = qtts_context_new(m, NULL, &ctx, err, sizeof err))) {
        fprintf(stderr, "qtts: %s\n", err);
        rc = cli_exit_code(s);
        goto out;
    }
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    d.n_groups = info.n_code_groups;
    d.progress = !o.quiet && isatty(STDERR_FILENO);
    d.t0 = tool_now_s();
    d.chars_total = text ? strlen(text) : 0;
    if (o.dump_codes) {
        d.f = !strcmp(o.dump_codes, "-") ? stdout : fopen(o.dump_codes, "w");
        if (!d.f) {
            fprintf(stderr, "qtts: cannot write %s\n", o.dump_codes);
            rc = EXIT_IO;
            goto out;
        }
        if (d.f == stdout && o.to_stdout) {
            fprintf(stderr, "qtts: --dump-codes - and --stdout cannot share standard output\n");
            d.f = NULL;
            rc = EXIT_USAGE;
            goto out;
        }
    }
    if ((rc = cli_audio_open(&o, &ao))) goto out;
    int n_frames = 0;
    size_t n_samples = 0;
    if (want_audio) {
        qtts_audio_params ap = qtts_audio_default_params();
        if (o.chunk_frames) ap.chunk_frames = o.chunk_frames;
        ap.on_frame = on_frame;
        ap.frame_user = &d;
        ap.split = o.split;
        ap.on_segment = on_segment;
        ap.segment_user = &d;
        audio_sink sink = {&ao, o.stream || o.to_stdout, 0};
        const double t_synth = tool_now_s();
        if (from_stdin) {
            s = cli_speak_stdin(m, &gp, &ap, on_audio, &sink, &n_samples, err, sizeof err);
            if (s && !(s == QTTS_ERR_CANCELLED && ao.failed)) fprintf(stderr, "qtts: %s\n", err);
            if (s) {
                cli_audio_close(&ao);
                rc = ao.failed ? EXIT_IO : cli_exit_code(s);
                goto out;
            }
        } else {
            s = qtts_synthesize(ctx, &gp, &ap, on_audio, &sink, sink.stream ? NULL : &pcm, &n_samples);
        }
        if (o.timing && !s) {
            qtts_stats st;
            qtts_context_get_stats(ctx, &st);
            qtts_model_info mi;
            qtts_model_get_info(m, &mi);
            /* the first frame: from the end of the prefill to its on_frame call;
               the first decode: from there to the first PCM chunk's on_audio call */
            const double t_frame = d.t_first_frame, t_audio = sink.t_first_audio;
            const double to_frame_ms = t_frame > 0 ? (t_frame - t_synth) * 1e3 : st.first_audio_ms;
            const double decode_ms = t_frame > 0 && t_audio > 0 ? (t_audio - t_frame) * 1e3 : st.first_audio_ms - to_frame_ms;
            const double audio_ms = t_audio > 0 ? (t_audio - t_main) * 1e3 : (t_synth - t_main) * 1e3 + st.first_audio_ms;
            fprintf(stderr,
                    "qtts timing: load_ms %.1f prepare_ms %.1f voice_ms %.1f setup_ms %.1f prefill_ms %.1f "
                    "first_frame_ms %.1f first_decode_ms %.1f first_audio_ms %.1f (since main) weights_cache %s\n",
                    mi.load_ms - mi.prepare_ms, mi.prepare_ms, t_voice * 1e3,
                    (t_synth - t_main) * 1e3 - mi.load_ms - t_voice * 1e3, st.prefill_ms, to_frame_ms - st.prefill_ms,
                    decode_ms, audio_ms, mi.weights_cache);
        }
        if (!s && !sink.stream) cli_audio_write(&ao, pcm, n_samples);
        n_frames = (int)(n_samples / (size_t)info.samples_per_frame);
    } else {
        s = qtts_generate_codes(ctx, &gp, on_frame, &d, NULL, &n_frames);
    }
    if (d.f && d.f != stdout && fclose(d.f) != 0) d.io_error = 1;
    d.f = NULL;
    int wrc = cli_audio_close(&ao);
    if (d.progress) fprintf(stderr, "\r\033[K");
    if (d.io_error) {
        fprintf(stderr, "qtts: writing %s failed\n", o.dump_codes);
        rc = EXIT_IO;
        goto out;
    }
    if (s) {
        if (!(s == QTTS_ERR_CANCELLED && ao.failed)) fprintf(stderr, "qtts: %s\n", qtts_context_last_error(ctx));
        rc = ao.failed ? EXIT_IO : cli_exit_code(s);
        goto out;
    }
    if (wrc) {
        rc = wrc;
        goto out;
    }
    if (d.progress) {
        const double el = tool_now_s() - d.t0, audio = n_samples ? n_samples / 24000.0 : n_frames * 0.08;
        fprintf(stderr, "qtts: %.2f s of audio in %.2f s (RTF %.2f) -> %s%s%s\n", audio, el, audio > 0 ? el / audio : 0.0,
                want_audio ? ao.name : "codes only", o.dump_codes ? ", codes in " : "", o.dump_codes ? o.dump_codes : "");
    }
    if (!o.quiet && qtts_context_n_capped_segments(ctx) > 0)
        fprintf(stderr, "qtts: warning: %d segment(s) did not end by themselves and were cut at the length cap; "
                "the audio up to each cut is kept (use --max-new-tokens N to set the limit yourself)\n",
                qtts_context_n_capped_segments(ctx));
    rc = 0;
out:
    if (d.f && d.f != stdout) fclose(d.f);
    if (ao.w) cli_audio_close(&ao);
    free(pcm);
    qtts_context_free(ctx);
    qtts_model_free(m);
    free(text);
    free(text_ids);
    free(instr_ids);
    free(ref_ids);
    qtts_voice_free(voice);
    return rc;
}
