/* The backends this build holds, by name: host always, cuda when CUDA and NCCL were found at
 * configure time (REFIT_HAVE_CUDA: backend_cuda.cu is compiled). */
#include "backend.h"

#include <string.h>

#ifdef REFIT_HAVE_CUDA
extern const RfDevOps rf_dev_cuda_ops;
const RfDevOps *const rf_dev_cuda = &rf_dev_cuda_ops;
#else
const RfDevOps *const rf_dev_cuda = NULL;
#endif

const RfDevOps *rf_boot_dev_ops(const char *name) {
  if (!name || !strcmp(name, "host")) return &rf_dev_host;
  if (!strcmp(name, "cuda")) return rf_dev_cuda;
  return NULL;
}
