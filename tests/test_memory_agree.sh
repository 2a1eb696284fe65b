#!/bin/sh
# One memory model (model/plan/memory.h): refit plan, sim, advise and run --memory report the same
# fullest inference GPU (`infer_peak_bytes`) within 2%, on four models and every strategy, in
# place and with --double-bank (advise: in place, refit run's default); and what run --memory's
# executor would allocate (`infer_allocated_bytes`, first-fit holding) is within 2% of the count
# less NCCL's buffers (`infer_refit_peak_bytes`: NCCL allocates those itself). Also with --staged
# and --one-comm (refit run's other schedules).
# Usage: test_memory_agree.sh REFIT
set -u
REFIT=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
# model train gpus tp: advise's candidates of that size give the inference layouts compared
for c in "tiny-moe TP2 2 2" "tiny-mla TP2xPP2xEP2 4 2" "tiny-next TP2xPP2 4 2" \
  "qwen3-30b-a3b TP2xEP8 8 4"; do
  set -- $c
  m=$1 t=$2 n=$3 tp=$4
  "$REFIT" advise -m "$m" -t "$t" -n "$n" --tp "$tp" -T dgx-h100 --json -q >"$TMP/advise.json" \
    2>"$TMP/err" || { cat "$TMP/err"; echo "FAIL: advise $m"; status=1; continue; }
  layout=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ok = [r for r in d["ranked"] if r["placement"] == "split" and "infer_peak_bytes" in r]
print(ok[0]["infer"] + " " + ok[0].get("framework", "vllm") if ok else "")' "$TMP/advise.json")
  [ -n "$layout" ] || { echo "FAIL: advise $m: no split candidate"; status=1; continue; }
  fw=${layout#* } layout=${layout% *} # advise's winner may be an SGLang layout (attention DP)
  for bank in "" --double-bank --staged --one-comm; do
    A="-m $m -t $t -i $layout --infer-framework $fw -T dgx-h100 -s all --json -q $bank"
    # refit plan has no --staged / --one-comm: it counts refit run's default (an empty file)
    case $bank in --staged | --one-comm) : >"$TMP/plan.json" ;; *) "$REFIT" plan $A >"$TMP/plan.json" ;; esac \
      2>"$TMP/err" &&
      "$REFIT" sim $A >"$TMP/sim.json" 2>>"$TMP/err" &&
      "$REFIT" run --local --memory $A >"$TMP/run.json" 2>>"$TMP/err" ||
      { cat "$TMP/err"; echo "FAIL: $m $layout $bank"; status=1; continue; }
    /usr/bin/python3 - "$TMP" "$layout" "${bank:-in-place}" "$m" "$fw" <<'PY' || status=1
import json, os, sys
tmp, layout, bank, model, fw = sys.argv[1:6]
peak, own = {}, {}
for cmd in ("plan", "sim", "run"):
    if os.path.getsize(f"{tmp}/{cmd}.json") == 0:  # no plan row for --staged / --one-comm
        continue
    for r in json.load(open(f"{tmp}/{cmd}.json"))["strategies"]:
        if "infer_peak_bytes" in r:
            peak.setdefault(r["strategy"], {})[cmd] = r["infer_peak_bytes"]
        if cmd == "run":
            # refit's own allocation, against the count less NCCL's buffers (NCCL's own)
            peak[r["strategy"]]["allocated"] = r["infer_allocated_bytes"]
            own[r["strategy"]] = r["infer_refit_peak_bytes"]
            assert r["weight_banks"] == (2 if bank == "--double-bank" else 1), r
if bank == "in-place":
    for r in json.load(open(f"{tmp}/advise.json"))["ranked"]:
        if (r["infer"] == layout and r["placement"] == "split" and "infer_peak_bytes" in r
                and r.get("framework", "vllm") == fw):
            peak[r["strategy"]]["advise"] = r["infer_peak_bytes"]
bad = 0
assert len(peak) == 4, peak
for s, v in sorted(peak.items()):
    ref = v["run"]
    off = {k: x / (own[s] if k == "allocated" else ref) - 1 for k, x in v.items()}
    worst = max(abs(x) for x in off.values())
    want = 5 if bank == "in-place" else 4 if bank == "--double-bank" else 3
    line = "%s %s %s %s: %s" % (model, layout, bank, s, ", ".join("%s %+.3f%%" % (k, 100 * x) for k, x in sorted(off.items())))
    if worst > 0.02 or len(v) != want:
        print("FAIL: " + line)
        bad = 1
    else:
        print("ok: " + line)
sys.exit(bad)
PY
  done
done
exit $status
