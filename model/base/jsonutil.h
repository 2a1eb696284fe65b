/* Type-checked reads from json-glib documents: a wrong type is a FALSE / NULL for the caller to
 * turn into a one-line error, never a GLib critical. Internal to model/. */
#ifndef RF_JSONUTIL_H
#define RF_JSONUTIL_H

#include <json-glib/json-glib.h>
#include <stdint.h>

static inline JsonNode *rf_json_member(JsonObject *o, const char *key) {
  return o ? json_object_get_member(o, key) : NULL;
}

static inline JsonArray *rf_json_array(JsonObject *o, const char *key) {
  JsonNode *n = rf_json_member(o, key);
  return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static inline JsonObject *rf_json_object(JsonObject *o, const char *key) {
  JsonNode *n = rf_json_member(o, key);
  return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static inline gboolean rf_json_node_string(JsonNode *n, const char **out) {
  if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) return FALSE;
  *out = json_node_get_string(n);
  return TRUE;
}

static inline const char *rf_json_string(JsonObject *o, const char *key) {
  const char *s = NULL;
  return rf_json_node_string(rf_json_member(o, key), &s) ? s : NULL;
}

/* An integer in [lo, hi]. */
static inline gboolean rf_json_node_int(JsonNode *n, int64_t lo, int64_t hi, int64_t *out) {
  if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64) return FALSE;
  int64_t v = json_node_get_int(n);
  if (v < lo || v > hi) return FALSE;
  *out = v;
  return TRUE;
}

static inline gboolean rf_json_array_int(JsonArray *a, guint i, int64_t lo, int64_t hi,
                                         int64_t *out) {
  return i < json_array_get_length(a) &&
         rf_json_node_int(json_array_get_element(a, i), lo, hi, out);
}

#endif
