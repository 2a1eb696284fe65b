#!/bin/sh
# The refit command line: outputs, contracts (JSON fields, dump format) and one-line errors.
set -u
REFIT=${1:?usage: test_cli.sh path/to/refit}
DATA=$(dirname "$0")/data
. "$(dirname "$0")/lib.sh"

expect_ok "help" "$REFIT" --help
expect_ok "model list" "$REFIT" model list
grep -q "kimi-k3" "$TMP/out" || bad "model list lacks kimi-k3"
expect_ok "model show" "$REFIT" model show deepseek-v3
grep -q "expert_gate" "$TMP/out" || bad "model show lacks the kind table"
expect_ok "model show json" "$REFIT" model show qwen3-235b-a22b --json
for f in '"name"' '"params"' '"bytes"' '"tensors"'; do grep -q "$f" "$TMP/out" || bad "model json lacks $f"; done

expect_ok "plan table" "$REFIT" plan -m tiny-moe -t TP2xPP2 -i TP4 --verify
for s in gather-broadcast p2p m2n hybrid; do grep -q "^$s " "$TMP/out" || bad "plan lacks $s"; done
grep -q "# placement:" "$TMP/out" || bad "plan does not print its placement"
grep -q "OK" "$TMP/out" || bad "plan --verify did not say OK"
expect_ok "plan json" "$REFIT" plan -m tiny-mla -t PP3xEP8 -i TP2xDP4 --json -q
for f in strategies strategy network_bytes nvlink_bytes max_nic_bytes messages transfers lower_bound_s; do
  grep -q "\"$f\"" "$TMP/out" || bad "plan json lacks $f"
done
expect_ok "plan chooses DP" "$REFIT" plan -m qwen3-235b-a22b -t TP4xPP8xEP16 -i TP8xDP16 -s m2n
grep -q "DP4 chosen" "$TMP/out" || bad "plan does not say which DP it chose"
expect_ok "plan spec dump" "$REFIT" plan --spec "$DATA/small-spec.json" -s p2p --dump "$TMP/d.json"
grep -q '"transfers"' "$TMP/d.json" && grep -q '"box":\[\[' "$TMP/d.json" && grep -q '"relay":false' "$TMP/d.json" \
  || bad "dump format"
n=$(grep -c '"tensor"' "$TMP/d.json")
[ "$n" -eq 8 ] || bad "dump has $n transfers, want 8"
expect_ok "plan dump several" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 --dump "$TMP/x.json" -q
[ -s "$TMP/x.m2n.json" ] && [ -s "$TMP/x.gather-broadcast.json" ] || bad "dump per strategy"
expect_ok "plan topology" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -T gb200-nvl72 -s m2n
grep -q "72 GPUs per NVLink domain" "$TMP/out" || bad "topology not used"

expect_err "unknown model" "unknown model" "$REFIT" plan -m gpt-9 -t TP2 -i TP2
expect_err "bad layout" "bad layout" "$REFIT" plan -m tiny-moe -t TP2xQQ4 -i TP2
expect_err "ep not dividing" "does not divide" "$REFIT" plan -m tiny-moe -t TP2xEP4xDP3 -i TP2
expect_err "not divisible" "does not divide" "$REFIT" plan -m tiny-moe -t TP3 -i TP2
expect_err "unknown strategy" "unknown strategy" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -s magic
expect_err "unknown topology" "unknown topology" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -T cray
expect_err "missing args" "need --model" "$REFIT" plan -m tiny-moe
expect_err "domain size 0" "domain-size" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 --domain-size 0
expect_err "strategy twice" "given twice" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -s p2p,m2n,p2p
expect_err "all in a list" "stands alone" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -s p2p,all
expect_err "bcast channels" "bcast-channels" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 --bcast-channels 5000
echo '{"tensors":[{"name":"w","shape":[4]' >"$TMP/broken.json"
expect_err "malformed spec" "malformed JSON" "$REFIT" plan --spec "$TMP/broken.json"
expect_err "missing spec" "cannot read spec" "$REFIT" plan --spec "$TMP/none.json"
expect_err "unknown command" "unknown command" "$REFIT" frobnicate
expect_err "model show unknown" "unknown model" "$REFIT" model show nope
echo '{"model_type":"qwen3_moe","hidden_size":8}' >"$TMP/cfg.json"
expect_err "malformed config" "missing" "$REFIT" model show "$TMP/cfg.json"

# One JSON shape for plan, sim and run: {"strategies": [...]}, and with one strategy its fields
# at the top level too (scripts read d["predicted_s"] there).
# json_shape NAME FIELD COUNT: stdout is that shape with COUNT strategies, each with FIELD
json_shape() {
  python3 - "$TMP/out" "$2" "$3" <<'PY' || bad "$1: JSON shape"
import json, sys
d = json.load(open(sys.argv[1]))
field, n = sys.argv[2], int(sys.argv[3])
rows = d["strategies"]
assert len(rows) == n, rows
assert all(field in r and "strategy" in r for r in rows), rows
if n == 1:
    assert all(d[k] == v for k, v in rows[0].items()), "top level differs from the row"
else:
    assert field not in d, "several strategies but a top-level " + field
PY
}
expect_ok "plan json one" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 -s p2p --json -q
json_shape "plan json one" network_bytes 1
expect_ok "plan json all" "$REFIT" plan -m tiny-moe -t TP2 -i TP2 --json -q
json_shape "plan json all" network_bytes 4
expect_ok "sim json one" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s p2p --json -q
json_shape "sim json one" predicted_s 1
expect_ok "sim json two" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s p2p,m2n --json -q
json_shape "sim json two" predicted_s 2
# --lost: the recovery table (destroy-and-recreate vs shrink, then the first refit) and its fields
expect_ok "sim lost recovery" "$REFIT" sim -m tiny-moe -t TP2xPP2xDP2 -i TP2xDP2 -T dgx-h100 \
  -s p2p,hybrid --lost 1,9
grep -q "^# recovery: communicators rebuilt" "$TMP/out" || bad "sim --lost: no recovery table"
grep -q "12->10" "$TMP/out" || bad "sim --lost: recovery table lacks 12->10 ranks"
expect_ok "sim lost recovery json" "$REFIT" sim -m tiny-moe -t TP2xPP2xDP2 -i TP2xDP2 \
  -T dgx-h100 -s hybrid --software nemo-rl --software-variant python-fallback --lost 1,9 --json -q
json_shape "sim lost recovery json" recovery_shrink_total_s 1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["recovery_communicators"] == 3 and d["recovery_recreate_total_s"] > d["recovery_shrink_total_s"] > d["predicted_s"], d' "$TMP/out" || bad "sim --lost json: recovery fields"
expect_ok "run json one" "$REFIT" run --local -m tiny-moe -t TP2 -i TP2 -s m2n --iters 1 --json -q
json_shape "run json one" measured_s 1
grep -q '"lane_comms" : false' "$TMP/out" || bad "run json: no lane_comms beside lanes"
expect_ok "run json two" "$REFIT" run --local -m tiny-moe -t TP2 -i TP2 -s m2n,p2p --iters 1 --json -q
json_shape "run json two" measured_s 2

# Exit statuses and the documented scheme.
expect_ok "help names exit statuses" "$REFIT" --help
grep -q "exit status: 0 success, 1 runtime failure" "$TMP/out" || bad "refit --help lacks the exit statuses"
expect_ok "plan help names exit statuses" "$REFIT" plan --help
grep -q "3 verification failed" "$TMP/out" || bad "refit plan --help lacks the exit statuses"
expect_err "model usage" "usage" "$REFIT" model frobnicate
expect_ok "version" "$REFIT" --version
grep -Eq '^refit [0-9]+\.[0-9]+\.[0-9]+ \(backends of refit run: host' "$TMP/out" ||
  bad "refit --version: $(cat "$TMP/out")"

# Placement: interleaved alternates the sides' domains; the node map names each node's ranks.
expect_ok "plan interleaved node map" "$REFIT" plan -m tiny-moe -t TP2xPP2 -i TP4 -D 4 -s m2n \
  --placement interleaved --node-map 2
grep -q '^# placement: .*interleaved: 1 training and 1 inference domains alternate' "$TMP/out" ||
  bad "plan --placement interleaved: no interleaved note"
grep -Eq '^  0 +0 +0-1 +0-1 +-$' "$TMP/out" || bad "node map: node 0 should hold training ranks 0-1"
[ "$(grep -c '^  [0-9]' "$TMP/out")" -ge 4 ] || bad "node map: fewer than 4 nodes listed"
expect_ok "sim interleaved json" "$REFIT" sim -m tiny-moe -t TP2xPP2 -i TP4 -T dgx-h100 -s m2n \
  --placement interleaved --node-map 4 --json -q
grep -q '^# node map: 4 GPUs per node' "$TMP/err" || bad "sim --json --node-map: map not on stderr"
json_shape "sim interleaved json" predicted_s 1
expect_ok "run interleaved" "$REFIT" run --local -m tiny-moe -t TP2 -i TP2 -s m2n --iters 1 -q \
  --placement interleaved
# refit step honours --strategy (the baseline is always predicted: the speedups are against it).
expect_ok "step strategy" "$REFIT" step -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -q --rollout-s 10 \
  --train-s 5 -s m2n --mode async
[ "$(grep -c '^async ' "$TMP/out")" -eq 2 ] || bad "step -s m2n: want the m2n and baseline rows"
grep -q '^async  *nemo-rl:gather-broadcast .* nemo-rl/gather-broadcast$' "$TMP/out" || bad "step -s m2n: no NeMo RL baseline row"
grep -q '^async  *m2n ' "$TMP/out" || bad "step -s m2n: no m2n row"
grep -q "NeMo RL's default refit (non-colocated) is gather-broadcast; its nccl_reshard refit .* is the hybrid strategy" "$TMP/out" ||
  bad "step: does not say which strategy NeMo RL uses"
# its memory lines say whose memory each is, as refit sim does: NeMo RL's buckets, or refit's for a
# NeMo RL row that is not modelled
expect_ok "step memory sources" "$REFIT" step -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -q --rollout-s 10 \
  --train-s 5 -s m2n,hybrid --mode async
grep -q "^# nemo-rl:gather-broadcast: fullest inference GPU .*(NeMo RL's reused broadcast buckets; " "$TMP/out" ||
  bad "step: NeMo RL's gather-broadcast memory source: $(grep fullest "$TMP/out")"
grep -q "^# nemo-rl:hybrid: fullest .*refit run's schedule: refit's memory for this plan; not modelled for nemo-rl; " "$TMP/out" ||
  bad "step: NeMo RL hybrid memory not labelled: $(grep fullest "$TMP/out")"
grep -q "^# m2n: fullest .*(in place, refit run's schedule; NCCL" "$TMP/out" || bad "step: m2n memory source"
expect_ok "step memory json" "$REFIT" step -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -q --rollout-s 10 \
  --train-s 5 -s m2n --mode async --json
grep -q '"memory_from" : "buckets"' "$TMP/out" && grep -q '"memory_from" : "schedule"' "$TMP/out" ||
  bad "step --json: memory_from"
# Every prediction names its model: refit's executor (the default), flows (an estimate), or a software
# model.
expect_ok "sim predicted_by executor" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n --json -q
grep -q '"predicted_by" : "executor"' "$TMP/out" || bad "sim: predicted_by executor (the default) missing"
grep -q '"software_variant" : "executor"' "$TMP/out" || bad "sim: software_variant executor missing"
grep -q '"sim_engine" : "events"' "$TMP/out" || bad "sim: sim_engine events (the default) missing"
# the executor row carries refit run's staging choice, under the names refit run --json gives it
sim_st=$(grep -E '"(staging_bound_bytes|lanes|max_ops|lane_comms)"' "$TMP/out" | head -n 4 | tr -d ' ,')
# the same programs on SimGrid's actors: the same prediction (sim/events.c, docs/sim.md)
ev=$(sed -n 's/.*"predicted_s" : \([0-9.e+-]*\).*/\1/p' "$TMP/out" | head -n 1)
expect_ok "run memory json" "$REFIT" run --memory -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n --json -q
run_st=$(grep -E '"(staging_bound_bytes|lanes|max_ops|lane_comms)"' "$TMP/out" | head -n 4 | tr -d ' ,')
[ -n "$sim_st" ] && [ "$sim_st" = "$run_st" ] ||
  bad "sim --json: staging choice '$sim_st' is not refit run's '$run_st'"
expect_ok "sim engine simgrid" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n --json -q \
  --engine simgrid
grep -q '"sim_engine" : "simgrid"' "$TMP/out" || bad "sim --engine simgrid: sim_engine simgrid missing"
sg=$(sed -n 's/.*"predicted_s" : \([0-9.e+-]*\).*/\1/p' "$TMP/out" | head -n 1)
awk -v a="$ev" -v b="$sg" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-5 * b) }' ||
  bad "sim: events engine $ev s against SimGrid $sg s"
expect_ok "sim model line executor" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n -q \
  --software-variant executor
grep -q "^#  model: refit's executor: every rank's program" "$TMP/out" || bad "sim: executor model line"
# how finely it resolves a prediction (experiments/results/resolution.csv)
grep -q "(calibration \[executor\]); at scale a change of 1e-9 in the NIC efficiency moves a prediction by up to [0-9.]*% (mean [0-9.]*%) on [0-9]* configurations (experiments/resolution.py): finer digits carry no meaning there; against" \
  "$TMP/out" || bad "sim: the executor's resolution missing"
# its accuracy beside it: against refit run on the emulated network (experiments/results/emulated.csv),
# and on a coarse platform how far that came from the exact one (executor-scale.csv; not at 2)
grep -q "on an emulated network (.*): mean |error| [0-9.]*%, max [0-9.]*% on [0-9]* runs (experiments/emulated.py); against refit run on one H200, one rank (self-sends, 2-256 groups): mean |error| [0-9.]*%, max [0-9.]*% on [0-9]* runs (experiments/gpu_one_rank.py); runs of several GPUs not yet made$" \
  "$TMP/out" || bad "sim: the executor's emulated-network error missing"
expect_ok "sim model line coarse" "$REFIT" sim -m tiny-moe -t TP2xPP2 -i TP4 -T dgx-h100 -s m2n -q \
  --group 2
grep -q "; simulated on hosts of 2 GPUs (one actor per host): its error against the exact model not measured at this size" \
  "$TMP/out" || bad "sim --group 2: the coarse platform's accuracy not stated"
# the same from other result files: a malformed one says not measured, a measured group its figures
mkdir -p "$TMP/data/experiments/results" "$TMP/data/model"
ln -s "$REFIT_DATA_DIR/model/configs" "$TMP/data/model/configs"
for d in topologies sim; do ln -s "$REFIT_DATA_DIR/$d" "$TMP/data/$d"; done
printf 'model,topology,ratio\ntiny-moe,emulated-2x4,fast\n' >"$TMP/data/experiments/results/emulated.csv"
printf 'kind,group,error\ncoarse-check,2,0.01\ncoarse-check,2,-0.03\ncoarse-check,8,0.5\nlarge,2,0.9\n' \
  >"$TMP/data/experiments/results/executor-scale.csv"
REFIT_DATA_DIR="$TMP/data" expect_ok "sim model line results" "$REFIT" sim -m tiny-moe -t TP2xPP2 \
  -i TP4 -T dgx-h100 -s m2n -q --group 2
grep -q "against refit run on an emulated network: not measured (experiments/emulated.py)" "$TMP/out" ||
  bad "sim: a malformed emulated.csv not said unmeasured"
grep -q "hosts of 2 GPUs (one actor per host): within 3.0% of the exact model (mean 2.0%) on the 2 runs where both run" \
  "$TMP/out" || bad "sim: the coarse platform's error not read from executor-scale.csv"
# lane communicators (the default, as refit run's; --lane-comms says so): said in the header, and
# the lanes and staging chosen for them (8 lanes, 4 MiB); --one-comm: one communicator, 2 lanes
for flag in "" --lane-comms; do
  expect_ok "sim lane comms $flag" "$REFIT" sim -m tiny-moe -t TP2xPP2 -i TP4 -T dgx-h100 -s m2n $flag
  grep -q "^# executor: each lane's groups on a communicator and stream of its own (refit run's default)" "$TMP/out" ||
    bad "sim $flag: lane communicators header line"
  grep -q "staging 4 MiB per rank, direction and lane (chosen: .*other lanes' groups moving at once), 8 lanes (chosen)" "$TMP/out" ||
    bad "sim $flag: 8 lanes of 4 MiB chosen"
done
expect_ok "sim one comm" "$REFIT" sim -m tiny-moe -t TP2xPP2 -i TP4 -T dgx-h100 -s m2n --one-comm
grep -q "^# executor: every lane on one communicator and stream (--one-comm)" "$TMP/out" ||
  bad "sim --one-comm: header line"
grep -q "2 lanes (chosen)" "$TMP/out" || bad "sim --one-comm: 2 lanes chosen"
expect_ok "sim predicted_by software" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s hybrid \
  --software nemo-rl --software-variant python-fallback --json -q
grep -q '"predicted_by" : "nemo-rl/python-fallback"' "$TMP/out" || bad "sim: software predicted_by"
grep -q "a model of nemo-rl's code (variant python-fallback); out of sample" "$TMP/out" ||
  bad "sim: software model note"
# NeMo RL's gather-broadcast is its collective path: no variant applies (golden moved nothing)
expect_ok "sim nemo-rl gather-broadcast" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 \
  -s gather-broadcast --software nemo-rl --json -q
cp "$TMP/out" "$TMP/gb-default.json"
expect_ok "sim nemo-rl gather-broadcast golden" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 \
  -s gather-broadcast --software nemo-rl --software-variant golden --json -q
/usr/bin/python3 - "$TMP/gb-default.json" "$TMP/out" <<'PY' || bad "sim: nemo-rl gather-broadcast depends on the variant"
import json, sys
a, b = (json.load(open(p))["strategies"][0] for p in sys.argv[1:3])
assert a["predicted_s"] > 0 and a["predicted_s"] == b["predicted_s"], (a["predicted_s"], b["predicted_s"])
for r in (a, b):
    assert r["predicted_by"] == "nemo-rl/gather-broadcast", r["predicted_by"]
    assert "its gather + packed broadcast path" in r["model_note"], r["model_note"]
PY
# a published-software row counted by refit run's schedule says whose memory that is
expect_ok "sim nemo-rl memory label" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 \
  -s hybrid,gather-broadcast --software nemo-rl -q
grep -q "(in place, refit run's schedule: refit's memory for this plan; not modelled for nemo-rl)" \
  "$TMP/out" || bad "sim: nemo-rl hybrid memory not labelled refit's"
grep -q "(NeMo RL's reused broadcast buckets)$" "$TMP/out" || bad "sim: nemo-rl buckets label"
expect_ok "sim flows variant" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n -q \
  --software-variant flows --json
grep -q '"predicted_by" : "flows"' "$TMP/out" || bad "sim --software-variant flows: not the flow model"
# the executor's host time per group, from sim/calibration/dgx-h100.cal: executor.group_host_s
# 45.8 us + executor.stream_wait_s 3 us + 3 x executor.event_record_s 0.25 us = 49.55 us, once per
# group
expect_ok "sim executor per-op costs" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n,p2p \
  --json -q
/usr/bin/python3 - "$TMP/out" <<'PY' || bad "sim: executor software time is not groups x 49.55 us"
import json, sys
for r in json.load(open(sys.argv[1]))["strategies"]:
    assert r["predicted_by"] == "executor" and r["reshard_calls"] > 0, r
    want = r["reshard_calls"] * (4.58e-5 + 3e-6 + 3 * 2.5e-7)
    assert abs(r["software_s"] - want) <= 1e-9 * max(1.0, want), (r["software_s"], want)
PY
expect_err "refit variant list" "unknown variant 'golden' of software refit (flows, executor)" \
  "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -T dgx-h100 -s m2n --software-variant golden
expect_err "placement unknown" "--placement: unknown placement 'diagonal'" \
  "$REFIT" plan -m tiny-moe -t TP2 -i TP2 --placement diagonal
expect_err "node map negative" "--node-map -1: GPUs per node must be >= 1" \
  "$REFIT" sim -m tiny-moe -t TP2 -i TP2 --node-map -1
# strategies simulated in forked workers (--jobs) give the figures of one process
expect_ok "sim jobs 1" "$REFIT" sim -m tiny-mla -t TP2xPP2xEP2 -i TP2xDP2xEP4 -s all --json -q -j 1
cp "$TMP/out" "$TMP/jobs1.json"
expect_ok "sim jobs 3" "$REFIT" sim -m tiny-mla -t TP2xPP2xEP2 -i TP2xDP2xEP4 -s all --json -q -j 3
cmp -s "$TMP/out" "$TMP/jobs1.json" || bad "sim --jobs 3 predicts otherwise than --jobs 1"
expect_err "sim jobs negative" "--jobs must be in 0..256" \
  "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -j -1
# sim and step need bandwidths: without --topology they simulate dgx-h100 (as advise does)
expect_ok "sim default topology" "$REFIT" sim -m tiny-moe -t TP2 -i TP2 -s p2p -q
grep -q "^# topology dgx-h100:" "$TMP/out" || bad "sim without --topology does not simulate dgx-h100"
expect_ok "step default topology" "$REFIT" step -m tiny-moe -t TP2 -i TP2 -s p2p -q --rollout-s 1 \
  --train-s 1
grep -q "dgx-h100" "$TMP/out" || bad "step without --topology does not name dgx-h100"

finish
