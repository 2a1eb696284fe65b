/* libFuzzer target: a safetensors file's header (length, JSON, offsets, shapes, dtypes), the
 * input being the whole file; then the fold of what it lists onto a tiny model. */
#include "checkpoint.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static RfModel *m;
  if (!m) m = rf_model_load("tiny-moe", NULL);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(RfCkptTensor));
  GError *e = NULL;
  if (rf_safetensors_parse("fuzz", data, size, size, 0, out, &e) && m) {
    char *shards[] = {"fuzz", NULL};
    RfCheckpoint c = {(RfCkptTensor *)(void *)out->data, out->len, shards, 1, 0};
    uint32_t n = 0;
    char *diff = NULL;
    RfTensor *ts = rf_checkpoint_fold(m, &c, &n, &diff);
    for (uint32_t i = 0; i < n; i++)
      g_free(ts[i].name);
    g_free(ts);
    g_free(diff);
  }
  for (guint i = 0; i < out->len; i++)
    g_free(g_array_index(out, RfCkptTensor, i).name);
  g_array_free(out, TRUE);
  g_clear_error(&e);
  return 0;
}
