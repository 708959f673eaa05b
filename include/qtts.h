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

/* Receives every diagnostic of the library. msg is borrowed for the call. */
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

/* Where the language model (prefill, talker, code predictor, sampling) runs.
 * The codec decoder and the encoders run on the CPU on every backend. */
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
    int huge_pages;          /* 1 = the matrices read every frame (talker and code predictor
                                layers and heads, as stored or quantised) are copied at load
                                into one mapping advised for 2 MiB transparent huge pages
                                (fewer TLB misses while streaming them; same values, same
                                resident size); 0 = stored ones are read in place from the
                                file mapping; default 1 */
    qtts_backend backend;    /* where the language model runs; default QTTS_BACKEND_CPU, or the
                                one the environment variable QTTS_BACKEND names ("cpu",
                                "vulkan") when it is set */
    int device;              /* device index of the backend (qtts_backend_devices); >= 0;
                                default 0, or QTTS_DEVICE when set */
    qtts_log_fn log;         /* diagnostics sink; NULL = discard; default NULL */
    void *log_user;          /* passed to log; default NULL */
} qtts_model_params;

qtts_model_params qtts_model_default_params(void);

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
    qtts_backend backend;         /* where the language model runs */
    const char *device_name;      /* the backend's device ("cpu" for the CPU backend) */
    const char *device_driver;    /* its driver ("" for the CPU backend) */
    int64_t device_bytes_allocated; /* device memory in use by buffers now (0 on the CPU) */
    int64_t device_bytes_reserved;  /* device memory allocations made (>= allocated; 0 on the CPU) */
} qtts_model_info;

void qtts_model_get_info(const qtts_model *model, qtts_model_info *info);

/* Lend one of the model's worker threads to the caller, for a program that
 * runs its own heavy work beside generation on as many cores as the model
 * has threads (e.g. a server decoding audio on a thread of its own with
 * qtts_context_audio_decode while another thread steps a batch): the worker
 * parks, idle, until qtts_model_return_thread, so the program's thread and
 * the model's threads do not oversubscribe the cores; generation meanwhile
 * runs on the calling thread and the other workers, with the same results.
 * Returns 1 when a worker was lent (it parks as soon as it finishes the task
 * it may be running), 0 when there is none to lend: the model has one
 * thread, a worker is already lent, or qtts_synthesize on this model has
 * lent one to its decoder. Lending right after a return succeeds (it may
 * wait up to 2 ms for the returned worker to free its slot). Thread-safe. */
int qtts_model_lend_thread(qtts_model *model);
/* Give the lent worker back to the pool (no-op when none is lent). */
void qtts_model_return_thread(qtts_model *model);

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
    /* Fixed template ids used when text/instruction come as ids and the
     * folder has no tokenizer (e.g. test checkpoints with a small vocabulary):
     * id of "\n" and of "user"; -1 = from the tokenizer, else the Qwen
     * vocabulary's 198 / 872. Default -1. */
    int newline_id;
    int user_id;
    /* Runaway guard: stop a piece that has not ended after 50 + 8 x (its text
     * tokens) frames (about 2.5x a normal speaking rate), keep the audio so far
     * and report QTTS_STOP_LENGTH_CAP with a warning. 0 = off (max_new_tokens
     * still applies). Default 1. */
    int auto_length_cap;
    /* Measurement aids (qtts-bench). force_frames > 0: generate exactly this
     * many frames, EOS disabled and length cap off (max_new_tokens ignored).
     * teacher_codes: [n_teacher_frames][16] codes fed back instead of the
     * model's own choices (teacher forcing); the model's choices are still
     * made and compared (qtts_context_get_stats). Defaults 0 / NULL / 0. */
    int force_frames;
    const int32_t *teacher_codes;
    int n_teacher_frames;
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
    int decode_on_model_threads; /* 1 = qtts_context_audio_begin/_decode compute on the model's
                                    threads (for a caller that decodes on the thread driving
                                    generation, between steps); 0 = on the codec decoder's own,
                                    smaller pool, safe beside generation. Same samples either
                                    way. Default 0 */
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

/* How the last generation on this context ended, and how many pieces of the
 * last qtts_synthesize call were stopped by the automatic length cap. */
qtts_stop_reason qtts_context_stop_reason(const qtts_context *ctx);
int qtts_context_n_capped_pieces(const qtts_context *ctx);

/* Where the time of the last qtts_generate_codes / qtts_synthesize went
 * (all pieces together), and teacher-forcing agreement when teacher codes
 * were given. Times are wall-clock milliseconds on the calling thread, except
 * decode_ms, which the decode worker measures (it overlaps generation). */
typedef struct qtts_stats {
    int n_prompt;            /* talker prompt positions (last piece) */
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
    double first_audio_ms;   /* from the call to the first PCM chunk (qtts_synthesize) */
    int n_chunks;            /* PCM chunks delivered */
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

/* ---------------------------------------------------------------- batches */

/* Continuous batching: several contexts (streams) stepped together, so each
 * weight is read once per frame for all of them. A stream's frames are
 * bit-identical to running it alone (same seed, same build): every kernel
 * computes each row independently, and each stream keeps its own caches,
 * sampling parameters and RNG. Streams join and leave between steps. A batch
 * and its contexts are driven from one thread at a time. */
typedef struct qtts_batch qtts_batch;

#define QTTS_MAX_BATCH 64

qtts_status qtts_batch_new(const qtts_model *model, int max_streams, qtts_batch **out);
void qtts_batch_free(qtts_batch *batch); /* accepts NULL; streams still in it are cancelled */

/* Start a generation on ctx (its prompt and prefill run now, on the calling
 * thread) and add it to the batch. Frames go to on_frame during
 * qtts_batch_step. params and its pointers must stay valid until the stream
 * leaves. QTTS_ERR_LIMIT when the batch is full. */
qtts_status qtts_batch_add(qtts_batch *batch, qtts_context *ctx, const qtts_gen_params *params,
                           qtts_frame_fn on_frame, void *user);
/* One frame for every stream; finished streams leave the batch. Returns the
 * number of streams still in it. */
int qtts_batch_step(qtts_batch *batch);
/* Take a stream out early (e.g. its client went away); its generation ends
 * with QTTS_ERR_CANCELLED. No effect if ctx is not in the batch. */
void qtts_batch_remove(qtts_batch *batch, qtts_context *ctx);
int qtts_batch_size(const qtts_batch *batch);

/* 1 while ctx has a generation in progress (in a batch or not). */
int qtts_context_is_generating(const qtts_context *ctx);
/* After a batched stream left its batch: the status of its generation
 * (message in qtts_context_last_error) and its frame count. Once per stream. */
qtts_status qtts_context_finish(qtts_context *ctx, int *n_frames);

/* Audio for batched streams: reset ctx's streaming codec decoder for a new
 * utterance (priming it with the reference codes of an ICL voice), then
 * decode frames as they come; exactly the samples qtts_synthesize gives.
 * pcm holds n_frames * samples_per_frame samples. */
qtts_status qtts_context_audio_begin(qtts_context *ctx, const qtts_gen_params *params);
qtts_status qtts_context_audio_decode(qtts_context *ctx, const int32_t *codes, int n_frames, float *pcm);

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
/* Reference frames (ICL) and transcript of the voice ("" when none). */
int qtts_voice_n_ref_frames(const qtts_voice *voice);
const char *qtts_voice_ref_text(const qtts_voice *voice);

/* ---------------------------------------------------------------- audio */

typedef struct qtts_audio_params {
    int first_chunk_frames; /* frames in the first audio chunk (>= 1); smaller = earlier first
                               audio; default 1 (80 ms) */
    int chunk_frames;       /* frames per audio chunk after the first (>= 1); default 4 (320 ms) */
    int overlap;            /* -1 = auto: 1 when the model has more than one thread, else 0;
                               0 = decode each chunk on the calling thread between frames, on
                               all of the model's threads; 1 = decode beside generation: the
                               chunks after the first are decoded by one of the model's worker
                               threads, lent to the decoder while the calling thread and the
                               other workers go on generating (a model without workers: by a
                               thread of its own); the first chunk and the chunks left when
                               generation ends are decoded on all threads. The same samples
                               either way. Default -1 (docs/BENCH.md, tenth pass: on 2 cores
                               lending a worker lowered the real-time factor 13-16 % with int8
                               and int4 weights, BF16 within its spread; first audio the same) */
    qtts_frame_fn on_frame; /* optional observer of each generated frame (generating thread);
                               return non-zero to stop; default NULL */
    void *frame_user;       /* passed to on_frame; default NULL */
    int split_text;         /* 1 = text longer than max_piece_chars is split at sentence
                               boundaries and spoken piece by piece with the same voice and
                               settings (piece i uses seed + i), joined by short pauses; the
                               KV cache and memory stay bounded by one piece. Default 1 */
    int max_piece_chars;    /* longest piece in characters (>= 16); default 300 */
    int sentence_pause_ms;  /* silence between pieces; default 300 */
    int paragraph_pause_ms; /* silence after a paragraph (blank line); default 700 */
    /* Optional: called before each piece (index from 0, count, the piece's
     * UTF-8 text, borrowed). Return non-zero to stop. Default NULL. */
    int (*on_piece)(int piece, int n_pieces, const char *text, void *user);
    void *piece_user;       /* passed to on_piece; default NULL */
} qtts_audio_params;

qtts_audio_params qtts_audio_default_params(void);

/* Receives each chunk of 24 kHz mono PCM in [-1, 1] as soon as it is decoded.
 * pcm is borrowed for the duration of the call. Calls are serialised (never
 * concurrent) but, with overlap on, may come from another thread (a model
 * worker or the decoder's own thread).
 * Return non-zero to stop synthesis cleanly (qtts_synthesize then returns
 * QTTS_ERR_CANCELLED; the audio delivered so far stays valid). */
typedef int (*qtts_audio_fn)(const float *pcm, size_t n_samples, void *user);

/* Text to speech: generates frames and decodes them to audio. Chunks go to
 * on_audio (may be NULL) and, if pcm_out is not NULL, the whole waveform is
 * also returned in a malloc'ed buffer the caller frees with free().
 * The samples are identical whatever the chunk sizes (exact streaming decode).
 * For ICL voice cloning the reference part is cut as the official wrapper
 * does; see docs/API.md for the one-sample detail of streamed ICL output. */
qtts_status qtts_synthesize(qtts_context *ctx, const qtts_gen_params *params, const qtts_audio_params *audio,
                            qtts_audio_fn on_audio, void *user, float **pcm_out, size_t *n_samples);

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
