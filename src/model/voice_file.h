/* Saved voices: what a voice clone needs (x-vector, and for ICL the reference
 * codes and the reference transcript's ids), stored so that it can be reused
 * without running the speaker encoder and the codec encoder again.
 * Dataflow: voice_data <-> little-endian bytes (file or memory buffer).
 * Upstream equivalent: the VoiceClonePromptItem of QwenLM/Qwen3-TTS
 * qwen_tts/inference/qwen3_tts_model.py (ref_code, ref_spk_embedding,
 * x_vector_only_mode / icl_mode, ref_text), which upstream keeps only in
 * memory (or pickles); this format is qtts's own.
 *
 * File format, version 2 (version 1 is the same without bit 1 of the flags
 * and the primed-state block). Every integer is little-endian, written byte by
 * byte; u32 = unsigned 32-bit, i32 = two's-complement signed 32-bit, f32 =
 * IEEE-754 binary32. X, F, Q, N, L are the counts read before them.
 *
 *   offset      size    field
 *   0           8       magic, the ASCII bytes "QTTSVOIC"
 *   8           4       u32 format version (2)
 *   12          4       u32 flags: bit 0 = ICL voice (reference codes and
 *                       transcript ids follow); 0 = x-vector only. Bit 1
 *                       (version 2, ICL only) = the primed decoder state
 *                       follows the transcript. The other bits are reserved
 *                       and must be 0.
 *   16          16      model type the voice was made with: config.json
 *                       tts_model_type ("base"), printable ASCII, 1..15
 *                       bytes, NUL-padded to 16 (at least one NUL)
 *   32          16      model size: config.json tts_model_size ("0b6",
 *                       "1b7"), same encoding
 *   48          4       u32 talker hidden size, 1..VOICE_MAX_XVECTOR
 *   52          4       u32 Q = codebooks per frame (16), 1..VOICE_MAX_CODEBOOKS
 *   56          4       u32 codebook size (2048), 1..VOICE_MAX_CODEBOOK_SIZE
 *   60          4       u32 X = x-vector length (= hidden size), 1..VOICE_MAX_XVECTOR
 *   64          4X      f32 x-vector [X], every value finite
 *   A = 64+4X   4       u32 F = reference frames: ICL 1..VOICE_MAX_REF_FRAMES, else 0
 *   A+4         4FQ     i32 reference codes [F][Q], frame-major, codebook 0
 *                       first, each in [0, codebook size)
 *   B = A+4+4FQ 4       u32 N = reference transcript ids: ICL 1..VOICE_MAX_TEXT_IDS,
 *                       else 0
 *   B+4         4N      i32 ids [N], each >= 0: the transcript's tokens as
 *                       qtts_gen_params.ref_text_ids takes them (no chat template)
 *   C = B+4+4N  4       u32 L = transcript bytes, 0..VOICE_MAX_TEXT_BYTES (0 = none)
 *   C+4         L       the reference transcript, UTF-8, no NUL, no terminator
 *   P = C+4+L           only with flag bit 1, else P = D:
 *   P           8       u64 state key (codec_decoder_state_key: the decoder
 *                       weights' fingerprint, the kernel table, the backend
 *                       and the state layout); a loader whose decoder has
 *                       another key ignores the state and decodes the
 *                       reference frames again (same audio, slower start)
 *   P+8         4       f32 the reference's last decoded sample (ICL cut)
 *   P+12        8       i64 stream position in frames, >= 0
 *   P+20        4       u32 attention window length in use
 *   P+24        4       u32 S = state floats, 1..VOICE_MAX_PRIMED_FLOATS
 *   P+28        4S      f32 state [S] (codec_snapshot.state), every value finite
 *   D = P+28+4S 4       u32 CRC-32 of bytes [0, D): IEEE 802.3 polynomial
 *                       (reflected 0xEDB88320), initial value and final xor
 *                       0xFFFFFFFF, i.e. zlib's crc32()
 *   D+4                 end of file: nothing may follow
 *
 * Limits (a larger count is refused as damaged before anything is allocated):
 * x-vector 8192 values, 64 codebooks of up to 65536 codes, 7500 reference
 * frames (600 s at 12.5 frames/s, ten times the 60 s reference limit of the
 * audio reader), 65536 transcript ids, 1 MiB of transcript; so a voice file
 * is at most VOICE_MAX_FILE_BYTES (~3.3 MB plus 64 MiB of primed state; a
 * real primed state is a few MB: the codec's attention window and its
 * convolutions' left context).
 *
 * Version policy: writers always write VOICE_FORMAT_VERSION. A reader loads
 * every version from 1 up to its own and refuses a newer one with a message
 * saying a newer qtts is needed. Any change to the layout or to the meaning of
 * a field, or a new flag bit, takes a new version number.
 *
 * Every malformed input (truncated anywhere, wrong magic, newer version,
 * reserved flags, counts over the limits, out-of-range codes, non-finite
 * x-vector, bad UTF-8, CRC mismatch, bytes after the CRC) gives
 * QTTS_ERR_FORMAT with a message naming the file; a missing or unreadable
 * file gives QTTS_ERR_IO. */
#ifndef QTTS_MODEL_VOICE_FILE_H
#define QTTS_MODEL_VOICE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define VOICE_MAGIC "QTTSVOIC"
#define VOICE_FORMAT_VERSION 2u
#define VOICE_FLAG_ICL 1u
#define VOICE_FLAG_PRIMED 2u          /* version >= 2 */
#define VOICE_MAX_PRIMED_FLOATS (1u << 24)
#define VOICE_PRIMED_FIXED_BYTES 28u  /* key, ref_last, pos, kv_len, count */
#define VOICE_NAME_FIELD 16           /* bytes of the model type / size fields */
#define VOICE_MAX_XVECTOR 8192
#define VOICE_MAX_CODEBOOKS 64
#define VOICE_MAX_CODEBOOK_SIZE 65536
#define VOICE_MAX_REF_FRAMES 7500
#define VOICE_MAX_TEXT_IDS 65536
#define VOICE_MAX_TEXT_BYTES (1u << 20)
#define VOICE_HEADER_BYTES 64         /* offset of the x-vector */
#define VOICE_MAX_FILE_BYTES                                                                   \
    ((size_t)VOICE_HEADER_BYTES + 4u * VOICE_MAX_XVECTOR + 4u +                                \
     4u * (size_t)VOICE_MAX_REF_FRAMES * VOICE_MAX_CODEBOOKS + 4u + 4u * VOICE_MAX_TEXT_IDS + \
     4u + VOICE_MAX_TEXT_BYTES + VOICE_PRIMED_FIXED_BYTES + 4u * (size_t)VOICE_MAX_PRIMED_FLOATS + 4u)

/* A voice in memory. Arrays are malloc'ed and owned by the struct (voice_free). */
typedef struct voice_data {
    char model_type[VOICE_NAME_FIELD]; /* tts_model_type of the source model, "base" */
    char model_size[VOICE_NAME_FIELD]; /* tts_model_size of the source model, "0b6" / "1b7" */
    int hidden_size;                   /* talker hidden size of the source model */
    int n_codebooks;                   /* codebooks per frame Q (16) */
    int codebook_size;                 /* codes per codebook (2048) */
    int icl;                           /* 1 = ICL voice (codes + transcript ids), 0 = x-vector only */
    int xvector_len;                   /* X, = hidden_size */
    float *xvector;                    /* [xvector_len] speaker embedding */
    int n_ref_frames;                  /* F: ICL >= 1, else 0 */
    int32_t *ref_codes;                /* [n_ref_frames][n_codebooks] reference codes; NULL when F = 0 */
    int n_ref_text_ids;                /* N: ICL >= 1, else 0 */
    int32_t *ref_text_ids;             /* [n_ref_text_ids] transcript token ids; NULL when N = 0 */
    char *ref_text;                    /* UTF-8 transcript, NUL-terminated; NULL = none */
    /* ICL: the codec stream primed with the reference frames (a codec_snapshot
     * and the key of the decoder that made it); primed_state NULL = none */
    uint64_t primed_key;
    float primed_ref_last;
    int64_t primed_pos;
    int primed_kv_len;
    size_t primed_n;                   /* floats in primed_state */
    float *primed_state;
} voice_data;

/* Write v to path (created or replaced). Invalid v: QTTS_ERR_INVALID_ARG;
 * write failure: QTTS_ERR_IO. Written to a temporary file beside path and
 * renamed over it: a failure leaves no partial file and an existing file as it was. */
qtts_status voice_save(const char *path, const voice_data *v, qtts_error *e);

/* Serialise v into a malloc'ed buffer *buf of *size bytes (caller frees with free()). */
qtts_status voice_save_mem(const voice_data *v, unsigned char **buf, size_t *size, qtts_error *e);

/* Read a voice file into *v (overwritten: do not pass a voice holding
 * arrays). On failure *v is zeroed. The caller frees with voice_free. */
qtts_status voice_load(const char *path, voice_data *v, qtts_error *e);

/* The same from bytes in memory (borrowed); name labels them in messages
 * (NULL = "voice data"). */
qtts_status voice_load_mem(const void *data, size_t size, const char *name, voice_data *v, qtts_error *e);

/* Frees the arrays of v and zeroes it; accepts NULL and a zeroed voice. */
void voice_free(voice_data *v);

/* QTTS_OK when v can be used with a model of this type / size / geometry
 * (qtts_model_info's type_name, size_name, hidden_size, n_code_groups,
 * codebook_size); otherwise QTTS_ERR_INPUT with a message such as "this voice
 * was made for a Base 0.6B model (hidden 1024); the loaded model is Base 1.7B
 * (hidden 2048): ...". */
qtts_status voice_check_compatible(const voice_data *v, const char *model_type, const char *model_size,
                                   int hidden_size, int n_codebooks, int codebook_size, qtts_error *e);

/* CRC-32 (IEEE, zlib's crc32): continue crc over data[n]; start with 0. */
uint32_t voice_crc32(uint32_t crc, const void *data, size_t n);

#endif
