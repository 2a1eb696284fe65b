#include "datafile.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *rf_data_dir(void) {
  const char *d = g_getenv("REFIT_DATA_DIR");
  return (d && *d) ? d : REFIT_SOURCE_DIR;
}

char *rf_data_resolve(const char *name_or_path, const char *subdir, const char *ext) {
  if (strchr(name_or_path, '/') || g_str_has_suffix(name_or_path, ext))
    return g_strdup(name_or_path);
  return g_strdup_printf("%s/%s/%s%s", rf_data_dir(), subdir, name_or_path, ext);
}

gboolean rf_file_read(const char *path, gsize max_bytes, char **text, gsize *len, GError **error) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "cannot open %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s is not a regular file", path);
    close(fd);
    return FALSE;
  }
  if ((guint64)sb.st_size > max_bytes) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "%s is %.1f MiB, more than the %.0f MiB limit",
                path, (double)sb.st_size / (1 << 20), (double)max_bytes / (1 << 20));
    close(fd);
    return FALSE;
  }
  /* read up to one byte past the cap: a file that grows meanwhile is still refused */
  gsize cap = (gsize)sb.st_size + 1, n = 0;
  char *buf = g_malloc(cap + 1);
  for (;;) {
    if (n == cap) {
      if (cap > max_bytes) break;
      cap = MIN(cap * 2, (gsize)max_bytes + 1);
      buf = g_realloc(buf, cap + 1);
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      g_set_error(error, RF_ERROR, RF_ERROR_IO, "cannot read %s: %s", path, g_strerror(errno));
      g_free(buf);
      close(fd);
      return FALSE;
    }
    if (r == 0) break;
    n += (gsize)r;
  }
  close(fd);
  if (n > max_bytes) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "%s is larger than the %.0f MiB limit", path,
                (double)max_bytes / (1 << 20));
    g_free(buf);
    return FALSE;
  }
  buf[n] = 0;
  *text = buf;
  if (len) *len = n;
  return TRUE;
}

/* ---- strict JSON check ------------------------------------------------------------------ */

typedef struct {
  const char *s;
  gsize n, i;
  RfJsonFlags flags;
  GString *out; /* when rewriting Python's constants as null */
  gsize copied; /* text before this offset is in out */
  GError **error;
} Scan;

static gboolean scan_fail(Scan *c, RfError code, const char *what) {
  int line = 1, col = 1;
  for (gsize k = 0; k < c->i && k < c->n; k++) {
    if (c->s[k] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  g_set_error(c->error, RF_ERROR, code, "malformed JSON: line %d column %d: %s", line, col, what);
  return FALSE;
}

static void skip_ws(Scan *c) {
  while (c->i < c->n &&
         (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
    c->i++;
}

static gboolean has_word(const Scan *c, const char *w) {
  gsize k = strlen(w);
  return c->n - c->i >= k && !memcmp(c->s + c->i, w, k);
}

static gboolean scan_string(Scan *c) {
  c->i++; /* opening quote */
  while (c->i < c->n) {
    unsigned char ch = (unsigned char)c->s[c->i];
    if (ch == '"') {
      c->i++;
      return TRUE;
    }
    if (ch < 0x20) return scan_fail(c, RF_ERROR_INPUT, "control character in a string");
    if (ch == '\\') {
      if (++c->i >= c->n) break;
      char e = c->s[c->i];
      if (e == 'u') {
        for (int k = 1; k <= 4; k++)
          if (c->i + k >= c->n || !g_ascii_isxdigit(c->s[c->i + k]))
            return scan_fail(c, RF_ERROR_INPUT, "bad \\u escape");
        c->i += 4;
      } else if (!strchr("\"\\/bfnrt", e) || !e) {
        return scan_fail(c, RF_ERROR_INPUT, "bad escape in a string");
      }
    }
    c->i++;
  }
  return scan_fail(c, RF_ERROR_INPUT, "unterminated string");
}

static gboolean digits(Scan *c) {
  gsize s = c->i;
  while (c->i < c->n && g_ascii_isdigit(c->s[c->i]))
    c->i++;
  return c->i > s;
}

static gboolean scan_number(Scan *c) {
  if (c->s[c->i] == '-') c->i++;
  if (c->i < c->n && c->s[c->i] == '0') {
    c->i++;
    if (c->i < c->n && (g_ascii_isdigit(c->s[c->i]) || c->s[c->i] == 'x' || c->s[c->i] == 'X'))
      return scan_fail(c, RF_ERROR_INPUT, "leading zero or hex number");
  } else if (!digits(c)) {
    return scan_fail(c, RF_ERROR_INPUT, "bad number");
  }
  if (c->i < c->n && c->s[c->i] == '.') {
    c->i++;
    if (!digits(c)) return scan_fail(c, RF_ERROR_INPUT, "bad fraction");
  }
  if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
    c->i++;
    if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
    if (!digits(c)) return scan_fail(c, RF_ERROR_INPUT, "bad exponent");
  }
  return TRUE;
}

/* Python's non-finite constants: accepted only with RF_JSON_PYTHON, rewritten as null. */
static gboolean scan_python_constant(Scan *c, gboolean *matched) {
  static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
  *matched = FALSE;
  for (guint k = 0; k < G_N_ELEMENTS(words); k++) {
    if (!has_word(c, words[k])) continue;
    if (!(c->flags & RF_JSON_PYTHON))
      return scan_fail(c, RF_ERROR_INPUT, "Infinity and NaN are not JSON");
    if (c->out) {
      g_string_append_len(c->out, c->s + c->copied, (gssize)(c->i - c->copied));
      g_string_append(c->out, "null");
      c->copied = c->i + strlen(words[k]);
    }
    c->i += strlen(words[k]);
    *matched = TRUE;
    return TRUE;
  }
  return TRUE;
}

static gboolean scan_scalar(Scan *c) {
  gboolean py = FALSE;
  if (!scan_python_constant(c, &py)) return FALSE;
  if (py) return TRUE;
  char ch = c->s[c->i];
  if (ch == '"') return scan_string(c);
  if (ch == '-' || g_ascii_isdigit(ch)) return scan_number(c);
  static const char *const lits[] = {"true", "false", "null"};
  for (guint k = 0; k < G_N_ELEMENTS(lits); k++)
    if (has_word(c, lits[k])) {
      c->i += strlen(lits[k]);
      return TRUE;
    }
  return scan_fail(c, RF_ERROR_INPUT, "unexpected character");
}

/* An iterative walk with an explicit stack: deep nesting cannot overflow the C stack. */
static gboolean scan_document(Scan *c) {
  char stack[RF_JSON_MAX_DEPTH];
  int depth = 0;
  skip_ws(c);
  for (;;) {
    /* a value is expected here */
    if (c->i >= c->n) return scan_fail(c, RF_ERROR_INPUT, "unexpected end of input");
    char ch = c->s[c->i];
    if (ch == '{' || ch == '[') {
      if (depth == RF_JSON_MAX_DEPTH) return scan_fail(c, RF_ERROR_LIMIT, "nested too deep");
      stack[depth++] = ch;
      c->i++;
      skip_ws(c);
      char close = ch == '{' ? '}' : ']';
      if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        depth--;
      } else if (ch == '{') {
        if (c->i >= c->n || c->s[c->i] != '"')
          return scan_fail(c, RF_ERROR_INPUT, "expected a member name");
        if (!scan_string(c)) return FALSE;
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return scan_fail(c, RF_ERROR_INPUT, "expected ':'");
        c->i++;
        skip_ws(c);
        continue;
      } else {
        continue;
      }
    } else if (!scan_scalar(c)) {
      return FALSE;
    }
    /* after a value: a separator or the end of containers */
    for (;;) {
      skip_ws(c);
      if (depth == 0) {
        if (c->i != c->n) return scan_fail(c, RF_ERROR_INPUT, "text after the document");
        return TRUE;
      }
      if (c->i >= c->n) return scan_fail(c, RF_ERROR_INPUT, "unexpected end of input");
      char top = stack[depth - 1], d = c->s[c->i];
      if (d == (top == '{' ? '}' : ']')) {
        c->i++;
        depth--;
        continue;
      }
      if (d != ',') return scan_fail(c, RF_ERROR_INPUT, "expected ',' or the end of a container");
      c->i++;
      skip_ws(c);
      if (top == '{') {
        if (c->i >= c->n || c->s[c->i] != '"')
          return scan_fail(c, RF_ERROR_INPUT, "expected a member name (trailing comma?)");
        if (!scan_string(c)) return FALSE;
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return scan_fail(c, RF_ERROR_INPUT, "expected ':'");
        c->i++;
        skip_ws(c);
      } else if (c->i < c->n && c->s[c->i] == ']') {
        return scan_fail(c, RF_ERROR_INPUT, "trailing comma");
      }
      break;
    }
  }
}

static gboolean json_scan(const char *text, gsize len, RfJsonFlags flags, GString *out,
                          GError **error) {
  if (!g_utf8_validate(text, (gssize)len, NULL)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "malformed JSON: not UTF-8 text");
    return FALSE;
  }
  Scan c = {text, len, 0, flags, out, 0, error};
  if (!scan_document(&c)) return FALSE;
  if (out) g_string_append_len(out, text + c.copied, (gssize)(len - c.copied));
  return TRUE;
}

gboolean rf_json_check(const char *text, gsize len, RfJsonFlags flags, GError **error) {
  return json_scan(text, len, flags, NULL, error);
}

JsonNode *rf_json_parse(const char *text, gsize len, RfJsonFlags flags, GError **error) {
  GString *fixed = (flags & RF_JSON_PYTHON) ? g_string_sized_new(len + 1) : NULL;
  JsonNode *root = NULL;
  if (json_scan(text, len, flags, fixed, error)) {
    JsonParser *p = json_parser_new_immutable();
    GError *e = NULL;
    const char *t = fixed ? fixed->str : text;
    gssize n = fixed ? (gssize)fixed->len : (gssize)len;
    if (json_parser_load_from_data(p, t, n, &e) && json_parser_get_root(p))
      root = json_node_ref(json_parser_get_root(p));
    else
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "malformed JSON: %s",
                  e ? e->message : "empty document");
    g_clear_error(&e);
    g_object_unref(p);
  }
  if (fixed) g_string_free(fixed, TRUE);
  return root;
}

JsonNode *rf_json_load(const char *path, RfJsonFlags flags, GError **error) {
  char *text = NULL;
  gsize len = 0;
  if (!rf_file_read(path, RF_MAX_INPUT_BYTES, &text, &len, error)) return NULL;
  GError *e = NULL;
  JsonNode *root = rf_json_parse(text, len, flags, &e);
  g_free(text);
  if (!root) {
    g_set_error(error, RF_ERROR, e->code, "%s: %s", path, e->message);
    g_error_free(e);
  }
  return root;
}
