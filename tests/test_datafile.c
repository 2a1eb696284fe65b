/* Input reading: strict JSON, Python's constants only where asked, depth and size limits,
 * non-regular files. */
#include "datafile.h"
#include "error.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *text;
  RfJsonFlags flags;
  int code; /* 0: accepted, else the RfError code */
} JsonCase;

static const JsonCase json_cases[] = {
    {"{\"a\": [1, 2.5e3, -0.5, true, false, null, \"x\\u00e9\\n\"]}", RF_JSON_STRICT, 0},
    {"  [ ]  ", RF_JSON_STRICT, 0},
    {"[0x10, 7]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[010]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[1,]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"{\"a\": 1,}", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"{\"a\": 1} // c", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"/* c */ {}", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"{} {}", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[\"a\tb\"]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[\"\\x41\"]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[+1]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[1.]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"['a']", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"{a: 1}", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[1, 2", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[0.0, Infinity]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[NaN]", RF_JSON_STRICT, RF_ERROR_INPUT},
    {"[0.0, Infinity, -Infinity, NaN]", RF_JSON_PYTHON, 0},
    {"[Inf]", RF_JSON_PYTHON, RF_ERROR_INPUT},
    {"[\"\xff\"]", RF_JSON_STRICT, RF_ERROR_INPUT},
};

static void test_json_case(gconstpointer data) {
  const JsonCase *c = data;
  GError *e = NULL;
  JsonNode *n = rf_json_parse(c->text, strlen(c->text), c->flags, &e);
  if (!c->code) {
    g_assert_no_error(e);
    g_assert_nonnull(n);
    json_node_unref(n);
  } else {
    g_assert_null(n);
    g_assert_error(e, RF_ERROR, c->code);
    g_assert_null(strchr(e->message, '\n'));
    g_error_free(e);
  }
}

static void test_python_constants_read_as_null(void) {
  const char *t = "{\"limit\": [0.0, Infinity], \"n\": NaN, \"s\": \"Infinity\"}";
  GError *e = NULL;
  JsonNode *n = rf_json_parse(t, strlen(t), RF_JSON_PYTHON, &e);
  g_assert_no_error(e);
  JsonObject *o = json_node_get_object(n);
  JsonArray *a = json_object_get_array_member(o, "limit");
  g_assert_cmpuint(json_array_get_length(a), ==, 2);
  g_assert_true(JSON_NODE_HOLDS_NULL(json_array_get_element(a, 1)));
  g_assert_true(JSON_NODE_HOLDS_NULL(json_object_get_member(o, "n")));
  g_assert_cmpstr(json_object_get_string_member(o, "s"), ==, "Infinity");
  json_node_unref(n);
}

static void test_deep_nesting(void) {
  /* 100,000 deep would overflow a recursive parser's stack: refused at the depth limit */
  gsize n = 100000;
  char *t = g_malloc(2 * n + 1);
  memset(t, '[', n);
  memset(t + n, ']', n);
  t[2 * n] = 0;
  GError *e = NULL;
  g_assert_null(rf_json_parse(t, 2 * n, RF_JSON_STRICT, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_clear_error(&e);
  /* at the limit it is accepted */
  memset(t, '[', RF_JSON_MAX_DEPTH);
  memset(t + RF_JSON_MAX_DEPTH, ']', RF_JSON_MAX_DEPTH);
  JsonNode *ok = rf_json_parse(t, 2 * RF_JSON_MAX_DEPTH, RF_JSON_STRICT, &e);
  g_assert_no_error(e);
  json_node_unref(ok);
  g_free(t);
}

static void test_file_limits(void) {
  GError *e = NULL;
  char *text = NULL;
  gsize len = 0;
  g_assert_false(rf_file_read("/dev/zero", RF_MAX_INPUT_BYTES, &text, &len, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  g_assert_false(rf_file_read("/nonexistent/x.json", RF_MAX_INPUT_BYTES, &text, &len, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  char *path = NULL;
  int fd = g_file_open_tmp("refit-XXXXXX.json", &path, &e);
  g_assert_no_error(e);
  g_assert_cmpint(write(fd, "[1, 2, 3]", 9), ==, 9);
  close(fd);
  g_assert_false(rf_file_read(path, 8, &text, &len, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_clear_error(&e);
  g_assert_true(rf_file_read(path, 9, &text, &len, &e));
  g_assert_no_error(e);
  g_assert_cmpuint(len, ==, 9);
  g_assert_cmpstr(text, ==, "[1, 2, 3]");
  g_free(text);
  JsonNode *n = rf_json_load(path, RF_JSON_STRICT, &e);
  g_assert_no_error(e);
  json_node_unref(n);
  g_unlink(path);
  g_free(path);
}

static void test_resolve(void) {
  g_setenv("REFIT_DATA_DIR", "/data", TRUE);
  char *p = rf_data_resolve("dgx-h100", "topologies", ".topo");
  g_assert_cmpstr(p, ==, "/data/topologies/dgx-h100.topo");
  g_free(p);
  p = rf_data_resolve("x.topo", "topologies", ".topo");
  g_assert_cmpstr(p, ==, "x.topo");
  g_free(p);
  p = rf_data_resolve("dir/x", "topologies", ".topo");
  g_assert_cmpstr(p, ==, "dir/x");
  g_free(p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(json_cases); i++) {
    char *name = g_strdup_printf("/datafile/json/%u", i);
    g_test_add_data_func(name, &json_cases[i], test_json_case);
    g_free(name);
  }
  g_test_add_func("/datafile/json/python-null", test_python_constants_read_as_null);
  g_test_add_func("/datafile/json/deep", test_deep_nesting);
  g_test_add_func("/datafile/file-limits", test_file_limits);
  g_test_add_func("/datafile/resolve", test_resolve);
  return g_test_run();
}
