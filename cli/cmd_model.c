#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "error.h"
#include "report.h"
#include "zoo.h"

static int fail(GError *e) {
  return rf_cmd_exit("refit: error", e, TRUE);
}

static int model_list(void) {
  printf("# refit model list\n");
  printf("%-20s %-12s %14s %12s %10s\n", "model", "family", "params(B)", "bytes(GB)", "tensors");
  for (const char *const *n = rf_zoo_names(); *n; n++) {
    GError *e = NULL;
    RfModel *m = rf_model_load(*n, &e);
    if (!m) return fail(e);
    printf("%-20s %-12s %14.3f %12.3f %10" G_GINT64_FORMAT "\n", m->name, m->family,
           rf_model_params(m) / 1e9, rf_model_bytes(m) / 1e9,
           (gint64)rf_model_checkpoint_tensors(m));
    rf_model_free(m);
  }
  return 0;
}

static int model_show(const char *name, gboolean json) {
  GError *e = NULL;
  RfModel *m = rf_model_load(name, &e);
  if (!m) return fail(e);
  if (m->ckpt_note) /* shown, never planned: rf_model_check_plannable */
    fprintf(stderr, "refit: %s: %s; shown: the checkpoint's tensors (plan, sim, run refuse it)\n",
            m->ckpt_dir, m->ckpt_note);
  uint64_t kb[RF_KIND_COUNT] = {0}, kt[RF_KIND_COUNT] = {0}, mtp_b = 0, mtp_t = 0;
  for (uint32_t i = 0; i < m->ntensors; i++) {
    const RfTensor *t = &m->tensors[i];
    uint64_t by = (uint64_t)rf_tensor_elems(t) * rf_dtype_size(t->dtype);
    if (t->mtp) {
      mtp_b += by;
      mtp_t += rf_tensor_count(t);
    } else {
      kb[t->kind] += by;
      kt[t->kind] += rf_tensor_count(t);
    }
  }
  int64_t total = rf_model_bytes(m);
  if (json) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    rf_json_str(b, "name", m->name);
    rf_json_str(b, "family", m->family);
    rf_json_int(b, "params", rf_model_params(m));
    rf_json_int(b, "bytes", total);
    rf_json_int(b, "checkpoint_bytes", rf_model_checkpoint_bytes(m));
    if (m->quant) {
      rf_json_str(b, "quantization", m->quant);
    }
    rf_json_int(b, "tensors", rf_model_checkpoint_tensors(m));
    rf_json_int(b, "layers", m->nlayers);
    json_builder_set_member_name(b, "kinds");
    json_builder_begin_array(b);
    for (int k = 0; k <= RF_KIND_COUNT; k++) {
      uint64_t by = k < RF_KIND_COUNT ? kb[k] : mtp_b, nt = k < RF_KIND_COUNT ? kt[k] : mtp_t;
      if (!nt) continue;
      json_builder_begin_object(b);
      rf_json_str(b, "kind", k < RF_KIND_COUNT ? rf_kind_name((RfKind)k) : "mtp");
      rf_json_int(b, "tensors", (gint64)nt);
      rf_json_int(b, "bytes", (gint64)by);
      rf_json_num(b, "share", total ? (double)by / total : 0);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    rf_json_print(b);
  } else {
    printf("# refit model show %s\n", name);
    printf("# family %s, %d layers, hidden %" G_GINT64_FORMAT ", vocab %" G_GINT64_FORMAT "\n",
           m->family, m->nlayers, (gint64)m->arch.hidden, (gint64)m->arch.vocab);
    printf("params     %18" G_GINT64_FORMAT "  (%.3f B)\n", (gint64)rf_model_params(m),
           rf_model_params(m) / 1e9);
    printf("bytes      %18" G_GINT64_FORMAT "  (%.3f GB)\n", (gint64)total, total / 1e9);
    if (m->quant || m->ckpt_dir)
      printf("checkpoint %18" G_GINT64_FORMAT "  (%.3f GB %s: %s)\n",
             (gint64)rf_model_checkpoint_bytes(m), rf_model_checkpoint_bytes(m) / 1e9,
             m->ckpt_dir ? "read from" : "as published", m->ckpt_dir ? m->ckpt_dir : m->quant);
    printf("tensors    %18" G_GINT64_FORMAT "  (checkpoint tensors; %u entries with experts "
           "stacked)\n",
           (gint64)rf_model_checkpoint_tensors(m), m->ntensors);
    printf("\n%-14s %10s %14s %8s\n", "kind", "tensors", "bytes(GB)", "share(%)");
    for (int k = 0; k <= RF_KIND_COUNT; k++) {
      uint64_t by = k < RF_KIND_COUNT ? kb[k] : mtp_b, nt = k < RF_KIND_COUNT ? kt[k] : mtp_t;
      if (!nt) continue;
      printf("%-14s %10" G_GUINT64_FORMAT " %14.3f %8.2f\n",
             k < RF_KIND_COUNT ? rf_kind_name((RfKind)k) : "mtp", (guint64)nt, by / 1e9,
             total ? 100.0 * by / total : 0);
    }
  }
  rf_model_free(m);
  return 0;
}

int rf_cmd_model(int argc, char **argv) {
  gboolean json = FALSE;
  GOptionEntry entries[] = {{"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit model");
  GOptionContext *ctx = g_option_context_new("list | show NAME");
  g_option_context_set_summary(ctx,
                               "Models in the zoo. NAME may also be a path to a config.json, "
                               "a tensor listing {name: {shape, dtype}}, or a checkpoint directory "
                               "(config.json + safetensors; only the headers are read).");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  if (!rf_args_parse(ctx, &argc, &argv, TRUE, &e)) {
    g_option_context_free(ctx);
    return fail(e);
  }
  g_option_context_free(ctx);
  if (argc == 2 && !strcmp(argv[1], "list")) return model_list();
  if (argc == 3 && !strcmp(argv[1], "show")) return model_show(argv[2], json);
  return fail(g_error_new(RF_ERROR, RF_ERROR_INPUT,
                          "usage: refit model list | refit model show NAME [--json]"));
}
