#include "checkpoint.h"
#include "datafile.h"
#include "error.h"
#include "jsonutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  const char *name;
  RfDtype dt;
} st_dtypes[] = {
    {"BOOL", RF_DT_BOOL},   {"U8", RF_DT_U8},      {"I8", RF_DT_I8},   {"F8_E4M3", RF_DT_FP8},
    {"F8_E5M2", RF_DT_FP8}, {"F8_E8M0", RF_DT_U8}, {"I16", RF_DT_I16}, {"U16", RF_DT_U16},
    {"F16", RF_DT_FP16},    {"BF16", RF_DT_BF16},  {"I32", RF_DT_I32}, {"U32", RF_DT_U32},
    {"F32", RF_DT_FP32},    {"F64", RF_DT_FP64},   {"I64", RF_DT_I64}, {"U64", RF_DT_U64},
};

/* A name from a file, safe to put in a one-line message. Caller frees. */
static char *printable(const char *s) {
  for (const char *p = s; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return g_strescape(s, NULL);
  return g_strdup(s);
}

static G_GNUC_PRINTF(4, 5) gboolean
    fail(GError **error, RfError code, const char *label, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, RF_ERROR, code, "%s: %s", label, msg);
  g_free(msg);
  return FALSE;
}

static void shape_str(GString *s, int ndim, const int64_t *shape) {
  g_string_append_c(s, '[');
  for (int d = 0; d < ndim; d++)
    g_string_append_printf(s, "%s%lld", d ? ", " : "", (long long)shape[d]);
  g_string_append_c(s, ']');
}

/* One tensor's entry: dtype, shape and data_offsets, checked against the data section. */
static gboolean tensor_read(const char *label, const char *name, JsonNode *node,
                            uint64_t data_bytes, RfCkptTensor *t, GError **error) {
  JsonObject *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
  const char *dt = rf_json_string(o, "dtype");
  JsonArray *shape = rf_json_array(o, "shape"), *off = rf_json_array(o, "data_offsets");
  if (!dt || !shape || !off)
    return fail(error, RF_ERROR_INPUT, label,
                "tensor %s needs \"dtype\", \"shape\" and \"data_offsets\"", name);
  gboolean known = FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(st_dtypes) && !known; i++)
    if (!strcmp(dt, st_dtypes[i].name)) {
      t->dtype = st_dtypes[i].dt;
      t->st_dtype = st_dtypes[i].name;
      known = TRUE;
    }
  if (!known) {
    char *d = printable(dt);
    fail(error, RF_ERROR_INPUT, label,
         "tensor %s has dtype '%s', which refit does not know (BOOL, U8, I8, F8_E4M3, F8_E5M2, "
         "F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64)",
         name, d);
    g_free(d);
    return FALSE;
  }
  guint nd = json_array_get_length(shape);
  if (nd > RF_MAX_DIMS)
    return fail(error, RF_ERROR_LIMIT, label, "tensor %s has %u dims (refit handles %d)", name, nd,
                RF_MAX_DIMS);
  t->ndim = (int)nd;
  for (guint d = 0; d < nd; d++)
    if (!rf_json_node_int(json_array_get_element(shape, d), 0, INT64_MAX, &t->shape[d]))
      return fail(error, RF_ERROR_INPUT, label, "tensor %s: shape must be a list of integers >= 0",
                  name);
  if (json_array_get_length(off) != 2 ||
      !rf_json_node_int(json_array_get_element(off, 0), 0, INT64_MAX, &t->begin) ||
      !rf_json_node_int(json_array_get_element(off, 1), 0, INT64_MAX, &t->end))
    return fail(error, RF_ERROR_INPUT, label,
                "tensor %s: data_offsets must be [begin, end], integers >= 0", name);
  if (t->begin > t->end)
    return fail(error, RF_ERROR_INPUT, label, "tensor %s: data_offsets [%lld, %lld] out of order",
                name, (long long)t->begin, (long long)t->end);
  if ((uint64_t)t->end > data_bytes)
    return fail(error, RF_ERROR_INPUT, label,
                "tensor %s: data_offsets [%lld, %lld] run beyond the file (%llu data bytes)", name,
                (long long)t->begin, (long long)t->end, (unsigned long long)data_bytes);
  /* shape x dtype size, without overflow: past 2^63 it cannot match any file */
  int es = rf_dtype_size(t->dtype);
  uint64_t need = (uint64_t)es, have = (uint64_t)(t->end - t->begin);
  gboolean zero = FALSE, over = FALSE;
  for (int d = 0; d < t->ndim; d++)
    zero |= t->shape[d] == 0;
  for (int d = 0; d < t->ndim && !zero && !over; d++) {
    if (need > (uint64_t)INT64_MAX / (uint64_t)t->shape[d])
      over = TRUE;
    else
      need *= (uint64_t)t->shape[d];
  }
  if (zero) need = 0;
  if (over || need != have) {
    GString *s = g_string_new(NULL);
    shape_str(s, t->ndim, t->shape);
    fail(error, RF_ERROR_INPUT, label,
         "tensor %s: data_offsets [%lld, %lld] hold %llu bytes, shape %s x %s (%d bytes) needs "
         "%s%llu",
         name, (long long)t->begin, (long long)t->end, (unsigned long long)have, s->str, dt, es,
         over ? "more than " : "", (unsigned long long)(over ? (uint64_t)INT64_MAX : need));
    g_string_free(s, TRUE);
    return FALSE;
  }
  return TRUE;
}

static int by_offset(const void *a, const void *b) {
  const RfCkptTensor *x = *(RfCkptTensor *const *)a, *y = *(RfCkptTensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* The tensors must tile [0, data_bytes): sorted by offset, each starts where the last ended.
 * On success they are left in offset order. */
static gboolean tiling_check(const char *label, RfCkptTensor *ts, guint n, uint64_t data_bytes,
                             GError **error) {
  RfCkptTensor **p = g_new(RfCkptTensor *, n ? n : 1);
  for (guint i = 0; i < n; i++)
    p[i] = &ts[i];
  qsort(p, n, sizeof *p, by_offset);
  uint64_t pos = 0;
  gboolean ok = TRUE;
  for (guint i = 0; i < n && ok; i++) {
    char *a = printable(p[i]->name), *b = i ? printable(p[i - 1]->name) : NULL;
    if ((uint64_t)p[i]->begin < pos)
      ok = fail(error, RF_ERROR_INPUT, label,
                "tensor %s: data_offsets [%lld, %lld] overlap tensor %s [%lld, %lld]", a,
                (long long)p[i]->begin, (long long)p[i]->end, b, (long long)p[i - 1]->begin,
                (long long)p[i - 1]->end);
    else if ((uint64_t)p[i]->begin > pos)
      ok = fail(error, RF_ERROR_INPUT, label,
                "tensor %s starts at byte %lld, leaving a gap after byte %llu (the data must be "
                "packed)",
                a, (long long)p[i]->begin, (unsigned long long)pos);
    pos = (uint64_t)p[i]->end;
    g_free(a);
    g_free(b);
  }
  if (ok && pos != data_bytes)
    ok = fail(error, RF_ERROR_INPUT, label,
              "the tensors cover %llu of the %llu data bytes after the header",
              (unsigned long long)pos, (unsigned long long)data_bytes);
  if (ok && n) {
    RfCkptTensor *sorted = g_new(RfCkptTensor, n ? n : 1);
    for (guint i = 0; i < n; i++)
      sorted[i] = *p[i];
    memcpy(ts, sorted, n * sizeof *ts);
    g_free(sorted);
  }
  g_free(p);
  return ok;
}

gboolean rf_safetensors_parse(const char *label, const void *buf, gsize len, uint64_t file_size,
                              int shard, GArray *out, GError **error) {
  const guint8 *b = buf;
  if (len < 8 || file_size < 8)
    return fail(error, RF_ERROR_INPUT, label,
                "truncated: %llu bytes, shorter than the 8-byte header length",
                (unsigned long long)MIN((uint64_t)len, file_size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--)
    n = n << 8 | b[i];
  if (n > file_size - 8)
    return fail(error, RF_ERROR_INPUT, label,
                "header length %llu runs beyond the file (%llu bytes): truncated or not "
                "safetensors",
                (unsigned long long)n, (unsigned long long)file_size);
  if (n > RF_SAFETENSORS_MAX_HEADER)
    return fail(error, RF_ERROR_LIMIT, label, "header of %llu bytes, more than the %u accepted",
                (unsigned long long)n, RF_SAFETENSORS_MAX_HEADER);
  if (len < 8 + n)
    return fail(error, RF_ERROR_IO, label, "truncated while reading: %llu of %llu header bytes",
                (unsigned long long)(len - 8), (unsigned long long)n);
  uint64_t data_bytes = file_size - 8 - n;
  GError *e = NULL;
  JsonNode *root = rf_json_parse((const char *)b + 8, (gsize)n, RF_JSON_STRICT, &e);
  if (!root) {
    fail(error, e->code, label, "header: %s", e->message);
    g_error_free(e);
    return FALSE;
  }
  gboolean ok = TRUE;
  guint first = out->len;
  JsonObject *o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  if (!o) ok = fail(error, RF_ERROR_INPUT, label, "header: expected a JSON object");
  GList *names = o ? json_object_get_members(o) : NULL;
  for (GList *l = names; l && ok; l = l->next) {
    const char *key = l->data;
    JsonNode *v = json_object_get_member(o, key);
    if (!strcmp(key, "__metadata__")) {
      JsonObject *md = JSON_NODE_HOLDS_OBJECT(v) ? json_node_get_object(v) : NULL;
      GList *keys = md ? json_object_get_members(md) : NULL;
      const char *str;
      for (GList *k = keys; k && md; k = k->next)
        if (!rf_json_node_string(json_object_get_member(md, k->data), &str)) md = NULL;
      g_list_free(keys);
      if (!md) ok = fail(error, RF_ERROR_INPUT, label, "__metadata__ must map strings to strings");
      continue;
    }
    RfCkptTensor t = {0};
    t.name = g_strdup(key);
    t.shard = shard;
    char *pn = printable(key);
    ok = tensor_read(label, pn, v, data_bytes, &t, error);
    g_free(pn);
    g_array_append_val(out, t);
  }
  g_list_free(names);
  if (ok)
    ok = tiling_check(label, out->len > first ? &g_array_index(out, RfCkptTensor, first) : NULL,
                      out->len - first, data_bytes, error);
  if (!ok) {
    for (guint i = first; i < out->len; i++)
      g_free(g_array_index(out, RfCkptTensor, i).name);
    g_array_set_size(out, first);
  }
  json_node_unref(root);
  return ok;
}

/* The first 8 + header-length bytes of path (fewer when the file is shorter), and its size. */
static gboolean head_read(const char *path, guint8 **buf, gsize *len, uint64_t *size,
                          GError **error) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(error, errno == ENOENT ? RF_ERROR_INPUT : RF_ERROR_IO, path, "cannot open: %s",
                g_strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(error, RF_ERROR_INPUT, path, "not a regular file");
  }
  *size = (uint64_t)st.st_size;
  uint64_t want = MIN(*size, 8);
  *buf = g_malloc(8);
  *len = 0;
  gboolean ok = TRUE;
  for (int pass = 0; pass < 2 && ok; pass++) {
    while (*len < want) {
      ssize_t r = read(fd, *buf + *len, (size_t)(want - *len));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        ok = r == 0 || fail(error, RF_ERROR_IO, path, "read failed: %s", g_strerror(errno));
        break;
      }
      *len += (gsize)r;
    }
    if (!ok || pass || *len < 8) break;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
      n = n << 8 | (*buf)[i];
    if (n > RF_SAFETENSORS_MAX_HEADER || n > *size - 8) break; /* the parse says why */
    want = 8 + n;
    *buf = g_realloc(*buf, (gsize)want);
  }
  close(fd);
  if (!ok) {
    g_free(*buf);
    *buf = NULL;
  }
  return ok;
}

static gboolean shard_read(const char *dir, const char *file, int shard, GArray *out,
                           GError **error) {
  char *path = g_build_filename(dir, file, NULL);
  guint8 *buf = NULL;
  gsize len = 0;
  uint64_t size = 0;
  gboolean ok = head_read(path, &buf, &len, &size, error) &&
                rf_safetensors_parse(path, buf, len, size, shard, out, error);
  g_free(buf);
  g_free(path);
  return ok;
}

/* A shard name from the index: a plain file name in the directory, nothing else. */
static gboolean plain_name(const char *s) {
  if (!*s || !strcmp(s, ".") || !strcmp(s, "..")) return FALSE;
  for (const char *p = s; *p; p++)
    if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20 || *p == 0x7f) return FALSE;
  return TRUE;
}

static int by_name(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shards an index names, in name order; map holds tensor -> shard file (borrowed). */
static GPtrArray *index_read(const char *path, JsonNode **root, JsonObject **map, GError **error) {
  *root = rf_json_load(path, RF_JSON_STRICT, error);
  if (!*root) return NULL;
  JsonObject *o = JSON_NODE_HOLDS_OBJECT(*root) ? json_node_get_object(*root) : NULL;
  *map = rf_json_object(o, "weight_map");
  if (!*map) {
    fail(error, RF_ERROR_INPUT, path, "expected an object with a \"weight_map\" object");
    return NULL;
  }
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  GPtrArray *shards = g_ptr_array_new();
  GList *names = json_object_get_members(*map);
  gboolean ok = TRUE;
  for (GList *l = names; l && ok; l = l->next) {
    const char *f = NULL;
    if (!rf_json_node_string(json_object_get_member(*map, l->data), &f) || !plain_name(f)) {
      char *n = printable(l->data);
      ok = fail(error, RF_ERROR_INPUT, path,
                "weight_map: tensor %s must name a shard file in the same directory", n);
      g_free(n);
    } else if (g_hash_table_add(seen, (gpointer)f)) {
      g_ptr_array_add(shards, (gpointer)f);
    }
  }
  g_list_free(names);
  g_hash_table_destroy(seen);
  if (ok && !shards->len) ok = fail(error, RF_ERROR_INPUT, path, "weight_map lists no tensors");
  if (!ok) {
    g_ptr_array_free(shards, TRUE);
    return NULL;
  }
  g_ptr_array_sort(shards, by_name);
  return shards;
}

/* Each tensor in the shard the index names for it, and nothing the index does not list. */
static gboolean index_agrees(const char *path, JsonObject *map, const RfCheckpoint *c,
                             GError **error) {
  GHashTable *held = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;
  for (uint32_t i = 0; i < c->ntensors && ok; i++) {
    const RfCkptTensor *t = &c->tensors[i];
    const char *f = rf_json_string(map, t->name);
    char *n = printable(t->name);
    if (!f || strcmp(f, c->shards[t->shard]))
      ok = fail(error, RF_ERROR_INPUT, path, "%s holds tensor %s, which the index %s",
                c->shards[t->shard], n, f ? "puts in another shard" : "does not list");
    g_hash_table_add(held, t->name);
    g_free(n);
  }
  GList *names = ok ? json_object_get_members(map) : NULL;
  for (GList *l = names; l && ok; l = l->next)
    if (!g_hash_table_contains(held, l->data)) {
      char *n = printable(l->data);
      ok = fail(error, RF_ERROR_INPUT, path, "weight_map puts tensor %s in %s, which lacks it", n,
                rf_json_string(map, l->data));
      g_free(n);
    }
  g_list_free(names);
  g_hash_table_destroy(held);
  return ok;
}

RfCheckpoint *rf_checkpoint_read(const char *dir, GError **error) {
  char *index = g_build_filename(dir, "model.safetensors.index.json", NULL);
  RfCheckpoint *c = g_new0(RfCheckpoint, 1);
  GArray *ts = g_array_new(FALSE, FALSE, sizeof(RfCkptTensor));
  JsonNode *root = NULL;
  JsonObject *map = NULL;
  GPtrArray *shards = NULL;
  gboolean ok = TRUE;
  if (g_file_test(index, G_FILE_TEST_EXISTS)) {
    shards = index_read(index, &root, &map, error);
    ok = shards != NULL;
  } else {
    char *single = g_build_filename(dir, "model.safetensors", NULL);
    if (g_file_test(single, G_FILE_TEST_EXISTS)) {
      shards = g_ptr_array_new();
      g_ptr_array_add(shards, "model.safetensors");
    } else {
      ok = fail(error, RF_ERROR_INPUT, dir,
                "no model.safetensors.index.json or model.safetensors in the directory");
    }
    g_free(single);
  }
  if (ok) {
    c->nshards = (int)shards->len;
    c->shards = g_new0(char *, shards->len + 1);
    for (guint i = 0; i < shards->len; i++)
      c->shards[i] = g_strdup(g_ptr_array_index(shards, i));
  }
  for (int i = 0; ok && i < c->nshards; i++) {
    char *path = g_build_filename(dir, c->shards[i], NULL);
    if (root && !g_file_test(path, G_FILE_TEST_EXISTS))
      ok = fail(error, RF_ERROR_INPUT, index, "names shard %s, which is missing", c->shards[i]);
    g_free(path);
    if (ok) ok = shard_read(dir, c->shards[i], i, ts, error);
  }
  /* the total stays within RF_MAX_MODEL_BYTES, so later sums cannot overflow */
  for (guint j = 0; ok && j < ts->len; j++) {
    const RfCkptTensor *t = &g_array_index(ts, RfCkptTensor, j);
    if (t->end - t->begin > RF_MAX_MODEL_BYTES - c->bytes)
      ok = fail(error, RF_ERROR_LIMIT, dir, "the checkpoint is more than " RF_MAX_MODEL_BYTES_TEXT);
    else
      c->bytes += t->end - t->begin;
  }
  if (ok && ts->len > G_MAXUINT32 / 2)
    ok = fail(error, RF_ERROR_LIMIT, dir, "more than 2^31 tensors");
  c->ntensors = ts->len;
  c->tensors = (RfCkptTensor *)g_array_free(ts, FALSE);
  if (ok && root) ok = index_agrees(index, map, c, error);
  if (shards) g_ptr_array_free(shards, TRUE);
  if (root) json_node_unref(root);
  g_free(index);
  if (!ok) {
    rf_checkpoint_free(c);
    return NULL;
  }
  return c;
}

void rf_checkpoint_free(RfCheckpoint *c) {
  if (!c) return;
  for (uint32_t i = 0; i < c->ntensors; i++)
    g_free(c->tensors[i].name);
  g_free(c->tensors);
  g_strfreev(c->shards);
  g_free(c);
}

/* Layer of a checkpoint name ("...layers.N...."), -1 when it has none. */
static int name_layer(const char *n) {
  const char *p = strstr(n, "layers.");
  if (!p || !g_ascii_isdigit(p[7])) return -1;
  int64_t v = g_ascii_strtoll(p + 7, NULL, 10);
  return v < G_MAXINT ? (int)v : -1;
}

typedef struct {
  GString *first; /* the first difference, described */
  int64_t missing, extra, differ;
} Diff;

static void diff_note(Diff *d, const char *name, const RfCkptTensor *have, int ndim,
                      const int64_t *shape, RfDtype dt) {
  if (d->first) return;
  char *n = printable(name);
  d->first = g_string_new(n);
  g_free(n);
  g_string_append(d->first, ": checkpoint ");
  if (have) {
    shape_str(d->first, have->ndim, have->shape);
    g_string_append_printf(d->first, " %s", have->st_dtype);
  } else {
    g_string_append(d->first, "lacks it");
  }
  g_string_append(d->first, ", config ");
  if (shape) {
    shape_str(d->first, ndim, shape);
    g_string_append_printf(d->first, " %s", rf_dtype_name(dt));
  } else {
    g_string_append(d->first, "lacks it");
  }
}

static gboolean same(const RfCkptTensor *h, int ndim, const int64_t *shape, RfDtype dt) {
  return h->ndim == ndim && h->dtype == dt && !memcmp(h->shape, shape, sizeof(int64_t) * ndim);
}

RfTensor *rf_checkpoint_fold(const RfModel *m, const RfCheckpoint *c, uint32_t *n, char **diff) {
  const RfTensor *want = m->ckpt ? m->ckpt : m->tensors;
  uint32_t nwant = m->ckpt ? m->nckpt : m->ntensors;
  GHashTable *at = g_hash_table_new(g_str_hash, g_str_equal);
  for (uint32_t i = 0; i < c->ntensors; i++)
    g_hash_table_insert(at, c->tensors[i].name, GUINT_TO_POINTER(i + 1));
  guint8 *used = g_new0(guint8, c->ntensors ? c->ntensors : 1);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(RfTensor));
  Diff d = {0};
  for (uint32_t i = 0; i < nwant; i++) {
    const RfTensor *t = &want[i];
    int s = t->nexperts > 0 ? 1 : 0; /* a stacked entry's experts are [shape 1..] each */
    int64_t ne = rf_tensor_count(t);
    uint32_t *hit = g_new(uint32_t, ne);
    gboolean whole = TRUE;
    for (int64_t e = 0; e < ne; e++) {
      char *name = rf_tensor_name(t, e);
      hit[e] = GPOINTER_TO_UINT(g_hash_table_lookup(at, name));
      if (!hit[e]) {
        d.missing++;
        diff_note(&d, name, NULL, t->ndim - s, t->shape + s, t->dtype);
        whole = FALSE;
      } else {
        const RfCkptTensor *h = &c->tensors[hit[e] - 1];
        used[hit[e] - 1] = 1;
        if (!same(h, t->ndim - s, t->shape + s, t->dtype)) {
          d.differ++;
          diff_note(&d, name, h, t->ndim - s, t->shape + s, t->dtype);
          whole = FALSE;
        }
      }
      g_free(name);
    }
    for (int64_t e = 0; e < ne; e++) {
      if (!whole && !hit[e]) continue;
      RfTensor r = *t;
      if (whole) {
        r.name = g_strdup(t->name);
      } else {
        const RfCkptTensor *h = &c->tensors[hit[e] - 1];
        r.name = g_strdup(h->name);
        r.nexperts = 0;
        r.ndim = h->ndim;
        memcpy(r.shape, h->shape, sizeof r.shape);
        r.dtype = h->dtype;
      }
      g_array_append_val(out, r);
      if (whole) break;
    }
    g_free(hit);
  }
  for (uint32_t i = 0; i < c->ntensors; i++) {
    if (used[i]) continue;
    const RfCkptTensor *h = &c->tensors[i];
    d.extra++;
    diff_note(&d, h->name, h, 0, NULL, RF_DT_BF16);
    RfTensor r = {0};
    r.name = g_strdup(h->name);
    r.ndim = h->ndim;
    memcpy(r.shape, h->shape, sizeof r.shape);
    r.dtype = h->dtype;
    r.kind = rf_kind_from_name(h->name, h->ndim);
    r.layer = name_layer(h->name);
    g_array_append_val(out, r);
  }
  *diff = NULL;
  if (d.first)
    *diff = g_strdup_printf("checkpoint and config.json differ: first at %s; "
                            "checkpoint %u tensors, config %lld (%lld missing, %lld extra, %lld "
                            "differ in shape or dtype)",
                            d.first->str, c->ntensors, (long long)rf_model_checkpoint_tensors(m),
                            (long long)d.missing, (long long)d.extra, (long long)d.differ);
  if (d.first) g_string_free(d.first, TRUE);
  g_free(used);
  g_hash_table_destroy(at);
  *n = out->len;
  return (RfTensor *)g_array_free(out, FALSE);
}
