#include "topology.h"
#include "error.h"

#include <math.h>
#include <string.h>

#include "datafile.h"
#include "dtensor.h"

static RfTopology *topology_defaults(void) {
  RfTopology *t = g_new0(RfTopology, 1);
  t->gpus_per_domain = 8;
  t->nics_per_gpu = 1;
  t->oversubscription = 1.0;
  t->bcast_channels = 8;
  return t;
}

RfTopology *rf_topology_new_domains(int gpus_per_domain) {
  RfTopology *t = topology_defaults();
  t->name = g_strdup_printf("domains-%d", gpus_per_domain);
  t->description = g_strdup("domain map only");
  t->gpus_per_domain = gpus_per_domain;
  /* Only the plan's lower bound reads these: a DGX H100 style 400G NIC per GPU. */
  t->nic_Gbps = 400.0;
  t->nvlink_GBps = 450.0;
  return t;
}

void rf_topology_free(RfTopology *t) {
  if (!t) return;
  g_free(t->name);
  g_free(t->description);
  g_free(t->path);
  g_free(t->calibration_base);
  g_strfreev(t->calibration_keys);
  g_strfreev(t->calibration_values);
  g_free(t);
}

double rf_topology_nic_Bps(const RfTopology *t) {
  return t->nic_Gbps * 1e9 / 8.0;
}

double rf_topology_copy_Bps(const RfTopology *t, double hbm_efficiency) {
  return t->hbm_GBps * 1e9 * hbm_efficiency / 2.0;
}

gboolean rf_keyfile_number(GKeyFile *kf, const char *path, const char *group, const char *key,
                           double lo, double hi, double *out, GError **error) {
  GError *e = NULL;
  double v = g_key_file_get_double(kf, group, key, &e);
  if (e) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [%s] %s: %s", path, group, key, e->message);
    g_error_free(e);
    return FALSE;
  }
  if (!isfinite(v) || v < lo || v > hi) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [%s] %s must be a finite number in [%g, %g], got %g", path, group, key, lo, hi,
                v);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

/* Topology figures: bandwidths and counts strictly positive, latencies may be 0. */
#define TOPO_MAX 1e12
#define TOPO_POSITIVE 1e-9
/* Integer counts: plausible ranges, far above any machine built so far (an NVL576 domain,
 * 8 NICs per GPU, 64 broadcast rings), so a typo is refused instead of planned. */
#define TOPO_MAX_DOMAIN 65536  /* gpus_per_domain */
#define TOPO_MAX_NICS 16       /* nic.per_gpu */
#define TOPO_MAX_LEAF 65536    /* fabric.gpus_per_leaf */
#define TOPO_MAX_CHANNELS 1024 /* nccl.bcast_channels */

static gboolean get_num(GKeyFile *kf, const char *path, const char *group, const char *key,
                        gboolean zero_ok, double *out, GError **error) {
  return rf_keyfile_number(kf, path, group, key, zero_ok ? 0 : TOPO_POSITIVE, TOPO_MAX, out, error);
}

/* An integer count in lo..hi, written in plain decimal. */
static gboolean get_int(GKeyFile *kf, const char *path, const char *group, const char *key, int lo,
                        int hi, int *out, GError **error) {
  GError *e = NULL;
  g_autofree char *raw = g_key_file_get_value(kf, group, key, &e);
  if (e) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [%s] %s: %s", path, group, key, e->message);
    g_error_free(e);
    return FALSE;
  }
  g_strstrip(raw);
  gint64 v = 0;
  if (!g_ascii_string_to_signed(raw, 10, lo, hi, &v, NULL)) {
    g_autofree char *shown = g_strescape(raw, NULL);
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [%s] %s must be an integer in %d..%d, got '%s'", path, group, key, lo, hi,
                shown);
    return FALSE;
  }
  *out = (int)v;
  return TRUE;
}

/* The keys of each group (docs/topologies.md); [calibration] takes any GROUP.KEY, which the
 * simulator checks against its own table. */
static const struct {
  const char *group;
  const char *const keys[5];
} topo_keys[] = {
    {"cluster", {"name", "description", "gpus_per_domain"}},
    {"nvlink", {"bandwidth_GBps", "latency_us"}},
    {"nic", {"per_gpu", "bandwidth_Gbps", "latency_us", "pcie_GBps"}},
    {"fabric", {"kind", "oversubscription", "gpus_per_leaf", "switch_latency_us"}},
    {"gpu", {"hbm_GBps", "memory_GB"}},
    {"nccl", {"bcast_channels"}},
    {"calibration", {NULL}},
};

/* Every group and key is one refit reads: a misspelled optional key would otherwise be
 * ignored and its default planned. */
static gboolean check_keys(GKeyFile *kf, const char *path, GError **error) {
  g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
  for (int g = 0; groups[g]; g++) {
    size_t i = 0;
    while (i < G_N_ELEMENTS(topo_keys) && strcmp(topo_keys[i].group, groups[g]))
      i++;
    if (i == G_N_ELEMENTS(topo_keys)) {
      g_autofree char *shown = g_strescape(groups[g], NULL);
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: unknown group [%s] (known: cluster, nvlink, nic, fabric, gpu, nccl, "
                  "calibration)",
                  path, shown);
      return FALSE;
    }
    if (!strcmp(groups[g], "calibration")) continue;
    g_auto(GStrv) keys = g_key_file_get_keys(kf, groups[g], NULL, NULL);
    for (int k = 0; keys && keys[k]; k++) {
      const char *const *known = topo_keys[i].keys;
      int j = 0;
      while (known[j] && strcmp(known[j], keys[k])) /* NULL-terminated: at most 4 keys */
        j++;
      if (known[j]) continue;
      g_autofree char *shown = g_strescape(keys[k], NULL);
      g_autofree char *list = g_strjoinv(", ", (char **)known);
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [%s] unknown key '%s' (known: %s)", path,
                  groups[g], shown, list);
      return FALSE;
    }
  }
  return TRUE;
}

/* [calibration] base=NAME|PATH and "group.key" overrides, kept as strings (model/ does not know
 * the simulator's keys). Overrides without a base are refused: they would silently apply to
 * whichever calibration the simulator picked. */
static gboolean read_calibration(GKeyFile *kf, const char *path, RfTopology *t, GError **error) {
  if (!g_key_file_has_group(kf, "calibration")) return TRUE;
  gsize n = 0;
  char **keys = g_key_file_get_keys(kf, "calibration", &n, NULL);
  t->calibration_keys = g_new0(char *, n + 1);
  t->calibration_values = g_new0(char *, n + 1);
  int k = 0;
  for (gsize i = 0; i < n; i++) {
    char *v = g_key_file_get_string(kf, "calibration", keys[i], NULL);
    if (!strcmp(keys[i], "base")) {
      g_free(t->calibration_base); /* a key given twice is listed twice; the value is the last */
      t->calibration_base = v;
    } else if (!strchr(keys[i], '.') || !v || !*v) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: [calibration] %s: want base=NAME|FILE or GROUP.KEY=VALUE", path, keys[i]);
      g_free(v);
      g_strfreev(keys);
      return FALSE;
    } else {
      t->calibration_keys[k] = g_strdup(keys[i]);
      t->calibration_values[k++] = v;
    }
  }
  g_strfreev(keys);
  if (!t->calibration_base || !*t->calibration_base) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [calibration] needs base=NAME|FILE (the calibration it inherits)", path);
    return FALSE;
  }
  return TRUE;
}

RfTopology *rf_topology_load(const char *name_or_path, GError **error) {
  g_autofree char *path = rf_data_resolve(name_or_path, "topologies", ".topo");
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown topology '%s' (no file %s)", name_or_path,
                path);
    return NULL;
  }
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(RfTopology) t = topology_defaults();
  GError *e = NULL;
  if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: %s", path, e->message);
    g_error_free(e);
    return NULL;
  }
  if (!check_keys(kf, path, error)) return NULL;
  t->name = g_key_file_get_string(kf, "cluster", "name", NULL);
  if (!t->name) t->name = g_path_get_basename(path);
  t->description = g_key_file_get_string(kf, "cluster", "description", NULL);
  if (!get_int(kf, path, "cluster", "gpus_per_domain", 1, TOPO_MAX_DOMAIN, &t->gpus_per_domain,
               error))
    return NULL;
  if (!get_num(kf, path, "nvlink", "bandwidth_GBps", FALSE, &t->nvlink_GBps, error)) return NULL;
  if (!get_num(kf, path, "nvlink", "latency_us", TRUE, &t->nvlink_latency_us, error)) return NULL;
  if (!get_int(kf, path, "nic", "per_gpu", 1, TOPO_MAX_NICS, &t->nics_per_gpu, error)) return NULL;
  if (!get_num(kf, path, "nic", "bandwidth_Gbps", FALSE, &t->nic_Gbps, error)) return NULL;
  if (!get_num(kf, path, "nic", "latency_us", TRUE, &t->nic_latency_us, error)) return NULL;
  if (!get_num(kf, path, "nic", "pcie_GBps", FALSE, &t->pcie_GBps, error)) return NULL;
  {
    g_autofree char *kind = g_key_file_get_string(kf, "fabric", "kind", NULL);
    if (!kind) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: [fabric] kind is missing (rail-optimized or fat-tree)", path);
      return NULL;
    }
    if (!strcmp(kind, "rail-optimized"))
      t->fabric = RF_FABRIC_RAIL_OPTIMIZED;
    else if (!strcmp(kind, "fat-tree"))
      t->fabric = RF_FABRIC_FAT_TREE;
    else {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: [fabric] kind must be rail-optimized or fat-tree, got '%s'", path, kind);
      return NULL;
    }
  }
  if (!get_num(kf, path, "fabric", "oversubscription", FALSE, &t->oversubscription, error))
    return NULL;
  if (t->oversubscription < 1.0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [fabric] oversubscription must be >= 1, got %g", path, t->oversubscription);
    return NULL;
  }
  if (!get_int(kf, path, "fabric", "gpus_per_leaf", 1, TOPO_MAX_LEAF, &t->gpus_per_leaf, error))
    return NULL;
  if (!get_num(kf, path, "fabric", "switch_latency_us", TRUE, &t->switch_latency_us, error))
    return NULL;
  if (!get_num(kf, path, "gpu", "hbm_GBps", FALSE, &t->hbm_GBps, error)) return NULL;
  if (g_key_file_has_key(kf, "nccl", "bcast_channels", NULL) &&
      !get_int(kf, path, "nccl", "bcast_channels", 1, TOPO_MAX_CHANNELS, &t->bcast_channels, error))
    return NULL;
  if (g_key_file_has_key(kf, "gpu", "memory_GB", NULL) &&
      !get_num(kf, path, "gpu", "memory_GB", FALSE, &t->memory_GB, error))
    return NULL;
  if (!read_calibration(kf, path, t, error)) return NULL;
  t->path = g_steal_pointer(&path);
  return g_steal_pointer(&t);
}
