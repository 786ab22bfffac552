// What the rendered manifests must say for pipecoord to work, beyond the API schemas:
//   node manifest_checks.mjs TOOLS_DIR OVERLAY RENDERED.yaml LAUNCHER_DRY_RUN.txt OUT_DIR
// Checks ports, probes, the volume, the Secrets mounted where the TLS and token flags read them,
// the headless Service, the GPU request (gpu overlay only), and that the local launcher passes the
// containers' flags with the ConfigMap's values. Writes
// OUT_DIR/coordinator.args and OUT_DIR/worker.args: the containers' args with $(VAR) expanded
// from the ConfigMap (one a line), for the test to run the real binaries with.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [toolsDir, overlay, rendered, dryRun, outDir] = process.argv.slice(2);
const yaml = createRequire(join(toolsDir, 'package.json'))('js-yaml');
const objects = yaml.loadAll(readFileSync(rendered, 'utf8')).filter(Boolean);
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);

const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('pipecoord-config'));
const deployment = find('Deployment', 'pipecoord-coordinator');
const statefulset = find('StatefulSet', 'pipecoord-worker');
const service = find('Service', 'pipecoord-coordinator');
const headless = find('Service', 'pipecoord-worker');
for (const [o, what] of [[config, 'ConfigMap pipecoord-config-*'], [deployment, 'Deployment pipecoord-coordinator'],
  [statefulset, 'StatefulSet pipecoord-worker'], [service, 'Service pipecoord-coordinator'],
  [headless, 'Service pipecoord-worker'], [find('PersistentVolumeClaim', 'pipecoord-coordinator-state'), 'the state PVC']]) {
  if (!o) {
    console.log(`FAIL ${overlay}: missing ${what}`);
    process.exit(1);
  }
}
const env = config.data;
const coordinator = deployment.spec.template.spec.containers[0];
const worker = statefulset.spec.template.spec.containers[0];
const expand = (args, extra) => args.map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, k) => {
  const v = { ...env, ...extra }[k];
  if (v === undefined) failures.push(`${overlay}: ${a}: $(${k}) is not defined in the container's environment`);
  return v ?? m;
}));
const flags = (args) => Object.fromEntries(args.map((a) => { const i = a.indexOf('='); return [a.slice(0, i), a.slice(i + 1)]; }));

// Every container reads the ConfigMap.
for (const c of [coordinator, worker]) {
  check(c.envFrom?.some((e) => e.configMapRef?.name === config.metadata.name), `${c.name}: envFrom ${config.metadata.name}`);
}
// Coordinator: gRPC, HTTP and health ports, grpc health probes on the plaintext health port (the
// main port serves TLS, which probes cannot speak), state volume, scrape annotations.
const ports = Object.fromEntries(coordinator.ports.map((p) => [p.name, p.containerPort]));
check(ports.grpc === 50051 && ports.http === 8080 && ports.health === 50052,
  'coordinator: container ports grpc 50051, http 8080 and health 50052');
const svcPorts = Object.fromEntries(service.spec.ports.map((p) => [p.name, p.port]));
check(svcPorts.grpc === 50051 && svcPorts.http === 8080, 'Service pipecoord-coordinator: ports grpc 50051, http 8080');
check(svcPorts.health === undefined, 'Service pipecoord-coordinator: the health port is for probes only');
for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
  check(coordinator[probe]?.grpc?.port === ports.health, `coordinator: ${probe} is a grpc probe on the health port`);
}
const annotations = deployment.spec.template.metadata.annotations ?? {};
check(annotations['prometheus.io/scrape'] === 'true' && annotations['prometheus.io/port'] === '8080',
  'coordinator pods: prometheus.io scrape annotations on port 8080');
const stateVolume = deployment.spec.template.spec.volumes.find((v) => v.persistentVolumeClaim);
check(stateVolume?.persistentVolumeClaim.claimName === 'pipecoord-coordinator-state' &&
  coordinator.volumeMounts.some((m) => m.name === stateVolume.name && m.mountPath === '/var/lib/pipecoord'),
  'coordinator: the state PVC mounted at /var/lib/pipecoord');
// (Whether the binaries accept these args is checked by running them: manifests_test.sh.)
const cargs = expand(coordinator.args, {});
check(flags(cargs)['--http'] === `0.0.0.0:${ports.http}`, 'coordinator: --http serves the container port "http"');
check(flags(cargs)['--health-listen'] === `0.0.0.0:${ports.health}`,
  'coordinator: --health-listen serves the container port "health"');

// Security: every file a TLS or token flag names comes from the right Secret. mountedFrom gives
// the Secret and key a container path is read from (a whole-Secret mount or a subPath one).
const volumeSecret = (pod, name) => pod.volumes.find((v) => v.name === name)?.secret?.secretName;
const mountedFrom = (pod, container, path) => {
  for (const m of container.volumeMounts ?? []) {
    const secret = volumeSecret(pod, m.name);
    if (!secret) continue;
    const sub = m.subPath ?? m.subPathExpr;
    if (sub !== undefined && m.mountPath === path) return { secret, key: sub };
    if (sub === undefined && path.startsWith(m.mountPath + '/')) return { secret, key: path.slice(m.mountPath.length + 1) };
  }
  return undefined;
};
const coordinatorPod = deployment.spec.template.spec;
const cflags = flags(cargs);
for (const [flag, secret, key] of [['--tls-cert', 'pipecoord-tls', 'tls.crt'], ['--tls-key', 'pipecoord-tls', 'tls.key'],
  ['--tls-ca', 'pipecoord-tls', 'ca.crt'], ['--token-file', 'pipecoord-token', 'token']]) {
  const from = cflags[flag] && mountedFrom(coordinatorPod, coordinator, cflags[flag]);
  check(from?.secret === secret && from?.key === key, `coordinator: ${flag} reads key ${key} of Secret ${secret}`);
  check(find('Secret', secret)?.data?.[key] !== undefined || find('Secret', secret)?.stringData?.[key] !== undefined,
    `Secret ${secret} has a key ${key}`);
}
check(!JSON.stringify(coordinator.env ?? []).includes('pipecoord-token'), 'coordinator: the token is a file, never an env var');
// Workers: headless Service, the coordinator by its Service name, the pod IP advertised.
check(headless.spec.clusterIP === 'None' && statefulset.spec.serviceName === 'pipecoord-worker',
  'workers: StatefulSet behind the headless Service pipecoord-worker');
const podIp = worker.env?.find((e) => e.name === 'POD_IP');
check(podIp?.valueFrom?.fieldRef?.fieldPath === 'status.podIP', 'worker: POD_IP from the downward API');
const wargs = expand(worker.args, { POD_IP: '10.1.2.3' });
const wflags = flags(wargs);
// Workers: mutual TLS with the pod's own certificate, named after the pod, out of one Secret.
const workerPod = statefulset.spec.template.spec;
const podName = worker.env?.find((e) => e.name === 'POD_NAME');
check(podName?.valueFrom?.fieldRef?.fieldPath === 'metadata.name', 'worker: POD_NAME from the downward API');
for (const [flag, key] of [['--tls-ca', 'ca.crt'], ['--tls-cert', '$(POD_NAME).crt'], ['--tls-key', '$(POD_NAME).key']]) {
  const from = wflags[flag] && mountedFrom(workerPod, worker, wflags[flag]);
  check(from?.secret === 'pipecoord-worker-tls' && from?.key === key,
    `worker: ${flag} reads ${key} of Secret pipecoord-worker-tls (got ${JSON.stringify(from)})`);
}
check(!worker.volumeMounts.some((m) => volumeSecret(workerPod, m.name) && m.subPath === undefined && m.subPathExpr === undefined),
  'worker: no whole-Secret mount (a pod must not see the other workers\' keys)');
check(wflags['--coordinator'] === 'pipecoord-coordinator:50051', `worker: --coordinator is the Service name (${wflags['--coordinator']})`);
check(wflags['--advertise'] === '10.1.2.3', 'worker: --advertise=$(POD_IP)');
check(wflags['--data-listen'] === `0.0.0.0:${worker.ports.find((p) => p.name === 'data')?.containerPort}`,
  'worker: --data-listen port equals the container port "data"');
const gpus = worker.resources?.limits?.['nvidia.com/gpu'];
const device = overlay === 'gpu' ? 'cuda' : 'cpu';
check(wflags['--device'] === device, `worker: --device ${device} (got ${wflags['--device']})`);
check(overlay === 'gpu' ? gpus === '1' && worker.resources.requests['nvidia.com/gpu'] === '1' : gpus === undefined,
  `worker: nvidia.com/gpu ${overlay === 'gpu' ? 'requested' : 'not requested'} in the ${overlay} overlay`);
for (const c of [coordinator, worker]) {
  check(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.cpu && c.resources?.limits?.memory,
    `${c.name}: cpu and memory requests and limits`);
}

// The local launcher: the same flags, the same values except addresses (loopback, free ports).
const launcher = Object.fromEntries(readFileSync(dryRun, 'utf8').trim().split('\n')
  .map((l) => l.split(' ')).map(([name, ...args]) => [name, flags(args)]));
// Addresses and paths differ locally (loopback, free ports, a temporary state file, throwaway
// certificates and token made by the launcher).
const addressFlags = new Set(['--listen', '--http', '--state', '--coordinator', '--data-listen', '--advertise',
  '--health-listen', '--tls-cert', '--tls-key', '--tls-ca', '--token-file', '--checkpoint-dir']);
for (const [name, k8s] of [['coordinator', flags(cargs)], ['worker', wflags]]) {
  const local = launcher[name] ?? {};
  check(JSON.stringify(Object.keys(local).sort()) === JSON.stringify(Object.keys(k8s).sort()),
    `launcher: ${name} flags ${Object.keys(local)} differ from the container's ${Object.keys(k8s)}`);
  for (const [f, v] of Object.entries(k8s)) {
    if (!addressFlags.has(f)) check(local[f] === v, `launcher: ${name} ${f}=${local[f]}, the pods get ${v}`);
  }
}

writeFileSync(join(outDir, 'coordinator.args'), cargs.join('\n') + '\n');
writeFileSync(join(outDir, 'worker.args'), wargs.join('\n') + '\n');
for (const f of failures) console.log(`FAIL ${overlay}: ${f}`);
console.log(`manifest_checks ${overlay}: ${failures.length} failure(s)`);
process.exit(failures.length === 0 ? 0 : 1);
