/* Loading a model by name or path: a shipped config (model/configs), a config.json or tensor
 * listing on disk, or a checkpoint directory whose safetensors headers give the checkpoint list
 * (rf_model_load, zoo.h). */
#include "checkpoint.h"
#include "datafile.h"
#include "error.h"
#include "zoo.h"

#include <string.h>

/* A checkpoint directory: config.json gives the model, the safetensors headers its checkpoint. */
static RfModel *model_load_dir(const char *dir, GError **error) {
  char *label = g_path_get_basename(dir);
  char *path = g_build_filename(dir, "config.json", NULL);
  char *text = NULL;
  gsize len = 0;
  RfModel *m = NULL;
  if (rf_file_read(path, RF_MAX_INPUT_BYTES, &text, &len, error))
    m = rf_model_from_json(label, text, (gssize)len, error);
  RfCheckpoint *c = m ? rf_checkpoint_read(dir, error) : NULL;
  if (c) {
    uint32_t n = 0;
    char *diff = NULL;
    RfTensor *ts = rf_checkpoint_fold(m, c, &n, &diff);
    if (diff) { /* the checkpoint wins for what it describes */
      for (uint32_t i = 0; i < m->nckpt; i++)
        g_free(m->ckpt[i].name);
      g_free(m->ckpt);
      m->ckpt = ts;
      m->nckpt = n;
      m->ckpt_note = diff;
    } else {
      for (uint32_t i = 0; i < n; i++)
        g_free(ts[i].name);
      g_free(ts);
    }
    m->ckpt_dir = g_strdup(dir);
    rf_checkpoint_free(c);
  } else if (m) {
    rf_model_free(m);
    m = NULL;
  }
  g_free(text);
  g_free(path);
  g_free(label);
  return m;
}

gboolean rf_model_check_plannable(const RfModel *m, GError **error) {
  if (!m->ckpt_note) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "%s: %s; refit plans config.json's tensors, so it refuses a checkpoint that differs "
              "(fix config.json or the checkpoint)",
              m->ckpt_dir, m->ckpt_note);
  return FALSE;
}

RfModel *rf_model_load(const char *name_or_path, GError **error) {
  const char *const *zoo_names = rf_zoo_names();
  char *label;
  gboolean zoo_name = FALSE; /* a zoo name wins over a directory of that name in the cwd */
  for (int i = 0; zoo_names[i]; i++)
    zoo_name |= !strcmp(zoo_names[i], name_or_path);
  if (!zoo_name && g_file_test(name_or_path, G_FILE_TEST_IS_DIR))
    return model_load_dir(name_or_path, error);
  if (strchr(name_or_path, '/') || g_str_has_suffix(name_or_path, ".json")) {
    label = g_path_get_basename(name_or_path);
    if (g_str_has_suffix(label, ".json")) label[strlen(label) - 5] = 0;
  } else {
    gboolean known = FALSE;
    for (int i = 0; zoo_names[i]; i++)
      known |= !strcmp(zoo_names[i], name_or_path);
    if (!known) {
      char *list = g_strjoinv(", ", (char **)zoo_names);
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "unknown model '%s' (known: %s; or a path to a config.json)", name_or_path, list);
      g_free(list);
      return NULL;
    }
    label = g_strdup(name_or_path);
  }
  char *path = rf_data_resolve(name_or_path, "model/configs", ".json");
  char *text = NULL;
  gsize len = 0;
  RfModel *m = NULL;
  if (rf_file_read(path, RF_MAX_INPUT_BYTES, &text, &len, error))
    m = rf_model_from_json(label, text, (gssize)len, error);
  else
    g_prefix_error(error, "model '%s': ", name_or_path);
  g_free(text);
  g_free(path);
  g_free(label);
  return m;
}
