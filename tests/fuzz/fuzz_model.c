/* libFuzzer target: model configs (Hugging Face config.json) and tensor listings. */
#include "zoo.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  GError *e = NULL;
  RfModel *m = rf_model_from_json("fuzz", (const char *)data, (gssize)size, &e);
  rf_model_free(m);
  g_clear_error(&e);
  return 0;
}
