/* libFuzzer target: topology files, or calibration files when built with -DFUZZ_CALIBRATION. The
 * readers take a path, so the input goes to a temporary file first. */
#ifdef FUZZ_CALIBRATION
#include "sim.h"
#define SUFFIX ".cal"
#else
#include "topology.h"
#define SUFFIX ".topo"
#endif

#include <glib/gstdio.h>
#include <stdint.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *path = NULL;
  int fd = g_file_open_tmp("refit-fuzz-XXXXXX" SUFFIX, &path, NULL);
  if (fd < 0) return 0;
  gboolean wrote = write(fd, data, size) == (ssize_t)size;
  close(fd);
  GError *e = NULL;
  if (wrote) {
#ifdef FUZZ_CALIBRATION
    RfCalibration c = {0};
    rf_calibration_defaults(&c);
    rf_calibration_load(&c, path, &e);
    rf_calibration_clear(&c);
#else
    rf_topology_free(rf_topology_load(path, &e));
#endif
  }
  g_clear_error(&e);
  g_unlink(path);
  g_free(path);
  return 0;
}
