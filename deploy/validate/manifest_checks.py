"""What the rendered manifests must say for pipecoord to work, beyond the API schemas.

    manifest_checks.py OVERLAY RENDERED.yaml LAUNCHER_DRY_RUN.txt OUT_DIR

Checks ports, probes, the volume, the Secrets mounted where the TLS and token flags read them, the
headless Service, the GPU request (gpu overlay only), and that the local launcher passes the
containers' flags with the ConfigMap's values. Writes OUT_DIR/coordinator.args and
OUT_DIR/worker.args: the containers' args with $(VAR) expanded from the ConfigMap (one a line), for
manifests_test.sh to run the real binaries with. Exit 0 when every check holds, 1 naming each that
does not.
"""
import json
import os
import re
import sys

import yaml


def main(overlay, rendered, dry_run, out_dir):
    objects = [o for o in yaml.safe_load_all(open(rendered)) if o]
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    def find(kind, name):
        return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    config = next((o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("pipecoord-config")), None)
    deployment = find("Deployment", "pipecoord-coordinator")
    statefulset = find("StatefulSet", "pipecoord-worker")
    service = find("Service", "pipecoord-coordinator")
    headless = find("Service", "pipecoord-worker")
    for o, what in [(config, "ConfigMap pipecoord-config-*"), (deployment, "Deployment pipecoord-coordinator"),
                    (statefulset, "StatefulSet pipecoord-worker"), (service, "Service pipecoord-coordinator"),
                    (headless, "Service pipecoord-worker"),
                    (find("PersistentVolumeClaim", "pipecoord-coordinator-state"), "the state PVC")]:
        if o is None:
            print(f"FAIL {overlay}: missing {what}")
            return 1
    env = config["data"]
    coordinator = deployment["spec"]["template"]["spec"]["containers"][0]
    worker = statefulset["spec"]["template"]["spec"]["containers"][0]

    def expand(args, extra):
        values = {**env, **extra}

        def one(arg):
            def sub(m):
                if m[1] not in values:
                    failures.append(f"{overlay}: {arg}: $({m[1]}) is not defined in the container's environment")
                    return m[0]
                return values[m[1]]
            return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)
        return [one(a) for a in args]

    def flags(args):
        return dict(a.split("=", 1) if "=" in a else (a, "") for a in args)

    # Every container reads the ConfigMap.
    for c in (coordinator, worker):
        check(any(e.get("configMapRef", {}).get("name") == config["metadata"]["name"] for e in c.get("envFrom", [])),
              f"{c['name']}: envFrom {config['metadata']['name']}")
    # Coordinator: gRPC, HTTP and health ports, grpc health probes on the plaintext health port (the
    # main port serves TLS, which probes cannot speak), state volume, scrape annotations.
    ports = {p["name"]: p["containerPort"] for p in coordinator["ports"]}
    check(ports.get("grpc") == 50051 and ports.get("http") == 8080 and ports.get("health") == 50052,
          "coordinator: container ports grpc 50051, http 8080 and health 50052")
    svc_ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    check(svc_ports.get("grpc") == 50051 and svc_ports.get("http") == 8080,
          "Service pipecoord-coordinator: ports grpc 50051, http 8080")
    check("health" not in svc_ports, "Service pipecoord-coordinator: the health port is for probes only")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check((coordinator.get(probe) or {}).get("grpc", {}).get("port") == ports.get("health"),
              f"coordinator: {probe} is a grpc probe on the health port")
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    check(annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") == "8080",
          "coordinator pods: prometheus.io scrape annotations on port 8080")
    coordinator_pod = deployment["spec"]["template"]["spec"]
    state = next((v for v in coordinator_pod.get("volumes", []) if "persistentVolumeClaim" in v), None)
    check(state is not None and state["persistentVolumeClaim"]["claimName"] == "pipecoord-coordinator-state" and
          any(m["name"] == state["name"] and m["mountPath"] == "/var/lib/pipecoord"
              for m in coordinator.get("volumeMounts", [])),
          "coordinator: the state PVC mounted at /var/lib/pipecoord")
    # (Whether the binaries accept these args is checked by running them: manifests_test.sh.)
    cargs = expand(coordinator["args"], {})
    cflags = flags(cargs)
    check(cflags.get("--http") == f"0.0.0.0:{ports.get('http')}", 'coordinator: --http serves the container port "http"')
    check(cflags.get("--health-listen") == f"0.0.0.0:{ports.get('health')}",
          'coordinator: --health-listen serves the container port "health"')

    # Security: every file a TLS or token flag names comes from the right Secret. mounted_from gives
    # the Secret and key a container path is read from (a whole-Secret mount or a subPath one).
    def volume_secret(pod, name):
        v = next((v for v in pod.get("volumes", []) if v["name"] == name), None)
        return (v or {}).get("secret", {}).get("secretName")

    def mounted_from(pod, container, path):
        for m in container.get("volumeMounts", []):
            secret = volume_secret(pod, m["name"])
            if not secret:
                continue
            sub = m.get("subPath", m.get("subPathExpr"))
            if sub is not None and m["mountPath"] == path:
                return {"secret": secret, "key": sub}
            if sub is None and path.startswith(m["mountPath"] + "/"):
                return {"secret": secret, "key": path[len(m["mountPath"]) + 1:]}
        return None

    for flag, secret, key in [("--tls-cert", "pipecoord-tls", "tls.crt"), ("--tls-key", "pipecoord-tls", "tls.key"),
                              ("--tls-ca", "pipecoord-tls", "ca.crt"), ("--token-file", "pipecoord-token", "token")]:
        got = cflags.get(flag) and mounted_from(coordinator_pod, coordinator, cflags[flag])
        check(got == {"secret": secret, "key": key}, f"coordinator: {flag} reads key {key} of Secret {secret}")
        s = find("Secret", secret) or {}
        check(key in (s.get("data") or {}) or key in (s.get("stringData") or {}), f"Secret {secret} has a key {key}")
    check("pipecoord-token" not in json.dumps(coordinator.get("env", [])), "coordinator: the token is a file, never an env var")
    # Workers: headless Service, the coordinator by its Service name, the pod IP advertised.
    check(headless["spec"].get("clusterIP") == "None" and statefulset["spec"].get("serviceName") == "pipecoord-worker",
          "workers: StatefulSet behind the headless Service pipecoord-worker")
    worker_env = {e["name"]: e for e in worker.get("env", [])}
    check(worker_env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP",
          "worker: POD_IP from the downward API")
    wargs = expand(worker["args"], {"POD_IP": "10.1.2.3"})
    wflags = flags(wargs)
    # Workers: mutual TLS with the pod's own certificate, named after the pod, out of one Secret.
    worker_pod = statefulset["spec"]["template"]["spec"]
    check(worker_env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
          "worker: POD_NAME from the downward API")
    for flag, key in [("--tls-ca", "ca.crt"), ("--tls-cert", "$(POD_NAME).crt"), ("--tls-key", "$(POD_NAME).key")]:
        got = wflags.get(flag) and mounted_from(worker_pod, worker, wflags[flag])
        check(got == {"secret": "pipecoord-worker-tls", "key": key},
              f"worker: {flag} reads {key} of Secret pipecoord-worker-tls (got {json.dumps(got)})")
    check(not any(volume_secret(worker_pod, m["name"]) and "subPath" not in m and "subPathExpr" not in m
                  for m in worker.get("volumeMounts", [])),
          "worker: no whole-Secret mount (a pod must not see the other workers' keys)")
    check(wflags.get("--coordinator") == "pipecoord-coordinator:50051",
          f"worker: --coordinator is the Service name ({wflags.get('--coordinator')})")
    check(wflags.get("--advertise") == "10.1.2.3", "worker: --advertise=$(POD_IP)")
    data_port = next((p["containerPort"] for p in worker.get("ports", []) if p["name"] == "data"), None)
    check(wflags.get("--data-listen") == f"0.0.0.0:{data_port}", 'worker: --data-listen port equals the container port "data"')
    resources = worker.get("resources") or {}
    gpus = (resources.get("limits") or {}).get("nvidia.com/gpu")
    device = "cuda" if overlay == "gpu" else "cpu"
    check(wflags.get("--device") == device, f"worker: --device {device} (got {wflags.get('--device')})")
    check(gpus == "1" and (resources.get("requests") or {}).get("nvidia.com/gpu") == "1" if overlay == "gpu" else gpus is None,
          f"worker: nvidia.com/gpu {'requested' if overlay == 'gpu' else 'not requested'} in the {overlay} overlay")
    for c in (coordinator, worker):
        r = c.get("resources") or {}
        check(all((r.get(k) or {}).get(x) for k in ("requests", "limits") for x in ("cpu", "memory")),
              f"{c['name']}: cpu and memory requests and limits")

    # The local launcher: the same flags, the same values except addresses (loopback, free ports,
    # a temporary state file, throwaway certificates and token made by the launcher).
    launcher = {}
    for line in open(dry_run).read().strip().split("\n"):
        name, *args = line.split(" ")
        launcher[name] = flags(args)
    address_flags = {"--listen", "--http", "--state", "--coordinator", "--data-listen", "--advertise",
                     "--health-listen", "--tls-cert", "--tls-key", "--tls-ca", "--token-file", "--checkpoint-dir"}
    for name, k8s in (("coordinator", cflags), ("worker", wflags)):
        local = launcher.get(name, {})
        check(sorted(local) == sorted(k8s), f"launcher: {name} flags {sorted(local)} differ from the container's {sorted(k8s)}")
        for f, v in k8s.items():
            if f not in address_flags:
                check(local.get(f) == v, f"launcher: {name} {f}={local.get(f)}, the pods get {v}")

    with open(os.path.join(out_dir, "coordinator.args"), "w") as f:
        f.write("\n".join(cargs) + "\n")
    with open(os.path.join(out_dir, "worker.args"), "w") as f:
        f.write("\n".join(wargs) + "\n")
    for f in failures:
        print(f"FAIL {overlay}: {f}")
    print(f"manifest_checks {overlay}: {len(failures)} failure(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: manifest_checks.py OVERLAY RENDERED.yaml LAUNCHER_DRY_RUN.txt OUT_DIR")
    sys.exit(main(*sys.argv[1:]))
