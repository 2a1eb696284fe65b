#include "error.h"
#include "schedule.h"
#include "sim.h"

#include <math.h>
#include <stddef.h>
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
  c->export_host_overlap = TRUE;
  c->nemo_streams = 2;
  c->m2n_slots = 4;
  c->m2n_max_sources = 16;
  c->m2n_max_targets = 64;
  c->m2n_direct_max_sources = 32;
  c->m2n_direct_max_targets = 64;
  c->m2n_staging_max_bytes = 2147483648.0;
  c->m2n_ring_chunk_bytes = 262144.0;
  /* refit run's defaults: staging bound, lanes and operation bound chosen for each plan
   * (rf_calibration_staging, model/plan/staging.h), in every command that predicts or counts */
  c->exec_staging_bytes = 0;
  c->exec_max_ops = RF_SCHEDULE_AUTO_OPS;
  c->exec_slots = 0;
  c->exec_banks = 1;
  c->exec_lane_comms = TRUE; /* refit run's default under MPI: a communicator per lane */
}

static const char *const SOFTWARE[] = {"refit", "nemo-rl", "nccl-m2n"};
static const char *const VARIANT[] = {"flows", "python-fallback", "m2n-pack", "xfer-v0.1", "golden",
                                      "pack",  "ring-v0.1",       "direct",   "executor"};

const char *rf_software_name(RfSoftware s) {
  return SOFTWARE[s];
}

RfSwVariant rf_variant_resolve(RfSoftware s, RfSwVariant v) {
  if (v != RF_VARIANT_DEFAULT) return v;
  if (s == RF_SOFTWARE_NEMO_RL) return RF_VARIANT_M2N_PACK;
  if (s == RF_SOFTWARE_NCCL_M2N) return RF_VARIANT_PACK;
  return RF_VARIANT_DEFAULT;
}

const char *rf_variant_name(RfSoftware s, RfSwVariant v) {
  return VARIANT[rf_variant_resolve(s, v)];
}

gboolean rf_variant_is_executor(RfSoftware s, RfSwVariant v) {
  return s == RF_SOFTWARE_REFIT && rf_variant_resolve(s, v) == RF_VARIANT_EXECUTOR;
}

gboolean rf_variant_applies(RfSoftware s, int st) {
  return !(s == RF_SOFTWARE_NEMO_RL && st == RF_STRATEGY_GATHER_BROADCAST);
}

gboolean rf_software_parse(const char *software, const char *variant, RfSoftware *sw,
                           RfSwVariant *v, GError **error) {
  int s = -1, k = 0;
  if (!software) software = "refit"; /* not given: refit's own */
  for (unsigned i = 0; i < G_N_ELEMENTS(SOFTWARE); i++)
    if (!strcmp(software, SOFTWARE[i])) s = (int)i;
  if (s < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown software '%s' (refit, nemo-rl, nccl-m2n)",
                software);
    return FALSE;
  }
  /* refit's default is its executor (the schedule refit run executes); "flows" is its strategies
   * as flows at calibrated rates (RF_VARIANT_DEFAULT inside the simulator) */
  if (s == RF_SOFTWARE_REFIT && !(variant && *variant)) k = RF_VARIANT_EXECUTOR;
  if (variant && *variant && !(s == RF_SOFTWARE_REFIT && !strcmp(variant, "flows"))) {
    k = -1;
    for (unsigned i = 1; i < G_N_ELEMENTS(VARIANT); i++)
      if (!strcmp(variant, VARIANT[i])) k = (int)i;
    gboolean fits =
        (s == RF_SOFTWARE_NEMO_RL && k >= RF_VARIANT_PYTHON_FALLBACK && k <= RF_VARIANT_GOLDEN) ||
        (s == RF_SOFTWARE_NCCL_M2N && k >= RF_VARIANT_PACK && k <= RF_VARIANT_DIRECT) ||
        (s == RF_SOFTWARE_REFIT && k == RF_VARIANT_EXECUTOR);
    if (!fits) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown variant '%s' of software %s (%s)",
                  variant, SOFTWARE[s],
                  s == RF_SOFTWARE_NEMO_RL    ? "python-fallback, m2n-pack, xfer-v0.1, golden"
                  : s == RF_SOFTWARE_NCCL_M2N ? "pack, ring-v0.1, direct"
                                              : "flows, executor");
      return FALSE;
    }
  }
  *sw = (RfSoftware)s;
  *v = (RfSwVariant)k;
  return TRUE;
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

void rf_calibration_memory_run(const RfCalibration *c, int banks, RfMemoryRun *out) {
  rf_memory_run_init(out);
  out->staging_bytes = (uint64_t)c->exec_staging_bytes;
  out->max_ops = c->exec_max_ops;
  out->slots = c->exec_slots;
  out->staged = c->exec_staged;
  out->lane_comms = c->exec_lane_comms;
  out->banks = banks;
  if (c->software == RF_SOFTWARE_NEMO_RL) {
    out->bucket_bytes = (uint64_t)rf_calibration_bucket_bytes(c);
    out->buffers = c->buffers;
  }
}

#define FIELD(f) offsetof(RfCalibration, f)

/* File bounds are what a calibration may claim; fit bounds are where `refit calibrate` searches
 * (tighter: where a measured refit time can put them). */
static const RfCalibrationKey KEYS[] = {
    {"efficiency", "nic", RF_CAL_REAL, FIELD(nic_efficiency), 0.01, 1.0, 0.3, 1.0, FALSE},
    {"efficiency", "nvlink", RF_CAL_REAL, FIELD(nvlink_efficiency), 0.01, 1.0, 0, 0, FALSE},
    {"efficiency", "allgather_net", RF_CAL_REAL, FIELD(allgather_efficiency), 0.01, 1.0, 0.2, 1.0,
     FALSE},
    {"efficiency", "broadcast_net", RF_CAL_REAL, FIELD(broadcast_efficiency), 0.01, 1.0, 0.2, 1.0,
     FALSE},
    {"efficiency", "hbm", RF_CAL_REAL, FIELD(hbm_efficiency), 0.01, 1.0, 0, 0, FALSE},
    {"latency", "message_s", RF_CAL_REAL, FIELD(message_latency_s), 0, 1.0, 0.0, 1e-3, FALSE},
    {"latency", "collective_base_s", RF_CAL_REAL, FIELD(collective_base_s), 0, 1.0, 0, 0, FALSE},
    {"latency", "chunk_bytes", RF_CAL_REAL, FIELD(chunk_bytes), 1, 1e12, 0, 0, FALSE},
    {"export", "tensor_overhead_s", RF_CAL_REAL, FIELD(export_tensor_overhead_s), 0, 1.0, 0.0, 1e-3,
     FALSE},
    {"export", "host_overlap", RF_CAL_BOOL, FIELD(export_host_overlap), 0, 1, 0, 0, FALSE},
    {"m2n", "tensor_overhead_s", RF_CAL_REAL, FIELD(m2n_tensor_overhead_s), 0, 1.0, 0.0, 2e-4,
     TRUE},
    {"bucket", "gpu_memory_bytes", RF_CAL_REAL, FIELD(gpu_memory_bytes), 1e6, 1e15, 0, 0, FALSE},
    {"bucket", "memory_fraction", RF_CAL_REAL, FIELD(bucket_memory_fraction), 1e-6, 1.0, 0, 0,
     FALSE},
    {"bucket", "max_bytes", RF_CAL_REAL, FIELD(bucket_max_bytes), 1, 1e15, 0, 0, FALSE},
    {"bucket", "buffers", RF_CAL_INT, FIELD(buffers), 1, 64, 0, 0, FALSE},
    {"hybrid", "overlap", RF_CAL_BOOL, FIELD(hybrid_overlap), 0, 1, 0, 0, FALSE},
    {"refit", "fixed_s", RF_CAL_REAL, FIELD(fixed_s), 0, 1e3, 0.0, 20.0, TRUE},
    {"executor", "kernel_launch_s", RF_CAL_REAL, FIELD(exec_kernel_launch_s), 0, 1.0, 0, 0, FALSE},
    {"executor", "event_record_s", RF_CAL_REAL, FIELD(exec_event_record_s), 0, 1.0, 0, 0, FALSE},
    {"executor", "stream_wait_s", RF_CAL_REAL, FIELD(exec_stream_wait_s), 0, 1.0, 0, 0, FALSE},
    {"executor", "stream_wait_gpu_s", RF_CAL_REAL, FIELD(exec_stream_wait_gpu_s), 0, 1.0, 0, 0,
     FALSE},
    {"executor", "group_host_s", RF_CAL_REAL, FIELD(exec_group_host_s), 0, 1.0, 0, 0, FALSE},
    /* software models (sim/models/) */
    {"nemo", "streams", RF_CAL_INT, FIELD(nemo_streams), 1, 64, 0, 0, FALSE},
    {"nemo", "dispatch_s", RF_CAL_REAL, FIELD(nemo_dispatch_s), 0, 1e3, 0.0, 5.0, FALSE},
    {"nemo", "call_s", RF_CAL_REAL, FIELD(nemo_call_s), 0, 1.0, 0.0, 0.05, FALSE},
    {"nemo", "golden_dispatch_s", RF_CAL_REAL, FIELD(nemo_golden_dispatch_s), 0, 1e3, 0.0, 0.075,
     FALSE},
    {"nemo", "p2p_op_s", RF_CAL_REAL, FIELD(nemo_p2p_op_s), 0, 1.0, 0.0, 2e-3, FALSE},
    {"nemo", "nccl_op_s", RF_CAL_REAL, FIELD(nemo_nccl_op_s), 0, 1.0, 0.0, 2e-3, FALSE},
    {"vllm", "finalize_s", RF_CAL_REAL, FIELD(vllm_finalize_s), 0, 1e3, 0.0, 5.0, FALSE},
    {"m2n", "plan_s", RF_CAL_REAL, FIELD(m2n_plan_s), 0, 1.0, 0.0, 0.05, FALSE},
    {"m2n", "pack_plan_s", RF_CAL_REAL, FIELD(m2n_pack_plan_s), 0, 1.0, 0.0, 0.05, FALSE},
    {"m2n", "barrier_s", RF_CAL_REAL, FIELD(m2n_barrier_s), 0, 1.0, 0, 0, FALSE},
    {"m2n", "slots", RF_CAL_INT, FIELD(m2n_slots), 1, 64, 0, 0, FALSE},
    {"m2n", "max_sources", RF_CAL_INT, FIELD(m2n_max_sources), 1, 1 << 20, 0, 0, FALSE},
    {"m2n", "max_targets", RF_CAL_INT, FIELD(m2n_max_targets), 1, 1 << 20, 0, 0, FALSE},
    {"m2n", "direct_max_sources", RF_CAL_INT, FIELD(m2n_direct_max_sources), 1, 1 << 20, 0, 0,
     FALSE},
    {"m2n", "direct_max_targets", RF_CAL_INT, FIELD(m2n_direct_max_targets), 1, 1 << 20, 0, 0,
     FALSE},
    {"m2n", "staging_max_bytes", RF_CAL_REAL, FIELD(m2n_staging_max_bytes), 1, 1e15, 0, 0, FALSE},
    {"m2n", "ring_chunk_bytes", RF_CAL_REAL, FIELD(m2n_ring_chunk_bytes), 1, 1e12, 0, 0, FALSE},
    {"copy", "ce_row_half_bytes", RF_CAL_REAL, FIELD(ce_row_half_bytes), 0, 1e12, 0, 0, FALSE},
    /* elastic recovery (sim/recovery.c) */
    {"recovery", "init_small_ranks", RF_CAL_REAL, FIELD(recovery_init_small_ranks), 0, 1e9, 0, 0,
     FALSE},
    {"recovery", "init_small_s", RF_CAL_REAL, FIELD(recovery_init_small_s), 0, 1e6, 0, 0, FALSE},
    {"recovery", "init_large_ranks", RF_CAL_REAL, FIELD(recovery_init_large_ranks), 0, 1e9, 0, 0,
     FALSE},
    {"recovery", "init_large_s", RF_CAL_REAL, FIELD(recovery_init_large_s), 0, 1e6, 0, 0, FALSE},
    {"recovery", "shrink_fraction", RF_CAL_REAL, FIELD(recovery_shrink_fraction), 0, 1.0, 0, 0,
     FALSE},
};

const RfCalibrationKey *rf_calibration_keys(int *n) {
  *n = (int)G_N_ELEMENTS(KEYS);
  return KEYS;
}

const RfCalibrationKey *rf_calibration_key(const char *name) {
  const char *dot = strchr(name, '.');
  if (!dot) return NULL;
  for (unsigned i = 0; i < G_N_ELEMENTS(KEYS); i++)
    if (strlen(KEYS[i].group) == (size_t)(dot - name) &&
        !strncmp(name, KEYS[i].group, (size_t)(dot - name)) && !strcmp(dot + 1, KEYS[i].key))
      return &KEYS[i];
  return NULL;
}

double *rf_calibration_real(RfCalibration *c, const RfCalibrationKey *k) {
  g_assert(k->kind == RF_CAL_REAL);
  return (double *)((char *)c + k->offset);
}

/* The one writer of a key's field: v (checked by the caller) as the key's kind. */
static void store(RfCalibration *c, const RfCalibrationKey *k, double v) {
  char *field = (char *)c + k->offset;
  if (k->kind == RF_CAL_REAL)
    *(double *)field = v;
  else if (k->kind == RF_CAL_INT)
    *(int *)field = (int)v;
  else
    *(gboolean *)field = v != 0;
}

/* One key into its field: whole numbers for RF_CAL_INT, 0 or 1 for RF_CAL_BOOL. */
static gboolean read_key(GKeyFile *kf, const char *path, const RfCalibrationKey *k,
                         RfCalibration *c, GError **error) {
  double v;
  if (!rf_keyfile_number(kf, path, k->group, k->key, k->lo, k->hi, &v, error)) return FALSE;
  if (k->kind != RF_CAL_REAL && v != (double)(int)v) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: [%s] %s must be %s, got %g", path, k->group,
                k->key, k->kind == RF_CAL_BOOL ? "0 or 1" : "a whole number", v);
    return FALSE;
  }
  store(c, k, v);
  return TRUE;
}

gboolean rf_calibration_override(RfCalibration *c, const char *origin, const char *name,
                                 const char *text, GError **error) {
  const RfCalibrationKey *k = rf_calibration_key(name);
  if (!k) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [calibration] %s is not a calibration key (docs/sim.md lists them)", origin,
                name);
    return FALSE;
  }
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text || *end || !isfinite(v) || v < k->lo || v > k->hi ||
      (k->kind != RF_CAL_REAL && v != floor(v))) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [calibration] %s must be %s in [%g, %g], got '%s'", origin, name,
                k->kind == RF_CAL_REAL ? "a number" : "a whole number", k->lo, k->hi, text);
    return FALSE;
  }
  store(c, k, v);
  return TRUE;
}

gboolean rf_calibration_load(RfCalibration *c, const char *name_or_path, GError **error) {
  char *path = rf_data_resolve(name_or_path, "sim/calibration", ".cal");
  GKeyFile *kf = g_key_file_new();
  GError *e = NULL;
  RfCalibration n;
  rf_calibration_defaults(&n);
  if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "calibration %s: %s", path, e->message);
    g_error_free(e);
    goto fail;
  }
  for (unsigned i = 0; i < G_N_ELEMENTS(KEYS); i++)
    if (!read_key(kf, path, &KEYS[i], &n, error)) goto fail;
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
