#!/bin/sh
# The whole test suite on a fresh machine: install, build (plain and ASan/UBSan), run CTest on
# both builds, and the unit tests under valgrind. Ends with one "N passed, N failed" line.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
echo "# clang-format (.clang-format)"
# shellcheck disable=SC2046
clang-format --dry-run --Werror $(git ls-files '*.c' '*.h' 2>/dev/null || find model sim real cli tests -name '*.[ch]')
sh scripts/build.sh build
sh scripts/build.sh build-asan -DREFIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
run_ctest() { # DIR: ctest there, output shown and kept in $log
  rc=0
  (cd "$1" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2) >"$log.ct" 2>&1 || rc=$?
  cat "$log.ct"
  cat "$log.ct" >>"$log"
  rm -f "$log.ct"
  [ "$rc" -eq 0 ] || status=1
}
echo "# ctest (release build)"
run_ctest build
echo "# ctest (ASan/UBSan build)"
run_ctest build-asan
echo "# valgrind on the unit tests"
vg_pass=0
vg_fail=0
for t in datafile dtensor zoo layout topology plan real sim; do
  [ -x build/tests/test_$t ] || continue
  if REFIT_DATA_DIR=$PWD valgrind -q --error-exitcode=1 --leak-check=full \
      --errors-for-leak-kinds=definite build/tests/test_$t >/dev/null 2>"$log.vg"; then
    echo "valgrind test_$t: clean"
    vg_pass=$((vg_pass + 1))
  else
    cat "$log.vg"
    echo "valgrind test_$t: FAILED"
    vg_fail=$((vg_fail + 1))
    status=1
  fi
done
rm -f "$log.vg"
# ctest prints "N% tests passed, F tests failed out of T" and lists skipped tests.
awk -v vp="$vg_pass" -v vf="$vg_fail" '
  /tests passed, .* tests failed out of/ { total += $NF; failed += $(NF - 4) }
  /\(Skipped\)/ { skipped++ }
  END { printf "refit: %d passed, %d failed, %d skipped\n", total - failed - skipped + vp, failed + vf, skipped }
' "$log"
exit $status
