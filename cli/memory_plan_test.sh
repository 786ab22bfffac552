#!/usr/bin/env bash
# Runs `pipectl memory` and `pipectl plan` as a user would: JSON fields parsed with
# /usr/bin/python3, the published figures reproduced through the CLI, exit codes and exact
# error messages.
source cli/cli_test_lib.sh

# --- help ------------------------------------------------------------------------------------
expect_ok memory_help memory --help
for flag in --model --model-config --layers --seq-len --micro-batch --microbatches --dp --tp --sp --pp \
            --vpp --zero --recompute --dtype --optimizer --recipe --attention --schedule --format \
            --liveness --program; do
  grep -q -- "^  $flag " "$TMP/memory_help.out" || fail "memory --help does not explain $flag"
done
expect_ok plan_help plan --help
for flag in --model --gpus --gpu-memory-gib --global-batch --top --format --reserve-gib; do
  grep -q -- "^  $flag " "$TMP/plan_help.out" || fail "plan --help does not explain $flag"
done
expect_ok top --help
grep -q "^  memory " "$TMP/top.out" && grep -q "^  plan " "$TMP/top.out" || fail "pipectl --help lists no memory/plan"

# --- memory: JSON contract and Korthikanti et al. Table 2 through the CLI ------------------------
expect_ok k22b memory --model gpt3-22b --tp 8 --sp --recompute selective --micro-batch 4 --pp 4 --microbatches 8 --format json
check k22b "
sbh = 2048 * 4 * 6144
assert d['block']['stored_bytes'] == 34 * sbh // 8, d['block']['stored_bytes']
assert len(d['ranks']) == 4
for r in d['ranks']:
    for k in ('rank', 'params_bytes', 'grads_bytes', 'optimizer_bytes', 'activations_bytes', 'peak_bytes'):
        assert k in r, k
    assert r['peak_bytes'] == r['params_bytes'] + r['grads_bytes'] + r['optimizer_bytes'] + r['activations_bytes'] + r['transient_bytes']
assert d['ranks'][0]['first_stage'] and d['ranks'][3]['last_stage']
# 1F1B: the first rank holds 4 micro-batches of 12 blocks: 34 sbh L / t plus the embedding masks.
assert d['ranks'][0]['activations_bytes'] == 34 * sbh * 48 // 8 + 4 * sbh // 8
"
expect_ok k22b_full memory --model gpt3-22b --tp 8 --recompute full --micro-batch 4 --format json
check k22b_full "assert d['block']['stored_bytes'] == 2 * 2048 * 4 * 6144"

# --- memory: Megatron-LM get_training_info's example -------------------------------------------
readme=(--model gpt3-22b --layers 32 --hidden 4096 --ffn 10880 --heads 32 --vocab 50432 --mlp swiglu
        --attention flash --micro-batch 4)
expect_ok readme_layer memory "${readme[@]}" --format json
check readme_layer "
g = d['block']['groups']
assert d['block']['saved_bytes'] == 1320 * 2**20
assert (g['input_norm'], g['attention'], g['post_attention_norm'], g['mlp'], g['dropout_add']) == (64 * 2**20, 384 * 2**20, 64 * 2**20, 744 * 2**20, 64 * 2**20), g
"
expect_ok readme_rank memory "${readme[@]}" --tp 2 --pp 2 --dp 4 --zero 1 --format json
check readme_rank "
r = d['ranks'][0]
gib = lambda b: round(b / 2**30, 1)
assert (gib(r['params_bytes']), gib(r['grads_bytes']), gib(r['optimizer_bytes'])) == (3.2, 6.4, 4.8), r
"

# --- memory: text, liveness, config.json, program replay ---------------------------------------
expect_ok text memory --model llama2-7b --pp 2
grep -q "^peak: " "$TMP/text.out" || fail "text: no peak line"
grep -q "input_norm.input" "$TMP/text.out" || fail "text: no tensor table"
expect_ok live memory --model llama2-7b --seq-len 1024 --liveness --format json
check live "l = d['liveness']; assert l['analytic']['b_keeps_for_w'] == l['liveness']['b_keeps_for_w'] and l['liveness']['peak'] > l['analytic']['peak']"
cat >"$TMP/config.json" <<'JSON'
{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
 "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
 "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false}
JSON
expect_ok cfg memory --model-config "$TMP/config.json" --format json
check cfg "assert d['total_params'] == 8030261248 and d['model']['kv_heads'] == 8"
expect_ok prog memory --program memory/testdata/two_layer_mlp.json --format json
check prog "assert d['peak_op'] == 5 and d['peak_op_name'] == 'backward/fc2_grad' and d['peak_bytes'] == 4 * 512 * 1024 + 5120 * 1024"
expect_ok emit memory --model llama2-7b --seq-len 512 --emit-program
"$PIPECTL" memory --program "$TMP/emit.out" --format json >"$TMP/replay.out" 2>"$TMP/replay.err" || fail "replay of --emit-program failed: $(cat "$TMP/replay.err")"
check replay "assert len(d['ops']) > 20"

# --- memory: errors name the rule ---------------------------------------------------------------
known="llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, gpt3-22b, gpt3-175b"
expect_error preset 2 "pipectl memory: --model: unknown preset \"nope\" (known: $known)" memory --model nope
expect_error tp 2 "pipectl memory: tp: must divide heads (32 % 3 != 0)" memory --model llama2-7b --tp 3
expect_error kv 2 "pipectl memory: tp: must divide kv-heads (8 % 16 != 0)" memory --model llama3-8b --tp 16
expect_error heads 2 "pipectl memory: heads: must divide hidden (4096 % 30 != 0)" memory --model llama2-7b --heads 30
expect_error layers 2 "pipectl memory: layers: every pipeline chunk needs at least one block, so layers (32) must be >= pp x vpp (64)" memory --model llama2-7b --pp 64
expect_error recompute 2 "pipectl memory: --recompute: expected none, selective or full, got \"some\"" memory --model llama2-7b --recompute some
expect_error nomodel 2 "pipectl memory: --model: give exactly one of --model ($known) and --model-config" memory --tp 2
expect_error badprog 2 "pipectl memory: --program: programs[0].ops[0].inputs[0].shape: expected an array of non-negative integers" \
  memory --program <(echo '{"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [-1]}]}]}]}')

# --- plan -------------------------------------------------------------------------------------
expect_ok plan plan --model llama2-7b --gpus 16 --gpu-memory-gib 80 --global-batch 64 --top 3 --format json
check plan "
assert len(d['top']) == 3
assert d['candidates'] == d['feasible'] + sum(p['count'] for p in d['pruned'])
steps = [t['time']['step_s'] for t in d['top']]
assert steps == sorted(steps)
for t in d['top']:
    assert t['dp'] * t['tp'] * t['pp'] == 16
    assert t['memory']['peak_bytes'] <= 80 * 2**30
    assert 64 % (t['dp'] * t['micro_batch']) == 0 and t['microbatches'] == 64 // (t['dp'] * t['micro_batch'])
reasons = {p['reason'] for p in d['pruned']}
assert 'memory over budget' in reasons, reasons
"
expect_ok plan_text plan --model llama2-70b --gpus 64 --gpu-memory-gib 80 --schedules 1f1b,interleaved --top 2
grep -q "^pruned" "$TMP/plan_text.out" || fail "plan text: no pruned section"
grep -q "searched in" "$TMP/plan_text.out" || fail "plan text: no timing line"
# pp 1 has no pipeline and so no schedule: one plan, schedule "none", not one per schedule name.
expect_ok plan_pp1 plan --model llama3-8b --gpus 32 --gpu-memory-gib 80 --top 20 --format json
check plan_pp1 "
key = lambda t: (t['dp'], t['tp'], t['sp'], t['pp'], t['vpp'], t['schedule'] if t['pp'] > 1 else None,
                 t['micro_batch'], t['zero'], t['recompute'])
keys = [key(t) for t in d['top']]
assert len(set(keys)) == len(keys) == 20, keys
pp1 = [t for t in d['top'] if t['pp'] == 1]
assert pp1 and all(t['schedule'] == 'none' and t['vpp'] == 1 for t in pp1), pp1
assert all(t['schedule'] != 'none' for t in d['top'] if t['pp'] > 1)
"
expect_ok plan_none plan --model llama2-70b --gpus 8 --gpu-memory-gib 16 --global-batch 8 --format json
check plan_none "assert d['top'] == [] and d['feasible'] == 0"
expect_error plan_gpus 2 "pipectl plan: --gpus: required (GPUs in the job)" plan --model llama2-7b --gpu-memory-gib 80
expect_error plan_eff 2 "pipectl plan: --efficiency: must be in (0, 1], got 1.5" \
  plan --model llama2-7b --gpus 8 --gpu-memory-gib 80 --efficiency 1.5
expect_error plan_bw 2 "pipectl plan: --inter-node-gbps: must be in (0, 1e9), got -25" \
  plan --model llama2-7b --gpus 8 --gpu-memory-gib 80 --inter-node-gbps -25
expect_error plan_reserve 2 "pipectl plan: --reserve-gib: must be >= 0 and below --gpu-memory-gib (80), got 80.5" \
  plan --model llama2-7b --gpus 8 --gpu-memory-gib 80 --reserve-gib 80.5
expect_error plan_mem 2 "pipectl plan: --gpu-memory-gib: required (memory per GPU, GiB)" plan --model llama2-7b --gpus 8

finish_tests "memory/plan CLI"
