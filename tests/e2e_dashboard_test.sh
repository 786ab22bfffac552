#!/usr/bin/env bash
# The dashboard in headless Chromium: a running job, its timeline with the predicted bubbles,
# workers, memory, and an injected fault (corrupt:0:3 -> an SDC event) on screen; markup in a
# job name stays text; after the test cancels the job, every curve holds the points the job
# reported (pipectl status) and the rebalance suggestion shows when the job has one.
# Leaves dashboard.png in the test's outputs (and in $DASHBOARD_PNG if set).
source tests/lib.sh
source tests/health_lib.sh
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || fail "chromium and chromium-driver not installed (tools/setup.sh)"

start_coordinator --http 127.0.0.1:0
HTTP=$(sed -n 's/^coordinator http on \([^ ]*\) .*/\1/p' "$WORK/coordinator.log")
start_workers_with 2 --inject corrupt:0:3

# A job nobody runs (device cuda: no such worker), named with markup.
job_json "$WORK/marked.json" 'name="<b id=\"x\">bold</b><img src=x onerror=alert(1)>"' 'device="cuda"'
submit "$WORK/marked.json" > /dev/null
# The running job trains on a byte-level dataset with a validation loss every 5 steps (its curve).
/usr/bin/python3 -c 'import sys; open(sys.argv[1], "w").write("a pipeline of ranks passes micro-batches along.\n" * 2000)' "$WORK/text.txt"
"$PIPECTL" data prepare "$WORK/text.txt" --out "$WORK/data" > /dev/null || fail "data prepare"
job_json "$WORK/job.json" steps=100000 'name="dashboard demo"' 'schedule="interleaved"' vpp=2 model.layers=8 \
  model.vocab=256 "data={\"path\": \"$WORK/data\"}" evalEvery=5
job=$(submit "$WORK/job.json")
wait_event "$job" SDC 20 > /dev/null || fail "no SDC event: $("$PIPECTL" events "$job")"

shot="${TEST_UNDECLARED_OUTPUTS_DIR:-$WORK}/dashboard.png"
timeout 120 /usr/bin/python3 tests/dashboard_test.py "http://$HTTP/" "$job" "$shot" "$PIPECTL" ||
  fail "dashboard checks; the job: $("$PIPECTL" status "$job")"
[ -s "$shot" ] || fail "no screenshot"
[ -n "${DASHBOARD_PNG:-}" ] && cp "$shot" "$DASHBOARD_PNG"
echo "e2e dashboard: ok"
