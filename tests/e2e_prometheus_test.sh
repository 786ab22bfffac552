#!/usr/bin/env bash
# A real Prometheus server (Debian's prometheus) scrapes the coordinator's /metrics at a 1 s
# interval on loopback while a job runs; its HTTP API then answers for pipecoord's series. Then
# the coordinator restarts on its state file and the same HTTP port: the job's series come back
# with the values they had, and Prometheus sees no counter reset.
source tests/lib.sh
PROMETHEUS=${PROMETHEUS:-prometheus}
command -v "$PROMETHEUS" > /dev/null || fail "prometheus not installed (tools/setup.sh installs Debian's prometheus)"

start_coordinator --http 127.0.0.1:0 --state "$WORK/state.db"
COORDINATOR_PID=${PIDS[-1]}
HTTP=$(sed -n 's/^coordinator http on \([^ ]*\) .*/\1/p' "$WORK/coordinator.log")
[ -n "$HTTP" ] || fail "no http address in the coordinator's log"
start_workers 2

# The exposition itself: base units, _total counters, TYPE lines.
curl -sf "http://$HTTP/metrics" > "$WORK/metrics.txt" || fail "GET /metrics"
grep -q '^# TYPE pipecoord_workers gauge' "$WORK/metrics.txt" || fail "no pipecoord_workers gauge: $(head "$WORK/metrics.txt")"
grep -q '^pipecoord_workers{state="idle"} 2$' "$WORK/metrics.txt" || fail "2 idle workers expected"

job_json "$WORK/job.json" steps=100000
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pipecoord
    static_configs:
      - targets: ["$HTTP"]
YML
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --web.listen-address="127.0.0.1:$PORT" \
  --storage.tsdb.path="$WORK/tsdb" > "$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM="http://127.0.0.1:$PORT"

# query EXPR: the first sample's value ("" when none yet).
query() {
  curl -sfG "$PROM/api/v1/query" --data-urlencode "query=$1" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2> /dev/null || true
}

# Three scrapes at least: wait (30 s at most) until Prometheus holds 3 samples of the step counter.
for _ in $(seq 300); do
  n=$(query "count_over_time(pipecoord_steps_total{job_id=\"$job\"}[1m])")
  [ -n "$n" ] && [ "$n" -ge 3 ] && break
  sleep 0.1
done
[ -n "$n" ] && [ "$n" -ge 3 ] || fail "Prometheus holds no 3 samples of pipecoord_steps_total: $(tail -5 "$WORK/prometheus.log")"

[ "$(query 'up{job="pipecoord"}')" = 1 ] || fail "target not up"
targets=$(curl -sf "$PROM/api/v1/targets" | /usr/bin/python3 -c 'import json,sys; print([t["health"] for t in json.load(sys.stdin)["data"]["activeTargets"]])')
[ "$targets" = "['up']" ] || fail "targets: $targets"
check() {  # check EXPR WANT
  local got
  got=$(query "$1")
  [ "$got" = "$2" ] || fail "$1 = '$got', want '$2'; the job: $("$PIPECTL" status "$job")"
  echo "prometheus: $1 = $got"
}
positive() {  # positive EXPR
  local got
  got=$(query "$1")
  /usr/bin/python3 -c "import sys; sys.exit(0 if float('${got:-0}') > 0 else 1)" || fail "$1 = '$got', want > 0"
  echo "prometheus: $1 = $got"
}
# The job is calibrated on its measured costs after its warm-up step and 3 more (docs/monitoring.md):
# wait (30 s at most) until Prometheus holds the calibrated prediction.
for _ in $(seq 300); do
  [ -n "$(query "pipecoord_predicted_step_seconds{job_id=\"$job\",source=\"calibrated\"}")" ] && break
  sleep 0.1
done
check "pipecoord_bubble_ratio{job_id=\"$job\",source=\"plan\"}" 0.2
positive "pipecoord_predicted_step_seconds{job_id=\"$job\",source=\"calibrated\"}"
positive "pipecoord_predicted_step_seconds{job_id=\"$job\",source=\"plan\"}"
positive "pipecoord_bubble_ratio{job_id=\"$job\",source=\"predicted\"}"
# The idle split: four causes for each of the 2 ranks; 1F1B's own bubble on every rank.
check "count(pipecoord_idle_seconds{job_id=\"$job\"})" 8
positive "min(pipecoord_idle_seconds{job_id=\"$job\",cause=\"inherent\"})"
check "pipecoord_memory_budget_bytes{job_id=\"$job\",rank=\"0\"}" 777024
check "pipecoord_jobs{state=\"RUNNING\"}" 1
check "pipecoord_workers{state=\"busy\"}" 2
# submitted, running, calibrated, and up to 3 "calibrated again" (the steady state, docs/monitoring.md)
got=$(query "pipecoord_health_events_total{job_id=\"$job\",kind=\"LIFECYCLE\"}")
case "$got" in 3|4|5|6) echo "prometheus: LIFECYCLE events = $got" ;;
  *) fail "pipecoord_health_events_total{kind=LIFECYCLE} = '$got', want 3 to 6; the job: $("$PIPECTL" status "$job")" ;;
esac
check "count(pipecoord_straggler_score{job_id=\"$job\",score=\"relative\"})" 4
positive "pipecoord_steps_total{job_id=\"$job\"}"
positive "rate(pipecoord_steps_total{job_id=\"$job\"}[5s])"
positive "pipecoord_step_duration_seconds_count{job_id=\"$job\"}"
positive "histogram_quantile(0.5, sum by (le) (rate(pipecoord_step_duration_seconds_bucket{job_id=\"$job\"}[5s])))"
positive "sum(pipecoord_action_duration_seconds_count{job_id=\"$job\",rank=\"1\",stage=\"1\",op=\"BW\"})"
positive "pipecoord_bubble_ratio{job_id=\"$job\",source=\"measured\"}"
positive "pipecoord_memory_peak_bytes{job_id=\"$job\",rank=\"1\"}"

# Every query of the Grafana dashboard (deploy/grafana) is valid PromQL and finds its series.
/usr/bin/python3 - "$PROM" "$job" deploy/grafana/dashboards/pipecoord.json <<'PY' || fail "grafana dashboard queries"
import json, sys, urllib.parse, urllib.request
prom, job, path = sys.argv[1:]
dash = json.load(open(path))
may_be_empty = {"Health events by kind (per minute)"}  # a healthy job raises none
n = 0
for panel in dash["panels"]:
    for t in panel["targets"]:
        expr = t["expr"].replace("$job_id", job).replace("$__rate_interval", "5s")
        url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        r = json.load(urllib.request.urlopen(url, timeout=10))
        assert r["status"] == "success", (panel["title"], expr, r)
        assert r["data"]["result"] or panel["title"] in may_be_empty, (panel["title"], expr, "no series")
        n += 1
print(f"grafana: {n} queries of {len(dash['panels'])} panels answered")
PY

# A restart: the job, cancelled (its series stop moving), keeps its step counter; a second job that
# ran to the end within the trace window (the 200k actions a job's series are rebuilt from,
# docs/monitoring.md; the first job's run can outgrow it, however long the queries above took)
# keeps every series and value.
"$PIPECTL" cancel "$job" > /dev/null
job_json "$WORK/short.json" steps=200
short=$("$PIPECTL" submit "$WORK/short.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$short" > /dev/null || fail "the short job did not succeed"
job_series() { curl -sf "http://$HTTP/metrics" | grep -F "job_id=\"$1\"" | sort; }
job_series "$short" > "$WORK/before.txt" || fail "GET /metrics before the restart"
steps=$(curl -sf "http://$HTTP/metrics" | sed -n "s/^pipecoord_steps_total{job_id=\"$job\"} //p")
[ -n "$steps" ] || fail "no pipecoord_steps_total of $job before the restart"
kill "$COORDINATOR_PID"
wait "$COORDINATOR_PID" 2> /dev/null || true
start_coordinator --http "$HTTP" --state "$WORK/state.db"
for _ in $(seq 100); do grep -q "^coordinator http on $HTTP " "$WORK/coordinator.log" && break; sleep 0.05; done
grep -q "^coordinator http on $HTTP " "$WORK/coordinator.log" || fail "the new coordinator is not on $HTTP"
job_series "$short" > "$WORK/after.txt" || fail "GET /metrics after the restart"
diff "$WORK/before.txt" "$WORK/after.txt" > "$WORK/series.diff" ||
  fail "$short's series changed across the restart ($(wc -l < "$WORK/before.txt") before): $(head -20 "$WORK/series.diff")"
[ "$(wc -l < "$WORK/after.txt")" -gt 50 ] || fail "too few series of $short: $(cat "$WORK/after.txt")"
[ "$(curl -sf "http://$HTTP/metrics" | sed -n "s/^pipecoord_steps_total{job_id=\"$job\"} //p")" = "$steps" ] ||
  fail "$job's pipecoord_steps_total changed across the restart (was $steps)"
echo "restart: $(wc -l < "$WORK/after.txt") series of $short as before; $job's pipecoord_steps_total $steps"
# Prometheus scrapes the new process (30 s at most) and reads the same counter, never reset.
for _ in $(seq 300); do
  [ "$(query "pipecoord_steps_total{job_id=\"$job\"}")" = "$steps" ] && [ "$(query 'up{job="pipecoord"}')" = 1 ] && break
  sleep 0.1
done
check "pipecoord_steps_total{job_id=\"$job\"}" "$steps"
check "resets(pipecoord_steps_total{job_id=\"$job\"}[5m])" 0
check "pipecoord_memory_budget_bytes{job_id=\"$job\",rank=\"0\"}" 777024
echo "e2e prometheus: ok"
