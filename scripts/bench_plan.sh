#!/bin/sh
# Planning speed and memory on one core; prints the measured figures against their targets and
# exits non-zero when one is over. Usage: sh scripts/bench_plan.sh [BUILD [CASE ...]]
#   plan      kimi-k3 TP8xPP16xEP16xDP16 (2048 GPUs) -> TP16xDP64 (1024), m2n, gb200-nvl72:
#             `refit plan`, target 2 s and 2 GiB (the default case)
#   large     kimi-k3 TP8xPP16xEP64xDP32 (4096 GPUs) -> TP32xDP128 (4096), m2n, gb200-nvl72:
#             `refit plan`, target 5 s and 3 GiB
#   memory    kimi-k3 TP8xPP16xEP64 -> TP32xDP32 (1024 + 1024), `refit run --memory` of each
#             strategy, target 10 s each (gather-broadcast: 60 s) and 4 GiB
#   all       the three
# Time is CPU time (user + system): the machine may be shared; wall time is printed beside it,
# and the load average before the first case. The system time is printed too: on the development
# virtual machine it is nearly all the kernel clearing fresh pages, and moves from 0.1 to 2.7 s
# on the same `large` run with what the machine did before (README, "Speed"). BENCH_CPU picks the
# core (default 0): on a shared machine the CPU time of a busy core is inflated too (caches), so
# pick the quieter one. scripts/bench_sim.sh does the same for the executor model's simulation.
set -eu
cd "$(dirname "$0")/.."
REFIT=${1:-build}/cli/refit
[ $# -gt 0 ] && shift
cases=${*:-plan}
[ "$cases" = all ] && cases="plan large memory"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
printf "# load average: %s; core %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)" "${BENCH_CPU:-0}"
printf "%-28s %9s %9s %9s %9s %9s %9s %7s\n" "# case" "wall(s)" "cpu(s)" "sys(s)" "target" \
  "mem(GiB)" "target" "ratio"

# bench NAME SECONDS GIB ARGS...: one run, its figures, and its larger ratio to the targets
bench() {
  name=$1 tsec=$2 tgib=$3
  shift 3
  taskset -c "${BENCH_CPU:-0}" /usr/bin/time -f "%e %U %S %M" "$REFIT" "$@" -q 2>"$out" >/dev/null ||
    { echo "$name: refit failed: $(cat "$out")" >&2; status=1; return; }
  tail -n 1 "$out" | awk -v n="$name" -v ts="$tsec" -v tg="$tgib" '{
    cpu = $2 + $3; gib = $4 / 1048576; r = cpu / ts; if (gib / tg > r) r = gib / tg;
    printf "%-28s %9.2f %9.2f %9.2f %9.2f %9.3f %9.3f %7.2f\n", n, $1, cpu, $3, ts, gib, tg, r;
    exit (r <= 1.0) ? 0 : 1 }' || status=1
}

for c in $cases; do
  case $c in
  plan)
    bench "plan kimi 2048->1024 m2n" 2 2 plan --model kimi-k3 --train TP8xPP16xEP16xDP16 \
      --infer TP16xDP64 --topology gb200-nvl72 --strategy m2n ;;
  large)
    bench "plan kimi 4096->4096 m2n" 5 3 plan --model kimi-k3 --train TP8xPP16xEP64xDP32 \
      --infer TP32xDP128 --topology gb200-nvl72 --strategy m2n ;;
  memory)
    for s in p2p m2n hybrid gather-broadcast; do
      t=10
      [ "$s" = gather-broadcast ] && t=60
      bench "memory kimi 1024+1024 $s" $t 4 run --memory --model kimi-k3 \
        --train TP8xPP16xEP64 --infer TP32xDP32 --strategy "$s"
    done ;;
  *)
    echo "bench_plan.sh: unknown case '$c' (plan, large, memory, all)" >&2
    exit 2 ;;
  esac
done
exit $status
