#!/usr/bin/env bash
# The coordinator's HTTP side (/metrics, the dashboard and its JSON API) is read-only: every
# method but GET and HEAD is refused (405) on every route, and refused requests change nothing.
# Also: the plaintext development mode (no TLS flags) says so loudly on stderr.
source tests/lib.sh
start_coordinator --http 127.0.0.1:0
grep -qx "WARNING: serving gRPC in plaintext without authentication: for local development only" \
  "$WORK/coordinator.log" || fail "no plaintext warning"
http=$(sed -n 's/^coordinator http on \([^ ]*\).*/\1/p' "$WORK/coordinator.log")
job_json "$WORK/job.json" pp=4 model.layers=4  # no workers: it stays PENDING
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
HTTP=$http JOB=$job timeout 60 /usr/bin/python3 - <<'PY' || fail "HTTP is not read-only"
import http.client, json, os
host, port = os.environ["HTTP"].rsplit(":", 1)
job = os.environ["JOB"]
routes = ["/", "/index.html", "/dashboard.js", "/metrics", "/api/jobs", "/api/workers", f"/api/job?id={job}",
          "/api/job", "/api/submit", "/api/jobs/cancel", "/nothing"]
def call(method, path, body=None):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data
before = json.loads(call("GET", "/api/jobs")[1])
spec = json.dumps({"pp": 1, "model": {"layers": 1, "hidden": 8, "heads": 1, "vocab": 8, "seqLen": 4}}).encode()
for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
    for path in routes:
        status, _ = call(method, path, spec if method in ("POST", "PUT", "PATCH") else None)
        assert status == 405, (method, path, status)
assert call("GET", "/api/jobs")[0] == 200 and call("HEAD", "/metrics")[0] == 200
after = json.loads(call("GET", "/api/jobs")[1])
assert after == before and [j["id"] for j in after["jobs"]] == [job], (before, after)
print("HTTP read-only: 5 methods x", len(routes), "routes refused")
PY
[ "$("$PIPECTL" status "$job" --format json | json_field '["state"]')" = PENDING ] || fail "the job changed"
echo "http read-only: ok"
