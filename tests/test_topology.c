/* Topology files: the shipped clusters load with their figures; bad files are refused. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "topology.h"

static void test_shipped(void) {
  static const struct {
    const char *name;
    int domain;
    double nic;
  } c[] = {{"dgx-h100", 8, 400}, {"gb200-nvl72", 72, 400}, {"gb200-nvl72-800g", 72, 800}};
  for (size_t i = 0; i < G_N_ELEMENTS(c); i++) {
    GError *e = NULL;
    RfTopology *t = rf_topology_load(c[i].name, &e);
    g_assert_no_error(e);
    g_assert_cmpstr(t->name, ==, c[i].name);
    g_assert_cmpint(t->gpus_per_domain, ==, c[i].domain);
    g_assert_cmpfloat(t->nic_Gbps, ==, c[i].nic);
    g_assert_cmpint(t->nics_per_gpu, ==, 1);
    g_assert_cmpfloat(rf_topology_nic_Bps(t), ==, c[i].nic * 1e9 / 8);
    g_assert_cmpfloat(t->hbm_GBps, >, 1000);
    rf_topology_free(t);
  }
  rf_topology_free(NULL);
}

static char *write_tmp(const char *text) {
  char *path = NULL;
  int fd = g_file_open_tmp("refit-XXXXXX.topo", &path, NULL);
  close(fd);
  g_file_set_contents(path, text, -1, NULL);
  return path;
}

static const char *good =
    "[cluster]\ngpus_per_domain=4\n[nvlink]\nbandwidth_GBps=100\nlatency_us=1\n"
    "[nic]\nper_gpu=1\nbandwidth_Gbps=200\nlatency_us=2\npcie_GBps=32\n"
    "[fabric]\nkind=fat-tree\noversubscription=2\ngpus_per_leaf=16\nswitch_latency_us=0.5\n"
    "[gpu]\nhbm_GBps=2000\n";

static void test_good(void) {
  char *p = write_tmp(good);
  GError *e = NULL;
  RfTopology *t = rf_topology_load(p, &e);
  g_assert_no_error(e);
  g_assert_cmpint(t->fabric, ==, RF_FABRIC_FAT_TREE);
  g_assert_cmpfloat(t->oversubscription, ==, 2);
  rf_topology_free(t);
  g_unlink(p);
  g_free(p);
}

/* A good file with one line replaced is refused: one line naming the key and what it wants. */
typedef struct {
  const char *from, *to, *needle;
} BadTopo;

static const BadTopo bad_topos[] = {
    {"gpus_per_domain=4", "gpus_per_domain=0", "gpus_per_domain must be an integer in 1..65536"},
    {"gpus_per_domain=4", "gpus_per_domain=2.5", "integer in 1..65536, got '2.5'"},
    {"gpus_per_domain=4", "gpus_per_domain=0x10", "integer in 1..65536"},
    {"gpus_per_domain=4", "gpus_per_domain=99999999999999999999", "integer in 1..65536"},
    {"bandwidth_GBps=100", "bandwidth_GBps=fast", "bandwidth_GBps"},
    {"kind=fat-tree", "kind=torus", "rail-optimized or fat-tree"},
    {"oversubscription=2", "oversubscription=0.5", ">= 1"},
    {"bandwidth_Gbps=200", "bandwidth_Gbps=inf", "finite"},
    {"hbm_GBps=2000", "hbm_GBps=2000\n[nccl]\nbcast_channels=1000000000", "integer in 1..1024"},
    {"hbm_GBps=2000", "", "hbm_GBps"},
    {"[nic]", "[nic", ""},
    /* a NIC count that made the network lower bound 0 s (issue 10) */
    {"per_gpu=1", "per_gpu=2147483647", "[nic] per_gpu must be an integer in 1..16"},
    {"per_gpu=1", "per_gpu=-1", "integer in 1..16"},
    {"gpus_per_leaf=16", "gpus_per_leaf=2147483647",
     "gpus_per_leaf must be an integer in 1..65536"},
    {"hbm_GBps=2000", "hbm_GBps=2000\nmemory_GB=0", "memory_GB"},
    {"hbm_GBps=2000", "hbm_GBps=2000\nmemory_GB=lots", "memory_GB"},
    {"hbm_GBps=2000", "hbm_GBps=2000\n[calibration]\nefficiency.nic=0.9", "needs base="},
    {"hbm_GBps=2000", "hbm_GBps=2000\n[calibration]\nbase=dgx-h100\nnic=0.9", "GROUP.KEY=VALUE"},
    /* a misspelled key or group is refused, not ignored for its default */
    {"hbm_GBps=2000", "hbm_GBps=2000\nmemory_gb=80",
     "[gpu] unknown key 'memory_gb' (known: hbm_GBps, memory_GB)"},
    {"latency_us=2", "latency_us=2\nlatency=2", "[nic] unknown key 'latency'"},
    {"hbm_GBps=2000", "hbm_GBps=2000\n[ncl]\nbcast_channels=4", "unknown group [ncl]"},
};

static void test_bad(gconstpointer data) {
  const BadTopo *c = data;
  GString *s = g_string_new(good);
  g_string_replace(s, c->from, c->to, 1);
  char *p = write_tmp(s->str);
  g_string_free(s, TRUE);
  GError *e = NULL;
  g_autoptr(RfTopology) t = rf_topology_load(p, &e);
  g_assert_null(t);
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  if (!strstr(e->message, c->needle)) g_error("'%s' lacks '%s'", e->message, c->needle);
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
  g_unlink(p);
  g_free(p);
}

static void test_unknown(void) {
  GError *e = NULL;
  g_assert_null(rf_topology_load("no-such-cluster", &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "unknown topology"));
  g_clear_error(&e);
}

/* [gpu] memory_GB of the shipped files (datasheets), and a [calibration] base with overrides
 * kept as written (the simulator's side checks the keys). */
static void test_memory_calibration(void) {
  static const struct {
    const char *name;
    double memory_GB;
  } c[] = {{"dgx-h100", 80}, {"gb200-nvl72", 186}, {"gb200-nvl72-800g", 186}};
  GError *e = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(c); i++) {
    RfTopology *t = rf_topology_load(c[i].name, &e);
    g_assert_no_error(e);
    g_assert_cmpfloat(t->memory_GB, ==, c[i].memory_GB);
    g_assert_null(t->calibration_base);
    g_assert_nonnull(strstr(t->path, c[i].name));
    rf_topology_free(t);
  }
  char *p = g_strdup_printf("%s/tests/data/custom-cal.topo", g_getenv("REFIT_DATA_DIR"));
  RfTopology *t = rf_topology_load(p, &e);
  g_assert_no_error(e);
  g_assert_cmpstr(t->calibration_base, ==, "gb200-nvl72");
  g_assert_cmpstr(t->calibration_keys[0], ==, "efficiency.nic");
  g_assert_cmpstr(t->calibration_values[0], ==, "0.9");
  g_assert_null(t->calibration_keys[1]);
  rf_topology_free(t);
  g_free(p);
  t = rf_topology_new_domains(4);
  g_assert_cmpfloat(t->memory_GB, ==, 0);
  g_assert_null(t->path);
  rf_topology_free(t);
}

/* Every topology shipped or used by the tests loads, except the bad-*.topo files, which are
 * refused (here or by the simulator) for what they were written to show, never for an unknown
 * key. */
static void test_all_files(void) {
  const char *dirs[] = {"topologies", "tests/data", "tests/data/sim"};
  int n = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
    g_autofree char *dir = g_build_filename(g_getenv("REFIT_DATA_DIR"), dirs[i], NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    for (const char *f; (f = g_dir_read_name(d));) {
      if (!g_str_has_suffix(f, ".topo")) continue;
      g_autofree char *p = g_build_filename(dir, f, NULL);
      GError *e = NULL;
      RfTopology *t = rf_topology_load(p, &e);
      if (g_str_has_prefix(f, "bad-")) /* some are refused later, by the simulator */
        g_assert_true(t ? !e : !strstr(e->message, "unknown"));
      else
        g_assert_no_error(e);
      g_clear_error(&e);
      rf_topology_free(t);
      n++;
    }
  }
  g_assert_cmpint(n, >=, 11);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/topology/shipped", test_shipped);
  g_test_add_func("/topology/good", test_good);
  for (size_t i = 0; i < G_N_ELEMENTS(bad_topos); i++) {
    g_autofree char *path = g_strdup_printf("/topology/bad/%zu", i);
    g_test_add_data_func(path, &bad_topos[i], test_bad);
  }
  g_test_add_func("/topology/unknown", test_unknown);
  g_test_add_func("/topology/memory-calibration", test_memory_calibration);
  g_test_add_func("/topology/all-files", test_all_files);
  return g_test_run();
}
