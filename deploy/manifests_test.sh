#!/usr/bin/env bash
# deploy/'s manifests: every YAML file parses; each kustomization renders with kubectl kustomize;
# the rendered objects pass Kubernetes' own schemas (deploy/validate/k8s_validate.py, strict:
# unknown fields refused) and the checks pipecoord needs (deploy/validate/manifest_checks.py); the
# real binaries accept the containers' args; a misspelt field and a wrong type are rejected.
set -euo pipefail
source deploy/validate/tools.sh
source deploy/local/pki.sh
require_deploy_tools kubectl openssl
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/manifests.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
validate() { "$VPY" deploy/validate/k8s_validate.py "$@"; }
echo "kubectl $(kubectl version --client 2>/dev/null | tr '\n' ' '), $("$VPY" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE '^(kubernetes-validate|jsonschema|PyYAML) ' | tr -s ' ' | paste -sd, -)"

# kustomize refuses files reached through symlinks from outside its root: work on a real copy.
cp -rL deploy "$work/deploy"

# 1. Every YAML file parses.
find "$work/deploy" -name '*.yaml' | sort > "$work/yaml-files"
"$VPY" -c '
import sys, yaml
for f in open(sys.argv[1]).read().split():
    try:
        list(yaml.safe_load_all(open(f)))
    except yaml.YAMLError as e:
        sys.exit(f"{f}: {e}")
' "$work/yaml-files" || fail "a YAML file does not parse"
echo "parsed $(wc -l < "$work/yaml-files") YAML files"

# 2. The base and each overlay render, and every object validates.
for k in base overlays/cpu overlays/gpu overlays/ha; do
  out="$work/$(basename "$k").yaml"
  kubectl kustomize "$work/deploy/$k" > "$out" || fail "kubectl kustomize deploy/$k"
  validate "$out" || fail "deploy/$k: rendered objects do not validate"
done

# The private overlay docs/kubernetes.md shows (real secrets, your registry) renders, validates,
# and leaves no placeholder behind. Its certificates are made as docs/operations.md says.
mkdir -p "$work/prod"
printf 's3cret' > "$work/prod/token"
pki_ca "$work/prod"
pki_server "$work/prod" coordinator \
  "DNS:pipecoord-coordinator,DNS:pipecoord-coordinator.pipecoord.svc,DNS:pipecoord-coordinator.pipecoord.svc.cluster.local"
for i in $(seq 0 7); do pki_worker "$work/prod" "pipecoord-worker-$i"; done
cat > "$work/prod/kustomization.yaml" <<'EOF'
resources: [../deploy/overlays/gpu]
secretGenerator:
  - {name: pipecoord-token, behavior: replace, files: [token]}
  - {name: pipecoord-tls, behavior: replace, type: kubernetes.io/tls,
     files: [tls.crt=coordinator.crt, tls.key=coordinator.key, ca.crt]}
  - name: pipecoord-worker-tls
    behavior: replace
    files: [ca.crt, pipecoord-worker-0.crt, pipecoord-worker-0.key, pipecoord-worker-1.crt, pipecoord-worker-1.key,
            pipecoord-worker-2.crt, pipecoord-worker-2.key, pipecoord-worker-3.crt, pipecoord-worker-3.key,
            pipecoord-worker-4.crt, pipecoord-worker-4.key, pipecoord-worker-5.crt, pipecoord-worker-5.key,
            pipecoord-worker-6.crt, pipecoord-worker-6.key, pipecoord-worker-7.crt, pipecoord-worker-7.key]
images:
  - {name: pipecoord/coordinator, newName: registry.example.com/pipecoord/coordinator, newTag: v1}
  - {name: pipecoord/worker, newName: registry.example.com/pipecoord/worker, newTag: v1}
replicas:
  - {name: pipecoord-worker, count: 8}
EOF
kubectl kustomize "$work/prod" > "$work/prod.yaml" || fail "kubectl kustomize of the docs' private overlay"
validate "$work/prod.yaml" || fail "the docs' private overlay does not validate"
! grep -q "REPLACE-ME" "$work/prod.yaml" || fail "a placeholder secret survived the private overlay"
grep -q "token: czNjcmV0" "$work/prod.yaml" || fail "the token secret was not replaced"
/usr/bin/python3 - "$work/prod.yaml" "$work/prod" <<'PY' || fail "the private overlay's TLS Secrets"
import base64, sys
docs = open(sys.argv[1]).read().split("\n---\n")
def secret(name):
    [d] = [d for d in docs if "kind: Secret" in d and f"name: {name}\n" in d]
    return d
for name, key, path in [("pipecoord-tls", "tls.crt", "coordinator.crt"), ("pipecoord-tls", "ca.crt", "ca.crt"),
                        ("pipecoord-worker-tls", "pipecoord-worker-7.key", "pipecoord-worker-7.key")]:
    want = base64.b64encode(open(f"{sys.argv[2]}/{path}", "rb").read()).decode()
    assert want in "".join(secret(name).split()), (name, key)  # kustomize folds base64 over lines
PY
grep -q "image: registry.example.com/pipecoord/worker:v1" "$work/prod.yaml" || fail "image not renamed"
grep -q "replicas: 8" "$work/prod.yaml" || fail "replicas not set"

# 3. Overlays: pipecoord's own checks, and the launcher's flags against the containers'.
for overlay in cpu gpu; do
  mkdir -p "$work/$overlay"
  deploy/local/launch.sh --dry-run --overlay "$overlay" > "$work/$overlay/launcher.txt"
  "$VPY" deploy/validate/manifest_checks.py "$overlay" "$work/$overlay.yaml" \
    "$work/$overlay/launcher.txt" "$work/$overlay" || fail "deploy/overlays/$overlay: checks"
done

# 4. The real binaries accept the containers' args (ConfigMap values substituted; loopback
#    addresses instead of 0.0.0.0 and the Service name, a temporary state file, certificates
#    made here for 127.0.0.1 and the pod pipecoord-worker-0), the worker advertises the pod IP
#    and registers under its pod's name, from its certificate.
pki=$work/pki
pki_ca "$pki"
pki_server "$pki" coordinator "IP:127.0.0.1"
pki_worker "$pki" pipecoord-worker-0
pki_token "$pki/token"
# local_coordinator_args ARGS_FILE [sed expressions...]: the container's coordinator args with
# loopback addresses and this test's certificates and token (one a line, into cargs).
local_coordinator_args() {
  local file=$1
  shift
  mapfile -t cargs < <(sed -e 's/^--listen=.*/--listen=127.0.0.1:0/' -e 's/^--http=.*/--http=127.0.0.1:0/' \
    -e 's/^--health-listen=.*/--health-listen=127.0.0.1:0/' \
    -e "s|^--tls-cert=/etc/pipecoord/tls/tls.crt$|--tls-cert=$pki/coordinator.crt|" \
    -e "s|^--tls-key=/etc/pipecoord/tls/tls.key$|--tls-key=$pki/coordinator.key|" \
    -e "s|^--tls-ca=/etc/pipecoord/tls/ca.crt$|--tls-ca=$pki/ca.crt|" \
    -e "s|^--token-file=/etc/pipecoord/token/token$|--token-file=$pki/token|" "$@" "$file")
}
for overlay in cpu gpu; do
  local_coordinator_args "$work/$overlay/coordinator.args" -e "s|^--state=.*|--state=$work/$overlay/state.db|"
  coordinator/coordinator "${cargs[@]}" > "$work/$overlay/coordinator.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -qs "listening on" "$work/$overlay/coordinator.log" && break; sleep 0.05; done
  addr=$(sed -n 's/^coordinator listening on //p' "$work/$overlay/coordinator.log")
  [ -n "$addr" ] || fail "$overlay: the coordinator refused its args: $(cat "$work/$overlay/coordinator.log")"
  # The scrape annotations' path answers on the HTTP port.
  http=$(sed -n 's/^coordinator http on \([^ ]*\).*/\1/p' "$work/$overlay/coordinator.log")
  /usr/bin/python3 -c 'import sys, urllib.request; sys.exit(b"# TYPE" not in urllib.request.urlopen(sys.argv[1], timeout=5).read())' \
    "http://$http/metrics" || fail "$overlay: no Prometheus metrics at http://$http/metrics"
  grep -q "^coordinator security: TLS" "$work/$overlay/coordinator.log" || fail "$overlay: the coordinator serves no TLS"
  grep -q "^coordinator health on 127.0.0.1:[0-9]* (grpc.health.v1 only, plaintext)" "$work/$overlay/coordinator.log" ||
    fail "$overlay: no health port"
  # The data port is fixed in the pods; here any free port on loopback will do.
  mapfile -t wargs < <(sed -e "s/^--coordinator=.*/--coordinator=$addr/" \
    -e 's/^--data-listen=.*/--data-listen=127.0.0.1:0/' -e "s|^--tls-ca=/etc/pipecoord/tls/ca.crt$|--tls-ca=$pki/ca.crt|" \
    -e "s|^--tls-cert=/etc/pipecoord/tls/tls.crt$|--tls-cert=$pki/pipecoord-worker-0.crt|" \
    -e "s|^--tls-key=/etc/pipecoord/tls/tls.key$|--tls-key=$pki/pipecoord-worker-0.key|" "$work/$overlay/worker.args")
  worker/daemon/worker "${wargs[@]}" > "$work/$overlay/worker.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -qs "registered as" "$work/$overlay/worker.log" && break; sleep 0.05; done
  grep -q "peers reach it at 10.1.2.3:" "$work/$overlay/worker.log" ||
    fail "$overlay: the worker did not register advertising the pod IP: $(cat "$work/$overlay/worker.log")"
  PIPECOORD_ADDR=$addr PIPECOORD_TLS_CA=$pki/ca.crt cli/pipectl workers --format json > "$work/$overlay/workers.json"
  /usr/bin/python3 - "$work/$overlay/workers.json" "$overlay" <<'PY' || fail "$overlay: registration record"
import json, sys
w = json.load(open(sys.argv[1]))["workers"]
device = "cuda" if sys.argv[2] == "gpu" else "cpu"
assert len(w) == 1 and w[0]["dataEndpoint"].startswith("10.1.2.3:") and w[0]["host"] == "10.1.2.3", w
assert w[0]["workerId"] == "pipecoord-worker-0", w
assert w[0]["deviceKind"] == device, w
PY
  cleanup
  pids=()
  echo "$overlay: the coordinator and a worker run with the containers' args"
done

# 4b. The ha overlay: three coordinators on the etcd StatefulSet's members, no state volume, ready
#     only when elected; two coordinators with its args (etcd and addresses made local) on a
#     real etcd: one serves, the other stands by naming it.
/usr/bin/python3 - "$work/ha.yaml" "$work/ha" <<'PY' || fail "deploy/overlays/ha: checks"
import os, re, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
def find(kind, name):
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
dep = find("Deployment", "pipecoord-coordinator")
etcd = find("StatefulSet", "pipecoord-etcd")
assert not any(o["kind"] == "PersistentVolumeClaim" for o in objs), "a state volume is left"
assert dep["spec"]["replicas"] == 3 and dep["spec"]["strategy"]["type"] == "RollingUpdate", dep["spec"]
c = dep["spec"]["template"]["spec"]["containers"][0]
args = c["args"]
assert not any(a.startswith("--state") for a in args), args
assert all(v["name"] != "state" for v in dep["spec"]["template"]["spec"].get("volumes", [])), "state volume"
assert c["readinessProbe"]["grpc"] == {"port": 50052, "service": "pipecoord.active"}, c["readinessProbe"]
assert c["livenessProbe"]["grpc"] == {"port": 50052}, c["livenessProbe"]
members = [f"pipecoord-etcd-{i}.pipecoord-etcd:2379" for i in range(etcd["spec"]["replicas"])]
assert "--etcd=" + ",".join(members) in args, (args, members)
e = etcd["spec"]["template"]["spec"]["containers"][0]["args"]
cluster = [a for a in e if a.startswith("--initial-cluster=")][0].split("=", 1)[1]
assert cluster == ",".join(f"pipecoord-etcd-{i}=http://pipecoord-etcd-{i}.pipecoord-etcd:2380" for i in range(3)), cluster
assert etcd["spec"]["serviceName"] == "pipecoord-etcd" and find("Service", "pipecoord-etcd")["spec"]["clusterIP"] == "None"
assert all(o["metadata"].get("namespace") == "pipecoord" for o in objs if o["kind"] != "Namespace"), "namespace"
os.makedirs(sys.argv[2], exist_ok=True)
open(sys.argv[2] + "/coordinator.args", "w").write("\n".join(args) + "\n")
print("ha: 3 coordinators on", len(members), "etcd members, ready only when elected")
PY
eport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
etcd --name m --data-dir "$work/ha/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
  --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$pport" \
  --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "m=http://127.0.0.1:$pport" \
  > "$work/ha/etcd.log" 2>&1 &
pids+=($!)
for n in 1 2; do
  local_coordinator_args "$work/ha/coordinator.args" -e "s/^--etcd=.*/--etcd=127.0.0.1:$eport/" \
    -e "s/^--advertise=\$(POD_IP):50051$/--advertise=coordinator-$n:50051/" -e 's/\$(PIPECOORD_LEASE_MS)/5000/'
  coordinator/coordinator "${cargs[@]}" > "$work/ha/coordinator-$n.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do grep -qs "listening on\|standing by: the active" "$work/ha/coordinator-$n.log" && break; sleep 0.05; done
done
grep -q "^coordinator listening on" "$work/ha/coordinator-1.log" || fail "ha: the first coordinator does not serve: $(cat "$work/ha/coordinator-1.log")"
grep -q "^coordinator standby: standing by: the active coordinator is coordinator-1:50051" "$work/ha/coordinator-2.log" ||
  fail "ha: the second coordinator does not stand by: $(cat "$work/ha/coordinator-2.log")"
! grep -q "listening on" "$work/ha/coordinator-2.log" || fail "ha: the standby listens"
cleanup
pids=()
echo "ha: the coordinators run with the containers' args on a real etcd: one active, one standing by"

# 5. Rejections: a misspelt field and a wrong type, as files and through an overlay.
expect_rejected() {  # FILE PATTERN...
  local file=$1 out="$work/rejected.txt"
  shift
  if validate "$file" > "$out"; then fail "$file was accepted"; fi
  for p in "$@"; do grep -qF -- "$p" "$out" || fail "$file: no error matching '$p' in: $(cat "$out")"; done
  echo "rejected as expected: $(head -1 "$out")"
}
expect_rejected deploy/validate/testdata/imagee.yaml \
  "Kubernetes 1.27: at /spec/template/spec/containers/0: Additional properties are not allowed ('imagee' was unexpected)" \
  "Kubernetes 1.32: at /spec/template/spec/containers/0: Additional properties are not allowed ('imagee' was unexpected)"
expect_rejected deploy/validate/testdata/replicas-three.yaml "at /spec/replicas: 'three' is not of type 'integer'"
expect_rejected deploy/validate/testdata/int32-overflow.yaml "at /spec/containers/0/ports/0/containerPort: 4294967376 is not a 'int32'"
expect_rejected deploy/validate/testdata/no-kind-schema.yaml "has no schema for pipecoord.dev/v1 Pipeline"
mkdir -p "$work/deploy/overlays/misspelt"
cat > "$work/deploy/overlays/misspelt/kustomization.yaml" <<'EOF'
resources: [../../base]
patches:
  - target: {kind: StatefulSet, name: pipecoord-worker}
    patch: |
      - {op: add, path: /spec/template/spec/containers/0/imagee, value: pipecoord/worker:dev}
EOF
kubectl kustomize "$work/deploy/overlays/misspelt" > "$work/misspelt.yaml"
expect_rejected "$work/misspelt.yaml" "(StatefulSet pipecoord-worker)" "('imagee' was unexpected)"
# pipecoord's own checks refuse a manifest the schemas accept: the worker's data port moved.
sed 's/containerPort: 29500/containerPort: 29501/' "$work/cpu.yaml" > "$work/moved-port.yaml"
! cmp -s "$work/cpu.yaml" "$work/moved-port.yaml" || fail "the cpu overlay has no containerPort 29500 to move"
validate "$work/moved-port.yaml" > /dev/null || fail "the moved data port should pass the schemas"
if "$VPY" deploy/validate/manifest_checks.py cpu "$work/moved-port.yaml" "$work/cpu/launcher.txt" "$work/cpu" > "$work/moved.txt"; then
  fail "manifest_checks accepted a worker whose --data-listen port is not its container port"
fi
grep -qF 'worker: --data-listen port equals the container port "data"' "$work/moved.txt" || fail "manifest_checks: $(cat "$work/moved.txt")"
echo "rejected as expected: $(head -1 "$work/moved.txt")"
echo "PASS"
