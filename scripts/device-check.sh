#!/bin/sh
# The GPU checks of the CUDA backend, as one prepared script for a machine with one GPU (issue 9
# "On a GPU", issue 14). Steps, each logged under $OUT (default ./device-out):
#   1. build with the CUDA backend (build-gpu/, warnings as errors)          -> build.log
#   2. ctest -R real_cuda (single-GPU mode, a one-rank NCCL self-send)       -> ctest.log
#   3. pack / unpack bandwidth of the copy kernel against device memcpy      -> copy-bw.txt
#      (test_real --copy-bw; target: ratio >= 0.8)
#   4. a model-sized single-GPU refit: qwen3-30b-a3b (per-layer shapes of the real model) scaled
#      to $LAYERS (8) of its 48 layers, so that every rank fits on one GPU together,
#      TP2xPP4 -> TP4xDP2, every strategy, --local --backend cuda          -> refit.txt
#      (its --memory figures first                                         -> memory.txt)
# Budget: at most 200 + 90 + 45 + 30 + 120 s = about 8 minutes (each step has its own timeout). Without a GPU it stops after
# saying so (exit 77). Usage: sh scripts/device-check.sh [BUILD_DIR]
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
out=${OUT:-./device-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${1:-build-gpu}
layers=${LAYERS:-8}
summary="$out/summary.txt"
: >"$summary"
t0=$(date +%s)

say() {
  echo "device-check: $*"
  echo "$*" >>"$summary"
}
elapsed() { echo $(($(date +%s) - t0)); }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$out/gpus.txt" 2>&1 ||
  ! grep -q '^GPU' "$out/gpus.txt"; then
  say "no GPU on this machine (nvidia-smi -L: $(head -1 "$out/gpus.txt" 2>/dev/null || echo missing)): nothing to check"
  exit 77
fi
say "GPUs: $(grep -c '^GPU' "$out/gpus.txt") ($(head -1 "$out/gpus.txt"))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$out/gpus.txt" 2>&1

fails=0
step() { # step NAME RC
  if [ "$2" = 0 ]; then say "ok: $1 ($(elapsed) s so far)"; else
    say "FAIL: $1 (exit $2, $(elapsed) s so far)"
    fails=$((fails + 1))
  fi
}

# 1. Build (the CUDA backend must be found: no silent host-only build).
say "1. building $build with the CUDA backend"
timeout 200 sh scripts/build.sh "$build" -DREFIT_CUDA=ON >"$out/build.log" 2>&1
rc=$?
if [ $rc = 0 ] && ! grep -q '^-- CUDA backend: nvcc' "$build.cmake.log"; then
  grep 'CUDA backend' "$build.cmake.log" >>"$out/build.log"
  rc=1
fi
step "build ($(grep -h 'CUDA backend' "$build.cmake.log" 2>/dev/null | head -1))" $rc
if [ $rc != 0 ]; then
  tail -20 "$out/build.log"
  exit 1
fi
refit="$build/cli/refit"
test_real="$build/tests/test_real"

# 2. The CUDA tests of the suite.
say "2. ctest -R real_cuda"
(cd "$build" && timeout 90 ctest -R real_cuda --output-on-failure) >"$out/ctest.log" 2>&1
rc=$?
grep -q 'real_cuda .*Skipped' "$out/ctest.log" && rc=77
step "ctest -R real_cuda" $rc

# 3. Copy bandwidth: pack / unpack lists against cudaMemcpyAsync device to device.
say "3. copy bandwidth (256 MiB lists)"
timeout 45 "$test_real" --copy-bw 256 >"$out/copy-bw.txt" 2>&1
rc=$?
cat "$out/copy-bw.txt"
step "copy bandwidth" $rc
grep -q 'below the 0.8 target' "$out/copy-bw.txt" &&
  say "note: a list is below 0.8 of device memcpy bandwidth (see copy-bw.txt)"

# 4. A model-sized refit on one GPU: every rank of the plan in this process.
say "4. qwen3-30b-a3b@$layers TP2xPP4 -> TP4xDP2, --local --backend cuda"
cfg="$out/qwen3-30b-a3b-${layers}L.json"
sed -E "s/\"num_hidden_layers\": *[0-9]+/\"num_hidden_layers\": $layers/" \
  "$root/model/configs/qwen3-30b-a3b.json" >"$cfg"
run="$refit run --local --model $cfg --train TP2xPP4 --infer TP4xDP2 --topology dgx-h100"
echo "\$ $run --memory" >"$out/memory.txt"
timeout 30 $run --memory >>"$out/memory.txt" 2>&1
step "--memory" $?
grep -E '^## |largest rank' "$out/memory.txt"
echo "\$ $run --warmup 1 --iters 3" >"$out/refit.txt"
timeout 120 $run --warmup 1 --iters 3 >>"$out/refit.txt" 2>&1
rc=$?
grep -E '^## |^   total|^# wrong|^# OK|^# FAILED|failed' "$out/refit.txt"
step "single-GPU refit (every strategy, zero wrong elements)" $rc

say "done in $(elapsed) s, $fails failure(s); results in $out"
[ $fails = 0 ]
