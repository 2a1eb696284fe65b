#!/bin/sh
# The GPU checks of the CUDA backend, as one prepared script for a machine with one GPU (issue 9
# "On a GPU", issue 14). Steps, each logged under $OUT (default ./device-out):
#   0. preflight: one line per missing dependency (nothing can be installed there)
#   1. build with the CUDA backend (build-gpu/, the GPU's architecture, no -Werror) -> build.log
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

# 0. Preflight: a device machine cannot install anything, so name every missing piece first,
# one line each, instead of failing inside cmake.
missing=0
need() { # WHAT COMMAND...: the command must succeed
  what=$1
  shift
  if ! "$@" >/dev/null 2>&1; then
    say "missing: $what"
    missing=$((missing + 1))
  fi
}
need "cmake" command -v cmake
need "a C compiler (cc)" command -v cc
need "pkg-config" command -v pkg-config
need "GLib (pkg-config glib-2.0)" pkg-config --exists glib-2.0
need "json-glib (pkg-config json-glib-1.0)" pkg-config --exists json-glib-1.0
need "SimGrid (pkg-config simgrid)" pkg-config --exists simgrid
need "MPI (mpicc)" command -v mpicc
need "an MPI launcher (mpirun)" command -v mpirun
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
need "the CUDA compiler (nvcc on PATH or /usr/local/cuda/bin)" test -n "$nvcc"
need "NCCL (nccl.h under /usr/include, /usr/local/cuda or \$NCCL_HOME)" sh -c \
  'ls /usr/include/nccl.h /usr/local/cuda/include/nccl.h "${NCCL_HOME:-/nonexistent}/include/nccl.h" 2>/dev/null | grep -q .'
if [ $missing != 0 ]; then
  say "FAIL: preflight: $missing missing piece(s); nothing built"
  exit 1
fi
[ -n "$nvcc" ] && say "nvcc: $("$nvcc" --version | tail -1)"
# Build for the GPU found (compute capability 9.0 -> 90): one architecture builds in a fraction
# of the three-architecture time.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case $arch in '' | *[!0-9]*) arch="80;90;100" ;; esac

# 1. Build (the CUDA backend must be found: no silent host-only build). Warnings are not errors
# here: a compiler this project's CI does not run must not stop a hardware check (CPU CI keeps
# -Werror).
say "1. building $build with the CUDA backend (architectures $arch, -Werror off)"
timeout 200 sh scripts/build.sh "$build" -DREFIT_CUDA=ON -DREFIT_WERROR=OFF \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" ${nvcc:+"-DCMAKE_CUDA_COMPILER=$nvcc"} >"$out/build.log" 2>&1
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
