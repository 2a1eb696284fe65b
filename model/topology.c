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

static gboolean get_num(GKeyFile *kf, const char *path, const char *group, const char *key,
                        gboolean zero_ok, double *out, GError **error) {
  return rf_keyfile_number(kf, path, group, key, zero_ok ? 0 : TOPO_POSITIVE, TOPO_MAX, out, error);
}

static gboolean get_int(GKeyFile *kf, const char *path, const char *group, const char *key,
                        int *out, GError **error) {
  double v;
  if (!get_num(kf, path, group, key, FALSE, &v, error)) return FALSE;
  if (v > INT32_MAX || v != (double)(int)v) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [%s] %s must be a whole number, got %g", path,
                group, key, v);
    return FALSE;
  }
  *out = (int)v;
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
  char *path = rf_data_resolve(name_or_path, "topologies", ".topo");
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown topology '%s' (no file %s)", name_or_path,
                path);
    g_free(path);
    return NULL;
  }
  GKeyFile *kf = g_key_file_new();
  RfTopology *t = topology_defaults();
  GError *e = NULL;
  if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: %s", path, e->message);
    g_error_free(e);
    goto fail;
  }
  t->name = g_key_file_get_string(kf, "cluster", "name", NULL);
  if (!t->name) t->name = g_path_get_basename(path);
  t->description = g_key_file_get_string(kf, "cluster", "description", NULL);
  if (!get_int(kf, path, "cluster", "gpus_per_domain", &t->gpus_per_domain, error)) goto fail;
  if (t->gpus_per_domain >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [cluster] gpus_per_domain must be below %d",
                path, RF_MAX_RANKS);
    goto fail;
  }
  if (!get_num(kf, path, "nvlink", "bandwidth_GBps", FALSE, &t->nvlink_GBps, error)) goto fail;
  if (!get_num(kf, path, "nvlink", "latency_us", TRUE, &t->nvlink_latency_us, error)) goto fail;
  if (!get_int(kf, path, "nic", "per_gpu", &t->nics_per_gpu, error)) goto fail;
  if (!get_num(kf, path, "nic", "bandwidth_Gbps", FALSE, &t->nic_Gbps, error)) goto fail;
  if (!get_num(kf, path, "nic", "latency_us", TRUE, &t->nic_latency_us, error)) goto fail;
  if (!get_num(kf, path, "nic", "pcie_GBps", FALSE, &t->pcie_GBps, error)) goto fail;
  {
    char *kind = g_key_file_get_string(kf, "fabric", "kind", NULL);
    if (!kind) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: [fabric] kind is missing (rail-optimized or fat-tree)", path);
      goto fail;
    }
    if (!strcmp(kind, "rail-optimized"))
      t->fabric = RF_FABRIC_RAIL_OPTIMIZED;
    else if (!strcmp(kind, "fat-tree"))
      t->fabric = RF_FABRIC_FAT_TREE;
    else {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: [fabric] kind must be rail-optimized or fat-tree, got '%s'", path, kind);
      g_free(kind);
      goto fail;
    }
    g_free(kind);
  }
  if (!get_num(kf, path, "fabric", "oversubscription", FALSE, &t->oversubscription, error))
    goto fail;
  if (t->oversubscription < 1.0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [fabric] oversubscription must be >= 1, got %g", path, t->oversubscription);
    goto fail;
  }
  if (!get_int(kf, path, "fabric", "gpus_per_leaf", &t->gpus_per_leaf, error)) goto fail;
  if (!get_num(kf, path, "fabric", "switch_latency_us", TRUE, &t->switch_latency_us, error))
    goto fail;
  if (!get_num(kf, path, "gpu", "hbm_GBps", FALSE, &t->hbm_GBps, error)) goto fail;
  if (g_key_file_has_key(kf, "nccl", "bcast_channels", NULL) &&
      !get_int(kf, path, "nccl", "bcast_channels", &t->bcast_channels, error))
    goto fail;
  if (t->bcast_channels > 1024) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [nccl] bcast_channels must be 1..1024, got %d", path, t->bcast_channels);
    goto fail;
  }
  if (g_key_file_has_key(kf, "gpu", "memory_GB", NULL) &&
      !get_num(kf, path, "gpu", "memory_GB", FALSE, &t->memory_GB, error))
    goto fail;
  if (!read_calibration(kf, path, t, error)) goto fail;
  t->path = path;
  g_key_file_free(kf);
  return t;
fail:
  g_key_file_free(kf);
  g_free(path);
  rf_topology_free(t);
  return NULL;
}
