/* Reports of qtts-bench: a markdown table (default), JSON (everything, read
 * back by compare) and CSV (one row per record and run kind). Every report
 * carries the definitions, the machine and build, the measured bandwidth and
 * whether the frame count was forced. Dataflow: bench_report -> text. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define M(key, label, field, better, fmt) {key, label, offsetof(run_metrics, field), better, fmt}
const metric_desc bench_metrics[] = {
    M("rtf", "RTF", rtf, 1, "%.3f"),
    M("rtfx", "RTFx", rtfx, 0, "%.3f"),
    M("wall_ms", "wall ms", wall_ms, 1, "%.0f"),
    M("audio_s", "audio s", audio_s, -1, "%.2f"),
    M("ttfa_ms", "TTFA ms", ttfa_ms, 1, "%.0f"),
    M("cadence_ms", "cadence ms", cadence_ms, 1, "%.0f"),
    M("cadence_max_ms", "max gap ms", cadence_max_ms, 1, "%.0f"),
    M("underruns", "underruns", underruns, 1, "%.0f"),
    M("viability", "viability", viability, 0, "%.2f"),
    M("n_chunks", "chunks", n_chunks, -1, "%.0f"),
    M("n_frames", "frames", n_frames, -1, "%.0f"),
    M("prefill_ms", "prefill ms", prefill_ms, 1, "%.0f"),
    M("talker_ms_per_frame", "talker ms/f", talker_ms_f, 1, "%.1f"),
    M("predictor_ms_per_frame", "CP ms/f", predictor_ms_f, 1, "%.1f"),
    M("decode_ms_per_frame", "decode ms/f", decode_ms_f, 1, "%.1f"),
    M("decode_ms", "decode ms", decode_ms, 1, "%.0f"),
    M("peak_rss_mib", "peak RSS MiB", peak_rss_mib, 1, "%.0f"),
    M("rss_over_weights", "RSS/weights", rss_over_weights, 1, "%.2f"),
    M("gbps", "GB/s", gbps, 0, "%.1f"),
    M("roofline", "roofline", roofline, 0, "%.2f"),
    M("probe_gbps", "probe GB/s", probe_gbps, -1, "%.1f"),
    M("mhz_mean", "MHz", mhz_mean, -1, "%.0f"),
    M("mhz_min", "MHz min", mhz_min, -1, "%.0f"),
    M("mhz_max", "MHz max", mhz_max, -1, "%.0f"),
    M("audio_rms", "audio RMS", audio_rms, -1, "%.3f"),
    M("audio_peak", "audio peak", audio_peak, -1, "%.3f"),
    M("nonfinite_samples", "NaN/Inf samples", nonfinite, 1, "%.0f"),
    M("gpu_prefill_ms", "GPU prefill ms", gpu_prefill_ms, 1, "%.1f"),
    M("gpu_talker_ms_per_frame", "GPU talker ms/f", gpu_talker_ms_f, 1, "%.2f"),
    M("gpu_predictor_ms_per_frame", "GPU CP ms/f", gpu_predictor_ms_f, 1, "%.2f"),
    M("gpu_sampling_ms_per_frame", "GPU sampling ms/f", gpu_sampling_ms_f, 1, "%.2f"),
};
#undef M
const int bench_n_metrics = (int)(sizeof bench_metrics / sizeof bench_metrics[0]);

const metric_desc *bench_metric(const char *key) {
    for (int i = 0; i < bench_n_metrics; i++)
        if (strcmp(bench_metrics[i].key, key) == 0) return &bench_metrics[i];
    return NULL;
}

double metric_get(const run_metrics *m, const metric_desc *d) {
    return *(const double *)((const char *)m + d->offset);
}

bench_summary record_summary(const bench_record *rec, const metric_desc *d) {
    double v[BENCH_MAX_RUNS];
    for (int i = 0; i < rec->n_runs; i++) v[i] = metric_get(&rec->runs[i], d);
    return bench_summarize(v, rec->n_runs);
}

double report_bw_for(const bench_report *r, int n_threads) {
    int best = -1;
    for (int i = 0; i < r->n_bw; i++)
        if (best < 0 || abs(r->bw_threads[i] - n_threads) < abs(r->bw_threads[best] - n_threads)) best = i;
    return best < 0 ? NAN : r->bw_gbps[best];
}

void report_free(bench_report *r) {
    free(r->rec);
    free(r->q);
    r->rec = NULL;
    r->q = NULL;
    r->n_rec = r->n_q = 0;
}

static const char *definitions =
    "RTF = processing seconds / audio seconds (wall clock of the qtts_synthesize call; lower is better, "
    "< 1 is faster than real time). RTFx = 1 / RTF (higher is better; some projects call this \"RTF\"). "
    "TTFA = time from the call to the first non-empty PCM chunk, given with the chunk size F/C in frames "
    "(first chunk F, then C; 1 frame = 80 ms). Cadence = median gap between chunks; an underrun is a gap longer "
    "than the audio of the chunk before it; viability = share of chunks delivered before a player started at the "
    "first chunk needs them. Decode = where the codec decoder runs: inline (qtts_audio_params.overlap = 0) decodes each chunk on the "
    "calling thread between frames, on all of the model's threads, while generation waits; worker (overlap = 1, "
    "what the library's default does with more than one thread) decodes the chunks after the first on a thread "
    "of its own that parks one of the model's workers while the other threads go on generating, so the phases add "
    "up to more than the wall time; none calls "
    "qtts_generate_codes with the same generation parameters and makes no audio (generation alone): its RTF = "
    "wall / (frames x 0.08 s), and its TTFA, cadence and decode columns are empty. Phases (library stats): "
    "prefill ms; talker, code predictor (CP) and codec decode ms per frame. GB/s = talker + code-predictor "
    "weight bytes read per frame / (talker + CP time per frame), on the none rows with nothing else running; "
    "roofline = GB/s / read bandwidth with the widest vector loads the CPU has (1.0 = the bandwidth floor), "
    "per run against probe GB/s: the mean of two probes (best of 3 passes over a buffer larger than the caches, "
    "all the run's threads) made right before and right after that run, so numerator and denominator come from "
    "the same minute on a shared host (with --bw-run-mib 0, against the opening read bandwidth line). "
    "Peak RSS = VmHWM of the process, reset before each run (includes the resident "
    "memory-mapped weights). RSS/weights = peak RSS bytes / weights in use (qtts_model_info.weight_bytes_in_use: "
    "the weights synthesis reads, each counted once in its in-memory format, codec decoder included, text "
    "embedding table not); near 1 means the process holds little beyond the weights it needs. The reset lowers "
    "the peak to the current RSS, so weights that earlier runs made resident count on every row, none rows "
    "included. Each figure is the median [p95] of the measured runs (min/max in JSON and CSV); the cold run (the "
    "first run after loading a configuration: page-in, allocator growth) is on its own line. Backend = where the "
    "language model and the codec decoder run (qtts_model_params.backend); on a GPU "
    "backend the GPU columns are the device time of each phase from timestamp queries (qtts_stats.gpu_*: prefill "
    "ms; talker steps, code predictor passes and sampling ms per frame), and device memory allocated / reserved is "
    "the most qtts_model_info reported at the end of a run, its context still alive.";

static const char *frames_text(const bench_report *r, char *buf, size_t n) {
    if (r->frames_mode > 0) snprintf(buf, n, "forced to %d per case, EOS ignored", r->frames_mode);
    else if (r->frames_mode < 0) snprintf(buf, n, "forced to each case's typical length (auto), EOS ignored");
    else snprintf(buf, n, "until the model's EOS (not forced)");
    return buf;
}

/* ---------------------------------------------------------------- markdown */

static void md_cell(FILE *f, const char *fmt, double v) {
    if (isnan(v)) fputs(" - |", f);
    else {
        fputc(' ', f);
        fprintf(f, fmt, v);
        fputs(" |", f);
    }
}

static void md_cell2(FILE *f, const char *fmt, bench_summary s) {
    if (isnan(s.median)) {
        fputs(" - |", f);
        return;
    }
    fputc(' ', f);
    fprintf(f, fmt, s.median);
    fputs(" [", f);
    fprintf(f, fmt, s.p95);
    fputs("] |", f);
}

static const char *md_cols[] = {"rtf",
                                "rtfx",
                                "ttfa_ms",
                                "cadence_ms",
                                "underruns",
                                "prefill_ms",
                                "talker_ms_per_frame",
                                "predictor_ms_per_frame",
                                "decode_ms_per_frame",
                                "peak_rss_mib",
                                "rss_over_weights",
                                "gbps",
                                "roofline",
                                "probe_gbps",
                                "mhz_mean"};
#define N_MD_COLS ((int)(sizeof md_cols / sizeof md_cols[0]))

/* added after md_cols when a record ran on a GPU backend */
static const char *md_gpu_cols[] = {"gpu_prefill_ms", "gpu_talker_ms_per_frame", "gpu_predictor_ms_per_frame",
                                    "gpu_sampling_ms_per_frame"};
#define N_MD_GPU_COLS ((int)(sizeof md_gpu_cols / sizeof md_gpu_cols[0]))

static int on_gpu(const bench_record *rec) { return rec->backend[0] && strcmp(rec->backend, "cpu") != 0; }

/* "device" machine lines: one per distinct model, format and GPU device */
static void write_md_devices(const bench_report *r, FILE *f) {
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        if (!on_gpu(rec)) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = on_gpu(&r->rec[j]) && strcmp(r->rec[j].model, rec->model) == 0 &&
                   strcmp(r->rec[j].weights, rec->weights) == 0 && strcmp(r->rec[j].backend, rec->backend) == 0 &&
                   r->rec[j].device == rec->device;
        if (seen) continue;
        fprintf(f, "| device | %s %s: %s device %d, %s (driver %s); %.1f MiB allocated, %.1f MiB reserved |\n",
                rec->model_name, rec->weights, rec->backend, rec->device, rec->device_name, rec->device_driver,
                rec->device_bytes_allocated / 1048576.0, rec->device_bytes_reserved / 1048576.0);
    }
}

/* "weights in use" machine line: one entry per distinct model and format */
static void write_md_weights(const bench_report *r, FILE *f) {
    int n = 0;
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        if (rec->weights_in_use <= 0) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = r->rec[j].weights_in_use > 0 && strcmp(r->rec[j].model, rec->model) == 0 &&
                   strcmp(r->rec[j].weights, rec->weights) == 0;
        if (seen) continue;
        fprintf(f, "%s %s %s: %.0f MiB", n++ ? ";" : "| weights in use |", rec->model_name, rec->weights,
                rec->weights_in_use / 1048576.0);
    }
    if (n) fprintf(f, " (read by synthesis, codec decoder included; the RSS/weights denominator) |\n");
}

static void write_md(const bench_report *r, FILE *f) {
    const sys_info *s = &r->sys;
    char fb[128];
    fprintf(f, "# qtts-bench report\n\n");
    fprintf(f, "**Definitions.** %s\n\n", definitions);
    fprintf(f, "| machine | |\n|---|---|\n");
    fprintf(f, "| CPU | %s (%s), %d online CPUs, %.1f GiB RAM |\n", s->cpu_model,
            s->cpu_id[0] ? s->cpu_id : "id not recorded", s->n_cpus, s->mem_total_gb);
    fprintf(f, "| read bandwidth |");
    for (int i = 0; i < r->n_bw; i++)
        fprintf(f, "%s %.1f GB/s with %d thread%s", i ? ";" : "", r->bw_gbps[i], r->bw_threads[i],
                r->bw_threads[i] == 1 ? "" : "s");
    fprintf(f, " (%.0f MiB buffer, %s, best of 5) |\n", r->bw_buffer_mib,
            r->bw_method[0] ? r->bw_method : "read loop not recorded");
    if (r->n_peaks) {
        fprintf(f, "| arithmetic peak |");
        for (int i = 0; i < r->n_peaks; i++) {
            const peak_result *p = &r->peaks[i];
            fprintf(f, "%s %d thread%s: f32 %.0f G multiply-adds/s (%s)", i ? ";" : "", p->threads,
                    p->threads == 1 ? "" : "s", p->f32_gmacs, p->f32_method);
            if (p->int8_gmacs > 0) fprintf(f, ", int8 %.0f G/s (%s)", p->int8_gmacs, p->int8_method);
        }
        fprintf(f, " (best of 3) |\n");
    }
    if (r->bw_run_mib > 0)
        fprintf(f, "| roofline denominator | per run: probes of %.0f MiB (best of 3) right before and after each run, "
                   "their mean in the probe GB/s column |\n",
                r->bw_run_mib);
    else
        fprintf(f, "| roofline denominator | the read bandwidth line above |\n");
    fprintf(f, "| build | %s; %s; flags: %s |\n", s->commit, s->compiler, s->cflags);
    fprintf(f, "| system | %s, %s; load average at start %s |\n", s->kernel, s->date, s->loadavg);
    write_md_weights(r, f);
    write_md_devices(r, f);
    fprintf(f, "| frames | %s |\n", frames_text(r, fb, sizeof fb));
    fprintf(f, "| runs | 1 cold + %d measured per case and configuration; %s decoding, seed %llu |\n", r->reps,
            r->greedy ? "greedy" : "sampled", (unsigned long long)r->seed);
    fprintf(f, "| weight pages | %s |\n",
            r->huge_pages ? "per-frame weights copied into 2 MiB pages at load (huge_pages 1, the default)"
                          : "stored weights read in place from the file mapping, 4 KiB pages (--no-huge-pages)");
    if (r->total_s > 0) fprintf(f, "| wall time | %.1f s for this report |\n", r->total_s);
    int synth = 0;
    for (int i = 0; i < r->n_rec; i++) synth |= r->rec[i].synthetic;
    if (synth)
        fprintf(f, "\nModels marked *synthetic* have random weights (qtts-bench make-model): their speed is real, "
                   "their audio is noise.\n");
    if (r->reps < 5) fprintf(f, "\n**Fewer than 5 measured runs: not a benchmark result.**\n");
    int gpu = 0;
    for (int i = 0; i < r->n_rec; i++) gpu |= on_gpu(&r->rec[i]);
    const int n_gpu_cols = gpu ? N_MD_GPU_COLS : 0;
    if (r->n_rec) {
        fprintf(f, "\n## Speed\n\n| model | weights | ISA | thr | chunk | mode | decode | case | frames | run | "
                   "RTF min-max |");
        for (int c = 0; c < N_MD_COLS; c++) fprintf(f, " %s |", bench_metric(md_cols[c])->label);
        for (int c = 0; c < n_gpu_cols; c++) fprintf(f, " %s |", bench_metric(md_gpu_cols[c])->label);
        fprintf(f, "\n|---|---|---|---|---|---|---|---|---|---|---|");
        for (int c = 0; c < N_MD_COLS + n_gpu_cols; c++) fprintf(f, "---|");
        fprintf(f, "\n");
    }
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        char head[512], isa[64], wname[40];
        /* the codec decoder's format beside the LM's when it is not f32 */
        if (rec->codec_weights[0] && strcmp(rec->codec_weights, "f32"))
            snprintf(wname, sizeof wname, "%s, codec %s", rec->weights, rec->codec_weights);
        else snprintf(wname, sizeof wname, "%s", rec->weights);
        /* on a GPU backend the CPU kernels still run the codec decoder */
        if (on_gpu(rec)) snprintf(isa, sizeof isa, "%s + %s", rec->backend, rec->kernels);
        else snprintf(isa, sizeof isa, "%s", rec->kernels);
        snprintf(head, sizeof head, "| %s%s (%s %s) | %s (%s) | %s | %d | %d/%d | %s | %s | %s |", rec->model_name,
                 rec->synthetic ? " *synthetic*" : "", rec->size_name, rec->type_name, wname,
                 rec->weight_dtype, isa, rec->n_threads, rec->first_chunk, rec->chunk, rec->mode,
                 rec->decode[0] ? rec->decode : "-", rec->case_name);
        if (rec->error[0] && rec->n_runs == 0) {
            fprintf(f, "%s - | - | %s |", head, rec->error);
            for (int c = 1; c < N_MD_COLS + n_gpu_cols + 1; c++) fputs(" |", f);
            fputc('\n', f);
            continue;
        }
        if (rec->cold.n_frames > 0) {
            fprintf(f, "%s %d | cold | - |", head, (int)rec->cold.n_frames);
            for (int c = 0; c < N_MD_COLS; c++) {
                const metric_desc *d = bench_metric(md_cols[c]);
                md_cell(f, d->fmt, metric_get(&rec->cold, d));
            }
            for (int c = 0; c < n_gpu_cols; c++) {
                const metric_desc *d = bench_metric(md_gpu_cols[c]);
                md_cell(f, d->fmt, metric_get(&rec->cold, d));
            }
            fputc('\n', f);
        }
        const bench_summary rs = record_summary(rec, bench_metric("rtf"));
        fprintf(f, "%s %d | median [p95] of %d |", head, rec->n_runs ? (int)rec->runs[0].n_frames : 0, rec->n_runs);
        if (isnan(rs.min)) fputs(" - |", f);
        else fprintf(f, " %.3f-%.3f |", rs.min, rs.max);
        for (int c = 0; c < N_MD_COLS; c++) {
            const metric_desc *d = bench_metric(md_cols[c]);
            md_cell2(f, d->fmt, record_summary(rec, d));
        }
        for (int c = 0; c < n_gpu_cols; c++) {
            const metric_desc *d = bench_metric(md_gpu_cols[c]);
            md_cell2(f, d->fmt, record_summary(rec, d));
        }
        fputc('\n', f);
        if (rec->error[0]) fprintf(f, "\n> %s %s: %s\n\n", rec->model_name, rec->case_name, rec->error);
        const bench_summary nf = record_summary(rec, bench_metric("nonfinite_samples"));
        if (nf.max > 0)
            fprintf(f, "\n> **%s %s: the output had NaN/Inf samples (up to %.0f per run)**\n\n", rec->model_name,
                    rec->case_name, nf.max);
    }
    if (r->n_q) {
        fprintf(f, "\n## Quality (same inputs, greedy, same seed; test weights against the reference path)\n\n");
        fprintf(f, "Agreement: teacher-forced, the share of frames where the test path chose the reference path's "
                   "code (codebook 0; mean of codebooks 1-15; all 16). Log-mel correlation and SNR: free runs of "
                   "both paths. Speaker similarity: cosine of speaker-encoder embeddings of the output and the "
                   "reference clip (Base models). WER: the recogniser's transcript against the text, normalised "
                   "(docs/BENCH.md).\n\n");
        fprintf(f, "| model | weights vs ref | case | frames | agree cb0 | agree cb1-15 | agree all | log-mel r | "
                   "SNR dB | spk sim ref / test | WER ref / test |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < r->n_q; i++) {
            const quality_record *q = &r->q[i];
            if (q->error[0]) {
                fprintf(f, "| %s | %s vs %s | %s | - | %s | | | | | | |\n", q->model_name, q->weights, q->ref_weights,
                        q->case_name, q->error);
                continue;
            }
            double rest = 0;
            for (int g = 1; g < q->n_groups; g++) rest += q->agree[g];
            rest /= q->n_groups > 1 ? q->n_groups - 1 : 1;
            fprintf(f, "| %s | %s vs %s | %s | %d |", q->model_name, q->weights, q->ref_weights, q->case_name,
                    q->frames);
            md_cell(f, "%.3f", q->agree[0]);
            md_cell(f, "%.3f", rest);
            md_cell(f, "%.3f", q->agree_mean);
            md_cell(f, "%.3f", q->mel_corr);
            md_cell(f, "%.1f", q->snr_db);
            if (isnan(q->spk_sim_ref)) fputs(" - |", f);
            else fprintf(f, " %.3f / %.3f |", q->spk_sim_ref, q->spk_sim_test);
            if (isnan(q->wer_ref)) fputs(" - |", f);
            else fprintf(f, " %.3f / %.3f |", q->wer_ref, q->wer_test);
            fputc('\n', f);
        }
    }
}

/* ---------------------------------------------------------------- JSON */

static json_t *jnum(double v) { return isnan(v) || isinf(v) ? json_null() : json_real(v); }

static json_t *metrics_json(const run_metrics *m) {
    json_t *o = json_object();
    for (int i = 0; i < bench_n_metrics; i++)
        json_object_set_new(o, bench_metrics[i].key, jnum(metric_get(m, &bench_metrics[i])));
    json_object_set_new(o, "status", json_integer(m->status));
    return o;
}

static json_t *summary_json(bench_summary s) {
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:i}", "median", jnum(s.median), "p95", jnum(s.p95), "min",
                     jnum(s.min), "max", jnum(s.max), "mean", jnum(s.mean), "n", s.n);
}

static json_t *report_json(const bench_report *r) {
    const sys_info *s = &r->sys;
    json_t *root = json_object();
    json_object_set_new(root, "qtts_bench_version", json_string(BENCH_VERSION));
    json_object_set_new(root, "definitions", json_string(definitions));
    json_t *mach = json_pack("{s:s, s:i, s:f, s:s, s:s, s:s, s:s, s:s, s:s}", "cpu", s->cpu_model, "cpus", s->n_cpus,
                             "mem_gib", s->mem_total_gb, "kernel", s->kernel, "hostname", s->hostname, "compiler",
                             s->compiler, "cflags", s->cflags, "commit", s->commit, "date", s->date);
    json_t *bw = json_array();
    for (int i = 0; i < r->n_bw; i++)
        json_array_append_new(bw, json_pack("{s:i, s:f}", "threads", r->bw_threads[i], "gbps", r->bw_gbps[i]));
    json_object_set_new(mach, "read_bandwidth", bw);
    json_object_set_new(mach, "bandwidth_buffer_mib", json_real(r->bw_buffer_mib));
    json_object_set_new(mach, "bandwidth_method", json_string(r->bw_method));
    json_object_set_new(mach, "bandwidth_run_probe_mib", json_real(r->bw_run_mib));
    json_object_set_new(mach, "cpu_id", json_string(s->cpu_id));
    json_t *pk = json_array();
    for (int i = 0; i < r->n_peaks; i++) {
        const peak_result *p = &r->peaks[i];
        json_array_append_new(pk, json_pack("{s:i, s:f, s:s, s:f, s:s}", "threads", p->threads, "f32_gmacs",
                                            p->f32_gmacs, "f32_method", p->f32_method, "int8_gmacs", p->int8_gmacs,
                                            "int8_method", p->int8_method));
    }
    json_object_set_new(mach, "compute_peak", pk);
    json_object_set_new(mach, "loadavg_at_start", json_string(s->loadavg));
    json_object_set_new(root, "machine", mach);
    char fb[128];
    json_object_set_new(root, "run",
                        json_pack("{s:i, s:s, s:i, s:I, s:b, s:b, s:f}", "frames", r->frames_mode, "frames_policy",
                                  frames_text(r, fb, sizeof fb), "measured_runs", r->reps, "seed",
                                  (json_int_t)r->seed, "greedy", r->greedy, "huge_pages", r->huge_pages, "total_s",
                                  r->total_s));
    json_t *recs = json_array();
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(rec->model));
        json_object_set_new(o, "model_name", json_string(rec->model_name));
        json_object_set_new(o, "size", json_string(rec->size_name));
        json_object_set_new(o, "type", json_string(rec->type_name));
        json_object_set_new(o, "synthetic", json_boolean(rec->synthetic));
        json_object_set_new(o, "weights", json_string(rec->weights));
        json_object_set_new(o, "weight_dtype", json_string(rec->weight_dtype));
        json_object_set_new(o, "isa", json_string(rec->kernels));
        json_object_set_new(o, "threads", json_integer(rec->n_threads));
        json_object_set_new(o, "first_chunk_frames", json_integer(rec->first_chunk));
        json_object_set_new(o, "chunk_frames", json_integer(rec->chunk));
        json_object_set_new(o, "mode", json_string(rec->mode));
        json_object_set_new(o, "decode", json_string(rec->decode));
        json_object_set_new(o, "codec_weights", json_string(rec->codec_weights[0] ? rec->codec_weights : "f32"));
        json_object_set_new(o, "case", json_string(rec->case_name));
        json_object_set_new(o, "length", json_string(rec->length));
        json_object_set_new(o, "language", json_string(rec->language));
        json_object_set_new(o, "text_bytes", json_integer(rec->text_chars));
        json_object_set_new(o, "frames_forced", json_integer(rec->frames_forced));
        json_object_set_new(o, "talker_bytes_per_frame", json_integer(rec->talker_bytes));
        json_object_set_new(o, "predictor_bytes_per_frame", json_integer(rec->predictor_bytes));
        json_object_set_new(o, "codec_bytes", json_integer(rec->codec_bytes));
        json_object_set_new(o, "n_params", json_integer(rec->n_params));
        json_object_set_new(o, "weights_in_use_mib",
                            rec->weights_in_use > 0 ? json_real(rec->weights_in_use / 1048576.0) : json_null());
        json_object_set_new(o, "weights_in_use_bytes",
                            rec->weights_in_use > 0 ? json_integer(rec->weights_in_use) : json_null());
        json_object_set_new(o, "load_ms", jnum(rec->load_ms));
        json_object_set_new(o, "voice_xvector_ms", jnum(rec->voice_ms));
        json_object_set_new(o, "voice_icl_ms", jnum(rec->voice_icl_ms));
        json_object_set_new(o, "read_bandwidth_gbps", jnum(rec->bw_gbps));
        json_object_set_new(o, "cpu", json_string(s->cpu_model));
        json_object_set_new(o, "commit", json_string(s->commit));
        json_object_set_new(o, "compiler", json_string(s->compiler));
        json_object_set_new(o, "cflags", json_string(s->cflags));
        json_object_set_new(o, "backend", json_string(rec->backend));
        json_object_set_new(o, "device", json_string(rec->device_name));
        json_object_set_new(o, "device_index", json_integer(rec->device));
        json_object_set_new(o, "device_driver", json_string(rec->device_driver));
        json_object_set_new(o, "device_bytes_allocated", json_integer(rec->device_bytes_allocated));
        json_object_set_new(o, "device_bytes_reserved", json_integer(rec->device_bytes_reserved));
        if (rec->error[0]) json_object_set_new(o, "error", json_string(rec->error));
        json_object_set_new(o, "cold", rec->cold.n_frames > 0 ? metrics_json(&rec->cold) : json_null());
        json_t *runs = json_array();
        for (int k = 0; k < rec->n_runs; k++) json_array_append_new(runs, metrics_json(&rec->runs[k]));
        json_object_set_new(o, "runs", runs);
        json_t *sum = json_object();
        for (int m = 0; m < bench_n_metrics; m++)
            json_object_set_new(sum, bench_metrics[m].key, summary_json(record_summary(rec, &bench_metrics[m])));
        json_object_set_new(o, "summary", sum);
        json_array_append_new(recs, o);
    }
    json_object_set_new(root, "records", recs);
    json_t *qs = json_array();
    for (int i = 0; i < r->n_q; i++) {
        const quality_record *q = &r->q[i];
        json_t *o = json_object();
        json_object_set_new(o, "model_name", json_string(q->model_name));
        json_object_set_new(o, "size", json_string(q->size_name));
        json_object_set_new(o, "type", json_string(q->type_name));
        json_object_set_new(o, "weights", json_string(q->weights));
        json_object_set_new(o, "ref_weights", json_string(q->ref_weights));
        json_object_set_new(o, "case", json_string(q->case_name));
        json_object_set_new(o, "frames", json_integer(q->frames));
        json_object_set_new(o, "teacher_frames", json_integer(q->teacher_frames));
        json_t *ag = json_array();
        for (int g = 0; g < q->n_groups; g++) json_array_append_new(ag, jnum(q->agree[g]));
        json_object_set_new(o, "agreement_per_codebook", ag);
        json_object_set_new(o, "agreement_mean", jnum(q->agree_mean));
        json_object_set_new(o, "logmel_corr", jnum(q->mel_corr));
        json_object_set_new(o, "snr_db", jnum(q->snr_db));
        json_object_set_new(o, "speaker_sim_ref", jnum(q->spk_sim_ref));
        json_object_set_new(o, "speaker_sim_test", jnum(q->spk_sim_test));
        json_object_set_new(o, "wer_ref", jnum(q->wer_ref));
        json_object_set_new(o, "wer_test", jnum(q->wer_test));
        json_object_set_new(o, "transcript_ref", json_string(q->hyp_ref));
        json_object_set_new(o, "transcript_test", json_string(q->hyp_test));
        if (q->error[0]) json_object_set_new(o, "error", json_string(q->error));
        json_array_append_new(qs, o);
    }
    json_object_set_new(root, "quality", qs);
    return root;
}

/* ---------------------------------------------------------------- CSV */

static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double v) {
    if (isnan(v)) fputs(",", f);
    else fprintf(f, ",%.6g", v);
}

static void write_csv(const bench_report *r, FILE *f) {
    fputs("model,size,type,synthetic,weights,weight_dtype,isa,threads,first_chunk,chunk,mode,decode,case,language,"
          "frames_forced,run,n_runs,cpu,commit,read_bw_gbps,weights_in_use_mib",
          f);
    for (int m = 0; m < bench_n_metrics; m++)
        fprintf(f, ",%s_median,%s_p95,%s_min,%s_max", bench_metrics[m].key, bench_metrics[m].key,
                bench_metrics[m].key, bench_metrics[m].key);
    fputs(",backend,device,device_index,device_driver,device_bytes_allocated,device_bytes_reserved\n", f);
    for (int i = 0; i < r->n_rec; i++) {
        const bench_record *rec = &r->rec[i];
        if (rec->n_runs == 0) continue; /* failed or skipped: in the markdown and JSON with the reason */
        for (int kind = rec->cold.n_frames > 0 ? 0 : 1; kind < 2; kind++) {
            csv_str(f, rec->model_name);
            fprintf(f, ",%s,%s,%d,%s,%s,%s,%d,%d,%d,%s,%s,%s,%s,%d,%s,%d,", rec->size_name, rec->type_name,
                    rec->synthetic, rec->weights, rec->weight_dtype, rec->kernels, rec->n_threads, rec->first_chunk,
                    rec->chunk, rec->mode, rec->decode, rec->case_name, rec->language, rec->frames_forced,
                    kind == 0 ? "cold" : "measured", kind == 0 ? 1 : rec->n_runs);
            csv_str(f, r->sys.cpu_model);
            fputc(',', f);
            csv_str(f, r->sys.commit);
            csv_num(f, rec->bw_gbps);
            csv_num(f, rec->weights_in_use > 0 ? rec->weights_in_use / 1048576.0 : NAN);
            for (int m = 0; m < bench_n_metrics; m++) {
                if (kind == 0) {
                    const double v = metric_get(&rec->cold, &bench_metrics[m]);
                    csv_num(f, v), csv_num(f, v), csv_num(f, v), csv_num(f, v);
                } else {
                    const bench_summary s = record_summary(rec, &bench_metrics[m]);
                    csv_num(f, s.median), csv_num(f, s.p95), csv_num(f, s.min), csv_num(f, s.max);
                }
            }
            fprintf(f, ",%s,", rec->backend);
            csv_str(f, rec->device_name);
            fprintf(f, ",%d,", rec->device);
            csv_str(f, rec->device_driver);
            fprintf(f, ",%lld,%lld\n", (long long)rec->device_bytes_allocated, (long long)rec->device_bytes_reserved);
        }
    }
}

int report_write(const bench_report *r, const char *fmt, FILE *f) {
    if (strcmp(fmt, "json") == 0) {
        json_t *j = report_json(r);
        const int rc = json_dumpf(j, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        fputc('\n', f);
        json_decref(j);
        return rc ? -1 : 0;
    }
    if (strcmp(fmt, "csv") == 0) write_csv(r, f);
    else write_md(r, f);
    return ferror(f) ? -1 : 0;
}

int report_write_file(const bench_report *r, const char *fmt, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "qtts-bench: cannot write %s\n", path);
        return -1;
    }
    int rc = report_write(r, fmt, f);
    if (fclose(f)) rc = -1;
    return rc;
}

/* ---------------------------------------------------------------- JSON in */

static double jget(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void jstr(json_t *o, const char *k, char *out, size_t n) {
    json_t *v = json_object_get(o, k);
    snprintf(out, n, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static void metrics_from_json(json_t *o, run_metrics *m) {
    for (int i = 0; i < bench_n_metrics; i++)
        *(double *)((char *)m + bench_metrics[i].offset) = jget(o, bench_metrics[i].key);
}

int report_read_json(const char *path, bench_report *r, char *err, size_t es) {
    memset(r, 0, sizeof *r);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return snprintf(err, es, "%s: %s (line %d)", path, je.text, je.line), -1;
    json_t *recs = json_object_get(root, "records");
    if (!json_is_array(recs)) {
        json_decref(root);
        return snprintf(err, es, "%s: not a qtts-bench JSON report (no \"records\")", path), -1;
    }
    json_t *mach = json_object_get(root, "machine");
    if (mach) {
        jstr(mach, "cpu", r->sys.cpu_model, sizeof r->sys.cpu_model);
        jstr(mach, "cpu_id", r->sys.cpu_id, sizeof r->sys.cpu_id); /* absent before it existed: "" */
        jstr(mach, "commit", r->sys.commit, sizeof r->sys.commit);
        jstr(mach, "date", r->sys.date, sizeof r->sys.date);
        jstr(mach, "bandwidth_method", r->bw_method, sizeof r->bw_method);
        const double mib = jget(mach, "bandwidth_buffer_mib");
        r->bw_buffer_mib = isnan(mib) ? 0 : mib;
        const double run_mib = jget(mach, "bandwidth_run_probe_mib"); /* absent before per-run probes: off */
        r->bw_run_mib = isnan(run_mib) ? 0 : run_mib;
    }
    json_t *run = json_object_get(root, "run");
    if (run) {
        r->frames_mode = (int)jget(run, "frames");
        r->reps = (int)jget(run, "measured_runs");
        r->seed = (uint64_t)jget(run, "seed");
        r->greedy = json_is_true(json_object_get(run, "greedy"));
        json_t *hp = json_object_get(run, "huge_pages"); /* absent in reports before it existed: 4 KiB pages */
        r->huge_pages = json_is_true(hp);
        r->total_s = jget(run, "total_s");
    }
    json_t *bw = mach ? json_object_get(mach, "read_bandwidth") : NULL;
    for (size_t i = 0; i < json_array_size(bw) && r->n_bw < BENCH_MAX_LIST; i++) {
        r->bw_threads[r->n_bw] = (int)jget(json_array_get(bw, i), "threads");
        r->bw_gbps[r->n_bw++] = jget(json_array_get(bw, i), "gbps");
    }
    json_t *pk = mach ? json_object_get(mach, "compute_peak") : NULL; /* absent before it existed */
    for (size_t i = 0; i < json_array_size(pk) && r->n_peaks < BENCH_MAX_LIST; i++) {
        json_t *o = json_array_get(pk, i);
        peak_result *p = &r->peaks[r->n_peaks++];
        p->threads = (int)jget(o, "threads");
        p->f32_gmacs = jget(o, "f32_gmacs");
        p->int8_gmacs = jget(o, "int8_gmacs");
        jstr(o, "f32_method", p->f32_method, sizeof p->f32_method);
        jstr(o, "int8_method", p->int8_method, sizeof p->int8_method);
    }
    const size_t n = json_array_size(recs);
    r->rec = calloc(n ? n : 1, sizeof *r->rec);
    if (!r->rec) {
        json_decref(root);
        return snprintf(err, es, "out of memory"), -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(recs, i);
        bench_record *rec = &r->rec[r->n_rec++];
        jstr(o, "model", rec->model, sizeof rec->model);
        jstr(o, "model_name", rec->model_name, sizeof rec->model_name);
        jstr(o, "size", rec->size_name, sizeof rec->size_name);
        jstr(o, "type", rec->type_name, sizeof rec->type_name);
        jstr(o, "weights", rec->weights, sizeof rec->weights);
        jstr(o, "weight_dtype", rec->weight_dtype, sizeof rec->weight_dtype);
        jstr(o, "isa", rec->kernels, sizeof rec->kernels);
        jstr(o, "mode", rec->mode, sizeof rec->mode);
        jstr(o, "decode", rec->decode, sizeof rec->decode);
        jstr(o, "codec_weights", rec->codec_weights, sizeof rec->codec_weights);
        jstr(o, "case", rec->case_name, sizeof rec->case_name);
        jstr(o, "length", rec->length, sizeof rec->length);
        jstr(o, "language", rec->language, sizeof rec->language);
        jstr(o, "error", rec->error, sizeof rec->error);
        jstr(o, "backend", rec->backend, sizeof rec->backend); /* absent before backends: "" (the CPU) */
        jstr(o, "device", rec->device_name, sizeof rec->device_name);
        jstr(o, "device_driver", rec->device_driver, sizeof rec->device_driver);
        const double dix = jget(o, "device_index"), dba = jget(o, "device_bytes_allocated"),
                     dbr = jget(o, "device_bytes_reserved");
        rec->device = isnan(dix) ? 0 : (int)dix;
        rec->device_bytes_allocated = isnan(dba) ? 0 : (int64_t)dba;
        rec->device_bytes_reserved = isnan(dbr) ? 0 : (int64_t)dbr;
        rec->synthetic = json_is_true(json_object_get(o, "synthetic"));
        rec->n_threads = (int)jget(o, "threads");
        rec->first_chunk = (int)jget(o, "first_chunk_frames");
        rec->chunk = (int)jget(o, "chunk_frames");
        rec->frames_forced = (int)jget(o, "frames_forced");
        const double wiu = jget(o, "weights_in_use_bytes"), wiu_mib = jget(o, "weights_in_use_mib");
        rec->weights_in_use = !isnan(wiu) ? (int64_t)wiu : !isnan(wiu_mib) ? (int64_t)llround(wiu_mib * 1048576.0) : 0;
        json_t *cold = json_object_get(o, "cold");
        if (json_is_object(cold)) metrics_from_json(cold, &rec->cold);
        json_t *runs = json_object_get(o, "runs");
        for (size_t k = 0; k < json_array_size(runs) && rec->n_runs < BENCH_MAX_RUNS; k++)
            metrics_from_json(json_array_get(runs, k), &rec->runs[rec->n_runs++]);
    }
    json_decref(root);
    return 0;
}
