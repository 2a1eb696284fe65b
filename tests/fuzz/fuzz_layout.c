/* libFuzzer target: layout strings. Input "TRAIN\nINFER": both are parsed, and when both parse
 * the preset problem of a tiny model is built (placement rules, rank limits). */
#include "layout.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 256) return 0;
  char buf[257];
  memcpy(buf, data, size);
  buf[size] = 0;
  char *nl = strchr(buf, '\n');
  const char *train = buf, *infer = nl ? nl + 1 : "TP1";
  if (nl) *nl = 0;
  RfParallel a, b;
  GError *e = NULL;
  gboolean ok = rf_parallel_parse(train, &a, &e) && rf_parallel_parse(infer, &b, &e);
  /* Worlds past 65536 ranks are legitimate and planned in seconds, but a mesh of every rank under
   * the fuzzer's instrumentation takes longer than its timeout: they are left to the scaling
   * tests, the fuzzer keeps to parsing and validation. */
  double world = (double)a.tp * a.cp * a.ep * a.etp * (a.dp ? a.dp : 1) * a.pp +
                 (double)b.tp * b.cp * b.ep * (b.dp ? b.dp : 1) * b.pp;
  if (ok && world <= 65536) {
    char *s = rf_parallel_format(&a);
    g_free(s);
    RfModel *m = rf_model_load("tiny-moe", &e);
    if (m) {
      RfProblem *p = rf_problem_new_preset(m, train, infer, rf_topology_new_domains(8), &e);
      rf_problem_free(p);
    }
  }
  g_clear_error(&e);
  return 0;
}
