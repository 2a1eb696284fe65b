#!/bin/sh
# Bad input to sim, calibrate and run: exit 2 and one stderr line that names what is wrong,
# never a traceback, never MPI started for a bad option. Runtime failures: exit 1.
set -u
REFIT=${1:?usage: test_cli_errors.sh path/to/refit}
. "$(dirname "$0")/lib.sh"
P="-m tiny-moe -t TP2 -i TP2"

# sim
expect_rc "sim overlap and sequential" 2 "exclude each other" \
  "$REFIT" sim $P -T dgx-h100 --hybrid-overlap --hybrid-sequential
expect_rc "sim timeline directory" 2 "timeline wants a FILE.png" "$REFIT" sim $P -T dgx-h100 --timeline "$TMP"
expect_rc "sim timeline empty" 2 "timeline wants a FILE.png" "$REFIT" sim $P -T dgx-h100 --timeline ""
expect_rc "sim timeline no directory" 2 "no directory" \
  "$REFIT" sim $P -T dgx-h100 --timeline "$TMP/none/t.png"
# The plot script fails: its last stderr line, not its traceback (a python that always fails).
printf '#!/bin/sh\necho "Traceback (most recent call last):" >&2\necho "  File x" >&2\necho "OSError: disk full" >&2\nexit 1\n' >"$TMP/py"
chmod +x "$TMP/py"
REFIT_PYTHON="$TMP/py" expect_rc "sim timeline failure" 1 "failed: OSError: disk full" \
  "$REFIT" sim $P -T dgx-h100 -s p2p -q --timeline "$TMP/t.png"
# calibration files: whole numbers and 0 / 1 where the key is a count or a switch
DATA=$(dirname "$0")/..
sed 's/^buffers *=.*/buffers = 1.5/' "$DATA/sim/calibration/dgx-h100.cal" >"$TMP/b.cal"
expect_rc "calibration buffers 1.5" 2 "buffers must be a whole number" "$REFIT" sim $P -T dgx-h100 -c "$TMP/b.cal"
sed 's/^overlap *=.*/overlap = 0.5/' "$DATA/sim/calibration/dgx-h100.cal" >"$TMP/o.cal"
expect_rc "calibration overlap 0.5" 2 "overlap must be 0 or 1" "$REFIT" sim $P -T dgx-h100 -c "$TMP/o.cal"
expect_rc "sim unexpected argument" 2 "unexpected argument" "$REFIT" sim $P -T dgx-h100 extra
# the executor's options with another model: refused (they changed nothing, silently)
expect_rc "sim lane comms with nemo-rl" 2 "--lane-comms applies to refit's executor" \
  "$REFIT" sim $P -T dgx-h100 -s hybrid --software nemo-rl --lane-comms
expect_rc "sim staging with flows" 2 "--staging-mib applies to refit's executor" \
  "$REFIT" sim $P -T dgx-h100 -s m2n --software-variant flows --staging-mib 8
expect_rc "sim engine events with nemo-rl" 2 "--engine events applies to refit's executor" \
  "$REFIT" sim $P -T dgx-h100 -s hybrid --software nemo-rl --engine events
expect_rc "sim engine unknown" 2 "--engine must be events or simgrid, not 'ns3'" \
  "$REFIT" sim $P -T dgx-h100 -s m2n --engine ns3
expect_rc "sim double bank with nemo-rl" 2 "--software nemo-rl has no second weight bank" \
  "$REFIT" sim $P -T dgx-h100 -s hybrid --software nemo-rl --double-bank

# calibrate: measured_s must be a finite decimal number > 0, with the line number
for v in nan inf 1e400 0.05abc 0x10 -1; do
  printf 'topology,model,train,infer,strategy,measured_s\ndgx-h100,tiny-moe,TP2,TP2,p2p,0.05\ndgx-h100,tiny-moe,TP2,TP2,m2n,%s\n' "$v" >"$TMP/m.csv"
  expect_rc "calibrate measured_s $v" 2 "m.csv:3: bad measured_s '$v'" "$REFIT" calibrate -M "$TMP/m.csv"
done
printf 'topology,model,train,infer,measured_s\ndgx-h100,tiny-moe,TP2,TP2,0.05\n' >"$TMP/m.csv"
expect_rc "calibrate no strategy column" 2 "m.csv:2: measured_s needs a strategy column" \
  "$REFIT" calibrate -M "$TMP/m.csv"
printf 'topology,model,train,infer,strategy,measured_s\ndgx-h100,tiny-moe,TP2,TP2,all,0.05\n' >"$TMP/m.csv"
expect_rc "calibrate strategy all" 2 "unknown strategy 'all' (one per row: gather-broadcast, p2p, m2n, hybrid)" \
  "$REFIT" calibrate -M "$TMP/m.csv"
grep -q "hybrid, all" "$TMP/err" && bad "calibrate lists 'all' as a strategy"
printf 'topology,model,train,infer,strategy,measured_s\n# note\ndgx-h100,tiny-moe,TP2,TP3,p2p,0.05\ndgx-h100,tiny-moe,TP2,TP2,p2p,0.05\n' >"$TMP/m.csv"
expect_rc "calibrate row error has its line" 2 "m.csv:3: " "$REFIT" calibrate -M "$TMP/m.csv"
expect_rc "calibrate unknown param" 2 "unknown --param 'efficiency.hbm'" \
  "$REFIT" calibrate -M "$TMP/m.csv" -p efficiency.hbm
expect_rc "calibrate missing file" 2 "measurements:" "$REFIT" calibrate -M "$TMP/none.csv"

# run: every option checked before MPI starts (no MPI output, one line, exit 2)
expect_rc "run staging abc" 2 "staging-mib" "$REFIT" run --local --staging-mib abc $P
expect_rc "run staging abc (MPI not started)" 2 "staging-mib" "$REFIT" run --staging-mib abc $P
expect_rc "run staging nan" 2 "staging-mib must be" "$REFIT" run --local --staging-mib nan $P
expect_rc "run drop 99" 2 "test-drop 99: the plan has ranks 0..3" "$REFIT" run --local --test-drop 99 $P
expect_rc "run drop -5" 2 "test-drop -5: the plan has ranks 0..3" "$REFIT" run --local --test-drop -5 $P
expect_rc "run fail 9:0" 2 "test-fail 9:0: the plan has ranks 0..3" "$REFIT" run --test-fail 9:0 $P
expect_rc "run fail 1:x" 2 "test-fail wants RANK:STAGE" "$REFIT" run --test-fail 1:x $P
expect_rc "run iters" 2 "iters must be" "$REFIT" run --local --iters 0 $P
expect_rc "run emulate local" 2 "emulate-network paces the host backend" \
  "$REFIT" run --local --emulate-network $P
sed 's/^oversubscription=1/oversubscription=2/' "$(dirname "$0")/../topologies/emulated-2x4.topo" \
  >"$TMP/os.topo"
expect_rc "run emulate oversubscribed (MPI not started)" 2 "oversubscribed fabric" \
  "$REFIT" run --emulate-network $P -T "$TMP/os.topo"
# --lane-comms: a communicator per staging lane needs MPI (one process per rank)
expect_rc "run lane-comms local" 2 "lane-comms gives each staging lane a communicator of its own: it needs MPI" \
  "$REFIT" run --local --lane-comms $P
expect_rc "run lane-comms one-comm" 2 "--lane-comms and --one-comm exclude each other" \
  "$REFIT" run --memory --lane-comms --one-comm $P
expect_rc "sim lane-comms one-comm" 2 "--lane-comms and --one-comm exclude each other" \
  "$REFIT" sim --lane-comms --one-comm -m qwen3-30b-a3b -t TP2xEP8 -i TP4xDP2 -T dgx-h100
expect_rc "run bad model (MPI not started)" 2 "unknown model" "$REFIT" run -m nope -t TP2 -i TP2

# Quantized inference targets: unknown names, a shard boundary inside a block, no executor.
expect_err "unknown quant" "unknown inference quantization 'fp4'" "$REFIT" plan $P --infer-quant fp4
expect_err "unknown quant place" "unknown quantization place 'nic'" \
  "$REFIT" plan $P --infer-quant mxfp8 --quant-at nic
expect_err "quant-at alone" "--quant-at needs --infer-quant" "$REFIT" plan $P --quant-at sender
expect_err "block cut" "inside a 128-wide block" \
  "$REFIT" plan -m tiny-moe -t TP2xPP2 -i TP2xDP2 --infer-quant fp8-block
expect_err "quant on cuda" "host backend only" \
  "$REFIT" run --local -b cuda -m tiny-moe -t TP1 -i TP1 --infer-quant mxfp8

# A non-ASCII byte in an option: one line naming the option, in any locale.
bytes=$(printf 'tiny\377')
LC_ALL=C expect_rc "non-ASCII option, C locale" 2 "^refit: error: --model: the value has bytes" \
  "$REFIT" plan --model "$bytes" -t TP2 -i TP2
LC_ALL=C.UTF-8 expect_rc "invalid UTF-8 option" 2 "^refit: error: -m: the value has bytes" \
  "$REFIT" plan -m "$bytes" -t TP2 -i TP2
LC_ALL=C expect_rc "non-ASCII option, run" 2 "^refit run: --train: the value has bytes" \
  "$REFIT" run --local -m tiny-moe --train="$bytes" -i TP2

# Strict inputs (issue 25).
# A checkpoint directory whose safetensors disagree with its config.json: shown by model show,
# with the difference on stderr; refused by every command that plans, -q or not.
mkdir "$TMP/ck"
cp "$DATA/model/configs/tiny-moe.json" "$TMP/ck/config.json"
h='{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
{ printf "\\$(printf '%03o' ${#h})\\0\\0\\0\\0\\0\\0\\0"; printf '%s' "$h"; printf '\0\0\0\0'; } >"$TMP/ck/model.safetensors"
CK="checkpoint and config.json differ: first at model.embed_tokens.weight: checkpoint lacks it"
expect_rc "checkpoint differs: model show" 0 "$CK.*shown: the checkpoint's tensors" \
  "$REFIT" model show "$TMP/ck"
CKP="$CK.*refit plans config.json's tensors, so it refuses a checkpoint that differs"
for cmd in plan sim; do
  expect_err "checkpoint differs: $cmd -q" "$CKP" "$REFIT" $cmd -q -m "$TMP/ck" -t TP2 -i TP2
done
expect_err "checkpoint differs: step -q" "$CKP" \
  "$REFIT" step -q -m "$TMP/ck" -t TP2 -i TP2 --rollout-s 10 --train-s 10
expect_err "checkpoint differs: run" "$CKP" "$REFIT" run --local -m "$TMP/ck" -t TP2 -i TP2
expect_err "checkpoint differs: advise" "$CKP" "$REFIT" advise -m "$TMP/ck" -t TP2 -n 2
# A misspelled topology key or group: refused with the file, group and key.
sed 's/^hbm_GBps *=.*/&\nmemory_gb=80/' "$DATA/topologies/dgx-h100.topo" >"$TMP/k.topo"
expect_err "topology unknown key" "k.topo: \\[gpu\\] unknown key 'memory_gb' (known: hbm_GBps, memory_GB)" \
  "$REFIT" plan $P -q -T "$TMP/k.topo"
printf '[ncl]\nbcast_channels=4\n' | cat "$DATA/topologies/dgx-h100.topo" - >"$TMP/g.topo"
expect_err "topology unknown group" "g.topo: unknown group \\[ncl\\]" "$REFIT" topology check "$TMP/g.topo"
# A MoE model_type without its expert count; 0 where a dimension sizes tensors.
grep -v '"num_experts"' "$DATA/model/configs/tiny-moe.json" >"$TMP/noexp.json"
expect_err "MoE without experts" "noexp: model_type 'qwen3_moe' has routed experts, but 'num_experts'" \
  "$REFIT" plan -q -m "$TMP/noexp.json" -t TP2 -i TP2
sed 's/"qk_rope_head_dim": *[0-9]*/"qk_rope_head_dim": 0/' "$DATA/model/configs/tiny-mla.json" >"$TMP/rope0.json"
expect_err "qk_rope_head_dim 0" "rope0: 'qk_rope_head_dim' is 0 (want >= 1" \
  "$REFIT" plan -q -m "$TMP/rope0.json" -t TP2 -i TP2
# Specs whose tensors total more than 2^50 bytes: 33 x 2^56 fp32 (overflowed the int64 sum) and
# 2 x 2^56 fp32 (576 PB, planned before): refused before the sum passes the limit.
t='"shape":[72057594037927936],"dtype":"fp32","src":{"mesh":[1],"ranks":[0],"placements":["R"]},"dst":{"mesh":[1],"ranks":[1],"placements":["R"]}'
{ printf '{"tensors":['; for i in $(seq 0 32); do [ "$i" -gt 0 ] && printf ','; printf '{"name":"t%d",%s}' "$i" "$t"; done; printf ']}'; } >"$TMP/huge.json"
expect_err "spec over 2^50 bytes" "spec: the model is more than 2^50 bytes (1.1 PB), the most refit plans (200x the largest published model)" \
  "$REFIT" plan -q --spec "$TMP/huge.json"
{ printf '{"tensors":['; for i in 0 1; do [ "$i" -gt 0 ] && printf ','; printf '{"name":"t%d",%s}' "$i" "$t"; done; printf ']}'; } >"$TMP/huge2.json"
expect_err "spec of 576 PB" "spec: the model is more than 2^50 bytes (1.1 PB)" \
  "$REFIT" plan -q --spec "$TMP/huge2.json"

finish
