#include "error.h"
#include "sim.h"

#include <string.h>

void rf_calibration_defaults(RfCalibration *c) {
  memset(c, 0, sizeof *c);
  c->name = g_strdup("neutral");
  c->path = g_strdup("(built-in neutral)");
  c->nic_efficiency = 1.0;
  c->nvlink_efficiency = 1.0;
  c->allgather_efficiency = 1.0;
  c->broadcast_efficiency = 1.0;
  c->hbm_efficiency = 1.0;
  c->chunk_bytes = 524288.0;
  c->gpu_memory_bytes = 80e9;
  c->bucket_memory_fraction = 0.02;
  c->bucket_max_bytes = 5.0 * 1024 * 1024 * 1024;
  c->buffers = 2;
}

void rf_calibration_clear(RfCalibration *c) {
  if (!c) return;
  g_free(c->name);
  g_free(c->path);
  c->name = c->path = NULL;
}

double rf_calibration_bucket_bytes(const RfCalibration *c) {
  double b = c->bucket_memory_fraction * c->gpu_memory_bytes;
  return b < c->bucket_max_bytes ? b : c->bucket_max_bytes;
}

gboolean rf_calibration_load(RfCalibration *c, const char *name_or_path, GError **error) {
  char *path = rf_data_resolve(name_or_path, "sim/calibration", ".cal");
  GKeyFile *kf = g_key_file_new();
  GError *e = NULL;
  RfCalibration n;
  rf_calibration_defaults(&n);
  double buffers = 2, overlap = 0;
  if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "calibration %s: %s", path, e->message);
    g_error_free(e);
    goto fail;
  }
  if (!rf_keyfile_number(kf, path, "efficiency", "nic", 0.01, 1.0, &n.nic_efficiency, error) ||
      !rf_keyfile_number(kf, path, "efficiency", "nvlink", 0.01, 1.0, &n.nvlink_efficiency,
                         error) ||
      !rf_keyfile_number(kf, path, "efficiency", "allgather_net", 0.01, 1.0,
                         &n.allgather_efficiency, error) ||
      !rf_keyfile_number(kf, path, "efficiency", "broadcast_net", 0.01, 1.0,
                         &n.broadcast_efficiency, error) ||
      !rf_keyfile_number(kf, path, "efficiency", "hbm", 0.01, 1.0, &n.hbm_efficiency, error) ||
      !rf_keyfile_number(kf, path, "latency", "message_s", 0, 1.0, &n.message_latency_s, error) ||
      !rf_keyfile_number(kf, path, "latency", "collective_base_s", 0, 1.0, &n.collective_base_s,
                         error) ||
      !rf_keyfile_number(kf, path, "latency", "chunk_bytes", 1, 1e12, &n.chunk_bytes, error) ||
      !rf_keyfile_number(kf, path, "export", "tensor_overhead_s", 0, 1.0,
                         &n.export_tensor_overhead_s, error) ||
      !rf_keyfile_number(kf, path, "m2n", "tensor_overhead_s", 0, 1.0, &n.m2n_tensor_overhead_s,
                         error) ||
      !rf_keyfile_number(kf, path, "bucket", "gpu_memory_bytes", 1e6, 1e15, &n.gpu_memory_bytes,
                         error) ||
      !rf_keyfile_number(kf, path, "bucket", "memory_fraction", 1e-6, 1.0,
                         &n.bucket_memory_fraction, error) ||
      !rf_keyfile_number(kf, path, "bucket", "max_bytes", 1, 1e15, &n.bucket_max_bytes, error) ||
      !rf_keyfile_number(kf, path, "bucket", "buffers", 1, 64, &buffers, error) ||
      !rf_keyfile_number(kf, path, "hybrid", "overlap", 0, 1, &overlap, error) ||
      !rf_keyfile_number(kf, path, "refit", "fixed_s", 0, 1e3, &n.fixed_s, error))
    goto fail;
  n.buffers = (int)buffers;
  n.hybrid_overlap = overlap != 0;
  g_free(n.name);
  n.name = g_key_file_get_string(kf, "calibration", "name", NULL);
  if (!n.name) n.name = g_path_get_basename(path);
  g_free(n.path);
  n.path = path;
  g_key_file_free(kf);
  rf_calibration_clear(c);
  *c = n;
  return TRUE;
fail:
  g_key_file_free(kf);
  g_free(path);
  rf_calibration_clear(&n);
  return FALSE;
}

gboolean rf_calibration_for_topology(RfCalibration *c, const RfTopology *t, gboolean *found,
                                     GError **error) {
  char *path = g_strdup_printf("%s/sim/calibration/%s.cal", rf_data_dir(), t->name);
  gboolean ok = TRUE;
  *found = g_file_test(path, G_FILE_TEST_IS_REGULAR);
  if (*found) {
    ok = rf_calibration_load(c, path, error);
  } else {
    rf_calibration_clear(c);
    rf_calibration_defaults(c);
  }
  g_free(path);
  return ok;
}
