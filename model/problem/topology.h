/* Cluster description: NVLink domains, NICs, fabric, memory. Read from a GKeyFile
 * (topologies/NAME.topo); the plan engine uses only the domain map and NIC count, the
 * simulator uses the rest. Bandwidths are per GPU per direction. */
#ifndef RF_TOPOLOGY_H
#define RF_TOPOLOGY_H

#include "datafile.h"
#include <glib.h>

typedef enum { RF_FABRIC_RAIL_OPTIMIZED, RF_FABRIC_FAT_TREE } RfFabric;

typedef struct {
  char *name;
  char *description;
  int gpus_per_domain;      /* GPUs in one NVLink domain */
  double nvlink_GBps;       /* per GPU per direction, peak */
  double nvlink_latency_us; /* per hop */
  int nics_per_gpu;
  double nic_Gbps;       /* per NIC per direction, line rate */
  double nic_latency_us; /* per network hop (NIC + cable) */
  double pcie_GBps;      /* GPU <-> NIC, per direction */
  RfFabric fabric;
  double
      oversubscription; /* leaf uplink : downlink bandwidth ratio denominator (1 = non-blocking) */
  int gpus_per_leaf;    /* GPUs (or rails x nodes) below one leaf switch */
  double switch_latency_us;
  double hbm_GBps;    /* device memory bandwidth for pack/unpack */
  int bcast_channels; /* rings NCCL spreads a broadcast over (gather-broadcast plans) */
  double memory_GB;   /* [gpu] memory_GB: device memory per GPU, 1e9 B; 0 when not given */
  char *path;         /* file it was read from; NULL for rf_topology_new_domains */
  /* [calibration]: base = the calibration file this topology inherits (a name under
   * sim/calibration/ or a path), NULL when none; every other key of the group, "group.key" =
   * value, overrides one key of that file. Strings as written; the simulator's side checks them. */
  char *calibration_base;
  char **calibration_keys, **calibration_values; /* NULL-terminated, same length */
} RfTopology;

/* Load NAME (a shipped topology: topologies/NAME.topo) or a path to a .topo file.
 * NULL + one-line error on a missing file, missing key or a value out of range. */
RfTopology *rf_topology_load(const char *name_or_path, GError **error);
/* A bare topology with only a domain size (the plan engine's --domain-size). */
RfTopology *rf_topology_new_domains(int gpus_per_domain);
void rf_topology_free(RfTopology *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfTopology, rf_topology_free)

/* A number that must be present in [lo, hi] (and finite) under [group] key of a GKeyFile read
 * from path: FALSE + a one-line error naming the file, group and key otherwise. Topology and
 * calibration files both read their numbers with it. */
gboolean rf_keyfile_number(GKeyFile *kf, const char *path, const char *group, const char *key,
                           double lo, double hi, double *out, GError **error);

/* NIC bandwidth in bytes per second for the lower bound. */
double rf_topology_nic_Bps(const RfTopology *t);
/* Bytes a device-to-device copy (a pack, an unpack, a framework's copy) moves per second on a GPU
 * of t whose copies reach hbm_efficiency of its HBM: hbm_GBps x hbm_efficiency / 2. The
 * efficiency is the HBM traffic a copy achieves over the peak, as CUDA's bandwidthTest counts a
 * device-to-device copy (each byte read and written: twice its size over the time); a copy's
 * payload is half of that traffic. */
double rf_topology_copy_Bps(const RfTopology *t, double hbm_efficiency);

#endif
