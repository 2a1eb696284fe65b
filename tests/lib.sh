# shellcheck shell=sh
# Shared by the CLI shell tests (sourced): a scratch dir, pass / fail counters and the checks.
# After sourcing: $TMP, ok, bad, expect_ok, expect_rc, expect_err; end with `finish [LABEL]`.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# expect_ok NAME CMD...: exit 0
expect_ok() {
  name=$1; shift
  if "$@" >"$TMP/out" 2>"$TMP/err"; then ok; else bad "$name: exit $? ($(cat "$TMP/err"))"; fi
}

# expect_rc NAME RC NEEDLE CMD...: exit RC, one stderr line containing NEEDLE
expect_rc() {
  name=$1; want=$2; needle=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err.all"
  rc=$?
  # AddressSanitizer's note on the stack switch of g_spawn's child is not the command's output
  grep -v -e '^==[0-9]*==WARNING: ASan is ignoring requested __asan_handle_no_return' \
    -e '^False positive error reports may follow' -e 'google/sanitizers/issues/189' \
    "$TMP/err.all" >"$TMP/err"
  lines=$(wc -l <"$TMP/err")
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, want $want ($(head -c 300 "$TMP/err"))"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines: $(cat "$TMP/err")"; return; fi
  grep -q -- "$needle" "$TMP/err" || { bad "$name: '$needle' not in: $(cat "$TMP/err")"; return; }
  ok
}

# expect_err NAME NEEDLE CMD...: exit 2 (bad input), one stderr line containing NEEDLE
expect_err() {
  name=$1; needle=$2; shift 2
  expect_rc "$name" 2 "$needle" "$@"
}

# finish [LABEL]: the closing "N passed, N failed" line; the exit status
finish() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
