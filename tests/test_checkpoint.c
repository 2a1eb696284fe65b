/* Real checkpoints: safetensors headers written on the fly (zero-filled, sparse data) for every
 * tiny family config; the header-derived list must equal the config-derived one. Malformed
 * headers and indexes are refused in one line with RF_ERROR_INPUT. */
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "error.h"
#include "zoo.h"

static const char *st_name(RfDtype d) {
  switch (d) {
  case RF_DT_BF16:
    return "BF16";
  case RF_DT_FP16:
    return "F16";
  case RF_DT_FP32:
    return "F32";
  case RF_DT_FP8:
    return "F8_E4M3";
  case RF_DT_U8:
    return "U8";
  default:
    g_error("dtype %s not written by these tests", rf_dtype_name(d));
  }
}

/* One checkpoint tensor as a writer sees it. */
typedef struct {
  char *name;
  const char *dtype;
  int ndim;
  int64_t shape[RF_MAX_DIMS];
  int64_t bytes;
} Ent;

static void ent_clear(gpointer p) {
  g_free(((Ent *)p)->name);
}

/* The model's checkpoint list with stacked experts expanded. */
static GArray *expand(const RfModel *m) {
  const RfTensor *ts = m->ckpt ? m->ckpt : m->tensors;
  uint32_t n = m->ckpt ? m->nckpt : m->ntensors;
  GArray *out = g_array_new(FALSE, TRUE, sizeof(Ent));
  g_array_set_clear_func(out, ent_clear);
  for (uint32_t i = 0; i < n; i++) {
    const RfTensor *t = &ts[i];
    int s = t->nexperts > 0;
    for (int64_t e = 0; e < rf_tensor_count(t); e++) {
      Ent x = {rf_tensor_name(t, e), st_name(t->dtype), t->ndim - s, {0}, rf_dtype_size(t->dtype)};
      for (int d = 0; d < x.ndim; d++) {
        x.shape[d] = t->shape[d + s];
        x.bytes *= x.shape[d];
      }
      g_array_append_val(out, x);
    }
  }
  return out;
}

/* A safetensors file: the header (padded with spaces to 8 bytes, as the reference writer does)
 * and data_bytes of zeros, written sparse. */
static void write_raw(const char *path, const char *header, int64_t data_bytes) {
  gsize n = strlen(header), pad = (8 - n % 8) % 8;
  GString *s = g_string_sized_new(8 + n + pad);
  guint64 len = n + pad;
  for (int i = 0; i < 8; i++)
    g_string_append_c(s, (char)(len >> (8 * i) & 0xff));
  g_string_append(s, header);
  for (gsize i = 0; i < pad; i++)
    g_string_append_c(s, ' ');
  GError *e = NULL;
  g_assert_true(g_file_set_contents(path, s->str, (gssize)s->len, &e));
  g_assert_no_error(e);
  g_assert_cmpint(truncate(path, (off_t)(s->len + data_bytes)), ==, 0);
  g_string_free(s, TRUE);
}

/* Entries [lo, hi) of es as one shard, packed in list order. */
static void write_shard(const char *path, const GArray *es, guint lo, guint hi) {
  GString *h = g_string_new("{\"__metadata__\":{\"format\":\"pt\"}");
  int64_t off = 0;
  for (guint i = lo; i < hi; i++) {
    const Ent *x = &g_array_index(es, Ent, i);
    g_string_append_printf(h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", x->name, x->dtype);
    for (int d = 0; d < x->ndim; d++)
      g_string_append_printf(h, "%s%lld", d ? "," : "", (long long)x->shape[d]);
    g_string_append_printf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                           (long long)(off + x->bytes));
    off += x->bytes;
  }
  g_string_append_c(h, '}');
  write_raw(path, h->str, off);
  g_string_free(h, TRUE);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char *p = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(p, text, -1, NULL));
  g_free(p);
}

/* A checkpoint of es in dir: nshards shards and an index, or a single model.safetensors. */
static void write_ckpt(const char *dir, const GArray *es, int nshards) {
  if (nshards == 0) {
    char *p = g_build_filename(dir, "model.safetensors", NULL);
    write_shard(p, es, 0, es->len);
    g_free(p);
    return;
  }
  GString *idx = g_string_new("{\"metadata\":{\"total_size\":0},\"weight_map\":{");
  for (int s = 0; s < nshards; s++) {
    guint lo = es->len * s / nshards, hi = es->len * (s + 1) / nshards;
    char *f = g_strdup_printf("model-%05d-of-%05d.safetensors", s + 1, nshards);
    char *p = g_build_filename(dir, f, NULL);
    write_shard(p, es, lo, hi);
    for (guint i = lo; i < hi; i++)
      g_string_append_printf(idx, "%s\"%s\":\"%s\"", idx->str[idx->len - 1] == '{' ? "" : ",",
                             g_array_index(es, Ent, i).name, f);
    g_free(p);
    g_free(f);
  }
  g_string_append(idx, "}}");
  write_file(dir, "model.safetensors.index.json", idx->str);
  g_string_free(idx, TRUE);
}

static char *tmpdir(void) {
  GError *e = NULL;
  char *d = g_dir_make_tmp("refit-ckpt-XXXXXX", &e);
  g_assert_no_error(e);
  return d;
}

static void rm_tree(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  while (d && (n = g_dir_read_name(d))) {
    char *p = g_build_filename(dir, n, NULL);
    g_unlink(p);
    g_free(p);
  }
  if (d) g_dir_close(d);
  g_rmdir(dir);
}

static char *read_config(const char *rel) {
  char *path = g_build_filename(g_getenv("REFIT_DATA_DIR"), rel, NULL), *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_free(path);
  return text;
}

static void assert_same_list(const RfTensor *a, uint32_t na, const RfTensor *b, uint32_t nb) {
  g_assert_cmpuint(na, ==, nb);
  for (uint32_t i = 0; i < na; i++) {
    g_assert_cmpstr(a[i].name, ==, b[i].name);
    g_assert_cmpint(a[i].ndim, ==, b[i].ndim);
    g_assert_cmpmem(a[i].shape, sizeof(int64_t) * a[i].ndim, b[i].shape,
                    sizeof(int64_t) * b[i].ndim);
    g_assert_cmpint(a[i].dtype, ==, b[i].dtype);
    g_assert_cmpint(a[i].kind, ==, b[i].kind);
    g_assert_cmpint(a[i].layer, ==, b[i].layer);
    g_assert_cmpint(a[i].nexperts, ==, b[i].nexperts);
  }
}

/* Every family: the checkpoint written from the config reads back as the config's list. */
static const char *const families[] = {
    "tests/data/tiny/llama.json",      "tests/data/tiny/mixtral.json",
    "tests/data/tiny/minimax-m2.json", "tests/data/tiny/glm4-moe.json",
    "tests/data/tiny/glm5.json",       "tests/data/tiny/qwen3.5-moe.json",
    "tests/data/tiny/qwen3.5.json",    "tests/data/tiny/gpt-oss.json",
    "model/configs/tiny-hybrid.json",  "model/configs/tiny-kimi.json",
    "model/configs/tiny-mla.json",     "model/configs/tiny-moe.json",
    "model/configs/tiny-next.json",    "fp8", /* tiny-mla with 16x16 FP8 blocks */
};

static char *family_config(const char *f) {
  if (strcmp(f, "fp8")) return read_config(f);
  char *text = read_config("model/configs/tiny-mla.json");
  GString *out = g_string_new(text);
  g_free(text);
  while (out->len > 0 && out->str[out->len - 1] != '}')
    g_string_truncate(out, out->len - 1);
  g_string_truncate(out, out->len - 1); /* the closing brace */
  g_string_append(out, ", \"quantization_config\": {\"quant_method\": \"fp8\", "
                       "\"fmt\": \"e4m3\", \"weight_block_size\": [16, 16]}}");
  return g_string_free(out, FALSE);
}

static void test_family(gconstpointer data) {
  const char *f = data;
  char *dir = tmpdir(), *cfg = family_config(f);
  GError *e = NULL;
  RfModel *m = rf_model_from_json("cfg", cfg, -1, &e);
  g_assert_no_error(e);
  GArray *es = expand(m);
  write_file(dir, "config.json", cfg);
  for (int nshards = 0; nshards <= 3; nshards += 3) {
    write_ckpt(dir, es, nshards);
    RfCheckpoint *c = rf_checkpoint_read(dir, &e);
    g_assert_no_error(e);
    g_assert_cmpuint(c->ntensors, ==, es->len);
    g_assert_cmpint(c->bytes, ==, rf_model_checkpoint_bytes(m));
    g_assert_cmpint(c->nshards, ==, nshards ? nshards : 1);
    uint32_t n = 0;
    char *diff = NULL;
    RfTensor *ts = rf_checkpoint_fold(m, c, &n, &diff);
    g_assert_null(diff);
    assert_same_list(ts, n, m->ckpt ? m->ckpt : m->tensors, m->ckpt ? m->nckpt : m->ntensors);
    for (uint32_t i = 0; i < n; i++)
      g_free(ts[i].name);
    g_free(ts);
    rf_checkpoint_free(c);
    /* the directory loads as the model, with nothing to note */
    RfModel *d = rf_model_load(dir, &e);
    g_assert_no_error(e);
    g_assert_null(d->ckpt_note);
    g_assert_true(rf_model_check_plannable(d, &e));
    g_assert_cmpstr(d->ckpt_dir, ==, dir);
    g_assert_cmpint(rf_model_checkpoint_bytes(d), ==, rf_model_checkpoint_bytes(m));
    g_assert_cmpint(rf_model_checkpoint_tensors(d), ==, es->len);
    assert_same_list(d->tensors, d->ntensors, m->tensors, m->ntensors);
    rf_model_free(d);
    char *single = g_build_filename(dir, "model.safetensors", NULL);
    g_unlink(single);
    g_free(single);
  }
  g_array_free(es, TRUE);
  rf_model_free(m);
  g_free(cfg);
  rm_tree(dir);
  g_free(dir);
}

/* A checkpoint that lacks a tensor, reshapes one and adds one: noted in one line, and the
 * checkpoint wins for its description while the training tensors stay the config's; such a
 * model is refused for planning. */
static void test_disagree(void) {
  char *dir = tmpdir(), *cfg = read_config("model/configs/tiny-moe.json");
  GError *e = NULL;
  RfModel *m = rf_model_from_json("cfg", cfg, -1, &e);
  g_assert_no_error(e);
  GArray *es = expand(m);
  guint expert = 0;
  for (guint i = 0; i < es->len && !expert; i++)
    if (strstr(g_array_index(es, Ent, i).name, "experts.1.down_proj")) expert = i;
  g_assert_cmpuint(expert, >, 0);
  Ent *x = &g_array_index(es, Ent, expert);
  x->shape[0] *= 2;
  x->bytes *= 2;
  char *lost = g_strdup(g_array_index(es, Ent, 0).name);
  g_array_remove_index(es, 0);
  Ent extra = {g_strdup("model.layers.2.mlp.extra.weight"), "F32", 1, {7}, 28};
  g_array_append_val(es, extra);
  write_file(dir, "config.json", cfg);
  write_ckpt(dir, es, 2);
  RfModel *d = rf_model_load(dir, &e);
  g_assert_no_error(e);
  g_assert_nonnull(d->ckpt_note);
  g_assert_null(strchr(d->ckpt_note, '\n'));
  g_assert_nonnull(strstr(d->ckpt_note, lost)); /* the first difference in config order */
  g_assert_nonnull(strstr(d->ckpt_note, "1 missing, 1 extra, 1 differ"));
  /* shown, never planned: the plan would move config.json's tensors, not the checkpoint's */
  g_assert_false(rf_model_check_plannable(d, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_true(g_str_has_prefix(e->message, dir));
  g_assert_nonnull(strstr(e->message, d->ckpt_note));
  g_assert_nonnull(strstr(e->message, "refuses a checkpoint that differs"));
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
  g_assert_cmpint(rf_model_checkpoint_tensors(d), ==, es->len);
  int64_t bytes = 0;
  for (guint i = 0; i < es->len; i++)
    bytes += g_array_index(es, Ent, i).bytes;
  g_assert_cmpint(rf_model_checkpoint_bytes(d), ==, bytes);
  /* the extra tensor takes its layer from its name */
  g_assert_cmpint(d->ckpt[d->nckpt - 1].layer, ==, 2);
  assert_same_list(d->tensors, d->ntensors, m->tensors, m->ntensors);
  rf_model_free(d);
  g_free(lost);
  g_array_free(es, TRUE);
  rf_model_free(m);
  g_free(cfg);
  rm_tree(dir);
  g_free(dir);
}

/* Malformed files, each refused in one line with its code and a word of why. */
typedef struct {
  const char *what;
  const char *header; /* NULL: raw holds the whole file */
  int64_t data;
  const char *raw;
  gsize raw_len;
  const char *index; /* written as model.safetensors.index.json when set */
  int code;
  const char *says;
} Bad;

#define T(dt, shape, b, e) "\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static const Bad bad[] = {
    {"truncated", NULL, 0, "\x10\0\0\0\0", 5, NULL, RF_ERROR_INPUT, "truncated"},
    {"header_beyond", NULL, 0, "\xff\0\0\0\0\0\0\0{}", 10, NULL, RF_ERROR_INPUT, "beyond the file"},
    {"header_huge", NULL, 0, "\0\0\0\x10\0\0\0\0{}", 10, NULL, RF_ERROR_INPUT, "beyond the file"},
    {"not_json", "{\"a\": {\"dtype\": BF16}}", 0, NULL, 0, NULL, RF_ERROR_INPUT,
     "header: malformed JSON"},
    {"not_object", "[1, 2]", 0, NULL, 0, NULL, RF_ERROR_INPUT, "expected a JSON object"},
    {"overlap",
     "{\"a\":{\"dtype\":" T("BF16", "[4]", 0, 8) ",\"b\":{\"dtype\":" T("BF16", "[4]", 4, 12) "}",
     12, NULL, 0, NULL, RF_ERROR_INPUT, "overlap tensor a"},
    {"out_of_order", "{\"a\":{\"dtype\":" T("BF16", "[4]", 8, 0) "}", 8, NULL, 0, NULL,
     RF_ERROR_INPUT, "out of order"},
    {"beyond_file", "{\"a\":{\"dtype\":" T("BF16", "[4]", 0, 8) "}", 6, NULL, 0, NULL,
     RF_ERROR_INPUT, "beyond the file"},
    {"gap",
     "{\"a\":{\"dtype\":" T("BF16", "[2]", 0, 4) ",\"b\":{\"dtype\":" T("BF16", "[2]", 6, 10) "}",
     10, NULL, 0, NULL, RF_ERROR_INPUT, "gap"},
    {"trailing", "{\"a\":{\"dtype\":" T("BF16", "[2]", 0, 4) "}", 6, NULL, 0, NULL, RF_ERROR_INPUT,
     "cover 4 of the 6"},
    {"size", "{\"a\":{\"dtype\":" T("F32", "[2,3]", 0, 12) "}", 12, NULL, 0, NULL, RF_ERROR_INPUT,
     "needs 24"},
    {"size_overflow",
     "{\"a\":{\"dtype\":" T("F32", "[4294967296,4294967296,4294967296]", 0, 12) "}", 12, NULL, 0,
     NULL, RF_ERROR_INPUT, "needs more than"},
    {"dtype", "{\"a\":{\"dtype\":" T("Q4_K", "[2]", 0, 2) "}", 2, NULL, 0, NULL, RF_ERROR_INPUT,
     "dtype 'Q4_K'"},
    {"negative", "{\"a\":{\"dtype\":" T("U8", "[-2]", 0, 2) "}", 2, NULL, 0, NULL, RF_ERROR_INPUT,
     "integers >= 0"},
    {"newline_name", "{\"a\\nb\":{\"dtype\":" T("U8", "[2]", 0, 3) "}", 3, NULL, 0, NULL,
     RF_ERROR_INPUT, "a\\nb"},
    {"metadata", "{\"__metadata__\":{\"format\":1}}", 0, NULL, 0, NULL, RF_ERROR_INPUT,
     "__metadata__"},
    {"missing_shard", "{\"a\":{\"dtype\":" T("U8", "[2]", 0, 2) "}", 2, NULL, 0,
     "{\"weight_map\":{\"a\":\"model.safetensors\",\"b\":\"model-2.safetensors\"}}", RF_ERROR_INPUT,
     "names shard model-2.safetensors, which is missing"},
    {"unlisted", "{\"a\":{\"dtype\":" T("U8", "[2]", 0, 2) "}", 2, NULL, 0,
     "{\"weight_map\":{\"b\":\"model.safetensors\"}}", RF_ERROR_INPUT, "does not list"},
    {"empty_index", "{}", 0, NULL, 0, "{\"weight_map\":{}}", RF_ERROR_INPUT, "lists no tensors"},
    {"lacking", "{\"a\":{\"dtype\":" T("U8", "[2]", 0, 2) "}", 2, NULL, 0,
     "{\"weight_map\":{\"a\":\"model.safetensors\",\"c\":\"model.safetensors\"}}", RF_ERROR_INPUT,
     "which lacks it"},
    {"escape", "{}", 0, NULL, 0, "{\"weight_map\":{\"a\":\"../model.safetensors\"}}",
     RF_ERROR_INPUT, "shard file in the same directory"},
    {"index_json", "{}", 0, NULL, 0, "{\"weight_map\":{,}}", RF_ERROR_INPUT, "line 1"},
};

static void test_bad(gconstpointer data) {
  const Bad *b = data;
  char *dir = tmpdir(), *path = g_build_filename(dir, "model.safetensors", NULL);
  if (b->header) {
    write_raw(path, b->header, b->data);
  } else {
    g_assert_true(g_file_set_contents(path, b->raw, (gssize)b->raw_len, NULL));
  }
  if (b->index) write_file(dir, "model.safetensors.index.json", b->index);
  GError *e = NULL;
  RfCheckpoint *c = rf_checkpoint_read(dir, &e);
  g_assert_null(c);
  g_assert_error(e, RF_ERROR, b->code);
  g_assert_null(strchr(e->message, '\n'));
  if (!strstr(e->message, b->says)) g_error("%s: '%s' lacks '%s'", b->what, e->message, b->says);
  g_error_free(e);
  g_free(path);
  rm_tree(dir);
  g_free(dir);
}

/* Past the header cap: RF_ERROR_LIMIT, without reading the header. */
static void test_header_limit(void) {
  char *dir = tmpdir(), *path = g_build_filename(dir, "model.safetensors", NULL);
  guint64 n = RF_SAFETENSORS_MAX_HEADER + 1ull;
  char head[8];
  for (int i = 0; i < 8; i++)
    head[i] = (char)(n >> (8 * i) & 0xff);
  g_assert_true(g_file_set_contents(path, head, 8, NULL));
  g_assert_cmpint(truncate(path, (off_t)(8 + n)), ==, 0);
  GError *e = NULL;
  g_assert_null(rf_checkpoint_read(dir, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_assert_nonnull(strstr(e->message, "more than the 100000000 accepted"));
  g_clear_error(&e);
  /* a directory with no checkpoint, and a config with no checkpoint beside it */
  g_unlink(path);
  g_assert_null(rf_checkpoint_read(dir, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  char *cfg = read_config("tests/data/tiny/llama.json");
  write_file(dir, "config.json", cfg);
  g_free(cfg);
  g_assert_null(rf_model_load(dir, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  g_free(path);
  rm_tree(dir);
  g_free(dir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(families); i++) {
    char *base = g_path_get_basename(families[i]);
    if (g_str_has_suffix(base, ".json")) base[strlen(base) - 5] = 0;
    char *p = g_strdup_printf("/checkpoint/family/%s", base);
    g_test_add_data_func(p, families[i], test_family);
    g_free(p);
    g_free(base);
  }
  g_test_add_func("/checkpoint/disagree", test_disagree);
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *p = g_strdup_printf("/checkpoint/bad/%s", bad[i].what);
    g_test_add_data_func(p, &bad[i], test_bad);
    g_free(p);
  }
  g_test_add_func("/checkpoint/header_limit", test_header_limit);
  return g_test_run();
}
