/* `refit topology show|check NAME|FILE`: every key of a topology file as the tools read it, and
 * whether the file (with the calibration it names) is usable. The keys: docs/topologies.md. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "error.h"
#include "predict.h"
#include "report.h"
#include "topology.h"

typedef struct {
  const char *group, *key, *unit;
  double value;
} Key;

static int topo_keys(const RfTopology *t, Key *k) {
  int n = 0;
#define K(g, name, u, v) k[n++] = (Key){g, name, u, (double)(v)}
  K("cluster", "gpus_per_domain", "GPUs", t->gpus_per_domain);
  K("nvlink", "bandwidth_GBps", "GB/s per GPU per direction", t->nvlink_GBps);
  K("nvlink", "latency_us", "us per hop", t->nvlink_latency_us);
  K("nic", "per_gpu", "NICs", t->nics_per_gpu);
  K("nic", "bandwidth_Gbps", "Gb/s per NIC per direction", t->nic_Gbps);
  K("nic", "latency_us", "us per network hop", t->nic_latency_us);
  K("nic", "pcie_GBps", "GB/s GPU<->NIC per direction", t->pcie_GBps);
  K("fabric", "oversubscription", "leaf downlink : uplink", t->oversubscription);
  K("fabric", "gpus_per_leaf", "GPUs below one leaf", t->gpus_per_leaf);
  K("fabric", "switch_latency_us", "us per switch", t->switch_latency_us);
  K("gpu", "hbm_GBps", "GB/s per GPU", t->hbm_GBps);
  K("gpu", "memory_GB", "GB per GPU (0: not given)", t->memory_GB);
  K("nccl", "bcast_channels", "rings", t->bcast_channels);
#undef K
  return n;
}

static const char *fabric_name(const RfTopology *t) {
  return t->fabric == RF_FABRIC_RAIL_OPTIMIZED ? "rail-optimized" : "fat-tree";
}

static void show_json(const RfTopology *t, const char *cal_source) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  rf_json_str(b, "name", t->name);
  rf_json_str(b, "path", t->path);
  rf_json_str(b, "description", t->description ? t->description : "");
  rf_json_str(b, "fabric.kind", fabric_name(t));
  Key k[32];
  int n = topo_keys(t, k);
  for (int i = 0; i < n; i++) {
    char *name = g_strdup_printf("%s.%s", k[i].group, k[i].key);
    rf_json_num(b, name, k[i].value);
    g_free(name);
  }
  rf_json_str(b, "calibration", cal_source);
  json_builder_end_object(b);
  rf_json_print(b);
}

static void show_table(const RfTopology *t, const char *cal_source) {
  printf("# refit topology show %s (%s)\n", t->name, t->path);
  if (t->description) printf("# %s\n", t->description);
  printf("%-30s %14s  %s\n", "[group] key", "value", "unit");
  printf("%-30s %14s  %s\n", "[fabric] kind", fabric_name(t), "");
  Key k[32];
  int n = topo_keys(t, k);
  for (int i = 0; i < n; i++) {
    char *name = g_strdup_printf("[%s] %s", k[i].group, k[i].key);
    printf("%-30s %14.6g  %s\n", name, k[i].value, k[i].unit);
    g_free(name);
  }
  if (t->calibration_base) {
    printf("%-30s %14s  %s\n", "[calibration] base", t->calibration_base, "");
    for (int i = 0; t->calibration_keys[i]; i++) {
      char *name = g_strdup_printf("[calibration] %s", t->calibration_keys[i]);
      printf("%-30s %14s  %s\n", name, t->calibration_values[i], "override");
      g_free(name);
    }
  }
  printf("# calibration used by sim, advise and step: %s\n", cal_source);
}

int rf_cmd_topology(int argc, char **argv) {
  gboolean json = FALSE;
  GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON instead of a table (show)", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit topology");
  GOptionContext *ctx = g_option_context_new("show|check NAME|FILE - read a topology file");
  g_option_context_set_summary(
      ctx, "show: every key as the tools read it, and the calibration a prediction will use.\n"
           "check: load the file and its calibration; print OK or the one thing that is wrong.\n"
           "NAME is a shipped topology (topologies/NAME.topo); the keys: docs/topologies.md.");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  RfTopology *t = NULL;
  RfCalibration cal = {0};
  char *source = NULL;
  gboolean neutral = FALSE;
  if (!rf_args_parse(ctx, &argc, &argv, TRUE, &e)) goto out;
  if (argc != 3 || (strcmp(argv[1], "show") && strcmp(argv[1], "check"))) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "usage: refit topology show|check NAME|FILE");
    goto out;
  }
  t = rf_topology_load(argv[2], &e);
  if (!t) goto out;
  if (!rf_calibration_select(&cal, NULL, t, &source, &neutral, &e)) goto out;
  if (!strcmp(argv[1], "check")) {
    printf("%s: OK (%s, %d GPUs/domain, %s; calibration %s)\n", t->path, t->name,
           t->gpus_per_domain, fabric_name(t), source);
    if (neutral)
      g_printerr("refit topology: note: no calibration for '%s': predictions use the neutral one "
                 "(add [calibration] base=NAME, docs/topologies.md)\n",
                 t->name);
    if (t->memory_GB <= 0)
      g_printerr("refit topology: note: no [gpu] memory_GB: plan and sim cannot check memory\n");
  } else if (json) {
    show_json(t, source);
  } else {
    show_table(t, source);
  }
out:
  rf_calibration_clear(&cal);
  g_free(source);
  rf_topology_free(t);
  g_option_context_free(ctx);
  return rf_cmd_exit("refit topology", e, TRUE);
}
