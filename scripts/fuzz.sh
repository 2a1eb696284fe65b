#!/bin/sh
# Build the libFuzzer targets (clang, ASan/UBSan) into build-fuzz/ and run each for SECONDS
# (default 60) on a scratch corpus seeded from the repository's own inputs. Any crash, sanitizer
# report or leak fails the run; the reproducer is left in build-fuzz/artifacts/.
#   sh scripts/fuzz.sh 600          # a 10-minute campaign per target
#   sh scripts/fuzz.sh 60 spec      # one target
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
shift 2>/dev/null || true
targets=${*:-"json layout spec model safetensors topology calibration"}
command -v clang >/dev/null || { echo "fuzz: clang is needed (apt-get install clang)"; exit 2; }
cmake -S . -B build-fuzz -DREFIT_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ >build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
set --
for t in $targets; do set -- "$@" "fuzz_$t"; done
cmake --build build-fuzz -j"$(nproc)" --target "$@" \
  >build-fuzz.build.log 2>&1 || { tail -30 build-fuzz.build.log; exit 1; }
seeds() { # TARGET: the files its corpus starts from
  case $1 in
  json) ls tests/data/*.json model/configs/*.json ;;
  layout) ls tests/fuzz/seeds/layout/* ;;
  spec) ls tests/data/*.json ;;
  model) ls model/configs/*.json ;;
  safetensors) ls tests/fuzz/seeds/safetensors/* ;;
  topology) ls topologies/*.topo tests/data/sim/*.topo ;;
  calibration) ls sim/calibration/*.cal tests/data/sim/*.cal ;;
  esac
}
mkdir -p build-fuzz/artifacts
export REFIT_DATA_DIR=$PWD ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
# fuzz_one TARGET: one campaign; its summary line goes to build-fuzz/fuzz_TARGET.result
fuzz_one() {
  t=$1
  corpus=$(mktemp -d)
  # shellcheck disable=SC2046
  cp $(seeds "$t") "$corpus"/
  log=build-fuzz/fuzz_$t.log
  if build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=4096 \
      -timeout=25 -artifact_prefix=build-fuzz/artifacts/"$t"- "$corpus" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1)
    echo "fuzz_$t: clean (${runs:-no summary}, ${secs}s, corpus $(ls "$corpus" | wc -l) inputs)" \
      >build-fuzz/fuzz_"$t".result
  else
    { tail -40 "$log"; echo "fuzz_$t: FAILED (log $log, reproducer in build-fuzz/artifacts/)"; } \
      >build-fuzz/fuzz_"$t".result
  fi
  rm -rf "$corpus"
}
# One campaign per core at a time (REFIT_FUZZ_JOBS overrides): each target keeps its whole
# time budget on a core of its own, and the run takes targets / cores x SECONDS.
jobs=${REFIT_FUZZ_JOBS:-$(nproc)}
n=0
for t in $targets; do
  fuzz_one "$t" &
  n=$((n + 1))
  [ $((n % jobs)) -ne 0 ] || wait
done
wait
status=0
for t in $targets; do
  cat build-fuzz/fuzz_"$t".result
  ! grep -q ': FAILED' build-fuzz/fuzz_"$t".result || status=1
  rm -f build-fuzz/fuzz_"$t".result
done
exit $status
