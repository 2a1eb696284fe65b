#!/bin/sh
# What-if tools: refit topology, memory checks of plan and sim, refit advise, refit step.
set -u
REFIT=${1:?usage: test_whatif.sh path/to/refit}
DATA=$(dirname "$0")/data
. "$(dirname "$0")/lib.sh"
# row OUT MODE STRATEGY: the table row of refit step
row() { grep "^$1 *$2 " "$TMP/out" | tr -s ' '; }

# --- topology files
expect_ok "topology show" "$REFIT" topology show gb200-nvl72
grep -q "memory_GB *186" "$TMP/out" || bad "topology show lacks memory_GB 186"
grep -q "rail-optimized" "$TMP/out" || bad "topology show lacks the fabric kind"
expect_ok "topology show json" "$REFIT" topology show dgx-h100 --json
grep -q '"gpu.memory_GB" : 80' "$TMP/out" || bad "topology json lacks gpu.memory_GB"
expect_ok "topology check inherits" "$REFIT" topology check "$DATA/custom-cal.topo"
grep -q "gb200-nvl72.cal + 1 override from topology my-gb200" "$TMP/out" || bad "calibration base not used: $(cat "$TMP/out")"
expect_err "topology bad override" "efficiency.bogus is not a calibration key" "$REFIT" topology check "$DATA/custom-badcal.topo"
expect_err "topology usage" "usage: refit topology" "$REFIT" topology list
expect_err "topology unknown" "unknown topology" "$REFIT" topology show cray

# --- the calibration a prediction used
expect_ok "sim json calibration" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T "$DATA/custom-cal.topo" -s m2n --json
grep -q '"calibration" : ".*gb200-nvl72.cal + 1 override' "$TMP/out" || bad "sim json lacks the calibration"
grep -q '"infer_weights_bytes"' "$TMP/out" || bad "sim json lacks infer_weights_bytes"
expect_ok "sim table calibration" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T gb200-nvl72 -s m2n
grep -q "^# calibration .*gb200-nvl72.cal: efficiency NIC 0.94" "$TMP/out" || bad "sim header lacks the calibration"

# --- memory: warn, --strict refuses
expect_ok "plan memory line" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -T "$DATA/tiny-mem.topo"
grep -q "^# m2n inference GPU: weights .*EXCEEDS GPU MEMORY" "$TMP/out" || bad "plan does not flag memory"
expect_err "plan strict" "exceeds the GPU memory (--strict)" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -T "$DATA/tiny-mem.topo" --strict -q
expect_err "sim strict" "exceeds the GPU memory (--strict)" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T "$DATA/tiny-mem.topo" -s m2n --strict -q
expect_ok "plan memory fits" "$REFIT" plan -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 --strict -s m2n
grep -q "^# m2n inference GPU: weights 15.29 GB + refit extra 5.511 GB (holding 4.093, staging 0.2265, NCCL 1.225 in communicators of the lanes too) = 20.8 GB of 80 GB (in place, refit run's schedule)$" "$TMP/out" || bad "m2n memory line: $(grep inference "$TMP/out")"
# sim counts the staging of the executor it is given (--staging-mib 64, 8 lanes chosen)
expect_ok "sim memory staging" "$REFIT" sim -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 -s m2n --staging-mib 64
grep -q "^#  inference GPU: weights 15.29 GB + refit extra 10.47 GB (holding 5.258, staging 4.48, NCCL 0.8472 in communicators of the lanes too) = 25.76 GB of 80 GB (in place, refit run's schedule)$" "$TMP/out" || bad "sim --staging-mib memory line: $(grep inference "$TMP/out")"
# --one-comm: every lane on the data communicator (2 lanes of 32 MiB chosen: a group's measured
# fixed cost of 59.5 us on dgx-h100), NCCL's buffers once
expect_ok "sim memory one-comm" "$REFIT" sim -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 -s m2n --one-comm
grep -q "^#  inference GPU: weights 15.29 GB + refit extra 4.895 GB (holding 4.191, staging 0.5033, NCCL 0.2013) = 20.18 GB of 80 GB (in place, refit run's schedule)$" "$TMP/out" || bad "sim --one-comm memory line: $(grep inference "$TMP/out")"

# --- plan --schedule: refit run's schedule of every strategy; its lockstep time (groups one after
# another, each as long as its busiest rank at line rate) is never below the plan's lower bound
expect_ok "plan schedule" "$REFIT" plan -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 -s all --schedule --json -q
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "plan --schedule"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["strategies"]:
    assert r["schedule_groups"] > 0 and r["schedule_segments"] >= r["messages"], r
    assert r["schedule_lockstep_s"] >= r["lower_bound_s"] * (1 - 1e-9), r
    assert r["memory_from"] == "schedule", r
    assert r["schedule_max_ops"] == 40, r  # pipelined, every strategy: 2 x 4 x (1 + 4) on DGX H100
PY
expect_ok "plan schedule table" "$REFIT" plan -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 -s m2n --schedule
grep -q "^# m2n schedule (refit run: 4 MiB staging, 8 lanes, pipelined): [0-9]* groups of up to 40 operations, [0-9]* segments; lockstep [0-9.]* s at line rate" "$TMP/out" || bad "plan --schedule line: $(grep schedule "$TMP/out")"
# the same count as without --schedule (one memory model: refit run's schedule, by round); a
# forwarded piece is held `--slots` rounds before it goes on (schedule.h)
grep -q "^# m2n inference GPU: weights 15.29 GB + refit extra 5.511 GB (holding 4.093, staging 0.2265, NCCL 1.225 in communicators of the lanes too) = 20.8 GB of 80 GB (in place, refit run's schedule)$" "$TMP/out" || bad "plan --schedule memory line: $(grep inference "$TMP/out")"

# --- refit's executor simulated on a coarse platform (--group; above 1,024 ranks by default):
# one actor per host of 4 GPUs, within a few percent of the exact model (docs/sim.md)
for g in 1 4; do
  expect_ok "sim executor group $g" "$REFIT" sim -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100 -s m2n \
    --software refit --software-variant executor --group $g --json -q
  cp "$TMP/out" "$TMP/exec$g.json"
done
/usr/bin/python3 - "$TMP/exec1.json" "$TMP/exec4.json" <<'PY' || bad "sim executor --group"
import json, sys
e, c = (json.load(open(p))["strategies"][0] for p in sys.argv[1:3])
assert e["sim_group"] == 1 and c["sim_group"] == 4 and c["sim_hosts"] * 4 <= e["sim_hosts"] + 3, (e, c)
assert abs(c["predicted_s"] / e["predicted_s"] - 1) < 0.10, (e["predicted_s"], c["predicted_s"])
assert c["predicted_s"] >= c["lower_bound_s"], c
# the executor model's memory line is refit run's schedule's (by round): m2n holds less than the
# plan's stage estimate (the flow model's line)
assert e["memory_from"] == "schedule" and e["refit_extra_bytes"] == c["refit_extra_bytes"], (e, c)
PY

# --- advise with a published-software model: every feasible candidate simulated, said in JSON
expect_ok "advise software" "$REFIT" advise -m qwen3-30b-a3b -t TP2xEP8 -n 8 --tp 4,8 -T dgx-h100 \
  -j 2 -q --json -s hybrid --software nemo-rl --software-variant python-fallback
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "advise: --software not applied"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["software"] == "nemo-rl" and d["software_variant"] == "python-fallback", d
assert d["pruned"] == 0 and d["simulated"] == d["candidates"] - d["infeasible"] > 0, d
PY
expect_err "advise bad software" "unknown software" "$REFIT" advise -m qwen3-30b-a3b -t TP2xEP8 \
  -n 8 -T dgx-h100 --software vllm

# --- the bound holds on an oversubscribed fabric, placements interleaved (SimGrid's full update)
expect_ok "advise os4 exhaustive" "$REFIT" advise -m qwen3-30b-a3b -t TP2xEP16 -n 16-32 --tp 8 \
  --ep off -s p2p,m2n -T "$DATA/h100-os4.topo" --placement split,interleaved -j 2 -q --json \
  --exhaustive
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "advise os4: a prediction below its bound"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["ranked"] if "predicted_s" in r]
assert len(rows) >= 6, len(rows)
for r in rows:
    assert r["predicted_s"] >= r["lower_bound_s"] * (1 - 1e-6), r
PY

# --- advise: the pruned search finds the exhaustive winner
ADV="-m qwen3-30b-a3b -t TP2xEP8 -n 8 --tp 2,4,8 -s p2p,m2n -T dgx-h100 -j 2 -q --json"
expect_ok "advise pruned" "$REFIT" advise $ADV
cp "$TMP/out" "$TMP/pruned.json"
expect_ok "advise exhaustive" "$REFIT" advise $ADV --exhaustive
cp "$TMP/out" "$TMP/all.json"
/usr/bin/python3 - "$TMP/pruned.json" "$TMP/all.json" <<'PY' || bad "advise: pruned and exhaustive winners differ"
import json, sys
p, a = (json.load(open(f)) for f in sys.argv[1:3])
wp, wa = p["ranked"][0], a["ranked"][0]
assert wp["predicted_s"] == wa["predicted_s"], (wp, wa)
assert p["pruned"] > 0 and a["pruned"] == 0, (p["pruned"], a["pruned"])
assert a["simulated"] == a["candidates"] - a["infeasible"]
best = min(r["predicted_s"] for r in a["ranked"] if "predicted_s" in r)
assert wp["predicted_s"] == best
# every pruned candidate's bound exceeds the winner, every bound is below its prediction
for r in p["ranked"]:
    if r["status"] == "pruned":
        assert r["lower_bound_s"] > wp["predicted_s"], r
for r in a["ranked"]:
    if "predicted_s" in r:
        assert r["lower_bound_s"] <= r["predicted_s"] * (1 + 1e-9), r
PY
# oversubscribed leaves: the bound sees them, and placement matters
expect_ok "advise leaves" "$REFIT" advise -m qwen3-30b-a3b -t TP2xEP16 -n 16 --tp 8 --ep off -s p2p,m2n -T "$DATA/h100-os4.topo" --placement split,interleaved -j 2 -q --exhaustive --json
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "advise on oversubscribed leaves"
import json, sys
d = json.load(open(sys.argv[1]))
top = d["ranked"][0]
assert (top["placement"], top["strategy"]) == ("interleaved", "p2p"), top
assert any(r["bound_resource"] == "leaf" for r in d["ranked"]), d["ranked"]
for r in d["ranked"]:
    assert r["lower_bound_s"] <= r["predicted_s"], r
    assert r["lower_bound_s"] >= r["nic_lower_bound_s"], r
PY
expect_ok "advise table csv" "$REFIT" advise -m qwen3-30b-a3b -t TP2xEP8 -n 8 --tp 4,8 -s m2n -j 2 -q --csv "$TMP/a.csv"
grep -q "^# candidates .* pruned by the bound" "$TMP/out" || bad "advise lacks the pruned figure"
grep -q "^   1 " "$TMP/out" || bad "advise table lacks rank 1"
head -1 "$TMP/a.csv" | grep -q "^rank,infer_gpus,infer,tp,placement,strategy" || bad "advise csv header"
expect_err "advise kv reserve too big" "is not below the GPU memory" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --kv-reserve 100 -q
expect_err "advise kv reserve text" "--kv-reserve wants GiB" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --kv-reserve lots -q
expect_err "advise kv fraction 1" "leaves no memory" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --kv-reserve 100% -q
expect_err "advise no tp divides" "no allowed TP value divides" "$REFIT" advise -m tiny-moe -t TP2 -n 6 --tp 4 -q
expect_err "advise bad counts" "--infer-gpus wants" "$REFIT" advise -m tiny-moe -t TP2 -n 8-2 -q
expect_err "advise bad placement" "unknown placement" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --placement ring -q
expect_err "advise bad ep" "--ep wants on, off or both" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --ep maybe -q
expect_err "advise missing" "need --model, --train and --infer-gpus" "$REFIT" advise -m tiny-moe -q
expect_err "advise infeasible" "no feasible candidate among 2: weights" "$REFIT" advise -m deepseek-v3 -t TP1xPP16xEP64 -n 8 --tp 8 --ep off -s m2n,p2p -q --infer-framework vllm

# --- advise's serving defaults: TP within one NVLink domain, a KV reserve, SGLang beside vLLM
D2="$DATA/domain2.topo"
expect_ok "advise serving json" "$REFIT" advise -m tiny-moe -t TP2 -n 2-4 -T "$D2" -s m2n -j 2 -q --json
cp "$TMP/out" "$TMP/serving.json"
/usr/bin/python3 - "$TMP/serving.json" <<'PY' || bad "advise serving defaults"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tp_within_domain"] is True and d["domain_gpus"] == 2, d
assert d["frameworks"] == "vllm,sglang", d["frameworks"]
assert abs(d["kv_reserve_bytes"] - 0.10 * 80e9) < 1, d["kv_reserve_bytes"]
assert "gpu_memory_utilization 0.9" in d["kv_reserve_from"], d["kv_reserve_from"]
rows = d["ranked"]
assert all(int(r["infer"].split("x")[0][2:]) <= 2 and not r["tp_spans_domains"] for r in rows), rows
assert any(r["framework"] == "sglang" and "ADP" in r["infer"] for r in rows), rows
assert d["pruned_per_gpus"] is True
best = d["best_per_gpus"]
assert [b["infer_gpus"] for b in best] == [2, 4], best
for b in best:  # each count's best is its fastest simulated candidate
    same = [r["predicted_s"] for r in rows if r["infer_gpus"] == b["infer_gpus"] and "predicted_s" in r]
    assert b["predicted_s"] == min(same), (b, same)
PY
expect_ok "advise cross-domain tp" "$REFIT" advise -m tiny-moe -t TP2 -n 4 -T "$D2" -s m2n -j 2 -q \
  --allow-cross-domain-tp --json --infer-framework vllm
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "advise --allow-cross-domain-tp"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tp_within_domain"] is False and d["frameworks"] == "vllm", d
spans = [r for r in d["ranked"] if r["tp_spans_domains"]]
assert spans and all(r["infer"].startswith("TP4") and r["tp_domains"] == 2 for r in spans), d["ranked"]
assert all(r["framework"] == "vllm" for r in d["ranked"])
PY
expect_ok "advise cross-domain table" "$REFIT" advise -m tiny-moe -t TP2 -n 4 --tp 4 -T "$D2" -s m2n -j 2 -q --allow-cross-domain-tp --exhaustive
grep -q "^ *[0-9]* *4 vllm *TP4xDP1 .*TP4 SPANS 2 NVLINK DOMAINS" "$TMP/out" || bad "advise table: cross-domain TP not flagged: $(cat "$TMP/out")"
grep -q "^# engines vllm, sglang .*TP groups may span NVLink domains" "$TMP/out" || bad "advise header: cross-domain rule"
expect_err "advise tp beyond domain" "stays within one NVLink domain (--allow-cross-domain-tp allows more)" "$REFIT" advise -m tiny-moe -t TP2 -n 4 --tp 4 -T "$D2" -q
expect_err "advise kv reserve GB" "--kv-reserve 100GB (100 GB) is not below the GPU memory (80 GB)" "$REFIT" advise -m tiny-moe -t TP2 -n 2 --kv-reserve 100GB -q
expect_ok "advise kv reserve in GB" "$REFIT" advise -m tiny-moe -t TP2 -n 2 -T "$D2" -s m2n -j 2 -q --kv-reserve 21.5GB --json
grep -q '"kv_reserve_bytes" : 21500000000' "$TMP/out" || bad "advise --kv-reserve 21.5GB: $(grep kv_reserve "$TMP/out")"
expect_ok "advise kv reserve none" "$REFIT" advise -m tiny-moe -t TP2 -n 2 -T "$D2" -s m2n -j 2 -q --kv-reserve 0 --json
grep -q '"kv_reserve_bytes" : 0' "$TMP/out" || bad "advise --kv-reserve 0: $(grep kv_reserve "$TMP/out")"
expect_ok "advise table serving" "$REFIT" advise -m tiny-moe -t TP2 -n 2-4 -T "$D2" -s m2n -j 2 -q
grep -q "^# NVLink domain 2 GPUs; GPU memory 80 GB; KV reserve 8.0 GB per GPU (default 10% of GPU memory: vLLM's default gpu_memory_utilization 0.9" "$TMP/out" || bad "advise header: KV reserve line: $(grep reserve "$TMP/out")"
[ "$(grep -c '^best  *[24] ' "$TMP/out")" -eq 2 ] || bad "advise: best per GPU count: $(grep '^best' "$TMP/out")"
expect_err "advise kv reserve refuses" "(memory 0 GB - KV reserve 0.0 GB)" "$REFIT" advise -m tiny-moe -t TP2 -n 2 -T "$DATA/tiny-mem.topo" -q
expect_ok "advise sglang only" "$REFIT" advise -m tiny-moe -t TP2 -n 2 -T "$D2" -s m2n -j 2 -q --infer-framework sglang --json
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "advise --infer-framework sglang"
import json, sys
d = json.load(open(sys.argv[1]))
assert {r["framework"] for r in d["ranked"]} == {"sglang"}, d["ranked"]
assert "TP2xDP1" in {r["infer"] for r in d["ranked"]}  # its plain TP, when vLLM is not searched
PY
expect_err "advise bad framework" "--infer-framework wants vllm, sglang or vllm,sglang, got 'megatron'" "$REFIT" advise -m tiny-moe -t TP2 -n 2 -q --infer-framework megatron
# --plot: the best against GPU count; without matplotlib skipped with one line, exit 0
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  expect_ok "advise plot" "$REFIT" advise -m tiny-moe -t TP2 -n 2-4 -T "$D2" -s m2n -j 2 -q --plot "$TMP/a.png"
  [ -s "$TMP/a.png" ] || bad "advise --plot wrote no PNG"
fi
printf '#!/bin/sh\nexit 1\n' >"$TMP/nopython"
chmod +x "$TMP/nopython"
REFIT_PYTHON="$TMP/nopython" expect_ok "advise plot skipped" "$REFIT" advise -m tiny-moe -t TP2 -n 2-4 -T "$D2" -s m2n -j 2 -q --plot "$TMP/b.png"
grep -q "^refit advise: --plot .*b.png skipped: .*nopython cannot import matplotlib" "$TMP/err" || bad "advise plot skip message: $(cat "$TMP/err")"
[ ! -e "$TMP/b.png" ] || bad "advise plot skipped but a file was written"

# --- step with a published-software model: only the strategies it runs get a time
expect_ok "step software" "$REFIT" step -m tiny-moe -t TP2xPP2 -i TP4 -T dgx-h100 --rollout-s 60 \
  --train-s 30 --software nemo-rl --mode sync
grep -q 'software nemo-rl' "$TMP/out" && [ -n "$(row sync nemo-rl:hybrid)" ] && [ -z "$(row sync m2n)" ] ||
  bad "step software: $(cat "$TMP/out")"

# --- step: closed forms, exactly
expect_ok "step share 0" "$REFIT" step --rollout-s 60 --train-s 30 --refit gather-broadcast=0,m2n=0 --mode sync
[ "$(row sync m2n)" = "sync m2n 0 90 0.0 1.000 1.000 given" ] || bad "step share 0: $(row sync m2n)"
expect_ok "step share 1" "$REFIT" step --rollout-s 0 --train-s 0 --refit gather-broadcast=10,m2n=2 --mode sync
[ "$(row sync m2n)" = "sync m2n 2 2 100.0 5.000 inf given" ] || bad "step share 1: $(row sync m2n)"
expect_ok "step overlapped" "$REFIT" step --rollout-s 60 --train-s 30 --refit gather-broadcast=20,m2n=5
[ "$(row async-overlap gather-broadcast)" = "async-overlap gather-broadcast 20 60 33.3 1.000 1.000 given" ] || bad "step overlap: $(row async-overlap gather-broadcast)"
[ "$(row async-overlap m2n)" = "async-overlap m2n 5 60 8.3 1.000 1.000 given" ] || bad "step overlap m2n: $(row async-overlap m2n)"
[ "$(row async m2n)" = "async m2n 5 65 7.7 1.231 1.333 given" ] || bad "step async: $(row async m2n)"
[ "$(row sync m2n)" = "sync m2n 5 95 5.3 1.158 1.222 given" ] || bad "step sync: $(row sync m2n)"
expect_ok "step workload" "$REFIT" step --workload "$DATA/workloads/ok.workload" --mode async
[ "$(row async gather-broadcast)" = "async gather-broadcast 15 75 20.0 1.000 1.250 measured" ] || bad "step workload: $(row async gather-broadcast)"
grep -q "^# source: test fixture" "$TMP/out" || bad "step does not print the workload source"
expect_ok "step json" "$REFIT" step --rollout-s 0 --train-s 0 --refit gather-broadcast=10,m2n=2 --mode sync --json
grep -q '"amdahl_ceiling" : null' "$TMP/out" || bad "step json: infinite ceiling not null"
expect_ok "step predicted" "$REFIT" step --rollout-s 1 --train-s 1 -m tiny-moe -t TP2 -i TP2 -T dgx-h100 --mode sync
grep -q "predicted by refit sim (NeMo RL's model and refit's; calibration .*dgx-h100.cal)" "$TMP/out" || bad "step prediction source"
grep -q "^# model executor: " "$TMP/out" || bad "step: refit's rows do not name their model"
# one table: NeMo RL's model (its default gather-broadcast is the baseline) beside refit's strategies,
# each row naming its model; --baseline SOFTWARE:STRATEGY picks another row
[ "$(row sync nemo-rl:gather-broadcast | cut -d' ' -f6,8)" = "1.000 nemo-rl/gather-broadcast" ] || bad "step: NeMo RL's baseline row: $(row sync nemo-rl:gather-broadcast)"
[ -n "$(row sync nemo-rl:hybrid)" ] && [ "$(row sync m2n | cut -d' ' -f8)" = "executor" ] || bad "step: one table of both: $(cat "$TMP/out")"
grep -q "baseline nemo-rl:gather-broadcast$" "$TMP/out" || bad "step: baseline is not NeMo RL's default"
expect_ok "step baseline refit" "$REFIT" step --rollout-s 1 --train-s 1 -m tiny-moe -t TP2 -i TP2 -T dgx-h100 --mode sync --baseline refit:gather-broadcast -s m2n --json
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "step --baseline refit:gather-broadcast"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["baseline"] == "gather-broadcast" and d["baseline_software"] == "refit", d
assert d["nemo_rl_default_strategy"] == "gather-broadcast", d
labels = {r["label"]: r for r in d["rows"] if r["mode"] == "sync"}
assert set(labels) == {"gather-broadcast", "m2n"}, labels
assert labels["gather-broadcast"]["speedup"] == 1.0 and labels["m2n"]["predicted_by"] == "executor", labels
PY
expect_err "step baseline software" "unknown software 'foo'" "$REFIT" step --rollout-s 1 --train-s 1 -m tiny-moe -t TP2 -i TP2 --baseline foo:m2n
expect_err "step baseline missing" "no refit time for the baseline nemo-rl:m2n" "$REFIT" step --rollout-s 1 --train-s 1 --refit m2n=1 --baseline nemo-rl:m2n
# the shipped workload files (experiments/workloads): each loads, with its source and date, and
# its published times come back in the header
nship=0
for f in "$(dirname "$0")"/../experiments/workloads/*.ini; do
  nship=$((nship + 1))
  expect_ok "step shipped $(basename "$f")" "$REFIT" step --workload "$f" --refit gather-broadcast=10,m2n=2 --mode sync
  grep -q "^# source: https://.* (20[0-9][0-9]-[0-9][0-9]-[0-9][0-9])$" "$TMP/out" || bad "shipped workload $f: no source and date"
  expect_ok "step shipped json $(basename "$f")" "$REFIT" step --workload "$f" --refit gather-broadcast=10,m2n=2 --mode sync --json
  /usr/bin/python3 - "$f" "$TMP/out" <<'PY' || bad "shipped workload $f: its times do not come back"
import configparser, json, sys
ini = configparser.ConfigParser()
ini.read(sys.argv[1])
w, out = ini["workload"], json.load(open(sys.argv[2]))
for k in ("rollout_s", "train_s", "other_s"):
    assert abs(out[k] - float(w.get(k, "0"))) < 1e-9, (k, out[k], w.get(k))
PY
done
[ "$nship" -ge 1 ] || bad "no shipped workload file in experiments/workloads"
expect_err "step bad workload value" "rollout_s must be a finite number" "$REFIT" step --workload "$DATA/workloads/negative.workload"
expect_err "step workload no source" "source is missing" "$REFIT" step --workload "$DATA/workloads/nosource.workload"
expect_err "step workload broken" "workload .*broken.workload" "$REFIT" step --workload "$DATA/workloads/broken.workload"
expect_err "step workload text" "rollout_s" "$REFIT" step --workload "$DATA/workloads/text.workload"
expect_err "step workload missing" "workload" "$REFIT" step --workload "$DATA/workloads/none.workload"
expect_err "step no refit" "no refit time" "$REFIT" step --rollout-s 1 --train-s 1
expect_err "step bad refit" "--refit wants STRATEGY=SECONDS" "$REFIT" step --rollout-s 1 --train-s 1 --refit m2n=fast
expect_err "step bad mode" "--mode wants" "$REFIT" step --rollout-s 1 --train-s 1 --refit gather-broadcast=1 --mode later
expect_err "step no times" "need --rollout-s and --train-s" "$REFIT" step --refit gather-broadcast=1
expect_err "step no baseline" "no refit time for the baseline" "$REFIT" step --rollout-s 1 --train-s 1 --refit m2n=1

# --- one plan, one memory figure: DeepSeek-V3 TP8xDP32xEP256's hybrid schedule (8 M segments) is
# above what a count builds on its own (2 M), so the plan's stages (43.38 GB) stood in for NeMo RL's
# hybrid row (refit's memory for the plan) and refit's own row; each now takes the schedule refit's
# executor simulated (26.8 GB at 8 lanes of 4 MiB on communicators of their own, NCCL's buffers
# counted; 20.2 GB before on one communicator), the same figure
expect_ok "step one memory per plan" "$REFIT" step -m deepseek-v3 -t PP16xEP16 -i TP8xDP32xEP256 \
  -T dgx-h100 -s hybrid --rollout-s 60 --train-s 30 --json -q
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "step memory of one plan: $(cat "$TMP/out")"
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["strategy"] == "hybrid"]
assert {r["software"] for r in rows} == {"refit", "nemo-rl"}, rows
assert all(r["memory_from"] == "schedule" for r in rows), rows
for mode in {r["mode"] for r in rows}:  # async-overlap adds the second weight bank to both
    assert len({r["infer_peak_bytes"] for r in rows if r["mode"] == mode}) == 1, (mode, rows)
sync = [r for r in rows if r["mode"] == "sync"]
assert 25e9 < sync[0]["infer_peak_bytes"] < 28e9, rows  # 26.8 GB, not 44.56 GB by stages
PY

finish whatif
