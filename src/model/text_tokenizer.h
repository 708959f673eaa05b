/* Qwen2 byte-level BPE text tokenizer (vocab.json + merges.txt + tokenizer_config.json).
 * text -> UTF-8 check -> added tokens split out -> NFC -> regex pre-split -> GPT-2 byte symbols
 * -> BPE merges by rank -> ids. Matches the HF tokenizers Qwen2 BPE (spec/lm.md 2.4-2.5).
 * A loaded tokenizer is immutable: any number of threads may call tok_encode on it at once. */
#ifndef QTTS_MODEL_TEXT_TOKENIZER_H
#define QTTS_MODEL_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct text_tokenizer text_tokenizer;

/* dir holds vocab.json, merges.txt and (optional) tokenizer_config.json, whose
 * added_tokens_decoder lists the added/special tokens. alt_regex=1 selects the transformers-4.57
 * "fix_mistral_regex" split regex (lm.md 2.5) instead of the stock Qwen2 one.
 * Errors: QTTS_ERR_IO (missing/unreadable file), QTTS_ERR_FORMAT (malformed file, message names
 * the file and line), QTTS_ERR_NOMEM. On failure *out is NULL. The caller frees *out with tok_free. */
qtts_status tok_load(text_tokenizer **out, const char *dir, int alt_regex, qtts_error *e);

/* Frees a tokenizer; accepts NULL. */
void tok_free(text_tokenizer *t);

/* Encodes len bytes of UTF-8 text (embedded NULs are ordinary characters): added tokens are
 * matched first (longest exact match, anywhere), each remaining span is NFC-normalised,
 * pre-split by the regex and BPE-encoded. No BOS/EOS. *ids is malloc'ed (never NULL on
 * success, even when *n_ids is 0); the caller frees it with free().
 * Errors: QTTS_ERR_INPUT (invalid UTF-8; the message gives the byte offset), QTTS_ERR_LIMIT
 * (text over INT_MAX bytes, or a regex match limit hit), QTTS_ERR_NOMEM, QTTS_ERR_INVALID_ARG. */
qtts_status tok_encode(const text_tokenizer *t, const char *text, size_t len, int32_t **ids,
                       int *n_ids, qtts_error *e);

/* QTTS_ERR_INPUT when len bytes of text are not valid UTF-8, with the message "<what> is not
 * valid UTF-8 at byte offset N (why)", N counted from text. For text that is wrapped in a
 * template before tok_encode: checked alone, the offset is the one the caller knows. */
qtts_status tok_check_utf8(const char *text, size_t len, const char *what, qtts_error *e);

/* Pre-tokenisation only (for tests and debugging): the pieces BPE would see, as NUL-terminated
 * UTF-8 strings of the NFC text, added tokens as their own pieces. *pieces is a malloc'ed array
 * of malloc'ed strings; free them with tok_free_pieces. Errors as tok_encode. */
qtts_status tok_pretokenize(const text_tokenizer *t, const char *text, size_t len, char ***pieces,
                            int *n_pieces, qtts_error *e);
void tok_free_pieces(char **pieces, int n_pieces); /* accepts NULL */

/* Concatenated text of ids: byte-level symbols mapped back to bytes, added tokens verbatim.
 * *out is malloc'ed and NUL-terminated (*len excludes the NUL; it may hold invalid UTF-8 when the
 * ids split a character); the caller frees it. An id with no token -> QTTS_ERR_INPUT. */
qtts_status tok_decode(const text_tokenizer *t, const int32_t *ids, int n_ids, char **out,
                       size_t *len, qtts_error *e);

/* Id of a token string (added token content, or a vocab.json key in its byte-level form such as
 * "Ġthe"), or -1. */
int tok_token_id(const text_tokenizer *t, const char *token);

/* String of an id (added token content, or the byte-level vocab.json key), or NULL. Owned by t. */
const char *tok_token_str(const text_tokenizer *t, int id);

/* Largest id (vocab.json or added token) + 1. */
int tok_vocab_size(const text_tokenizer *t);

/* The smallest offset p such that text[p, len) is a proper prefix of an added token (text that
 * more text could turn into an added token), or len when there is none. */
size_t tok_added_prefix_at(const text_tokenizer *t, const char *text, size_t len);

/* vocab.json from buf[len] alone, for tests (the fuzz target's differential of the two readers):
 * reader 0 is the fast reader (QTTS_ERR_FORMAT for a file it leaves to jansson), 1 is jansson.
 * *out holds only the vocabulary; read it with tok_vocab_entry, free it with tok_free. */
qtts_status tok_vocab_parse(const char *buf, size_t len, int reader, text_tokenizer **out, qtts_error *e);

/* Entry k of the vocabulary, in file order: its id, its string (NUL-terminated) and length; -1
 * past the last entry. */
int32_t tok_vocab_entry(const text_tokenizer *t, int k, const char **s, size_t *len);

/* Number of added tokens and of merges loaded. */
int tok_n_added(const text_tokenizer *t);
int tok_n_merges(const text_tokenizer *t);

#endif
