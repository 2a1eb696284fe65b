#!/bin/sh
# The GPU checks of the CUDA backend, as one prepared script for a machine with one GPU (issue 9
# "On a GPU", issues 14 and 24). Steps, each logged under $OUT (default ./device-out), and ONE
# summary of them all in $OUT/summary.txt:
#   0. preflight: one line per missing dependency (nothing can be installed there)
#   1. build with the CUDA backend (build-gpu/, the GPU's architecture, no -Werror) -> build.log
#   2. ctest -R real_cuda (single-GPU mode, one-rank NCCL self-send and multi-group) -> ctest.log
#   3. pack / unpack bandwidth of the copy kernel against a device memcpy of the same bytes, per
#      shape, every copied byte checked (384 B expert rows included; test_real --copy-bw; target:
#      ratio >= 0.8); then each variant of the kernel the bundle holds (copy-variants.sh)
#                                                                   -> copy-bw.txt, copy-bw-*.txt
#  3b. one rank's operations, host and device time: a copy kernel, a group (self-send), a round,
#      an event record (test_real --op-costs: the executor model's per-round costs) -> op-costs.txt
#   4. one-rank NCCL, a 256 MiB spec at 2 MiB of staging (32 groups, each a self-send), timed
#      with --one-comm --slots 1 and 2: the two-lane path and its overlap      -> nccl-slots*.txt
#  4b. the same on 8 lanes, --one-comm against --lane-comms (the default: a communicator and
#      stream per lane): whether the lanes' NCCL kernels run side by side      -> nccl-lanes8-*.txt
#  4c. the same 256 MiB in 2 .. 256 groups: the cost of a group (least squares) -> nccl-stage*.txt
#   5. a model-sized single-GPU refit: qwen3-30b-a3b (per-layer shapes of the real model) scaled to
#      $LAYERS (8) of its 48 layers, TP2xPP4 -> TP4xDP2, --local --backend cuda. All 16 ranks
#      share the GPU: each strategy runs at the most layers (8, 4, 2, 1) whose `--memory --local`
#      process total fits 85% of the GPU's free memory (gather-broadcast at 8 layers needs 132 GiB)
#                                                                                  -> memory-*.txt, refit-*.txt
# Budget: at most 180 + 60 + 40 + 2 x 40 + 13 x 25 + 4 x 4 x 30 + 2 x 60 s = 16 minutes on an H200
# with 16 cores, 40 s more per copy variant (each step has its own timeout); with --bundle on an
# H200 it took 33-55 s (2026-12-04). Without
# a GPU it stops after saying so (exit 77).
# Usage: sh scripts/device-check.sh [BUILD_DIR]
#        sh scripts/device-check.sh --bundle DIR
# With --bundle, nothing is built there: DIR is what scripts/device-bundle.sh packed from a CUDA
# build made elsewhere (binaries, their libraries, Open MPI's components), for a machine that has
# a GPU and NCCL but not GLib, json-glib, SimGrid or Open MPI (the device tool's H200 image).
# One-rank runs then go through the bundle's mpirun1 (an isolated MPI singleton) instead of
# mpirun, and step 2 runs the real_cuda test's script directly (ctest's files name this
# machine's paths).
set -u
# the measurement hook is set only where a step asks for it (3b, 4c), never inherited
unset REFIT_NCCL_BLOCKING
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
out=${OUT:-./device-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle=""
if [ "${1:-}" = --bundle ]; then
  bundle=$(cd "${2:?--bundle needs a folder}" && pwd) || exit 1
  set -- build-gpu
fi
build=${1:-build-gpu}
launch="mpirun --allow-run-as-root"
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

# NCCL says its version at its first communicator (which library ran: the bundle finds the
# machine's own)
NCCL_DEBUG=${NCCL_DEBUG:-VERSION}
export NCCL_DEBUG
fails=0
step() { # step NAME RC
  if [ "$2" = 0 ]; then say "ok: $1 ($(elapsed) s so far)"; else
    say "FAIL: $1 (exit $2, $(elapsed) s so far)"
    fails=$((fails + 1))
  fi
}

# 0. Preflight: a device machine cannot install anything, so name every missing piece first,
# one line each, instead of failing inside cmake.
if [ -n "$bundle" ]; then
  REFIT_BUNDLE=$bundle
  REFIT_DATA_DIR=$root
  export REFIT_BUNDLE REFIT_DATA_DIR
  # shellcheck disable=SC1091 # written by scripts/device-bundle.sh
  . "$bundle/env.sh"
  say "bundle $bundle; NCCL ${REFIT_BUNDLE_NCCL:-not found}"
  unresolved=$(ldd "$bundle/bin/refit" "$bundle/bin/test_real" 2>&1 | grep 'not found' | sort -u)
  if [ -n "$unresolved" ]; then
    say "FAIL: preflight: the bundle's binaries miss libraries: $(echo "$unresolved" | tr -s ' \t\n' ' ')"
    exit 1
  fi
  refit="$bundle/bin/refit"
  test_real="$bundle/bin/test_real"
  launch="$bundle/bin/mpirun1"
  say "1. nothing built here: $("$refit" --version 2>&1 | head -1); $(cat "$bundle/info.txt" 2>/dev/null)"
else
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
timeout 180 sh scripts/build.sh "$build" -DREFIT_CUDA=ON -DREFIT_WERROR=OFF \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" ${nvcc:+"-DCMAKE_CUDA_COMPILER=$nvcc"} >"$out/build.log" 2>&1
rc=$?
if [ $rc = 0 ] && ! grep -q '^-- CUDA backend: nvcc' "$build.cmake.log"; then
  grep 'CUDA backend' "$build.cmake.log" >>"$out/build.log"
  rc=1
fi
step "build ($(grep -h 'CUDA backend' "$build.cmake.log" 2>/dev/null | head -1))" $rc
if [ $rc != 0 ]; then
  tail -20 "$out/build.log" | tee -a "$summary"
  exit 1
fi
refit="$build/cli/refit"
test_real="$build/tests/test_real"
fi

# 2. The CUDA tests of the suite.
if [ -n "$bundle" ]; then
  say "2. the real_cuda test (tests/test_real.sh cuda, one-rank runs through mpirun1)"
  timeout 60 sh tests/test_real.sh cuda "$refit" "$test_real" "$launch" >"$out/ctest.log" 2>&1
  rc=$?
else
  say "2. ctest -R real_cuda"
  (cd "$build" && timeout 60 ctest -R real_cuda --output-on-failure) >"$out/ctest.log" 2>&1
  rc=$?
  grep -q 'real_cuda .*Skipped' "$out/ctest.log" && rc=77
fi
grep -E '^(ok|FAIL|SKIP|note):' "$out/ctest.log" >>"$summary"
step "ctest -R real_cuda" $rc

# 3. Copy bandwidth: pack / unpack lists against cudaMemcpyAsync device to device, per shape; then
# the other settings of the copy kernel the bundle holds (scripts/copy-variants.sh).
copy_bw() { # VARIANT (empty: the build's) FILE TEST_REAL
  say "3. copy bandwidth (256 MiB lists)${1:+, variant $1}"
  timeout 40 "$3" --copy-bw 256 >"$2" 2>&1
  rc=$?
  tee -a "$summary" <"$2"
  step "copy bandwidth${1:+ ($1)}" $rc
  grep -q 'below the 0.8 target' "$2" &&
    say "note: a list is below 0.8 of device memcpy bandwidth (see above)"
}
copy_bw "" "$out/copy-bw.txt" "$test_real"
for v in ${bundle:+"$bundle"/bin/test_real-*}; do
  [ -x "$v" ] && copy_bw "${v##*/test_real-}" "$out/copy-bw-${v##*/test_real-}.txt" "$v"
done

# 3b. What a round's operations cost, host and device (the executor model's [executor] costs).
say "3b. one rank's operations: copy kernel, group, round, event record"
timeout 40 "$test_real" --op-costs >"$out/op-costs.txt" 2>&1
rc=$?
cat "$out/op-costs.txt" | tee -a "$summary"
step "operation costs" $rc
# the same on blocking communicators (a measurement hook): what NCCL's launch thread of a
# non-blocking communicator costs a group
say "3b. the same with REFIT_NCCL_BLOCKING=1 (blocking communicators)"
REFIT_NCCL_BLOCKING=1 timeout 40 "$test_real" --op-costs >"$out/op-costs-blocking.txt" 2>&1
rc=$?
grep -v '^#' "$out/op-costs-blocking.txt" | tee -a "$summary"
step "operation costs, blocking communicators" $rc

# 4. One rank, NCCL: every transfer a self-send, tens of groups at 8 MiB of staging; one lane
# against two (the second overlaps a group's transfer with the other lane's pack and unpack).
say "4. one-rank NCCL, 32 x 8 MiB at 2 MiB staging (32 groups), --slots 1 and 2"
spec="$out/one-rank-256mib.json"
{
  printf '{"tensors":['
  t=0
  while [ $t -lt 32 ]; do
    [ $t = 0 ] || printf ','
    printf '{"name":"w%d","shape":[2048,2048],"dtype":"bf16",' $t
    printf '"src":{"mesh":[1],"ranks":[0],"placements":["R"]},'
    printf '"dst":{"mesh":[1],"ranks":[0],"placements":["R"]}}'
    t=$((t + 1))
  done
  printf ']}\n'
} >"$spec"
# one_rank NAME FLAGS...: the spec on one rank over NCCL at 2 MiB of staging with FLAGS, logged
# to $out/nccl-NAME.txt, one line of its groups, time and wrong elements in the summary, one
# step; $total gets its time (empty when there is none).
one_rank() {
  name=$1
  shift
  f="$out/nccl-$name.txt"
  echo "\$ $launch -np 1 $refit run --backend cuda --spec $spec -s p2p --staging-mib 2 $*" >"$f"
  # shellcheck disable=SC2086 # $launch: words
  timeout 25 $launch -np 1 "$refit" run --backend cuda --spec "$spec" -s p2p \
    --staging-mib 2 "$@" --warmup 1 --iters 5 >>"$f" 2>&1
  rc=$?
  groups=$(sed -n 's/.* \([0-9]*\) groups,.*/\1/p' "$f" | head -1)
  total=$(awk '/^   total/ {print $4}' "$f" | head -1)
  [ "$name" = slots1 ] && say "   $(grep -m1 'NCCL version' "$f" || echo 'no NCCL version line')"
  say "   ${REFIT_NCCL_BLOCKING:+REFIT_NCCL_BLOCKING=$REFIT_NCCL_BLOCKING }$*: ${groups:-?} groups, total ${total:-?} s, $(grep '^# wrong elements' "$f" || echo 'no wrong-elements line')"
  [ $rc = 0 ] && grep -q '^# wrong elements: 0$' "$f" || rc=1
  step "one-rank NCCL multi-group, $*" $rc
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
one_rank slots1 --one-comm --slots 1
t1=$total
one_rank slots2 --one-comm --slots 2
t2=$total
if [ -n "$t1" ] && [ -n "$t2" ]; then
  say "   lane overlap: --slots 1 / --slots 2 = $(ratio "$t1" "$t2") (above 1: the lanes overlap)"
fi

# 4b. Lane communicators (refit run's default since 2026-12-04, issue 26): the same spec on 8
# lanes, once on the one communicator and stream (--one-comm), once with each lane's groups on a
# communicator (ncclCommSplit) and stream of its own. What the simulator assumes and no GPU has shown: that the lanes' NCCL
# kernels run side by side; the ratio of the two times says it (above 1: they do).
say "4b. one-rank NCCL, the same spec on 8 lanes, one communicator against --lane-comms"
one_rank lanes8-one --one-comm --slots 8
l1=$total
one_rank lanes8-lane --slots 8 --lane-comms
l8=$total
if [ -n "$l1" ] && [ -n "$l8" ]; then
  say "   lane communicators: one communicator / --lane-comms = $(ratio "$l1" "$l8") (above 1: the lanes' kernels run side by side)"
fi

# 4c. The cost of a group: the same 256 MiB at staging bounds that cut it into 2 .. 256 groups,
# one lane; the slope of time over groups (least squares) is what a group costs beyond its bytes
# (the host's posting, NCCL's launch and the copy kernels' launches, a round trip per group).
say "4c. one-rank NCCL, 256 MiB in 2 .. 256 groups (--staging-mib 32 .. 0.25), --one-comm --slots 1"
sweep=""
for mib in 32 8 2 1 0.25; do
  one_rank "stage$mib" --one-comm --slots 1 --staging-mib "$mib"
  [ -n "$total" ] && [ -n "$groups" ] && sweep="$sweep $groups:$total"
done
if [ -n "$sweep" ]; then
  say "   $(echo "$sweep" | tr ' ' '\n' | awk -F: 'NF == 2 { n++; x += $1; y += $2; xx += $1 * $1; xy += $1 * $2 }
    END { if (n < 2) { print "too few points"; exit }
          b = (n * xy - x * y) / (n * xx - x * x); a = (y - b * x) / n
          printf "per group %.1f us, per refit %.3f ms (least squares over %d staging bounds)", b * 1e6, a * 1e3, n }')"
fi
# whether the lanes hide it: the 256 groups on 2 lanes (one communicator), and as refit run
# chooses by default (lanes and their communicators)
one_rank stage0.25-slots2 --one-comm --slots 2 --staging-mib 0.25
one_rank stage0.25-default --staging-mib 0.25
REFIT_NCCL_BLOCKING=1
export REFIT_NCCL_BLOCKING
one_rank stage0.25-blocking --one-comm --slots 1 --staging-mib 0.25
unset REFIT_NCCL_BLOCKING

# 5. A model-sized refit on one GPU: every rank of the plan in this process, each strategy at the
# most layers whose process total fits.
free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' ')
case $free_mib in '' | *[!0-9]*) free_mib=0 ;; esac
fit_gib=$(awk -v m="$free_mib" 'BEGIN { printf "%.1f", m * 0.85 / 1024 }')
say "5. qwen3-30b-a3b TP2xPP4 -> TP4xDP2, --local --backend cuda; $free_mib MiB free, fit under $fit_gib GiB"
plan="--local --backend cuda --train TP2xPP4 --infer TP4xDP2 --topology dgx-h100"
cfg_of() { # LAYERS: the model at that many layers
  c="$out/qwen3-30b-a3b-${1}L.json"
  sed -E "s/\"num_hidden_layers\": *[0-9]+/\"num_hidden_layers\": $1/" \
    "$root/model/configs/qwen3-30b-a3b.json" >"$c"
  echo "$c"
}
picks=""
for s in gather-broadcast p2p m2n hybrid; do
  l=$layers
  while :; do
    m="$out/memory-$s-${l}L.txt"
    # shellcheck disable=SC2086 # $plan: words
    timeout 30 "$refit" run $plan --model "$(cfg_of "$l")" -s "$s" --memory >"$m" 2>&1
    gib=$(awk '/process total:/ {print $3}' "$m" | head -1)
    if [ -n "$gib" ] && awk -v g="$gib" -v f="$fit_gib" 'BEGIN { exit !(g <= f) }'; then break; fi
    [ "$l" -le 1 ] && break
    l=$((l / 2))
  done
  say "   $s: $l layers, process total ${gib:-?} GiB"
  picks="$picks $l:$s"
done
for l in $(echo "$picks" | tr ' ' '\n' | sed -n 's/:.*//p' | sort -un); do
  strategies=$(echo "$picks" | tr ' ' '\n' | sed -n "s/^$l://p" | paste -sd, -)
  f="$out/refit-${l}L.txt"
  echo "\$ $refit run $plan --model $(cfg_of "$l") -s $strategies --warmup 1 --iters 3" >"$f"
  # shellcheck disable=SC2086 # $plan: words
  timeout 60 "$refit" run $plan --model "$(cfg_of "$l")" -s "$strategies" --warmup 1 --iters 3 >>"$f" 2>&1
  rc=$?
  grep -E '^## |^   total|^# wrong|^# OK|^# FAILED|failed|GiB' "$f" | tee -a "$summary"
  step "single-GPU refit at $l layers ($strategies, zero wrong elements)" $rc
done

say "done in $(elapsed) s, $fails failure(s); results in $out"
[ $fails = 0 ]
