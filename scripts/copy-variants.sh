#!/bin/sh
# Build test_real with other settings of the CUDA backend's copy kernel, side by side, into a
# bundle of scripts/device-bundle.sh: bin/test_real-NAME, one per variant. device-check.sh's
# step 3 then measures each one's copy bandwidth on the GPU (`test_real-NAME --copy-bw 256`),
# so that the settings are chosen on measurements of one machine in one call.
# A variant is NAME:BATCH:INFLIGHT:MINBLOCKS:SMALL[:SHIFT] (real/backends/backend_cuda.cu's
# COPY_BATCH, COPY_INFLIGHT, COPY_MIN_BLOCKS, backend.h's RF_REAL_SMALL_COPY_BYTES, and
# SHIFT_INFLIGHT, 1 when not given).
# Usage: sh scripts/copy-variants.sh BUNDLE_DIR VARIANT...
set -eu
cd "$(dirname "$0")/.."
b=${1:?usage: copy-variants.sh BUNDLE_DIR NAME:BATCH:INFLIGHT:MINBLOCKS:SMALL...}
shift
[ -d "$b/bin" ] || { echo "copy-variants: $b is not a bundle (scripts/device-bundle.sh)" >&2; exit 1; }
for v in "$@"; do
  IFS=: read -r name batch inflight minblocks small shift <<EOF
$v
EOF
  [ -n "$small" ] || { echo "copy-variants: '$v' is not NAME:BATCH:INFLIGHT:MINBLOCKS:SMALL[:SHIFT]" >&2; exit 1; }
  shift=${shift:-1}
  dir=build-var-$name
  cmake -S . -B "$dir" -DREFIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DREFIT_WERROR=OFF "-DCMAKE_C_FLAGS=-DRF_REAL_SMALL_COPY_BYTES=${small}u" \
    "-DCMAKE_CUDA_FLAGS=-DRF_REAL_SMALL_COPY_BYTES=${small}u -DCOPY_BATCH=$batch -DCOPY_INFLIGHT=$inflight -DCOPY_MIN_BLOCKS=$minblocks -DSHIFT_INFLIGHT=$shift" \
    >"$dir.cmake.log" 2>&1 || { cat "$dir.cmake.log"; exit 1; }
  cmake --build "$dir" -j"$(nproc)" --target test_real >/dev/null
  strip --strip-debug -o "$b/bin/test_real-$name" "$dir/tests/test_real"
  echo "copy-variants: $b/bin/test_real-$name (batch $batch, $inflight in flight, $minblocks blocks/SM, small <= $small B, $shift shifted in flight)"
done
