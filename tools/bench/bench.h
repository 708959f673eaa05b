/* qtts-bench: shared declarations of the benchmark tool (the .c files of tools/bench/).
 * The tool is a client of the public header only (include/qtts.h); make-model
 * writes checkpoint files itself. docs/BENCH.md describes the method and
 * ../shared/BENCHMARKING.md is the method it implements. */
#ifndef QTTS_BENCH_H
#define QTTS_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qtts.h"
#include "../common/clock.h"

#define BENCH_VERSION "2"
#define BENCH_MAX_LIST 16

/* ---------------------------------------------------------------- make_model.c */

typedef struct mm_options {
    const char *size;          /* "0.6b", "1.7b", or "tiny" (tests: small geometry, same names) */
    const char *type;          /* "custom_voice", "base", "voice_design" */
    uint64_t seed;             /* weights are a pure function of (size, type, seed) */
    const char *tokenizer_dir; /* folder with vocab.json, merges.txt, tokenizer_config.json;
                                  NULL = search tests/golden/data/e2e_string near cwd and binary */
    int quiet;                 /* 1 = no progress on stderr */
} mm_options;

/* Writes a complete synthetic checkpoint folder to dir (created if missing).
 * Returns 0 or -1 with a message in err. */
int mm_make_model(const char *dir, const mm_options *o, char *err, size_t err_size);

/* Parameters (and tensors) make-model writes for a size and type, without
 * writing anything: main checkpoint (codec 0) or speech_tokenizer (codec 1). */
int64_t mm_count_params(const char *size, const char *type, int codec, int64_t *n_tensors);

/* Size names accepted by --size, for usage text. */
extern const char *const mm_size_names[];

/* ---------------------------------------------------------------- stw_writer.c */

/* Streaming safetensors writer: declare every tensor, then write the data of
 * each in the declared order; the header is written before the first byte of
 * data so memory stays O(buffer) whatever the file size. */
typedef enum st_dtype { ST_F32 = 0, ST_BF16 = 1 } st_dtype;

typedef struct stw_writer stw_writer;

stw_writer *stw_open(const char *path, char *err, size_t err_size);
/* Declare a tensor (name copied). Returns its index or -1. */
int stw_declare(stw_writer *w, const char *name, st_dtype dt, int n_dims, const int64_t *shape);
/* Add a "__metadata__" string entry (both copied). */
int stw_metadata(stw_writer *w, const char *key, const char *value);
/* Write n float values of the current tensor (converted to its dtype);
 * tensors are filled in declaration order. */
int stw_write_f32(stw_writer *w, const float *v, size_t n);
/* Finish (checks every tensor was filled) and free; returns 0 or -1. */
int stw_close(stw_writer *w, char *err, size_t err_size);
uint16_t stw_f32_to_bf16(float f);

/* ---------------------------------------------------------------- stats.c */

typedef struct bench_summary {
    double median, p95, min, max, mean;
    int n;
} bench_summary;

/* Summary of n values (NaN entries skipped). p95 by linear interpolation
 * between order statistics (the "type 7" estimator of R and numpy). */
bench_summary bench_summarize(const double *v, int n);
double bench_percentile(const double *sorted, int n, double p);

/* ---------------------------------------------------------------- sysinfo.c */

typedef struct sys_info {
    char cpu_model[128];
    char cpu_id[64];         /* "x86 family 26 model 2 stepping 0" (the model name alone hides the generation) */
    int n_cpus;              /* online CPUs */
    char kernel[128];
    char compiler[128];      /* __VERSION__ of the bench build */
    char cflags[512];        /* compile flags of the library, as recorded in the binary */
    char commit[96];         /* source commit (git describe --always --dirty) */
    char date[32];           /* UTC, ISO 8601 */
    char hostname[64];
    double mem_total_gb;
    char loadavg[64];        /* /proc/loadavg when the report started: other work on the machine */
} sys_info;

void sys_collect(sys_info *s);

/* MHz sampler: a thread reading /proc/cpuinfo every period_ms between start
 * and stop; mean/min/max over all CPUs and samples. */
typedef struct mhz_sampler mhz_sampler;
mhz_sampler *mhz_start(int period_ms);
void mhz_stop(mhz_sampler *m, double *mean, double *min, double *max); /* frees m */

/* Peak resident set size: reset the high-water mark (Linux clear_refs 5;
 * returns 0 when supported) and read it in MiB (VmHWM). */
int rss_reset_peak(void);
double rss_peak_mib(void);
double rss_now_mib(void);


/* threads.c: fn(arg, t) for t = 0..n-1 on n threads released together; the
 * ms from the release to the end of the slowest, or -1 when not all n could
 * be started (then none ran). n in [1, BENCH_MAX_THREADS]. */
#define BENCH_MAX_THREADS 256
double bench_run_threads(int n, void (*fn)(void *arg, int t), void *arg);

/* ---------------------------------------------------------------- peak.c */

/* The arithmetic peak probe: f32 and int8 multiply-adds per second with the
 * instructions the engine's kernels use on this CPU. */
typedef enum peak_kind { PK_F32 = 0, PK_INT8 = 1 } peak_kind;
typedef enum peak_method { PK_SCALAR = 0, PK_AVX2 = 1, PK_AVX512 = 2, PK_N_METHODS = 3 } peak_method;

int peak_method_supported(peak_kind k, peak_method m); /* this build and CPU (int8: no scalar loop) */
peak_method peak_method_best(peak_kind k);
const char *peak_method_name(peak_kind k, peak_method m);
/* One thread's loop (iters rounds of 12 accumulators) and the checksum it
 * must return (for the tests); 0 when the method is not supported. */
double peak_loop(peak_kind k, peak_method m, long iters);
double peak_loop_expected(peak_kind k, peak_method m, long iters);
/* G multiply-adds per second on n threads started together, best of reps. */
double measure_peak(peak_kind k, peak_method m, int n_threads, int reps);

typedef struct peak_result {
    int threads;
    double f32_gmacs, int8_gmacs; /* G multiply-adds/s (f32 GFLOP/s = 2 x); int8 0 = not measured */
    char f32_method[48], int8_method[48];
} peak_result;
void measure_peaks(int n_threads, int reps, peak_result *out); /* the best methods */
/* method: a peak_method, or -1 for the best of each kind (int8 "none" where
 * the method has no int8 loop) */
void measure_peaks_with(int n_threads, int reps, int method, peak_result *out);
int peak_parse_method(const char *s, int *m); /* auto (-1), scalar, avx2, avx512; -1 on a bad name */
int cmd_peak(int argc, char **argv);

/* ---------------------------------------------------------------- bandwidth.c */

/* The read loop of the bandwidth probe: the widest loads the CPU has, chosen
 * at run time (the engine's kernels stream weights with vector loads). */
typedef enum bw_method { BW_SCALAR = 0, BW_AVX2 = 1, BW_AVX512 = 2, BW_N_METHODS = 3 } bw_method;

bw_method bw_method_best(void);          /* avx512 > avx2 > scalar, as this CPU allows */
int bw_method_supported(bw_method m);    /* 1 if this build and CPU can run the loop */
const char *bw_method_name(bw_method m); /* "scalar loads", "avx2 loads", "avx512 loads" */
/* "auto" (= bw_method_best), "scalar", "avx2", "avx512". Returns 0 or -1. */
int bw_parse_method(const char *s, bw_method *m);
/* "scalar", "avx2", "avx512" -> 0, 1, 2 (the order of bw_method and peak_method); -1 otherwise */
int isa_method_index(const char *s);
/* XOR of the n words at p through the loop of method m (scalar when m is not
 * supported): every loop gives the same value. */
uint64_t bw_read_xor(bw_method m, const uint64_t *p, size_t n);
/* Read bandwidth in GB/s (1e9 bytes/s) over a buffer of buf_bytes read by
 * n_threads threads with the loop of method; best of reps passes. 0 when the
 * method is not supported or the buffer cannot be allocated. */
double measure_read_bandwidth(size_t buf_bytes, int n_threads, int reps, bw_method method);

/* ---------------------------------------------------------------- wer.c */

/* Text normalisation for word error rate (docs/BENCH.md "WER"):
 * NFKC + case fold, numbers to English words, punctuation removed, CJK
 * characters as single tokens. Returns a malloc'ed string of tokens
 * separated by single spaces. */
char *wer_normalize(const char *text);
/* Word error rate of hyp against ref after normalisation:
 * (S + D + I) / N (N = reference words). Counts returned when not NULL.
 * An empty reference gives 0 for an empty hypothesis, else 1. */
double wer_compute(const char *ref, const char *hyp, int *n_ref, int *n_err);
/* English words for a non-negative integer written in digits (up to 18
 * digits; longer strings are read digit by digit). Writes to out. */
void wer_number_words(const char *digits, size_t n, char *out, size_t out_size);

/* ---------------------------------------------------------------- cases.c */

typedef struct bench_case {
    const char *name;      /* "short_en", ... */
    const char *length;    /* "short", "medium", "long", "clone" */
    const char *language;  /* qtts language name */
    const char *text;
    int frames;            /* frames used when --frames auto: a typical speaking rate */
    int clone;             /* 1 = ICL clone with the fixed reference clip (Base models) */
} bench_case;

extern const bench_case bench_cases[];
extern const int bench_n_cases;
/* Fixed reference clip: 3 s of a deterministic voiced signal at 24 kHz with
 * its transcript. *pcm is malloc'ed. */
void bench_ref_clip(float **pcm, size_t *n, const char **transcript);

/* ---------------------------------------------------------------- run.c */

#define RUN_MAX_CHUNKS 4096

typedef struct run_metrics {
    /* every figure is a double so that reports and compare can walk them
     * through bench_metrics[] */
    double wall_ms;          /* qtts_synthesize call (qtts_generate_codes with decode none) */
    double audio_s;          /* samples / 24000 (frames x 0.08 with decode none) */
    double rtf, rtfx;
    double ttfa_ms;          /* our clock: call start to first non-empty chunk */
    double cadence_ms;       /* median gap between chunks after the first */
    double cadence_max_ms;
    double underruns;        /* gaps longer than the audio of the chunk before */
    double viability;        /* share of chunks delivered before the player needs them */
    double n_chunks;
    double n_frames;
    double prefill_ms, talker_ms_f, predictor_ms_f, decode_ms_f, decode_ms;
    double peak_rss_mib;
    double rss_over_weights; /* peak RSS bytes / qtts_model_info.weight_bytes_in_use */
    double gbps;             /* (talker + predictor bytes) per frame / LM time per frame */
    double roofline;         /* gbps / measured read bandwidth: probe_gbps when measured, else
                                the process's opening probe */
    double probe_gbps;       /* read bandwidth probed right before and right after this run
                                (their mean); NaN when per-run probing is off */
    double mhz_mean, mhz_min, mhz_max;
    double audio_rms, audio_peak; /* of the delivered PCM: a sanity check of the output level */
    double nonfinite;        /* NaN/Inf samples delivered (must be 0) */
    /* GPU time of the language model from the library's timestamp queries
     * (qtts_stats.gpu_*): prefill ms, and talker steps, code predictor passes
     * and sampling ms per frame; NaN on the CPU backend */
    double gpu_prefill_ms, gpu_talker_ms_f, gpu_predictor_ms_f, gpu_sampling_ms_f;
    int status;              /* qtts_status of the call */
} run_metrics;

/* Where the codec decoder runs (--decode). */
typedef enum bench_decode {
    BENCH_DECODE_INLINE = 0, /* qtts_audio_params.overlap = 0 (library default): on the calling
                                thread between frames, on all of the model's threads */
    BENCH_DECODE_WORKER = 1, /* overlap = 1: in the context's worker thread beside generation */
    BENCH_DECODE_NONE = 2,   /* no audio: qtts_generate_codes alone (generation alone) */
} bench_decode;

/* Where the language model runs (--backend, --device). All zero = the
 * library's defaults (cpu and device 0, or QTTS_BACKEND / QTTS_DEVICE). */
typedef struct bench_backend {
    int have_backend;
    qtts_backend backend;
    int have_device;
    int device;              /* >= 0 */
} bench_backend;

/* Parse the value of --backend (opt "--backend") or --device into b. Returns
 * 0, or -1 with a message on stderr naming what is accepted. */
int bench_parse_backend(const char *opt, const char *v, bench_backend *b);
/* Apply what b gives to mp (the rest stays at qtts_model_default_params). */
void bench_apply_backend(const bench_backend *b, qtts_model_params *mp);

/* "inline", "worker", "none". Returns 0 or -1. */
int bench_parse_decode(const char *s, bench_decode *d);
const char *bench_decode_name(bench_decode d);

typedef struct bench_config {
    const char *model_dir;
    qtts_weight_type weights;
    const char *weights_name;
    int n_threads;
    int first_chunk, chunk;   /* frames */
    qtts_text_mode mode;
    const char *mode_name;
    bench_decode decode;      /* default (0) inline */
} bench_config;

typedef struct run_request {
    const bench_case *c;
    int frames;               /* forced frames (> 0) or 0 = until EOS */
    uint64_t seed;
    int greedy;
    const qtts_voice *voice;  /* Base models */
    const int32_t *teacher;   /* teacher codes or NULL */
    int n_teacher;
    int keep_audio;           /* return pcm */
    int keep_codes;           /* return codes */
} run_request;

typedef struct run_output {
    run_metrics m;
    float *pcm;               /* when keep_audio */
    size_t n_pcm;
    int32_t *codes;           /* when keep_codes: [n_codes_frames][16] */
    int n_codes_frames;
    qtts_stats stats;
    int chunks_off_thread;    /* PCM chunks delivered on a thread other than the caller's */
    int64_t device_bytes_allocated, device_bytes_reserved; /* qtts_model_info's, read at the end
                                                              of the run with its context alive */
    char err[256];
} run_output;

/* One synthesis with timing (generation only with cfg->decode none); bw_gbps
 * is the measured read bandwidth. */
int bench_run_once(qtts_model *model, const bench_config *cfg, const run_request *rq, double bw_gbps,
                   run_output *out);
void run_output_free(run_output *o);
/* Record the bandwidth probed around a run (mean of the probes before and
 * after it) and measure the run's roofline against it. */
void run_set_probe(run_metrics *m, double probe_gbps);
/* Fill gen params for a case on this model (speaker/instruct/voice); the
 * forced frames and teacher codes go to *dbg, which gp->debug points at. */
void bench_gen_params(qtts_model *model, const bench_config *cfg, const run_request *rq, qtts_gen_params *gp,
                      qtts_gen_debug *dbg);

typedef struct metric_desc {
    const char *key;      /* JSON / CSV name */
    const char *label;    /* table header */
    size_t offset;        /* into run_metrics */
    int lower_is_better;  /* 1, 0, or -1 = neither (informational) */
    const char *fmt;      /* printf format of one value */
} metric_desc;
extern const metric_desc bench_metrics[];
extern const int bench_n_metrics;
const metric_desc *bench_metric(const char *key);
double metric_get(const run_metrics *m, const metric_desc *d);

#define BENCH_MAX_RUNS 64

typedef struct bench_record {
    char model[512];          /* folder */
    char model_name[128];     /* its last path component */
    char size_name[16], type_name[16], kernels[32], weight_dtype[16];
    int synthetic;            /* config.json has "qtts_synthetic" */
    int64_t talker_bytes, predictor_bytes, codec_bytes, n_params;
    int64_t weights_in_use;   /* qtts_model_info.weight_bytes_in_use (0 = unknown) */
    char weights[16];         /* weight format name asked for */
    char codec_weights[8];    /* the codec decoder's format (f32, bf16, q8, q8bf16; "" in older reports = f32) */
    int n_threads, first_chunk, chunk;
    char mode[16];            /* text mode name */
    char decode[16];          /* decode placement: inline, worker, none ("" in older reports) */
    char case_name[32], length[16], language[16];
    int text_chars;
    int frames_forced;        /* > 0: frames forced, EOS ignored; 0: until EOS */
    double load_ms, voice_ms, voice_icl_ms, bw_gbps; /* voice: Base models, 3 s reference clip */
    run_metrics cold;         /* first run of this case on this configuration */
    run_metrics runs[BENCH_MAX_RUNS];
    int n_runs;
    char backend[16];         /* "cpu", "vulkan" (qtts_model_info.backend; "" in older reports) */
    int device;               /* device index the model was loaded with */
    char device_name[256], device_driver[256]; /* qtts_model_info's ("cpu" and "" on the CPU) */
    int64_t device_bytes_allocated, device_bytes_reserved; /* the most over the runs (0 on the CPU) */
    char error[256];          /* non-empty: the configuration failed */
} bench_record;

typedef struct quality_record {
    char model_name[128], size_name[16], type_name[16];
    char weights[16], ref_weights[16];
    char case_name[32], language[16];
    int frames;
    int n_groups;
    int teacher_frames;
    double agree[16];         /* teacher-forced agreement per codebook, 0..1 */
    double agree_mean;
    double mel_corr;          /* log-mel correlation, free runs, test vs reference */
    double snr_db;            /* waveform SNR of test against reference */
    double spk_sim_ref;       /* cosine(speaker emb of reference-dtype output, ref clip); NaN if n/a */
    double spk_sim_test;      /* the same for the tested dtype */
    double wer_ref, wer_test; /* NaN without --asr-cmd */
    char hyp_ref[256], hyp_test[256];
    char error[256];
} quality_record;

typedef struct bench_report {
    sys_info sys;
    int bw_threads[BENCH_MAX_LIST];
    double bw_gbps[BENCH_MAX_LIST];
    int n_bw;
    double bw_buffer_mib;
    char bw_method[32];       /* read loop of the probe: bw_method_name() */
    double bw_run_mib;        /* buffer of the probes around every run; 0 = none (roofline against
                                 the opening probe) */
    peak_result peaks[BENCH_MAX_LIST]; /* arithmetic peak per thread count, at the start */
    int n_peaks;
    int frames_mode;          /* > 0 forced N, -1 auto (per-case typical length), 0 until EOS */
    int reps;
    uint64_t seed;
    int greedy;
    int huge_pages;           /* qtts_model_params.huge_pages of the runs (1 = weights in 2 MiB pages) */
    bench_record *rec;
    int n_rec;
    quality_record *q;
    int n_q;
    double total_s;
} bench_report;

void report_free(bench_report *r);
/* Writers (report.c). fmt: "md", "json", "csv". Return 0 or -1. */
int report_write(const bench_report *r, const char *fmt, FILE *f);
int report_write_file(const bench_report *r, const char *fmt, const char *path);
/* Reads a JSON report written by report_write (compare). */
int report_read_json(const char *path, bench_report *r, char *err, size_t err_size);
/* Summary of one metric over the measured runs of a record. */
bench_summary record_summary(const bench_record *rec, const metric_desc *d);
/* Bandwidth for a thread count (the nearest measured count). */
double report_bw_for(const bench_report *r, int n_threads);

/* plot.c: SVG of RTF per case and the per-phase split. Returns 0 or -1. */
int plot_write_svg(const bench_report *r, const char *path);

/* compare.c: matched-pair comparison of two reports on one metric. Records
 * match on size, type, weights, threads, chunk, mode, decode placement, case
 * and frames; ignore ("weights,threads,model,decode", any of them, or NULL)
 * drops those from the match. Returns 0, or -1 when no pair matched. */
int compare_reports(const bench_report *a, const bench_report *b, const char *metric, const char *ignore, FILE *out);

/* quality.c */
typedef struct quality_options {
    const char *ref_weights;   /* the reference path ("native") */
    const char *asr_cmd;       /* "CMD {wav}" or NULL */
    int frames;                /* forced frames per case */
    int n_threads;
    uint64_t seed;
    const char *wav_dir;       /* keep WAVs here (NULL = temporary) */
    bench_backend backend;     /* both paths' language model (zero = the library default) */
} quality_options;
int quality_run(const char *model_dir, const char *const *weights, int n_weights, const bench_case *const *cases,
                int n_cases, const quality_options *o, bench_report *r);
/* Log-mel spectrogram (80 bands, 1024-point FFT, hop 256) correlation of two
 * waveforms over their common length; waveform SNR in dB of test against ref. */
double quality_logmel_corr(const float *a, const float *b, size_t n);
double quality_snr_db(const float *ref, const float *test, size_t n);
/* Mean |difference| of the two natural-log mel spectrograms (the floor of
 * quality_logmel_corr), per band and frame. */
double quality_logmel_l1(const float *a, const float *b, size_t n);
/* The codec arm: the codec decoder in each format of codec_weights against
 * f32 on the same codes (every DIR/golden/<run>/codes.npy, and random codes
 * of `frames` frames, seeded): waveform SNR, log-mel correlation and L1 per
 * case, as a markdown table on out. Returns the number of (format, case)
 * pairs below the acceptance (SNR >= 30 dB, log-mel correlation >= 0.999),
 * or -1 on error. */
int quality_codec_run(const char *model_dir, const char *const *codec_weights, int n, int frames, int n_threads,
                      uint64_t seed, FILE *out);
double quality_cosine(const float *a, const float *b, int n);
/* Speaker embedding of 24 kHz audio through the Base model's speaker encoder
 * (qtts_voice_from_pcm + the documented voice file layout). Returns the
 * length or -1. emb must hold max floats. */
int quality_speaker_embedding(qtts_model *model, const float *pcm, size_t n, float *emb, int max, char *err,
                              size_t err_size);
/* Runs the recogniser: cmd with {wav} replaced by the path; the transcript is
 * its standard output (whitespace collapsed). Returns malloc'ed text or NULL. */
char *asr_transcribe(const char *cmd, const char *wav, char *err, size_t err_size);

/* ---------------------------------------------------------------- dtypes */

typedef struct weight_name {
    const char *name;
    qtts_weight_type type;
} weight_name;
/* Parse a weight-format name ("native", "bf16", ...). Returns 0 or -1. */
int bench_parse_weights(const char *name, qtts_weight_type *t, const char **canon);
/* Comma list of every weight format this build knows. */
const char *bench_weight_names(void);

/* ---------------------------------------------------------------- commands
 * Each returns the process exit status: 0 ok, 1 failure, 2 usage. */
int cmd_make_model(int argc, char **argv); /* make_model.c */
int cmd_run(int argc, char **argv);        /* bench.c */
int cmd_suite(int argc, char **argv);      /* bench.c */
int cmd_compare(int argc, char **argv);    /* compare.c */
int cmd_quality(int argc, char **argv);    /* quality.c */
int cmd_wer(int argc, char **argv);        /* wer.c */
int cmd_bandwidth(int argc, char **argv);  /* bandwidth.c */
int cmd_plot(int argc, char **argv);       /* plot.c: SVG from a JSON report */
int cmd_cold(int argc, char **argv);       /* cold.c: launch -> first PCM byte of qtts --stdout */
int cmd_textstream(int argc, char **argv); /* textstream.c: text played in at a token rate */
void bench_help(FILE *f);                  /* bench.c */

#endif
