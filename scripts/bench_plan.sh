#!/bin/sh
# Planning speed and memory: kimi-k3 TP8xPP16xEP16xDP16 (2048 GPUs) -> TP16xDP64 (1024 GPUs),
# m2n, gb200-nvl72, on one core. Target: under 2 s and 2 GiB. Prints the measured ratios.
set -eu
cd "$(dirname "$0")/.."
REFIT=${1:-build}/cli/refit
out=$(mktemp)
taskset -c 0 /usr/bin/time -f "%e %M" "$REFIT" plan --model kimi-k3 --train TP8xPP16xEP16xDP16 \
  --infer TP16xDP64 --topology gb200-nvl72 --strategy m2n -q 2>"$out" >/dev/null
read -r secs kib <"$out"
rm -f "$out"
awk -v s="$secs" -v k="$kib" 'BEGIN {
  gib = k / 1048576;
  printf "# bench_plan: kimi-k3 2048 -> 1024 GPUs, m2n, gb200-nvl72, one core\n";
  printf "%-8s %10s %10s %8s\n", "metric", "measured", "target", "ratio";
  printf "%-8s %9.2fs %9.2fs %8.2f\n", "time", s, 2.0, s / 2.0;
  printf "%-8s %8.3fGiB %8.3fGiB %8.2f\n", "memory", gib, 2.0, gib / 2.0;
  exit (s <= 2.0 && gib <= 2.0) ? 0 : 1 }'
