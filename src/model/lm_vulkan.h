/* The language model on the Vulkan backend: the model-level seam that
 * src/model/generate.c calls instead of the CPU's tf_forward / cp_predict /
 * sample_token when qtts_model_params.backend is QTTS_BACKEND_VULKAN.
 * Dataflow: load -> lmv_create (every per-frame matrix uploaded once, in the
 * model's weight format) -> per context lmv_stream_new (KV caches, state,
 * recorded frame) -> per request lmv_prefill (prompt rows -> matmul
 * shaders -> caches, post-norm hidden) -> per frame lmv_frame (one
 * submission: codec_head, processors, sampling, 15 predictor passes, the
 * next input embedding and the talker step; 16 codes come back).
 * Without Vulkan in the build every entry point returns
 * QTTS_ERR_UNSUPPORTED with what to install. */
#ifndef QTTS_MODEL_LM_VULKAN_H
#define QTTS_MODEL_LM_VULKAN_H

#include "model/codec_vulkan.h"
#include "model/model.h"
#include "model/prompt.h"

typedef struct lmv_model lmv_model;   /* device + weights (one per qtts_model) */
typedef struct lmv_stream lmv_stream; /* one context's caches, state and recorded frame */

/* Create the device, upload the per-frame matrices of m (talker layers,
 * codec_head, predictor layers, heads, projection; talker codec_embedding
 * and the predictor's input tables), in m's formats. */
qtts_status lmv_create(lmv_model **out, const qtts_model *m, int device, qtts_error *e);
void lmv_free(lmv_model *v);
const qtts_device_info *lmv_device(const lmv_model *v);
/* The Vulkan device itself (for the codec decoder on the same device). */
struct vk_dev *lmv_vk_dev(const lmv_model *v);
int64_t lmv_bytes_allocated(const lmv_model *v);
int64_t lmv_bytes_reserved(const lmv_model *v);

qtts_status lmv_stream_new(const lmv_model *v, lmv_stream **out, qtts_error *e);
void lmv_stream_free(lmv_stream *s);

/* Observers (the golden tests'): with a trace the frame runs phase by phase
 * and reads back the arrays the trace wants. */
typedef struct lmv_trace {
    void *user;
    void (*on_prefill_layer)(int layer, const float *x, int n, void *user);
    void (*on_step_hidden)(int step, const float *y, int h, void *user);
    void (*on_talker_logits)(int step, const float *logits, int n, void *user);
    /* after codebook 0 is drawn: 0 when the generation stops there (the
       rest of the frame is then not run, as on the CPU, so the observers
       below see only the frames that continue) */
    int (*go_on)(int c0, void *user);
    void *go_on_user;
    void *cp_user; /* the user of the two below */
    void (*on_cp_inputs)(const float *in2, int h, void *user);
    void (*on_cp_logits)(int group, const float *logits, int n, void *user);
} lmv_trace;

/* The request's per-generation inputs. */
typedef struct lmv_request {
    const float *embeds;   /* [n_pos][H] prompt rows */
    int n_pos;
    const float *queue;    /* [n_queue][H] trailing text vectors */
    int n_queue;
    const float *tts_pad;  /* [H] */
    int max_frames;        /* frames this generation may make (sizes the KV cache) */
    const qtts_sampling *talker, *predictor;
    uint64_t seed;
    int ban_eos;           /* 1: EOS banned at every step (forced frames) */
    const int32_t *teacher;/* [n_teacher][G] or NULL */
    int n_teacher;
    int reuse;             /* leading positions whose K/V the stream's cache holds from its
                              last prompt (the same rows): the prefill starts after them */
} lmv_request;

/* Prefill the prompt (positions 0..n_pos-1) and set up the generation. */
qtts_status lmv_prefill(lmv_stream *s, const lmv_request *r, const lmv_trace *tr, double *gpu_ms, qtts_error *e);

/* GPU time of the last frame's phases (ms), and the dispatches and copies
 * of its recording (the length of its dependent chain; 0 when traced). */
typedef struct lmv_times {
    double talker, predictor, sampling;
    int dispatches, copies;
} lmv_times;

/* Make frame k (the k-th call since lmv_prefill): codes[G] get the frame
 * (codes[0] may be EOS: then the rest is meaningless and generation ends),
 * agree[G] (optional) the teacher agreement flags (agree[0] for codebook 0).
 * The talker step for the next frame runs in the same submission. */
qtts_status lmv_frame(lmv_stream *s, const lmv_trace *tr, int32_t *codes, int *agree, lmv_times *t, qtts_error *e);

/* A batched frame: one submission makes the next frame of up to
 * LMV_BATCH_MAX streams (each with its own caches, position, processors and
 * draws), reading each per-frame weight matrix once for all of them. Each
 * stream's codes, and so its audio, are bit for bit those lmv_frame gives it
 * alone, whichever streams share the batch. The batch owns the step's
 * activation rows and one recorded frame per batch size, made on first use
 * and replayed for any streams (they are named to it per frame through a
 * table of buffer addresses). Untraced streams of one model only. */
typedef struct lmv_batch lmv_batch;
#define LMV_BATCH_MAX 8 /* VK_MATVEC_MAX_N: the matvec shaders' fast case */
/* 1 when the device can run batched frames (buffer device addresses). */
int lmv_can_batch(const lmv_model *v);
qtts_status lmv_batch_new(const lmv_model *v, lmv_batch **out, qtts_error *e);
void lmv_batch_free(lmv_batch *b);
/* Frame of each of ss[0..n), 1 <= n <= LMV_BATCH_MAX, distinct streams:
 * codes[j * G .. j * G + G) and agree (optional) as lmv_frame's for ss[j];
 * t: the phase times of the whole submission. */
qtts_status lmv_batch_frame(lmv_batch *b, lmv_stream *const *ss, int n, int32_t *codes, int *agree, lmv_times *t,
                            qtts_error *e);
/* Recordings b has made (one per batch size it has run). */
int lmv_batch_recordings(const lmv_batch *b);

/* The stream's code ring: every frame's codes (EOS frames too) stay on the
 * device, frame number f (counted from lmv_stream_new, across requests) in
 * slot f % out->frames, for the codec decoder on the same device
 * (codec_stream_link_codes). lmv_frames_made: frames made so far; the one
 * lmv_frame / lmv_batch_frame returned last is number made - 1. */
void lmv_code_ring(lmv_stream *s, cdv_code_ring *out);
int64_t lmv_frames_made(const lmv_stream *s);

/* qtts_backend_devices for Vulkan. */
qtts_status lmv_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e);

#endif
