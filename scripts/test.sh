#!/bin/sh
# The whole test suite on a fresh machine: install, build (plain and ASan/UBSan), run CTest on
# both, and the model tests under valgrind.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
sh scripts/build.sh build
sh scripts/build.sh build-asan -DREFIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "# ctest (release build)"
(cd build && ctest --output-on-failure -j2)
echo "# ctest (ASan/UBSan build)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 -LE no-asan)
echo "# valgrind on the plan engine tests"
for t in dtensor zoo layout topology plan; do
  REFIT_DATA_DIR=$PWD valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    build/tests/test_$t >/dev/null
  echo "valgrind test_$t: clean"
done
