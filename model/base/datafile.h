/* Reading refit's inputs: where named data lives (topologies/, model/configs/,
 * sim/calibration/), bounded file reads, and strict JSON. Every reader of a user file goes
 * through here, so size caps, non-regular files and malformed JSON get the same one-line
 * errors everywhere. */
#ifndef RF_DATAFILE_H
#define RF_DATAFILE_H

#include <glib.h>
#include <json-glib/json-glib.h>

/* REFIT_DATA_DIR, or the source tree the binary was built from. */
const char *rf_data_dir(void);

/* A user's NAME or PATH: a path (it has a '/' or ends in ext) is returned as given, a name
 * becomes DATA_DIR/subdir/NAME.ext. Free with g_free. */
char *rf_data_resolve(const char *name_or_path, const char *subdir, const char *ext);

/* Largest input file refit reads (specs, configs, listings, topologies, measurements). */
#define RF_MAX_INPUT_BYTES (256u << 20)
/* Deepest JSON nesting accepted. */
#define RF_JSON_MAX_DEPTH 256

/* Read a regular file of at most max_bytes into a NUL-terminated buffer. FALSE + one-line
 * error: RF_ERROR_INPUT when it is missing or not a regular file, RF_ERROR_LIMIT when larger. */
gboolean rf_file_read(const char *path, gsize max_bytes, char **text, gsize *len, GError **error);

typedef enum {
  RF_JSON_STRICT = 0,
  /* Accept Infinity, -Infinity and NaN as Python's json module writes them (Hugging Face
   * config.json); they read as null. Nothing else beyond RFC 8259 is ever accepted. */
  RF_JSON_PYTHON = 1 << 0,
} RfJsonFlags;

/* Check text against RFC 8259 (UTF-8, one value, no comments, hex, leading zeros, trailing
 * commas or raw control characters; at most RF_JSON_MAX_DEPTH deep). FALSE + one-line error
 * "line L column C: what" (RF_ERROR_INPUT, RF_ERROR_LIMIT for the depth). */
gboolean rf_json_check(const char *text, gsize len, RfJsonFlags flags, GError **error);

/* rf_json_check, then parse: the root node (free with json_node_unref) or NULL + error. */
JsonNode *rf_json_parse(const char *text, gsize len, RfJsonFlags flags, GError **error);

/* rf_file_read + rf_json_parse; errors are prefixed with the path. */
JsonNode *rf_json_load(const char *path, RfJsonFlags flags, GError **error);

#endif
