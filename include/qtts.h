/* qtts: pure-C inference engine for the Qwen3-TTS 12 Hz models.
 *
 * The one public header of libqtts. A qtts_model holds the immutable weights
 * of one checkpoint folder (memory-mapped, shared by threads); a qtts_context
 * holds the state of one synthesis stream (KV caches, scratch, RNG).
 *
 * Conventions: every fallible call returns a qtts_status (QTTS_OK == 0,
 * errors < 0) with a human-readable message: calls on a context or an audio
 * writer keep it in that object (qtts_context_last_error,
 * qtts_audio_writer_last_error); calls that create an object, or work on no
 * object of their own (qtts_tokenize), write it to a caller buffer (errbuf,
 * errbuf_size; NULL = no message). A loaded model is never written to: any
 * number of threads may use one model at once, each with its own contexts.
 * The library never prints and never exits: diagnostics go to the log
 * callback in the params. */
#ifndef QTTS_H
#define QTTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum qtts_status {
    QTTS_OK = 0,
    QTTS_ERR_INVALID_ARG = -1, /* a caller-supplied parameter is out of range */
    QTTS_ERR_IO = -2,          /* a file is missing or cannot be read/written */
    QTTS_ERR_FORMAT = -3,      /* a file is malformed (JSON, safetensors, ...) */
    QTTS_ERR_MODEL = -4,       /* checkpoint inconsistent: missing tensor, wrong shape/dtype */
    QTTS_ERR_INPUT = -5,       /* bad user input: UTF-8, unknown voice/language, empty text */
    QTTS_ERR_NOMEM = -6,       /* out of memory */
    QTTS_ERR_UNSUPPORTED = -7, /* valid but not supported by this build/model */
    QTTS_ERR_LIMIT = -8,       /* request exceeds a limit (context length, text length) */
    QTTS_ERR_CANCELLED = -9,   /* stopped by a user callback */
    QTTS_ERR_INTERNAL = -10    /* a bug: please report */
} qtts_status;

/* Static string naming a status ("ok", "invalid argument", ...). Never NULL. */
const char *qtts_status_str(qtts_status st);

/* ---------------------------------------------------------------- logging */

typedef enum qtts_log_level {
    QTTS_LOG_ERROR = 0,
    QTTS_LOG_WARN = 1,
    QTTS_LOG_INFO = 2,
    QTTS_LOG_DEBUG = 3
} qtts_log_level;

/* Receives every diagnostic of the library. msg is borrowed for the call.
 * Calls may come from several threads at once (contexts used on different
 * threads, a pipeline's decode threads): make it thread-safe. */
typedef void (*qtts_log_fn)(qtts_log_level level, const char *msg, void *user);

/* ---------------------------------------------------------------- model */

typedef struct qtts_model qtts_model;
typedef struct qtts_context qtts_context;

typedef enum qtts_model_type {
    QTTS_MODEL_BASE = 0,         /* voice cloning from a reference recording */
    QTTS_MODEL_CUSTOM_VOICE = 1, /* preset speakers, optional instruction (1.7B) */
    QTTS_MODEL_VOICE_DESIGN = 2  /* voice described by an instruction */
} qtts_model_type;

typedef enum qtts_weight_type {
    QTTS_WEIGHTS_DEFAULT = -1, /* predictor_weights only: the same as weights */
    QTTS_WEIGHTS_NATIVE = 0,   /* as stored in the checkpoint (BF16/F16/F32), computed in f32 */
    QTTS_WEIGHTS_Q8 = 1,       /* int8, blocks of 32 with an f16 scale (quantised at load) */
    QTTS_WEIGHTS_Q4 = 2        /* int4, blocks of 32 with an f16 scale and minimum (quantised at load) */
} qtts_weight_type;

/* Format of the codec decoder on the CPU: its vocoder convolutions (weights
 * and the convolutions' inputs) and its Linear layers (weights). The Vulkan
 * decoder always computes in f32. */
typedef enum qtts_codec_weights {
    QTTS_CODEC_F32 = 0,  /* f32: matches the official decoder within 1e-4 */
    QTTS_CODEC_BF16 = 1, /* bf16 weights and convolution inputs, f32 sums, for the stages
                            docs/MODEL.md lists (the rest stays f32) */
    QTTS_CODEC_Q8 = 2,   /* int8: per-output-channel weight scales, per-step activation scales,
                            for the convs docs/MODEL.md lists; most other convs in int16 (the
                            list is there too); the Linear layers' weights in bf16 */
    QTTS_CODEC_Q8BF16 = 3 /* q8's int8 stages, and every other vocoder conv in bf16 (none f32):
                             the fastest where the CPU has a bf16 dot product (AVX512-BF16) */
} qtts_codec_weights;

/* "f32" / "bf16" / "q8" / "q8bf16" -> format; -1 if unknown. */
int qtts_codec_weights_from_name(const char *name);
const char *qtts_codec_weights_name(qtts_codec_weights w);

/* Where the language model (prefill, talker, code predictor, sampling) runs.
 * On Vulkan the codec decoder runs on the device too; the codec and speaker
 * encoders (once per cloned voice) run on the CPU on every backend. */
typedef enum qtts_backend {
    QTTS_BACKEND_CPU = 0,    /* the CPU kernels (scalar reference or the best SIMD table) */
    QTTS_BACKEND_VULKAN = 1  /* Vulkan compute on a GPU (or Mesa's lavapipe on the CPU) */
} qtts_backend;

/* "cpu" / "vulkan" -> backend; -1 if the name is unknown (case-insensitive). */
int qtts_backend_from_name(const char *name);
const char *qtts_backend_name(qtts_backend b);

/* One compute device of a backend, as qtts_backend_devices lists it. */
typedef struct qtts_device_info {
    char name[256];           /* e.g. "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char driver[256];         /* driver name and version, e.g. "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)" */
    char type[16];            /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t api_version;     /* Vulkan API version (VK_MAKE_API_VERSION packing) */
    int64_t memory_bytes;     /* device-local memory heaps, summed */
    uint32_t subgroup_size;   /* default subgroup (warp / wave) size */
    int int8_dot;             /* 1 when 4x8-bit packed integer dot products are accelerated */
    int fp16;                 /* 1 when shaders can compute in 16-bit floats */
    int int8_storage;         /* 1 when shaders can read 8-bit storage buffers */
    int64_t max_buffer_range; /* maxStorageBufferRange: the largest one binding can address */
    int usable;               /* 1 when qtts can run on it (the features it needs are present) */
    char why_not[256];        /* when usable is 0: what is missing */
} qtts_device_info;

/* List the devices of backend b into out[0..max) (*n gets the count found,
 * which may exceed max). QTTS_ERR_UNSUPPORTED with a message in errbuf that
 * names the package or driver to install when the build has no such backend
 * or no device exists. */
qtts_status qtts_backend_devices(qtts_backend b, qtts_device_info *out, int max, int *n, char *errbuf,
                                 size_t errbuf_size);

typedef struct qtts_model_params {
    int n_threads;           /* worker threads for compute; >= 1; default 1 */
    qtts_weight_type weights;/* format of the talker's (and, by default, the code predictor's)
                                matrices in memory; embeddings stay as stored; default
                                QTTS_WEIGHTS_NATIVE */
    qtts_weight_type predictor_weights; /* the code predictor's; default QTTS_WEIGHTS_DEFAULT
                                           (= weights) */
    int tokenizer_alt_regex; /* 1 = the Mistral-patched pre-split regex of transformers
                                4.57 local loads instead of the stock Qwen2 one; default 0 */
    int load_codec;          /* 1 = also load speech_tokenizer/ (needed for audio); default 1 */
    qtts_codec_weights codec_weights; /* the CPU codec decoder's vocoder format; default
                                         QTTS_CODEC_F32 */
    int huge_pages;          /* 1 = the matrices read every frame (talker and code predictor
                                layers and heads, as stored or quantised) are copied at load
                                into one mapping advised for 2 MiB transparent huge pages
                                (fewer TLB misses while streaming them; same values, same
                                resident size), and every file mapping (checkpoint, cache
                                files) is advised for 2 MiB pages, read in place; 0 = stored
                                matrices are read in place from the file mapping, nothing
                                advised; default 1 */
    qtts_backend backend;    /* where the language model runs; default QTTS_BACKEND_CPU, or the
                                one the environment variable QTTS_BACKEND names ("cpu",
                                "vulkan") when it is set */
    int device;              /* device index of the backend (qtts_backend_devices); >= 0;
                                default 0, or QTTS_DEVICE when set */
    qtts_log_fn log;         /* diagnostics sink; NULL = discard; default NULL */
    void *log_user;          /* passed to log; default NULL */
    const char *cache_dir;   /* prepared-weights cache folder (qtts_cache_default_dir gives the
                                usual one): with q8/q4 weights on the CPU backend, the first
                                load writes the quantised, repacked matrices there (temporary
                                file, then rename) and later loads map that file instead of
                                quantising; a missing, stale, truncated or damaged file is
                                rebuilt, never trusted. NULL = no cache; default NULL */
} qtts_model_params;

qtts_model_params qtts_model_default_params(void);

/* The default prepared-weights cache folder: $XDG_CACHE_HOME/qtts, else
 * $HOME/.cache/qtts, into buf. 0 on success; -1 when neither variable is set
 * or buf is too small. Creates nothing. */
int qtts_cache_default_dir(char *buf, size_t buf_size);

/* Calls fn(path, bytes, user) for each prepared-weights cache file of the
 * checkpoint folder model_dir in cache_dir (model_dir NULL: every cache
 * file there). Returns the count, or -1 if cache_dir cannot be read. */
int qtts_cache_list(const char *cache_dir, const char *model_dir,
                    void (*fn)(const char *path, long long bytes, void *user), void *user);

/* Removes those files (model_dir NULL: every cache file in cache_dir); a
 * process that has one mapped keeps its copy. Returns the count removed, or
 * -1 if cache_dir cannot be read. */
int qtts_cache_clear(const char *cache_dir, const char *model_dir);

/* Load a checkpoint folder exactly as published on Hugging Face (config.json,
 * generation_config.json, model.safetensors or shards, tokenizer files,
 * speech_tokenizer/). On failure *out is NULL and errbuf (if not NULL) holds a
 * message naming the file and the tensor or key at fault.
 * The caller frees *out with qtts_model_free. */
qtts_status qtts_model_load(qtts_model **out, const char *dir, const qtts_model_params *params,
                            char *errbuf, size_t errbuf_size);

/* Frees a model; accepts NULL. All contexts of the model must be freed first. */
void qtts_model_free(qtts_model *model);

/* Describes a loaded model. Strings are owned by the model. */
typedef struct qtts_model_info {
    qtts_model_type type;
    const char *type_name;    /* "base", "custom_voice", "voice_design" */
    const char *size_name;    /* "0b6", "1b7" (config tts_model_size) */
    int hidden_size;          /* talker width H */
    int n_layers;             /* talker layers */
    int cp_hidden_size;       /* code predictor width */
    int cp_n_layers;          /* code predictor layers */
    int n_code_groups;        /* codebooks per frame (16) */
    int codebook_size;        /* codes per codebook (2048) */
    int sample_rate_hz;       /* output audio rate (24000) */
    int samples_per_frame;    /* audio samples per codec frame (1920) */
    int has_tokenizer;        /* 1 when vocab.json + merges.txt were found */
    int has_codec;            /* 1 when speech_tokenizer/ was loaded */
    int has_speaker_encoder;  /* 1 for Base models */
    int64_t talker_bytes;     /* weight bytes the talker reads per frame (layers + codec_head) */
    int64_t predictor_bytes;  /* weight bytes the code predictor reads per frame (15 steps) */
    int64_t codec_bytes;      /* codec decoder weight bytes */
    int64_t weight_bytes_in_use; /* bytes of the weights synthesis reads, each counted once in
                                    its in-memory format: talker and code predictor matrices,
                                    their codec embeddings and heads, the text projection and
                                    the codec decoder; not the text embedding table, of which
                                    only the prompt's rows are read */
    const char *kernels;      /* CPU kernel path in use ("scalar", "avx2", "avx512") */
    int n_threads;            /* compute threads */
    int64_t n_params;         /* parameters in model.safetensors */
    int64_t weight_bytes;     /* bytes of model.safetensors tensors */
    const char *weight_dtype; /* dominant dtype of the checkpoint file, "BF16", "F32", ... */
    const char *talker_format;    /* in memory: "native", "q8" or "q4" */
    const char *predictor_format; /* in memory: "native", "q8" or "q4" */
    const char *weights_cache;    /* the prepared-weights cache at this load: "off ...",
                                     "mapped PATH", "written PATH" or "not written (PATH)" */
    double load_ms;               /* wall time of qtts_model_load */
    double prepare_ms;            /* of it, putting the per-frame matrices in their format
                                     (quantising and repacking, copying into huge pages, or
                                     mapping the prepared-weights cache) */
    qtts_backend backend;         /* where the language model runs */
    const char *device_name;      /* the backend's device ("cpu" for the CPU backend) */
    const char *device_driver;    /* its driver ("" for the CPU backend) */
    int64_t device_bytes_allocated; /* device memory in use by buffers now (0 on the CPU) */
    int64_t device_bytes_reserved;  /* device memory allocations made (>= allocated; 0 on the CPU) */
} qtts_model_info;

void qtts_model_get_info(const qtts_model *model, qtts_model_info *info);

/* Preset speakers (CustomVoice) and languages the checkpoint knows, in config
 * order. Languages exclude dialect entries and include "auto" first. */
int qtts_model_n_speakers(const qtts_model *model);
const char *qtts_model_speaker(const qtts_model *model, int i);
/* Dialect a preset speaker uses with language chinese or auto ("sichuan_dialect"),
 * or NULL. */
const char *qtts_model_speaker_dialect(const qtts_model *model, int i);
int qtts_model_n_languages(const qtts_model *model);
const char *qtts_model_language(const qtts_model *model, int i);

/* Tokenize UTF-8 text with the checkpoint's Qwen2 BPE (no BOS/EOS, special
 * tokens matched). *ids is malloc'ed; the caller frees it with free().
 * QTTS_ERR_INPUT for invalid UTF-8 (errbuf gives the byte offset in text),
 * QTTS_ERR_UNSUPPORTED when the folder has no tokenizer files. Thread-safe. */
qtts_status qtts_tokenize(const qtts_model *model, const char *text, int32_t **ids, int *n_ids, char *errbuf,
                          size_t errbuf_size);

/* ---------------------------------------------------------------- generation */

typedef enum qtts_text_mode {
    QTTS_TEXT_MODE_DEFAULT = 0,      /* the official default of the model type */
    QTTS_TEXT_MODE_STREAMING = 1,    /* text fed one token per frame */
    QTTS_TEXT_MODE_NON_STREAMING = 2 /* whole text in the prompt */
} qtts_text_mode;

/* A cloned voice (Base models): speaker embedding and, for in-context
 * cloning, the reference codes and transcript. See "voices" below. */
typedef struct qtts_voice qtts_voice;

typedef struct qtts_sampling {
    int do_sample;            /* 0 = greedy argmax; default from generation_config (1) */
    float temperature;        /* > 0; default 0.9 */
    int top_k;                /* 0 = off; default 50 */
    float top_p;              /* (0, 1]; 1 = off; default 1.0 */
    float repetition_penalty; /* >= 1 (1 = off); talker only; default 1.05 */
} qtts_sampling;

/* Test and benchmark aids, not for speech a user asked for: a request points
 * at one through qtts_gen_params.debug. The library reads it when a
 * generation begins (each piece of qtts_synthesize) and keeps no pointer to
 * it; teacher_codes stays borrowed until the generation ends. */
typedef struct qtts_gen_debug {
    /* Chat-template ids used when text/instruction come as ids and the folder
     * has no tokenizer (test checkpoints with a small vocabulary): the id of
     * "\n" and of "user", in [0, text vocabulary size); -1 = from the
     * tokenizer, else the Qwen vocabulary's 198 / 872. Default -1. */
    int newline_id;
    int user_id;
    /* frames; > 0: generate exactly this many frames, end of speech (EOS)
     * disabled, the runaway guard off, max_new_tokens ignored. 0 = off (end
     * at EOS). Default 0 */
    int force_frames;
    /* Teacher forcing: [n_teacher_frames][n_code_groups] codes, each in
     * [0, codebook size), fed back instead of the model's own choices; the
     * model's choices are still made and compared (qtts_stats.teacher_agree).
     * Generates exactly n_teacher_frames frames as force_frames does (and
     * takes its place). Borrowed until the generation ends. Default NULL */
    const int32_t *teacher_codes;
    int n_teacher_frames; /* frames in teacher_codes, >= 1 when given; default 0 */
} qtts_gen_debug;

/* Defaults: template ids -1, no forced frames, no teacher codes. */
qtts_gen_debug qtts_gen_debug_default_params(void);

typedef struct qtts_gen_params {
    /* What to say: either text (UTF-8) or already-tokenized text_ids (the ids
     * between the chat template's fixed tokens). */
    const char *text;          /* default NULL */
    const int32_t *text_ids;   /* default NULL */
    int n_text_ids;            /* default 0 */
    /* Instruction / voice description (CustomVoice 1.7B, VoiceDesign). */
    const char *instruct;         /* default NULL */
    const int32_t *instruct_ids;  /* default NULL */
    int n_instruct_ids;           /* default 0 */
    const char *speaker;       /* preset speaker (CustomVoice), case-insensitive; default NULL */
    const char *language;      /* language name or "auto"; case-insensitive; default "auto" */
    qtts_text_mode text_mode;  /* default QTTS_TEXT_MODE_DEFAULT */
    /* Voice clone (Base models): either a voice made by qtts_voice_* (preferred)
     * or its parts given directly. */
    const qtts_voice *voice;   /* borrowed for the call; default NULL */
    const float *xvector;      /* [hidden_size] speaker embedding; default NULL */
    const int32_t *ref_codes;  /* [n_ref_frames][16] reference codes (ICL); default NULL */
    int n_ref_frames;          /* default 0 */
    const char *ref_text;      /* transcript of the reference (ICL); default NULL */
    const int32_t *ref_text_ids; /* or its ids; default NULL */
    int n_ref_text_ids;        /* default 0 */
    /* Sampling: talker (codebook 0) and code predictor (codebooks 1..15). */
    qtts_sampling talker;      /* default from generation_config.json */
    qtts_sampling predictor;   /* default from generation_config.json (subtalker_*) */
    int max_new_tokens;        /* talker tokens incl. the final one; default from
                                  generation_config.json (8192), else 2048 */
    uint64_t seed;             /* RNG seed; default 0 */
    /* Runaway guard: stop a piece that has not ended after 50 + 8 x (its text
     * tokens) frames (about 2.5x a normal speaking rate), keep the audio so far
     * and report QTTS_STOP_LENGTH_CAP with a warning. 0 = off (max_new_tokens
     * still applies). Default 1. */
    int auto_length_cap;
    const qtts_gen_debug *debug; /* test and benchmark aids; borrowed; default NULL = none */
} qtts_gen_params;

/* Why the last generation (the last piece) ended. */
typedef enum qtts_stop_reason {
    QTTS_STOP_NONE = 0,       /* nothing generated yet, or an error */
    QTTS_STOP_EOS = 1,        /* the model ended the utterance */
    QTTS_STOP_MAX_TOKENS = 2, /* max_new_tokens reached */
    QTTS_STOP_LENGTH_CAP = 3, /* the automatic length cap fired (see auto_length_cap) */
    QTTS_STOP_CONTEXT_FULL = 4, /* the context (n_ctx) is full */
    QTTS_STOP_CANCELLED = 5   /* a callback asked to stop */
} qtts_stop_reason;

/* Defaults for this model (sampling values from generation_config.json). */
qtts_gen_params qtts_gen_default_params(const qtts_model *model);

/* Called with each finished frame: codes[n_code_groups], codebook 0 first.
 * Return non-zero to stop generation (the call then returns QTTS_ERR_CANCELLED). */
typedef int (*qtts_frame_fn)(const int32_t *codes, int frame_index, void *user);

typedef struct qtts_context_params {
    int n_ctx;  /* max talker positions (prompt + frames); 0 = model maximum; default 0 */
    int reuse_voice_prefix;      /* 1 = a prompt whose leading positions that do not depend on
                                    the text (instruction, role, language and speaker controls,
                                    an ICL reference transcript) are the same as those of the
                                    last prompt prefilled on this context skips them: their
                                    K/V are still in the cache. Same codes and audio as a
                                    full prefill, bit for bit. 0 = always prefill every
                                    position. Default 1 */
} qtts_context_params;

qtts_context_params qtts_context_default_params(void);

/* Creates a stream context on a model (params NULL = defaults). On failure
 * *out is NULL and errbuf (if not NULL) says why. Thread-safe: threads may
 * make contexts on one model at once. Free with qtts_context_free (accepts
 * NULL). */
qtts_status qtts_context_new(const qtts_model *model, const qtts_context_params *params, qtts_context **out,
                             char *errbuf, size_t errbuf_size);
void qtts_context_free(qtts_context *ctx);
/* Message of the last failed call on this context ("" if none). */
const char *qtts_context_last_error(const qtts_context *ctx);

/* How the last generation on this context ended, and how many segments of
 * the last qtts_synthesize call were stopped by the automatic length cap. */
qtts_stop_reason qtts_context_stop_reason(const qtts_context *ctx);
int qtts_context_n_capped_segments(const qtts_context *ctx);

/* Where the time of the last qtts_generate_codes / qtts_synthesize went
 * (all segments together), and teacher-forcing agreement when teacher codes
 * were given. Times are wall-clock milliseconds on the thread stepping
 * generation, except decode_ms, which the decoding thread measures (with a
 * decode thread it overlaps generation). */
typedef struct qtts_stats {
    int n_prompt;            /* talker prompt positions (last segment) */
    int n_prompt_reused;     /* of those, leading positions not prefilled again: their K/V were
                                left by the previous prompt on this context with the same
                                voice (qtts_context_params.reuse_voice_prefix) */
    int n_frames;            /* frames generated */
    double prefill_ms;       /* prompt building + talker prefill */
    double talker_ms;        /* talker steps incl. codec_head and sampling (not the time
                                spent in on_frame callbacks, e.g. inline decoding) */
    double predictor_ms;     /* code predictor (15 codebooks per frame). On a GPU backend a frame
                                is one submission: its wall time is split between talker_ms and
                                predictor_ms in the proportion of the device's phase times */
    double decode_ms;        /* codec decoder */
    double first_audio_ms;   /* from the call (qtts_synthesize) or qtts_pipeline_add to the first PCM chunk */
    int n_chunks;            /* PCM chunks delivered */
    int n_device_codes;      /* frames the decoder read from the device that made them (GPU
                                backends: the codes were not uploaded again; 0 on the CPU) */
    int teacher_frames;      /* frames compared against teacher codes */
    int teacher_agree[64];   /* per codebook: frames where the model chose the teacher's code */
    /* GPU time from timestamp queries (Vulkan backend; 0 on the CPU), summed over the call:
       talker prefill; talker steps with codec_head; code predictor passes with their heads;
       sampling (talker and predictor draws, logits processors) */
    double gpu_prefill_ms, gpu_talker_ms, gpu_predictor_ms, gpu_sampling_ms;
} qtts_stats;

void qtts_context_get_stats(const qtts_context *ctx, qtts_stats *stats);

/* Generates codec frames for one utterance. Frames go to on_frame as they are
 * made (may be NULL) and, if codes_out is not NULL, are also collected into a
 * malloc'ed [*n_frames][16] array that the caller frees with free(). */
qtts_status qtts_generate_codes(qtts_context *ctx, const qtts_gen_params *params,
                                qtts_frame_fn on_frame, void *user,
                                int32_t **codes_out, int *n_frames);

/* ---------------------------------------------------------------- voices */

typedef struct qtts_voice_params {
    const char *ref_text;        /* transcript of the reference recording: selects in-context
                                    cloning (ICL, the official default); default NULL */
    const int32_t *ref_text_ids; /* or the transcript as ids (between the template tokens); default NULL */
    int n_ref_text_ids;          /* default 0 */
    int xvector_only;            /* 1 = speaker embedding only, no transcript needed (the official
                                    x_vector_only_mode); default 0 */
    double max_ref_seconds;      /* longest reference accepted, (0, 600]; default 60. Longer
                                    recordings are refused, never cut */
} qtts_voice_params;

qtts_voice_params qtts_voice_default_params(void);

/* Make a voice from a recording (WAV, FLAC, OGG, MP3 where libsndfile has it;
 * downmixed and resampled to 24 kHz) as the official create_voice_clone_prompt
 * does. Needs a Base model. On failure *out is NULL and errbuf says why.
 * Free with qtts_voice_free. */
qtts_status qtts_voice_from_file(const qtts_model *model, const char *audio_path, const qtts_voice_params *params,
                                 qtts_voice **out, char *errbuf, size_t errbuf_size);
/* The same from an encoded file in memory (e.g. an upload); name is for messages. */
qtts_status qtts_voice_from_memory(const qtts_model *model, const void *data, size_t size, const char *name,
                                   const qtts_voice_params *params, qtts_voice **out, char *errbuf,
                                   size_t errbuf_size);
/* The same from PCM samples (mono, any rate; resampled to 24 kHz). */
qtts_status qtts_voice_from_pcm(const qtts_model *model, const float *pcm, size_t n_samples, int sample_rate_hz,
                                const qtts_voice_params *params, qtts_voice **out, char *errbuf,
                                size_t errbuf_size);

/* Save a voice to a small versioned file (docs/API.md describes the format). */
qtts_status qtts_voice_save(const qtts_voice *voice, const char *path, char *errbuf, size_t errbuf_size);
/* Serialise to a malloc'ed buffer (caller frees with free()). */
qtts_status qtts_voice_save_memory(const qtts_voice *voice, unsigned char **data, size_t *size, char *errbuf,
                                   size_t errbuf_size);
/* Load a saved voice for this model; a voice made with another model variant
 * is an error that says which. */
qtts_status qtts_voice_load(const qtts_model *model, const char *path, qtts_voice **out, char *errbuf,
                            size_t errbuf_size);
qtts_status qtts_voice_load_memory(const qtts_model *model, const void *data, size_t size, const char *name,
                                   qtts_voice **out, char *errbuf, size_t errbuf_size);
void qtts_voice_free(qtts_voice *voice); /* accepts NULL */
/* 1 for an in-context (ICL) voice, 0 for x-vector only. */
int qtts_voice_is_icl(const qtts_voice *voice);
/* 1 when an ICL voice carries its primed decoder state (the codec stream
 * after the reference frames): made once when the voice is made, saved with
 * it (voice files of version 2) and restored instead of decoding the
 * reference again, when the loading decoder has the same weights, kernels
 * and backend (otherwise the reference is decoded again: the same audio). */
int qtts_voice_has_primed_state(const qtts_voice *voice);
/* Reference frames (ICL) and transcript of the voice ("" when none). */
int qtts_voice_n_ref_frames(const qtts_voice *voice);
const char *qtts_voice_ref_text(const qtts_voice *voice);

/* ---------------------------------------------------------------- audio */

/* How long text is cut into segments that are spoken one after another in
 * the same voice, with pauses between them (qtts_synthesize, the pipeline,
 * and the tools: CLI, script renderer, server). Sentences end at . ! ? and
 * their CJK forms and at line breaks, not after a number's decimal point or
 * a known abbreviation; sentences are grouped up to max_chars; a longer
 * sentence is cut at clause marks, then spaces, then between characters. */
typedef struct qtts_split_params {
    int enabled;            /* 1 = text longer than max_chars is split; segment i uses seed + i,
                               and memory and the KV cache stay bounded by one segment; 0 = the
                               whole text is one utterance. Default 1 */
    int max_chars;          /* longest segment in code points, >= 16; default 300 */
    int sentence_pause_ms;  /* silence between segments, [0, 10000]; default 300 */
    int paragraph_pause_ms; /* silence after a segment that ends a paragraph (blank line),
                               [0, 10000]; default 700 */
} qtts_split_params;

qtts_split_params qtts_split_default_params(void);

typedef struct qtts_audio_params {
    int first_chunk_frames; /* frames in a segment's first audio chunk, [1, 64]; smaller = earlier
                               first audio; default 1 (80 ms) */
    int chunk_frames;       /* frames per audio chunk after the first, [1, 64]; default 4 (320 ms) */
    int overlap;            /* qtts_synthesize only (a pipeline's decoding is set by its params):
                               -1 = auto: 1 when the model has more than one thread, else 0;
                               0 = decode each chunk on the calling thread between frames, on all
                               of the model's threads; 1 = decode beside generation on a thread
                               of its own that parks one of the model's workers while it decodes
                               (so the cores are not oversubscribed); a segment's first chunk is
                               still decoded on all threads, as early as possible. The same
                               samples either way. Default -1 */
    qtts_split_params split; /* text segments and pauses; default qtts_split_default_params() */
    qtts_frame_fn on_frame; /* optional observer of each generated frame (generating thread; the
                               index counts from 0 in each segment); return non-zero to stop;
                               default NULL */
    void *frame_user;       /* passed to on_frame; default NULL */
    /* Optional: called before each segment is generated (index from 0, count,
     * the segment's UTF-8 text, borrowed), on the generating thread. Return
     * non-zero to stop. With incremental text: the count is the segments known
     * so far and the text the segment's so far. Default NULL. */
    int (*on_segment)(int segment, int n_segments, const char *text, void *user);
    void *segment_user;     /* passed to on_segment; default NULL */
} qtts_audio_params;

qtts_audio_params qtts_audio_default_params(void);

/* Receives each chunk of 24 kHz mono PCM in [-1, 1] as soon as it is decoded.
 * pcm is borrowed for the duration of the call. Calls are serialised (never
 * concurrent) but, with overlap on, may come from another thread (the
 * decoding thread).
 * Return non-zero to stop synthesis cleanly (qtts_synthesize then returns
 * QTTS_ERR_CANCELLED; the audio delivered so far stays valid). */
typedef int (*qtts_audio_fn)(const float *pcm, size_t n_samples, void *user);

/* Text to speech: text segments -> frames -> audio, on the pipeline below
 * with one stream. Chunks go to on_audio (may be NULL) and, if pcm_out is
 * not NULL, the whole waveform is also returned in a malloc'ed buffer the
 * caller frees with free(). Segments are joined by their pauses.
 * The samples are identical whatever the chunk sizes (exact streaming decode).
 * For ICL voice cloning the reference part is cut as the official wrapper
 * does; see docs/API.md for the one-sample detail of streamed ICL output. */
qtts_status qtts_synthesize(qtts_context *ctx, const qtts_gen_params *params, const qtts_audio_params *audio,
                            qtts_audio_fn on_audio, void *user, float **pcm_out, size_t *n_samples);

/* ---------------------------------------------------------------- pipeline */

/* The synthesis pipeline for many requests at once (continuous batching):
 * each request's text is split into segments, each segment's frames are
 * generated with those of every other stream in one step (each weight read
 * once per frame for all), and each stream's frames are decoded to audio in
 * chunks beside generation. Requests join and leave between steps, and a
 * request's audio is bit-identical to running it alone (same seed, same
 * build, same backend): every kernel computes each row independently, and
 * each stream keeps its own caches, sampling state, RNG and codec decoder.
 * qtts_synthesize is this pipeline with one stream.
 *
 * Threads: one thread drives the pipeline (qtts_pipeline_add, _step, _wait,
 * _free); qtts_pipeline_cancel may be called from any thread. Audio and
 * on_done callbacks come from the driving thread or a decode thread,
 * serialised per request. */
typedef struct qtts_pipeline qtts_pipeline;

#define QTTS_MAX_BATCH 64 /* streams of one pipeline at most */

/* Test aids: calls out of the pipeline's threads at the points where a
 * stream's slot changes hands, so tests can hold a thread there and force
 * interleavings that load produces only by chance. Each may be NULL. */
typedef struct qtts_pipeline_debug {
    void (*slot_freed)(void *arg, int slot);     /* right after a slot was let go */
    void (*frame_decoded)(void *arg, int slot, int done, int n); /* a decode thread decoded frame done of n */
    void (*chunk_begun)(void *arg, int slot, int n, int n_threads); /* a decode thread begins a chunk of n
                                                 frames on n_threads threads */
    void (*stepped)(void *arg, int n_streams);   /* after each step, with the streams it stepped */
    void *arg;
} qtts_pipeline_debug;

typedef struct qtts_pipeline_params {
    int max_streams;        /* requests in the pipeline at once, [1, QTTS_MAX_BATCH]; each has a
                               context of its own; default 1 */
    int n_ctx;              /* talker positions per stream (0 = model maximum); default 0 */
    int decode_threads;     /* threads decoding audio beside generation, [0, 64], at most
                               max_streams (stream i -> thread i mod n), one core each; 0 = decode
                               on the driving thread between steps, on all of the model's threads
                               (a stream's first chunk as soon as its frames exist); -1 = auto: 1
                               when the model has more than one thread, else 0. Default -1 */
    int decode_share_cores; /* 1 = a decode thread with chunks to decode parks one of the model's
                               workers until it has none left (one thread at a time can), so that
                               decoding and generation together use the model's thread count;
                               0 = decode threads run beside all of the model's threads; -1 =
                               auto: 1 when the model's threads plus the decode threads exceed the
                               CPUs online. Default -1 */
    int prefill_budget_ms;  /* at each step the pipeline prefills waiting segments (new requests
                               and the next segment of running ones) one at a time, oldest
                               first, until their prefills have taken this long; the first always
                               runs. Running streams then wait at most this plus one prefill for
                               their next frame. 0 = one prefill per step. Default 100 */
    int reuse_voice_prefix; /* qtts_context_params.reuse_voice_prefix of the streams; a new
                               request goes to a free stream that last served the same voice
                               when there is one. Default 1 */
    void (*on_wake)(void *user); /* optional: called (from a decode thread) when a request's
                               state changed so that qtts_pipeline_busy or qtts_pipeline_n_free
                               may have changed; default NULL */
    void *wake_user;        /* passed to on_wake; default NULL */
    const qtts_pipeline_debug *debug; /* test aids; borrowed; default NULL */
} qtts_pipeline_params;

qtts_pipeline_params qtts_pipeline_default_params(void);

/* A piece of a request's audio. */
typedef struct qtts_chunk {
    const float *pcm;       /* 24 kHz mono in [-1, 1]; borrowed for the call */
    size_t n_samples;
    int segment;            /* text segment the samples belong to (a pause: the one before it) */
    int n_segments;         /* segments of the request */
    int pause;              /* 1 for the silence between two segments */
    double decode_ms;       /* codec decoder time for these samples (0 for a pause) */
} qtts_chunk;

/* How a request ended. */
typedef struct qtts_request_result {
    qtts_status status;       /* QTTS_OK, QTTS_ERR_CANCELLED (qtts_pipeline_cancel, a callback, or
                                 the pipeline freed) or the error of the failing stage */
    const char *error;        /* its message ("" on success); borrowed for the call */
    qtts_stop_reason stop_reason; /* how the last segment's generation ended */
    int n_frames;             /* frames generated, all segments */
    int n_segments;           /* segments of the text */
    int n_capped;             /* segments stopped by the automatic length cap */
    size_t n_samples;         /* samples delivered, pauses included */
    int has_lead_sample;      /* ICL voice, one segment: the official whole waveform starts with
                                 one more sample, lead_sample (docs/API.md); chunks never carry it */
    float lead_sample;
    qtts_stats stats;         /* where the time went, all segments */
} qtts_request_result;

typedef struct qtts_request {
    const qtts_gen_params *gen;       /* what to say and how; it and what it points to are
                                         borrowed until on_done */
    const qtts_audio_params *audio;   /* chunk sizes, segments, observers (overlap is ignored);
                                         copied; NULL = defaults */
    /* Receives the request's audio in order. Return non-zero to cancel the request. May be NULL. */
    int (*on_audio)(const qtts_chunk *chunk, void *user);
    /* Called exactly once when the request has left the pipeline; the pipeline touches nothing
     * of the request afterwards. May be NULL. */
    void (*on_done)(const qtts_request_result *result, void *user);
    void *user;
    /* 1 = incremental text: the text arrives with qtts_pipeline_push_text and
     * ends with qtts_pipeline_end_text (gen->text, if not NULL, is its first
     * piece; gen->text_ids must be NULL). Speech starts before the text is
     * complete (streaming text mode: a segment's prefill needs its first
     * token, each frame the text token it consumes; generation waits while
     * the text runs dry); for any split of the text into pieces, the codes and
     * audio are bit-identical to the same request given the whole text at
     * once. With splitting on, each sentence is a segment (docs/API.md).
     * The streaming text mode runs on the CPU backend only for now
     * (QTTS_ERR_UNSUPPORTED on Vulkan). Default 0 */
    int incremental_text;
} qtts_request;

/* A pipeline of params->max_streams streams on model m. On failure *out is
 * NULL and errbuf says why. Free with qtts_pipeline_free. */
qtts_status qtts_pipeline_new(const qtts_model *m, const qtts_pipeline_params *params, qtts_pipeline **out, char *errbuf,
                              size_t errbuf_size);
/* Requests still in it end with QTTS_ERR_CANCELLED (their on_done runs); accepts NULL. */
void qtts_pipeline_free(qtts_pipeline *p);

/* Add a request to a free stream; it is prefilled and starts generating at a
 * later qtts_pipeline_step. Checks it first (text, voice, parameters):
 * QTTS_ERR_LIMIT when no stream is free, and any error of the request, with
 * the message in errbuf; on_done is then not called. *id (may be NULL) gets
 * the request's id for qtts_pipeline_cancel. */
qtts_status qtts_pipeline_add(qtts_pipeline *p, const qtts_request *r, uint64_t *id, char *errbuf,
                              size_t errbuf_size);
/* One round: prefill waiting segments (within the prefill budget), take
 * cancelled requests out, one frame for every generating stream, hand full
 * chunks to decoding. Returns the requests still in the pipeline. */
int qtts_pipeline_step(qtts_pipeline *p);
/* 1 when a step has work: a segment waits for its prefill or a stream generates
 * (incremental text: a stream waiting for text it has not received, or a
 * prefill waiting for its first tokens, has none until text arrives). */
int qtts_pipeline_busy(const qtts_pipeline *p);
/* Requests the pipeline can take now, and requests in it. */
int qtts_pipeline_n_free(const qtts_pipeline *p);
int qtts_pipeline_n_requests(const qtts_pipeline *p);
/* Block until a step has work or no request is left, at most timeout_ms. */
void qtts_pipeline_wait(qtts_pipeline *p, int timeout_ms);
/* Cancel request id: it leaves its stream at the next step and ends with
 * QTTS_ERR_CANCELLED. No effect once it has ended. Thread-safe. */
void qtts_pipeline_cancel(qtts_pipeline *p, uint64_t id);

/* Incremental text of request id (qtts_request.incremental_text): append n
 * bytes of UTF-8 (any split, even inside a character), or end the text.
 * Thread-safe; wakes the driver (qtts_pipeline_wait, on_wake). Returns
 * QTTS_ERR_INVALID_ARG when no such request is in the pipeline (it ended, or
 * was not incremental) or the text already ended, QTTS_ERR_LIMIT when more
 * than 1 MiB waits to be taken by the driver. Invalid UTF-8 ends the request
 * with QTTS_ERR_INPUT. A request whose text never ends waits (cancel it). */
qtts_status qtts_pipeline_push_text(qtts_pipeline *p, uint64_t id, const char *text, size_t n);
qtts_status qtts_pipeline_end_text(qtts_pipeline *p, uint64_t id);

/* What the last qtts_pipeline_step did. */
typedef struct qtts_step_info {
    int n_streams;          /* streams stepped */
    int n_frames;           /* frames made */
    double step_ms;         /* the frame step, wall time, without first chunks decoded inside it */
    int n_prefills;         /* segments prefilled */
    double prefill_ms;      /* their prefills (voice priming included), wall time */
    int n_prompt;           /* their prompt positions */
    int n_prompt_reused;    /* of those, positions reused from the stream's last prompt */
} qtts_step_info;

void qtts_pipeline_last_step(const qtts_pipeline *p, qtts_step_info *info);

/* Decode saved codes [n_frames][16] to audio (whole utterance). *pcm is
 * malloc'ed; the caller frees it with free(). */
qtts_status qtts_decode_codes(qtts_context *ctx, const int32_t *codes, int n_frames, float **pcm, size_t *n_samples);

/* ---------------------------------------------------------------- audio files */

typedef enum qtts_file_format {
    QTTS_FILE_WAV = 0,  /* RIFF WAVE */
    QTTS_FILE_FLAC = 1, /* FLAC (integer samples only) */
    QTTS_FILE_RAW = 2   /* headerless little-endian PCM */
} qtts_file_format;

typedef enum qtts_sample_format {
    QTTS_SAMPLE_S16 = 0, /* 16-bit signed integer */
    QTTS_SAMPLE_F32 = 1  /* 32-bit IEEE float (WAV and raw only) */
} qtts_sample_format;

typedef struct qtts_audio_writer qtts_audio_writer;

/* Format implied by a file name's extension (.wav, .flac, .raw/.pcm); returns
 * -1 when unknown. */
int qtts_file_format_from_path(const char *path);

/* Open an audio file for writing (path "-" = standard output, raw only).
 * The file is valid after every write (its header is updated as it grows),
 * so another program can read it while it is being written.
 * Free with qtts_audio_writer_close, which finalises it. */
qtts_status qtts_audio_writer_open(qtts_audio_writer **out, const char *path, qtts_file_format format,
                                   qtts_sample_format sample_format, int sample_rate_hz, char *errbuf,
                                   size_t errbuf_size);
/* Append n samples (clipped to [-1, 1] for integer formats); flushes. */
qtts_status qtts_audio_writer_write(qtts_audio_writer *w, const float *pcm, size_t n);
/* Finalise and free; accepts NULL. Returns QTTS_ERR_IO if finalising failed. */
qtts_status qtts_audio_writer_close(qtts_audio_writer *w);
const char *qtts_audio_writer_last_error(const qtts_audio_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* QTTS_H */
