#!/bin/sh
# The whole test suite on a fresh machine: install, build (plain and ASan/UBSan), the static checks
# (format, shellcheck, the dependency graph, docs/where.md), CTest on both builds (on the plain
# one, the unit tests through valgrind), the fuzz targets. Ends with one "N passed, N failed" line.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
sh scripts/build.sh build
sh scripts/build.sh build-asan -DREFIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Static checks: each counts as one test.
st_pass=0
st_fail=0
static_check() { # NAME COMMAND...: run it, show its output on failure
  name=$1
  shift
  if "$@" >"$log.st" 2>&1; then
    echo "$name: clean"
    st_pass=$((st_pass + 1))
  else
    cat "$log.st"
    echo "$name: FAILED"
    st_fail=$((st_fail + 1))
    status=1
  fi
  rm -f "$log.st"
}
echo "# static checks"
# shellcheck disable=SC2046
static_check "clang-format (.clang-format: C, C++, CUDA)" \
  clang-format --dry-run --Werror $(git ls-files '*.c' '*.h' '*.cpp' '*.cu')
# shellcheck disable=SC2046
static_check "shellcheck (warnings)" shellcheck -x -S warning .ci/run $(git ls-files '*.sh')
static_check "dependency graph (scripts/check_deps.py)" python3 scripts/check_deps.py build
static_check "docs/where.md (scripts/check_where.py)" python3 scripts/check_where.py
run_ctest() { # DIR [CTEST ARGS]: ctest there, output shown and kept in $log
  rc=0
  dir=$1
  shift
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 "$@") >"$log.ct" 2>&1 || rc=$?
  cat "$log.ct"
  cat "$log.ct" >>"$log"
  rm -f "$log.ct"
  [ "$rc" -eq 0 ] || status=1
}
# The unit tests valgrind runs (below, on this release build's binaries, slowest first): each of
# them passes there only if every assertion passes, so the release CTest leaves them to it.
vg_tests=""
for t in fit frameworks real sim plan advise_search executors datafile dtensor zoo checkpoint layout \
  topology quant schedule memory advise; do
  [ -x build/tests/test_$t ] && vg_tests="$vg_tests $t"
done
vg_re=$(echo $vg_tests | tr ' ' '|')
echo "# ctest (release build; the unit tests valgrind runs below are counted there)"
run_ctest build -E "^(${vg_re:-none})\$"
# The ASan build leaves out the two answer-checking scenario scripts (whatif: 440 s, memory_agree:
# 120 s there, a third of the whole CI budget): they check figures, which the release build does;
# the code they drive runs under ASan in the unit, cli and mpi tests and the CLI random driver.
echo "# ctest (ASan/UBSan build; whatif and memory_agree on the release build only)"
run_ctest build-asan -E '^(whatif|memory_agree)$'
echo "# valgrind on the unit tests (two at a time, the slowest first)"
vg_pass=0
vg_fail=0
# shellcheck disable=SC2086
printf '%s\n' $vg_tests | xargs -P 2 -I{} sh -c 'REFIT_DATA_DIR="$1" valgrind -q --error-exitcode=1 \
  --leak-check=full --errors-for-leak-kinds=definite "build/tests/test_$2" >/dev/null \
  2>"$3.vg.$2" && : >"$3.vg.$2.ok"' _ "$PWD" {} "$log" || true
for t in $vg_tests; do
  if [ -f "$log.vg.$t.ok" ]; then
    echo "valgrind test_$t: clean"
    vg_pass=$((vg_pass + 1))
  else
    cat "$log.vg.$t"
    echo "valgrind test_$t: FAILED"
    vg_fail=$((vg_fail + 1))
    status=1
  fi
  rm -f "$log.vg.$t" "$log.vg.$t.ok"
done
# Fuzz targets (libFuzzer, clang) for a short budget each, and the CLI random-argument driver
# against the ASan build: any crash, sanitizer report or undocumented exit status fails.
fz_pass=0
fz_fail=0
echo "# fuzz targets (${REFIT_FUZZ_SECONDS:-15} s each)"
if sh scripts/fuzz.sh "${REFIT_FUZZ_SECONDS:-15}" >"$log.fz" 2>&1; then :; else status=1; fi
cat "$log.fz"
fz_pass=$(grep -c ': clean' "$log.fz" || true)
fz_fail=$(grep -c ': FAILED' "$log.fz" || true)
[ "$fz_pass" -gt 0 ] || { echo "fuzz: no target ran"; fz_fail=$((fz_fail + 1)); status=1; }
echo "# CLI random-argument driver (ASan build)"
if REFIT_DATA_DIR=$PWD python3 tests/fuzz/cli_random.py build-asan/cli/refit --count 300 --seed 1 \
    --timeout 120 >"$log.cr" 2>&1; then
  fz_pass=$((fz_pass + 1))
else
  fz_fail=$((fz_fail + 1))
  status=1
fi
cat "$log.cr"
rm -f "$log.fz" "$log.cr"
# ctest prints "N% tests passed, F tests failed out of T" and lists skipped tests.
awk -v vp="$((vg_pass + fz_pass + st_pass))" -v vf="$((vg_fail + fz_fail + st_fail))" '
  /tests passed, .* tests failed out of/ { total += $NF; failed += $(NF - 4) }
  /\(Skipped\)/ { skipped++ }
  END { printf "refit: %d passed, %d failed, %d skipped\n", total - failed - skipped + vp, failed + vf, skipped }
' "$log"
exit $status
