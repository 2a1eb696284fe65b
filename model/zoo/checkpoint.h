/* Real checkpoints: the tensor list of a Hugging Face safetensors checkpoint, read from the
 * headers alone (8-byte little-endian header length, then the JSON header); the weights are
 * never read. A directory holds config.json and either model.safetensors.index.json with its
 * shards or a single model.safetensors.
 *
 * Validation follows the safetensors reference reader: a header of at most
 * RF_SAFETENSORS_MAX_HEADER bytes that lies within the file, strict JSON, known dtypes,
 * data_offsets [begin, end) with begin <= end that tile the data section exactly (sorted by
 * offset: no overlap, no gap, nothing past the last tensor, nothing beyond the file), and
 * end - begin == shape x dtype size. Every failure is one line; RF_ERROR_INPUT unless said. */
#ifndef RF_CHECKPOINT_H
#define RF_CHECKPOINT_H

#include "zoo.h"

#include <glib.h>
#include <stdint.h>

/* The safetensors reference limit on the JSON header (bytes); larger is RF_ERROR_LIMIT. */
#define RF_SAFETENSORS_MAX_HEADER 100000000u

typedef struct {
  char *name;
  RfDtype dtype;        /* refit's dtype (F8_E4M3 / F8_E5M2 -> fp8, F8_E8M0 -> u8) */
  const char *st_dtype; /* static: the safetensors name ("BF16", "F8_E4M3", ...) */
  int ndim;
  int64_t shape[RF_MAX_DIMS];
  int64_t begin, end; /* data_offsets: bytes within the shard's data section */
  int shard;          /* index into RfCheckpoint.shards */
} RfCkptTensor;

typedef struct {
  RfCkptTensor *tensors; /* shards in name order, each shard's tensors by offset */
  uint32_t ntensors;
  char **shards; /* file names in the directory, NULL-terminated */
  int nshards;
  int64_t bytes; /* sum of the tensors' bytes */
} RfCheckpoint;

/* Parse one safetensors file from its first len bytes (at least 8 + the header length, or the
 * whole file when shorter); file_size is the file's full size. Appends RfCkptTensor (names
 * owned by out; shard set to `shard`) to out. label prefixes every error. FALSE + one line:
 * truncated file, header length beyond the file (RF_ERROR_LIMIT past the cap), non-JSON,
 * unknown dtype, more than RF_MAX_DIMS dims (RF_ERROR_LIMIT), offsets out of order,
 * overlapping, leaving gaps or beyond the file, sizes that disagree with shape x dtype. */
gboolean rf_safetensors_parse(const char *label, const void *buf, gsize len, uint64_t file_size,
                              int shard, GArray *out, GError **error);

/* Read the headers of the checkpoint in dir (only the first 8 + header bytes of each shard).
 * Also refused: an index that is not strict JSON, names a shard that is missing or not a plain
 * file name, or disagrees with the shards about which tensor lives where; a directory with
 * neither file. Free with rf_checkpoint_free. */
RfCheckpoint *rf_checkpoint_read(const char *dir, GError **error);
void rf_checkpoint_free(RfCheckpoint *c);

/* The checkpoint as a list in the model's terms: each entry of the model's checkpoint list
 * (m->ckpt, or m->tensors when NULL) that the checkpoint holds with the same shape and dtype,
 * stacked experts kept stacked when every expert agrees; otherwise the checkpoint's own
 * tensors (kind and layer from the config entry, or from the name), then the tensors the
 * config does not name, in checkpoint order. *diff is NULL when the list equals the model's,
 * else one line: the first differing name with both shapes and dtypes, and the counts.
 * Caller frees the list (names included) and *diff. */
RfTensor *rf_checkpoint_fold(const RfModel *m, const RfCheckpoint *c, uint32_t *n, char **diff);

#endif
