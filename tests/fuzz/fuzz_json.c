/* libFuzzer target: the strict JSON check and parse (both flag sets). */
#include "datafile.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int f = 0; f < 2; f++) {
    GError *e = NULL;
    JsonNode *n = rf_json_parse((const char *)data, size, f ? RF_JSON_PYTHON : RF_JSON_STRICT, &e);
    if (n) json_node_unref(n);
    g_clear_error(&e);
  }
  return 0;
}
