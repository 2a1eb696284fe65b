#!/bin/sh
# Simulation speed of refit's executor model (`refit sim --software refit --software-variant
# executor`, the schedule `refit run` executes); prints the measured figures against their targets
# (issue 26: fast enough to be the default prediction) and exits non-zero when one is over.
# Usage: sh scripts/bench_sim.sh [BUILD [CASE ...]]
#   deepseek  deepseek-v3 PP16xEP16 (256 GPUs) -> TP32xDP8 (256), m2n, gb200-nvl72 (512 ranks):
#             target 30 s (the default case)
#   kimi      kimi-k3 TP8xPP16xEP64xDP16 (2048 GPUs) -> TP32xDP32 (1024), m2n, gb200-nvl72:
#             target 120 s
#   all       the two
# Time is CPU time (user + system, the SimGrid child included): the machine may be shared; wall
# time and peak RSS are printed beside it (no memory target: the ratio is the time's).
set -eu
cd "$(dirname "$0")/.."
REFIT=${1:-build}/cli/refit
[ $# -gt 0 ] && shift
cases=${*:-deepseek}
[ "$cases" = all ] && cases="deepseek kimi"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
printf "# load average: %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-32s %9s %9s %9s %9s %7s\n" "# case" "wall(s)" "cpu(s)" "target" "mem(GiB)" "ratio"

# bench NAME SECONDS ARGS...: one run of refit sim, its figures and its ratio to the target
bench() {
  name=$1 tsec=$2
  shift 2
  /usr/bin/time -f "%e %U %S %M" "$REFIT" sim "$@" --software refit --software-variant executor \
    -q 2>"$out" >/dev/null || { echo "$name: refit failed: $(cat "$out")" >&2; status=1; return; }
  tail -n 1 "$out" | awk -v n="$name" -v ts="$tsec" '{
    cpu = $2 + $3; r = cpu / ts;
    printf "%-32s %9.2f %9.2f %9.2f %9.3f %7.2f\n", n, $1, cpu, ts, $4 / 1048576, r;
    exit (r <= 1.0) ? 0 : 1 }' || status=1
}

for c in $cases; do
  case $c in
  deepseek)
    bench "sim deepseek-v3 256+256 m2n" 30 -m deepseek-v3 -t PP16xEP16 -i TP32xDP8 \
      -T gb200-nvl72 -s m2n ;;
  kimi)
    bench "sim kimi-k3 2048+1024 m2n" 120 -m kimi-k3 -t TP8xPP16xEP64xDP16 -i TP32xDP32 \
      -T gb200-nvl72 -s m2n ;;
  *)
    echo "bench_sim.sh: unknown case '$c' (deepseek, kimi, all)" >&2
    exit 2 ;;
  esac
done
exit $status
