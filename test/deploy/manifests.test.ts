// deploy/'s rules (scripts/deploy-checks.ts) hold on the committed files, and each one catches the
// mistake it is there for: a grace period shorter than preStop + drain deadline + flush, a probe on
// the wrong endpoint, threads not from the CPU limit, a gateway listing other pods than the engine
// replicas, a compose stop_grace_period under the drain deadline, a root or shell-form image.
// The JSON-schema half of scripts/check-deploy.ts needs validators from the registry and runs in
// deploy/validate.sh, not here.
/* eslint-disable @typescript-eslint/no-unsafe-member-access -- the tests edit parsed, untyped YAML in place */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { checkCompose, checkDockerfile, checkK8s, k8sDocs, mergeCompose, readYaml } from '../../scripts/deploy-checks.ts';
import type { Doc } from '../../scripts/deploy-checks.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- test edits of untyped YAML

const docs = (): Doc[] => structuredClone(k8sDocs('deploy'));
const find = (ds: Doc[], kind: string, name: string): Obj => {
  const d = ds.find((x) => x.value.kind === kind && (x.value.metadata as Obj).name === name);
  assert.ok(d, `${kind} ${name} not in deploy/k8s`);
  return d.value;
};
const container = (workload: Obj): Obj => (workload.spec.template.spec.containers as Obj[])[0]!;
const compose = (f: string): Obj => readYaml(`deploy/${f}`)[0]!.value;

test('the committed deploy/ files keep every rule', () => {
  assert.deepEqual(checkK8s(docs()), []);
  assert.deepEqual(checkCompose('compose.yml', mergeCompose(compose('compose.yml')), null), []);
  assert.deepEqual(checkCompose('gateway variant', mergeCompose(compose('compose.yml'), compose('compose.gateway.yml')), compose('gateway.yaml')), []);
  assert.deepEqual(checkDockerfile(readFileSync('Dockerfile', 'utf8')), []);
});

test('Kubernetes: a grace period that does not cover preStop + drain deadline + flush is caught, for the engine and the gateway', () => {
  for (const [kind, name] of [['StatefulSet', 'headroom-engine'], ['Deployment', 'headroom-gateway']] as const) {
    const ds = docs();
    const w = find(ds, kind, name);
    const c = container(w);
    const drainMs = Number((c.env as Obj[]).find((e) => /DRAIN_TIMEOUT_MS$/.test(e.name as string))!.value);
    const sleepS = Number(c.lifecycle.preStop.exec.command[1]);
    w.spec.template.spec.terminationGracePeriodSeconds = sleepS + drainMs / 1000 + 1; // equal is not enough
    assert.match(checkK8s(ds).join('\n'), /terminationGracePeriodSeconds \d+ must exceed preStop/, `${kind} ${name}`);
    // A longer drain deadline in the env, same grace: caught too.
    const ds2 = docs();
    const c2 = container(find(ds2, kind, name));
    (c2.env as Obj[]).find((e) => /DRAIN_TIMEOUT_MS$/.test(e.name as string))!.value = '120000';
    assert.match(checkK8s(ds2).join('\n'), /must exceed preStop 5 s \+ drain deadline 120 s/);
  }
});

test('Kubernetes: probes on the wrong endpoints, no preStop, no limits, or threads not from the CPU limit are caught', () => {
  const cases: [string, (c: Obj) => void, RegExp][] = [
    ['readiness on /health', (c) => (c.readinessProbe.httpGet.path = '/health'), /readinessProbe must be an HTTP GET of \/ready/],
    ['liveness on /ready', (c) => (c.livenessProbe.httpGet.path = '/ready'), /livenessProbe must be an HTTP GET of \/health/],
    ['probe on another port', (c) => (c.readinessProbe.httpGet.port = 9000), /readinessProbe must probe the probe port 8001/],
    ['liveness on the API port', (c) => (c.livenessProbe.httpGet.port = 'http'), /livenessProbe must probe the probe port 8001 \(not the API port 8000/],
    ['no probe port given to the server', (c) => (c.env = (c.env as Obj[]).filter((e) => e.name !== 'HEADROOM_PROBE_PORT')), /HEADROOM_PROBE_PORT must be 8001/],
    ['no preStop', (c) => delete c.lifecycle, /expected lifecycle\.preStop\.exec\.command/],
    ['no CPU limit', (c) => delete c.resources.limits.cpu, /no resources\.limits\.cpu/],
    ['fixed threads', (c) => ((c.env as Obj[]).find((e) => e.name === 'HEADROOM_THREADS')!.valueFrom = undefined), /HEADROOM_THREADS must come from this container's limits\.cpu/],
    ['threads from requests', (c) => ((c.env as Obj[]).find((e) => e.name === 'HEADROOM_THREADS')!.valueFrom.resourceFieldRef.resource = 'requests.cpu'), /HEADROOM_THREADS must come from/],
  ];
  for (const [what, edit, want] of cases) {
    const ds = docs();
    edit(container(find(ds, 'StatefulSet', 'headroom-engine')));
    assert.match(checkK8s(ds).join('\n'), want, what);
  }
});

test('Kubernetes: the gateway upstreams must be exactly the engine replicas; selectors must select', () => {
  let ds = docs();
  find(ds, 'StatefulSet', 'headroom-engine').spec.replicas = 3;
  assert.match(checkK8s(ds).join('\n'), /upstreams .* are not the engine replicas .*headroom-engine-2/);
  ds = docs();
  const cm = find(ds, 'ConfigMap', 'headroom-gateway');
  cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('headroom-engine-1.headroom-engine', 'headroom-engine-1.engines');
  assert.match(checkK8s(ds).join('\n'), /are not the engine replicas/);
  ds = docs();
  find(ds, 'Service', 'headroom-engine').spec.clusterIP = undefined;
  assert.match(checkK8s(ds).join('\n'), /must be a headless Service/);
  ds = docs();
  find(ds, 'PodDisruptionBudget', 'headroom-engine').spec.selector.matchLabels['app.kubernetes.io/component'] = 'engines';
  assert.match(checkK8s(ds).join('\n'), /PodDisruptionBudget headroom-engine: its selector matches no workload's pods/);
});

test('compose: stop_grace_period under the drain deadline, an engine without a CPU limit, a gateway upstream that is not an engine', () => {
  const base = compose('compose.yml');
  const short = structuredClone(base);
  short.services.headroom.stop_grace_period = '60s';
  assert.match(checkCompose('x', mergeCompose(short), null).join('\n'), /stop_grace_period 60s must exceed the drain deadline 60 s/);
  const unset = structuredClone(base);
  delete unset.services.headroom.stop_grace_period;
  assert.match(checkCompose('x', mergeCompose(unset), null).join('\n'), /10s \(default\)/);
  const noCpus = structuredClone(base);
  delete noCpus.services.headroom.cpus;
  assert.match(checkCompose('x', mergeCompose(noCpus), null).join('\n'), /needs a CPU limit/);
  const gateway = compose('compose.gateway.yml');
  const longGatewayDrain = structuredClone(gateway);
  longGatewayDrain.services.headroom.environment.HEADROOM_GATEWAY_DRAIN_TIMEOUT_MS = '90000';
  assert.match(checkCompose('x', mergeCompose(base, longGatewayDrain), compose('gateway.yaml')).join('\n'), /service headroom: stop_grace_period 70s must exceed the drain deadline 90 s/);
  assert.match(checkCompose('x', mergeCompose(base, gateway), { upstream: ['http://engine-1:8000', 'http://engine-3:8000'] }).join('\n'), /upstream http:\/\/engine-3:8000 is not an engine service/);
});

test('Dockerfile: a root user, another stop signal, a shell-form entrypoint or a health check off /ready is caught', () => {
  const text = readFileSync('Dockerfile', 'utf8');
  const cases: [string, string, RegExp][] = [
    ['USER 10001:10001', 'USER root', /non-root USER/],
    ['STOPSIGNAL SIGTERM', 'STOPSIGNAL SIGKILL', /STOPSIGNAL must be SIGTERM/],
    ['ENTRYPOINT ["/app/deploy/entrypoint.sh"]', 'ENTRYPOINT /app/deploy/entrypoint.sh', /exec form/],
    ["'/ready'", "'/health'", /HEALTHCHECK must probe \/ready/],
  ];
  for (const [from, to, want] of cases) {
    assert.ok(text.includes(from), `the Dockerfile has no '${from}'`);
    assert.match(checkDockerfile(text.replace(from, to)).join('\n'), want, to);
  }
});
