#!/usr/bin/env bash
# Runs the real pipectl binary: help texts, JSON fields, exit codes and exact error messages,
# --out, every format, and the CSV export -> import round trip. Golden outputs: cli/testdata/.
source cli/cli_test_lib.sh

# --- help -----------------------------------------------------------------------------------
expect_ok help schedule --help
for flag in --schedule --pp --vpp --microbatches --layers --stage-layers --cost-f --cost-b --cost-w \
            --cost-comm --cost-unshard --cost-reshard --cost-reduce-grad --overlap --w-share --mem-limit \
            --csv --format --out --help; do
  grep -qE -- "^ *(-h, )?$flag " "$TMP/help.out" || fail "schedule --help does not explain $flag"
done
expect_golden help
expect_ok top --help
grep -q "^  schedule " "$TMP/top.out" && grep -q "^  schedules " "$TMP/top.out" || fail "pipectl --help lists no verbs"
"$PIPECTL" >/dev/null 2>&1
[ $? -eq 2 ] || fail "pipectl with no verb should exit 2"

# --- text and JSON --------------------------------------------------------------------------
expect_ok 1f1b_p2_m3_text schedule --schedule 1f1b --pp 2 --microbatches 3
expect_golden 1f1b_p2_m3_text
expect_ok layers_text schedule --schedule fthenb --pp 2 --microbatches 2 --stage-layers 3,1
expect_golden layers_text

expect_ok json schedule --schedule 1f1b --pp 2 --microbatches 2 --format json
$PY - "$TMP/json.out" <<'PYEOF' || fail "JSON fields of 1f1b pp=2 m=2"
import json, sys
d = json.load(open(sys.argv[1]))
assert list(d) == ["schedule", "pp", "vpp", "microbatches", "stage_to_rank", "makespan", "bubble_rate",
                   "rank_span_bubble_rate", "peak_activations", "ranks"], list(d)
assert d["schedule"] == "1f1b" and d["pp"] == 2 and d["vpp"] == 1 and d["microbatches"] == 2
assert d["stage_to_rank"] == [0, 1]
assert d["makespan"] == 9, d["makespan"]
assert abs(d["bubble_rate"] - (1 - 12 / 18)) < 1e-12, d["bubble_rate"]
assert d["peak_activations"] == [2, 1], d["peak_activations"]
ops = {"F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "PROBE", "OPT"}
for r, rank in enumerate(d["ranks"]):
    assert rank["rank"] == r and rank["busy"] == 6
    for s, e in rank["idle"]:
        assert 0 <= s < e <= d["makespan"]
    for job in rank["jobs"]:
        assert job["op"] in ops
        assert ("peer" in job) == job["op"].startswith(("SEND", "RECV")), job
        assert set(job) <= {"op", "stage", "mb", "start", "end", "peer"} and job["start"] <= job["end"]
compute = [(j["op"], j["mb"], j["start"], j["end"]) for j in d["ranks"][0]["jobs"] if j["op"] in ("F", "BW")]
assert compute == [("F", 0, 0, 1), ("F", 1, 1, 2), ("BW", 0, 4, 6), ("BW", 1, 7, 9)], compute
assert d["ranks"][0]["idle"] == [[2, 4], [6, 7]], d["ranks"][0]["idle"]
PYEOF

expect_ok json_layers schedule --schedule 1f1b --pp 2 --microbatches 2 --layers 4 --stage-layers 3,1 --format json
$PY - "$TMP/json_layers.out" <<'PYEOF' || fail "JSON stage_layers"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stage_layers"] == [3, 1], d.get("stage_layers")
f0 = d["ranks"][0]["jobs"][0]
assert f0["op"] == "F" and f0["end"] == 1.5, f0  # 3 of 4 layers over pp=2: 1.5 x the mean share
PYEOF

# --- other formats --------------------------------------------------------------------------
expect_ok trace schedule --schedule eager-1f1b --pp 3 --microbatches 4 --format perfetto
$PY - "$TMP/trace.out" <<'PYEOF' || fail "perfetto trace"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
assert names == {"rank 0", "rank 1", "rank 2"}, names
x = [e for e in ev if e["ph"] == "X" and e["cat"] == "compute"]
assert len(x) == 3 * 4 * 2 and all(e["dur"] > 0 for e in x)
assert any(e["name"] == "F mb3 s2" for e in x)
PYEOF
expect_ok schedules_text schedules
grep -q "^1f1b " "$TMP/schedules_text.out" && grep -q "^csv " "$TMP/schedules_text.out" || fail "schedules lists no 1f1b/csv"
grep -q "^Not schedules but choices: best (--schedule best" "$TMP/schedules_text.out" || fail "schedules does not say best exists"
expect_ok schedules_json schedules --format json
$PY - "$TMP/schedules_json.out" <<'PYEOF' || fail "schedules --format json"
import json, sys
d = json.load(open(sys.argv[1]))
by = {s["name"]: s for s in d}
assert by["1f1b"] == {"name": "1f1b", "default_vpp": 1, "required_vpp": 1, "split_backward": False,
                      "summary": by["1f1b"]["summary"]}
assert by["zbv"]["split_backward"] and by["zbv"]["required_vpp"] == 2 and "csv" in by
PYEOF

# --- schedule best: every schedule ranked, the shortest within --mem-limit printed -----------
expect_ok best_text schedule --schedule best --pp 4 --microbatches 8 --mem-limit 3
[ "$(head -4 "$TMP/best_text.out")" == "best: v-half, the shortest makespan of 4 schedule(s) within --mem-limit 3
  schedule     vpp  makespan  rank span  bubble  peak activations
  v-half       2    26.5      26.5       9.4%    3 (rank 0)
  v-auto       2    26.5      26.5       9.4%    3 (rank 0)" ] || fail "best text: $(head -4 "$TMP/best_text.out")"
grep -qx "  zbv          peak activations 4 on rank 0, above the memory limit 3" "$TMP/best_text.out" ||
  fail "best text does not say why zbv was refused"
grep -q "^v-half  p=4 v=2 m=8  makespan 26.5 " "$TMP/best_text.out" || fail "best text shows no v-half grid"
expect_ok best_json schedule --schedule best --pp 4 --microbatches 8 --format json
check best_json 'b = d["best"]; assert d["schedule"] == "zbv" and d["makespan"] == 25.5 and b["winner"] == "zbv" and b["measure"] == "makespan" and b["mem_limit"] == 0 and len(b["ranked"]) == 13 and b["refused"] == [] and b["ranked"][0] == {"schedule": "zbv", "vpp": 2, "makespan": 25.5, "rank_span": 24, "bubble_rate": b["ranked"][0]["bubble_rate"], "peak_activations": 4, "peak_rank": 0}, b'
expect_ok best_csv schedule --schedule best --pp 4 --microbatches 8 --mem-limit 3 --format csv
expect_ok vhalf_csv schedule --schedule v-half --pp 4 --microbatches 8 --format csv
cmp -s "$TMP/best_csv.out" "$TMP/vhalf_csv.out" || fail "best --format csv is not the winner's CSV"
"$PIPECTL" schedule --schedule best --pp 2 --microbatches 4 --mem-limit 0.5 >"$TMP/best_none.out" 2>"$TMP/best_none.err"
[ $? -eq 1 ] || fail "best with nothing in the limit should exit 1"
grep -q "^pipectl schedule: --schedule best: no schedule runs this shape within the memory limit 0.5: fthenb: peak activations 4 on rank 0, above the memory limit 0.5; " "$TMP/best_none.err" ||
  fail "best with nothing in the limit: $(cat "$TMP/best_none.err")"

# --- --out ----------------------------------------------------------------------------------
expect_ok out schedule --schedule 1f1b --pp 2 --microbatches 3 --format json --out "$TMP/written.json"
[ "$(cat "$TMP/out.out")" == "wrote json to $TMP/written.json" ] || fail "--out printed: $(cat "$TMP/out.out")"
expect_ok stdout_json schedule --schedule 1f1b --pp 2 --microbatches 3 --format json
cmp -s "$TMP/written.json" "$TMP/stdout_json.out" || fail "--out file differs from stdout"

# --- CSV: export, import, same JSON ---------------------------------------------------------
for sched in 1f1b fthenb eager-1f1b; do
  expect_ok "csv_$sched" schedule --schedule $sched --pp 3 --microbatches 5 --format csv --out "$TMP/$sched.csv"
  expect_ok "orig_$sched" schedule --schedule $sched --pp 3 --microbatches 5 --format json
  expect_ok "back_$sched" schedule --schedule csv --csv "$TMP/$sched.csv" --format json
  $PY - "$TMP/orig_$sched.out" "$TMP/back_$sched.out" <<'PYEOF' || fail "csv round trip of $sched"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["schedule"] == "csv"
a.pop("schedule"); b.pop("schedule")
assert a == b
PYEOF
done
# A compute-only PyTorch file (I/W split, idle cells): the comm pass adds send/recv.
printf '0F0,0F1,,0I0,0W0,0I1,0W1\n,1F0,1I0,1F1,1I1,1W0,1W1\n' >"$TMP/zb.csv"
expect_ok zb_text schedule --schedule csv --csv "$TMP/zb.csv" --pp 2 --microbatches 2
expect_golden zb_text

# PyTorch's newer actions: read, validated, simulated and written back cell for cell.
printf '0UNSHARD,0F0,0F1,0B0,0B1,0REDUCE_GRAD,0RESHARD\n1UNSHARD,1F0,(1F1;1B0)OVERLAP_F_B,1B1,1REDUCE_GRAD,1RESHARD\n' \
  >"$TMP/torch.csv"
expect_ok torch_csv schedule --schedule csv --csv "$TMP/torch.csv" --format csv --out "$TMP/torch_back.csv"
expect_ok torch_back schedule --schedule csv --csv "$TMP/torch_back.csv" --format csv
cmp -s "$TMP/torch_back.csv" "$TMP/torch_back.out" || fail "PyTorch actions: export -> import -> export differs"
grep -q "^1UNSHARD,1RECV_F0,1RECV_F1,1F0,(1F1;1B0)OVERLAP_F_B,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD$" \
  "$TMP/torch_back.out" || fail "PyTorch actions: rank 1 exported as $(tail -1 "$TMP/torch_back.out")"
expect_ok torch_json schedule --schedule csv --csv "$TMP/torch.csv" --overlap 1 --cost-reduce-grad 1 --format json
check torch_json 'assert [j["op"] for j in d["ranks"][1]["jobs"]][:7] == ["UNSHARD", "RECV_F", "RECV_F", "F", "OVERLAP_F_B", "F", "BW"], d["ranks"][1]["jobs"]'
printf '0F0,0OVERLAP_F_B1\n' >"$TMP/torch_bad.csv"
expect_error torch_bad 2 "pipectl schedule: --csv \"$TMP/torch_bad.csv\": csv row 0 (rank 0), column 1 (\"0OVERLAP_F_B1\"): OVERLAP_F_B holds its two sub-actions: expected (<forward>;<backward>)OVERLAP_F_B, a forward then an I or B of this rank, e.g. \"(0F3;1B2)OVERLAP_F_B\"" \
  schedule --schedule csv --csv "$TMP/torch_bad.csv"

# --- errors: exit 2 and the exact message ---------------------------------------------------
expect_error pp0 2 "pipectl schedule: --pp: must be >= 1, got 0" \
  schedule --schedule 1f1b --pp 0 --microbatches 2
expect_error nope 2 "pipectl schedule: --schedule: unknown name \"nope\" (known: fthenb, 1f1b, eager-1f1b, interleaved, looped-bfs, zbh1, zbh2, zb-auto, zbv, v-half, v-min, dualpipev, v-auto, csv), or best" \
  schedule --schedule nope --pp 2 --microbatches 2
expect_error mbx 2 "pipectl schedule: --microbatches: expected an integer, got \"x\"" \
  schedule --schedule 1f1b --pp 2 --microbatches x
expect_error sum 2 "pipectl schedule: --stage-layers: counts must sum to --layers (8), got 6" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --layers 8 --stage-layers 3,3
expect_error count 2 "pipectl schedule: --stage-layers: must have one count per rank (--pp = 2) or per virtual stage (2), got 3" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --stage-layers 3,3,2
expect_error short_rank 2 "pipectl schedule: --stage-layers[1]: must be >= 2 (a layer for each of rank 1's 2 chunk(s)), got 1" \
  schedule --schedule interleaved --pp 2 --microbatches 2 --stage-layers 5,1
expect_error few_layers 2 "pipectl schedule: --layers: must be >= the 2 stages (a layer for each), got 1" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --layers 1
expect_error nopp 2 "pipectl schedule: --pp: required (pipeline ranks, >= 1)" \
  schedule --schedule 1f1b --microbatches 2
expect_error format 2 "pipectl schedule: --format: must be text, json, csv or perfetto, got \"xml\"" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --format xml
expect_error unknown_flag 2 "pipectl schedule: --ppp: unknown option (see --help)" \
  schedule --schedule 1f1b --ppp 2
expect_error cost 2 "pipectl schedule: --w-share: must be in [0, 1], got 2" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --w-share 2
expect_error cost_huge 2 "pipectl schedule: --cost-f: must be a finite number >= 0, got -1e+300" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --cost-f -1e300
expect_error vpp 2 "pipectl schedule: --vpp: schedule 1f1b places exactly 1 chunk(s) per rank, got 2" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --vpp 2
expect_error nocsv 2 "pipectl schedule: --csv: required with --schedule csv (the CSV file to import)" \
  schedule --schedule csv
expect_error missing_csv 2 "pipectl schedule: --csv: cannot open $TMP/none.csv: No such file or directory" \
  schedule --schedule csv --csv "$TMP/none.csv"
printf '0F0,0X0\n' >"$TMP/bad.csv"
expect_error bad_csv 2 "pipectl schedule: --csv \"$TMP/bad.csv\": csv row 0 (rank 0), column 1 (\"0X0\"): unknown op \"X\" (expected F, I, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, UNSHARD, RESHARD or REDUCE_GRAD)" \
  schedule --schedule csv --csv "$TMP/bad.csv"
printf '0F0,0F1,0B0\n' >"$TMP/incomplete.csv"
expect_error incomplete_csv 2 "pipectl schedule: --csv \"$TMP/incomplete.csv\": schedule csv is invalid: stage 0 micro-batch 1 has no B or BW" \
  schedule --schedule csv --csv "$TMP/incomplete.csv"
expect_error csv_pp 2 "pipectl schedule: --pp: 1 given, but the CSV has 2 rows (ranks)" \
  schedule --schedule csv --csv "$TMP/zb.csv" --pp 1
expect_error schedules_format 2 "pipectl schedules: --format: must be text or json, got \"csv\"" \
  schedules --format csv
expect_error out_dir 1 "pipectl schedule: --out: cannot write \"$TMP/no/such/dir.json\" (No such file or directory)" \
  schedule --schedule 1f1b --pp 2 --microbatches 2 --out "$TMP/no/such/dir.json"


# --- files: "cannot open FILE: reason", the flag named when a flag gave the file -------------
expect_error submit_missing 2 "pipectl submit: cannot open /nonexistent.json: No such file or directory" \
  submit /nonexistent.json
expect_error submit_dir 2 "pipectl submit: cannot read $TMP: Is a directory" submit "$TMP"
expect_error program_missing 2 "pipectl memory: --program: cannot open $TMP/none.json: No such file or directory" \
  memory --program "$TMP/none.json"
expect_error config_missing 2 "pipectl plan: --model-config: cannot open $TMP/none.json: No such file or directory" \
  plan --model-config "$TMP/none.json" --gpus 8 --gpu-memory-gib 80
expect_error csv_empty_name 2 "pipectl schedule: --csv: needs a file name" schedule --schedule csv --csv ""

# --- submit: a key given twice is refused, malformed JSON too (before any connection) -------
printf '{\n  "learningRate": 0.01,\n  "pp": 2,\n  "learningRate": 5\n}\n' >"$TMP/dup.json"
expect_error dup_key 2 "pipectl submit: $TMP/dup.json: duplicate key \"learningRate\" in spec (line 4, first on line 2)" \
  submit "$TMP/dup.json"
printf '{"model": {"hidden": 32,\n  "heads": 4,\n  "hidden": 64}}' >"$TMP/dup_nested.json"
expect_error dup_nested 2 "pipectl submit: $TMP/dup_nested.json: duplicate key \"hidden\" in spec.model (line 3, first on line 1)" \
  submit "$TMP/dup_nested.json"
printf '{"learning_rate": 0.01,\n "learningRate": 5}' >"$TMP/dup_alias.json"
expect_error dup_alias 2 "pipectl submit: $TMP/dup_alias.json: duplicate key \"learningRate\" in spec (line 2, the same field as \"learning_rate\" on line 1)" \
  submit "$TMP/dup_alias.json"
printf '{"pp": 2,\n "stageLayers": [1, 2,]}' >"$TMP/malformed.json"
expect_error malformed 2 "pipectl submit: $TMP/malformed.json: not JSON: line 2, column 23: expected a value for spec.stageLayers[2], got ']'" \
  submit "$TMP/malformed.json"

# --- --format: every verb that has one refuses any other, exit 2, before connecting ----------
for verb in "jobs" "workers" "status job-1" "events job-1" "rebalance job-1" "cancel job-1" "watch job-1" "resubmit job-1" \
            "submit $TMP/dup.json" "schedules" "memory --model llama2-7b" "plan --model llama2-7b --gpus 8 --gpu-memory-gib 80"; do
  name=${verb%% *}
  # shellcheck disable=SC2086
  expect_error "format_$name" 2 "pipectl $name: --format: must be text or json, got \"yaml\"" $verb --format yaml
done
expect_error rebalance_no_job 2 "pipectl rebalance: JOB: exactly one job id required (see \`pipectl jobs\`)" rebalance
expect_error format_trace 2 "pipectl trace: --format: unknown option (see --help)" trace job-1 --format json

# --- options before the verb -----------------------------------------------------------------
expect_error before_format 2 "pipectl jobs: --format: must be text or json, got \"yaml\"" --format yaml jobs
expect_error before_format_eq 2 "pipectl status: --format: must be text or json, got \"yaml\"" --format=yaml status job-1
# The address given before the verb is the one tried (nothing listens on port 1); one after it wins.
"$PIPECTL" --coordinator 127.0.0.1:1 jobs >"$TMP/before.out" 2>"$TMP/before.err"
rc=$?
[ "$rc" -eq 1 ] || fail "--coordinator before jobs: exit $rc, want 1"
grep -q "^pipectl jobs: coordinator at 127.0.0.1:1 not reachable in plaintext" "$TMP/before.err" ||
  fail "--coordinator before jobs: $(cat "$TMP/before.err")"
"$PIPECTL" --coordinator 127.0.0.1:1 workers --coordinator 127.0.0.1:2 >"$TMP/after.out" 2>"$TMP/after.err"
grep -q "^pipectl workers: coordinator at 127.0.0.1:2 not reachable" "$TMP/after.err" ||
  fail "the option after the verb should win: $(cat "$TMP/after.err")"
expect_error before_unknown_verb_option 2 "pipectl schedule: --coordinator: unknown option (see --help)" \
  --coordinator 127.0.0.1:1 schedule --schedule 1f1b --pp 2 --microbatches 2
"$PIPECTL" --bogus jobs >"$TMP/bogus.out" 2>"$TMP/bogus.err"
rc=$?
[ "$rc" -eq 2 ] || fail "--bogus before the verb: exit $rc, want 2"
[ "$(head -1 "$TMP/bogus.err")" == 'pipectl: unknown option "--bogus" before the verb (there: --coordinator, --tls-ca, --token, --format)' ] ||
  fail "--bogus before the verb: $(head -1 "$TMP/bogus.err")"
"$PIPECTL" --coordinator >/dev/null 2>"$TMP/novalue.err"
[ $? -eq 2 ] && [ "$(head -1 "$TMP/novalue.err")" == "pipectl: --coordinator: needs a value" ] ||
  fail "--coordinator without a value: $(head -1 "$TMP/novalue.err")"
"$PIPECTL" --coordinator 127.0.0.1:1 >/dev/null 2>"$TMP/noverb.err"
[ $? -eq 2 ] && [ "$(head -1 "$TMP/noverb.err")" == "pipectl: no verb after the options" ] ||
  fail "options and no verb: $(head -1 "$TMP/noverb.err")"
expect_ok top_help_before --coordinator 127.0.0.1:1 --help
grep -q "^  resubmit " "$TMP/top_help_before.out" || fail "pipectl --help does not list resubmit"
grep -q "may come before the verb" "$TMP/top_help_before.out" || fail "pipectl --help does not say options may come before the verb"
expect_ok resubmit_help resubmit --help
grep -qE -- "^ *--watch " "$TMP/resubmit_help.out" || fail "resubmit --help does not explain --watch"

# --- submit --dry-run: plans and prints, stores nothing (tests/e2e_auto_test.sh runs it live) ---
expect_ok submit_help submit --help
grep -qE -- "^ *--dry-run +plan only: print the spec as it would run" "$TMP/submit_help.out" ||
  fail "submit --help does not explain --dry-run: $(cat "$TMP/submit_help.out")"
grep -q 'schedule "auto"' "$TMP/submit_help.out" || fail "submit --help does not mention schedule \"auto\""
printf '{"schedule": "auto", "globalBatch": 8}' >"$TMP/auto.json"
expect_error dry_run_watch 2 "pipectl submit: --watch: a dry run starts no job to follow" \
  submit "$TMP/auto.json" --dry-run --watch

finish_tests "pipectl"
