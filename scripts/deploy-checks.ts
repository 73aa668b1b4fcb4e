// What deploy/ must keep true, checked on the files themselves (no cluster, no container engine):
// the drain timing (a container is never killed before its drain deadline has passed), the probes
// on the endpoints that mean readiness and liveness and on the server's probe port, llama.cpp's threads taken from the CPU limit,
// the gateway's upstream list matching the engine replicas, selectors that select something, and
// the Dockerfile's stop signal, user and health check. Each broken rule is one message naming the
// file and the object; an empty list means every rule holds.
//
// Used by scripts/check-deploy.ts (deploy/validate.sh) and test/deploy/manifests.test.ts.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_SERVER_CONFIG } from '../src/api/config.ts';

/** After the drain deadline the server gives cut streams this long to flush (CUT_FLUSH_MS, src/app.ts). */
export const CUT_FLUSH_S = 1;
export const HEADROOM_PORT = 8000;
/** The probe port the manifests give --probe-port: /health and /ready never queue behind API clients there. */
export const PROBE_PORT = 8001;

// Manifests are untyped YAML: read them through these small accessors.
type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);

export interface Doc {
  readonly file: string;
  readonly value: Obj;
}

/** Every YAML document of a file; a parse error throws with the file and the parser's message. */
export function readYaml(path: string, name = path): Doc[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'));
  const out: Doc[] = [];
  for (const d of Array.isArray(docs) ? docs : [docs]) {
    if (d.errors.length > 0) throw new Error(`${name}: ${d.errors[0]!.message}`);
    const value = d.toJS({ maxAliasCount: 100 }) as unknown;
    if (value !== null && value !== undefined) out.push({ file: name, value: obj(value) });
  }
  return out;
}

/** The Kubernetes manifests of deploy/k8s, kustomization.yaml aside. */
export function k8sDocs(deployDir: string): Doc[] {
  const dir = join(deployDir, 'k8s');
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml')
    .sort()
    .flatMap((f) => readYaml(join(dir, f), `k8s/${f}`));
}

const envValue = (container: Obj, name: string): string | undefined => str(obj(arr(container.env).find((e) => obj(e).name === name)).value);

/** The drain deadline a headroom container runs with, seconds: its env, else the CLI default. */
function drainSeconds(env: (name: string) => string | undefined, gateway: boolean): number {
  const raw = env(gateway ? 'HEADROOM_GATEWAY_DRAIN_TIMEOUT_MS' : 'HEADROOM_DRAIN_TIMEOUT_MS');
  return (raw === undefined ? DEFAULT_SERVER_CONFIG.drainTimeoutMs : Number(raw)) / 1000;
}

const labelsMatch = (selector: Obj, labels: Obj): boolean => Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The Kubernetes rules. */
export function checkK8s(docs: readonly Doc[]): string[] {
  const problems: string[] = [];
  const where = (d: Doc): string => `${d.file}: ${str(d.value.kind)} ${str(obj(d.value.metadata).name)}`;
  const workloads = docs.filter((d) => d.value.kind === 'Deployment' || d.value.kind === 'StatefulSet');
  const podLabels = (d: Doc): Obj => obj(obj(obj(obj(d.value.spec).template).metadata).labels);
  if (workloads.length === 0) problems.push('k8s: no Deployment or StatefulSet');

  for (const w of workloads) {
    const pod = obj(obj(obj(w.value.spec).template).spec);
    const grace = Number(pod.terminationGracePeriodSeconds ?? 30);
    if (!labelsMatch(obj(obj(obj(w.value.spec).selector).matchLabels), podLabels(w))) problems.push(`${where(w)}: spec.selector.matchLabels does not select its own pod template`);
    for (const c of arr(pod.containers).map(obj)) {
      const at = `${where(w)} container ${str(c.name)}`;
      const gateway = arr(c.args)[0] === 'gateway';
      const ports = arr(c.ports).map(obj);
      const probe = (kind: 'readinessProbe' | 'livenessProbe', path: string): void => {
        const get = obj(obj(c[kind]).httpGet);
        if (get.path !== path) problems.push(`${at}: ${kind} must be an HTTP GET of ${path}, got ${JSON.stringify(get.path ?? null)}`);
        const port = ports.find((p) => p.name === get.port || p.containerPort === get.port);
        if (port?.containerPort !== PROBE_PORT) problems.push(`${at}: ${kind} must probe the probe port ${PROBE_PORT} (not the API port ${HEADROOM_PORT}, where a probe queues behind the clients' connections), got ${JSON.stringify(get.port ?? null)}`);
      };
      const probeEnv = gateway ? 'HEADROOM_GATEWAY_PROBE_PORT' : 'HEADROOM_PROBE_PORT';
      if (envValue(c, probeEnv) !== String(PROBE_PORT)) problems.push(`${at}: ${probeEnv} must be ${PROBE_PORT} (the port the probes use), got ${JSON.stringify(envValue(c, probeEnv) ?? null)}`);
      probe('readinessProbe', '/ready');
      probe('livenessProbe', '/health');
      const limits = obj(obj(c.resources).limits);
      for (const r of ['cpu', 'memory']) if (limits[r] === undefined) problems.push(`${at}: no resources.limits.${r}`);
      const cmd = arr(obj(obj(obj(c.lifecycle).preStop).exec).command).map(String);
      const sleepS = cmd.length === 2 && cmd[0] === 'sleep' ? Number(cmd[1]) : NaN;
      if (!Number.isFinite(sleepS)) problems.push(`${at}: expected lifecycle.preStop.exec.command ["sleep", <seconds>], got ${JSON.stringify(cmd)}`);
      const drainS = drainSeconds((n) => envValue(c, n), gateway);
      const needS = (Number.isFinite(sleepS) ? sleepS : 0) + drainS + CUT_FLUSH_S;
      if (!(grace > needS)) problems.push(`${at}: terminationGracePeriodSeconds ${grace} must exceed preStop ${sleepS} s + drain deadline ${drainS} s + flush ${CUT_FLUSH_S} s = ${needS} s`);
      if (!gateway) {
        const ref = obj(obj(obj(arr(c.env).map(obj).find((e) => e.name === 'HEADROOM_THREADS')).valueFrom).resourceFieldRef);
        if (ref.resource !== 'limits.cpu' || ref.containerName !== c.name || (str(ref.divisor) ?? '1') !== '1') problems.push(`${at}: HEADROOM_THREADS must come from this container's limits.cpu (resourceFieldRef, divisor 1)`);
      }
    }
  }

  for (const d of docs) {
    const kind = d.value.kind;
    if (kind !== 'Service' && kind !== 'PodDisruptionBudget') continue;
    const selector = kind === 'Service' ? obj(obj(d.value.spec).selector) : obj(obj(obj(d.value.spec).selector).matchLabels);
    if (!workloads.some((w) => labelsMatch(selector, podLabels(w)))) problems.push(`${where(d)}: its selector matches no workload's pods`);
  }

  // The gateway's upstreams are exactly the engine StatefulSet's per-pod names.
  const services = docs.filter((d) => d.value.kind === 'Service');
  const engines = workloads.filter((w) => w.value.kind === 'StatefulSet');
  const expected: string[] = [];
  for (const s of engines) {
    const spec = obj(s.value.spec);
    const svc = services.find((d) => obj(d.value.metadata).name === spec.serviceName);
    if (svc === undefined || obj(svc.value.spec).clusterIP !== 'None') problems.push(`${where(s)}: serviceName ${JSON.stringify(spec.serviceName)} must be a headless Service (clusterIP: None) in k8s/`);
    for (let i = 0; i < Number(spec.replicas ?? 1); i++) expected.push(`http://${str(obj(s.value.metadata).name)}-${i}.${str(spec.serviceName)}:${HEADROOM_PORT}`);
  }
  for (const w of workloads) {
    const pod = obj(obj(obj(w.value.spec).template).spec);
    if (!arr(pod.containers).some((c) => arr(obj(c).args)[0] === 'gateway')) continue;
    const maps = arr(pod.volumes).map((v) => str(obj(obj(v).configMap).name)).filter((n) => n !== undefined);
    const cm = docs.find((d) => d.value.kind === 'ConfigMap' && maps.includes(str(obj(d.value.metadata).name) ?? ''));
    const text = str(obj(cm?.value.data)['gateway.yaml']);
    if (text === undefined) {
      problems.push(`${where(w)}: no mounted ConfigMap with a gateway.yaml key`);
      continue;
    }
    const upstreams = arr(obj(readYamlText(text)).upstream).map(String);
    if (JSON.stringify(upstreams) !== JSON.stringify(expected)) problems.push(`${where(w)}: upstreams ${JSON.stringify(upstreams)} are not the engine replicas ${JSON.stringify(expected)}`);
  }
  return problems;
}

function readYamlText(text: string): unknown {
  const docs = parseAllDocuments(text);
  return (Array.isArray(docs) ? docs[0] : docs)?.toJS() as unknown;
}

/** Compose services as `docker compose -f a -f b` merges them, close enough for these rules: maps merge, the rest is replaced. */
export function mergeCompose(...files: readonly Obj[]): Obj {
  const merge = (a: unknown, b: unknown): unknown => {
    if (b === undefined) return a;
    if (Object.keys(obj(a)).length === 0 || Object.keys(obj(b)).length === 0) return b;
    const out: Obj = { ...obj(a) };
    for (const [k, v] of Object.entries(obj(b))) out[k] = merge(out[k], v);
    return out;
  };
  return files.reduce<Obj>((acc, f) => obj(merge(acc, f)), {});
}

/** Compose's duration strings ('70s', '1m30s') in seconds. */
export function composeSeconds(v: unknown): number {
  const s = str(v) ?? '10s';
  const parts = [...s.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== s) return NaN;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6 };
  return parts.reduce((t, p) => t + Number(p[1]) * unit[p[2]!]!, 0);
}

/** The compose rules for one variant (its files merged), with the gateway config it mounts. */
export function checkCompose(name: string, merged: Obj, gatewayConfig: Obj | null): string[] {
  const problems: string[] = [];
  const services = obj(merged.services);
  for (const [svc, raw] of Object.entries(services)) {
    const s = obj(raw);
    if (!/^headroom(:|$)/.test(str(s.image) ?? '')) continue;
    const env = obj(s.environment);
    const gateway = env.HEADROOM_MODE === 'gateway';
    const drainS = drainSeconds((n) => str(env[n]), gateway);
    const graceS = composeSeconds(s.stop_grace_period);
    if (!(graceS > drainS + CUT_FLUSH_S)) problems.push(`${name}: service ${svc}: stop_grace_period ${str(s.stop_grace_period) ?? '10s (default)'} must exceed the drain deadline ${drainS} s + flush ${CUT_FLUSH_S} s`);
    if (!gateway && s.cpus === undefined && env.HEADROOM_THREADS === undefined) problems.push(`${name}: service ${svc}: an engine needs a CPU limit (cpus) for the entrypoint to size its threads from`);
    if (gateway) {
      const upstreams = arr(gatewayConfig?.upstream).map(String);
      if (upstreams.length === 0) problems.push(`${name}: service ${svc}: gateway without upstreams`);
      for (const u of upstreams) {
        const host = new URL(u).hostname;
        const target = obj(services[host]);
        if (!/^headroom(:|$)/.test(str(target.image) ?? '') || obj(target.environment).HEADROOM_MODE === 'gateway') problems.push(`${name}: service ${svc}: upstream ${u} is not an engine service of this variant`);
      }
    }
  }
  return problems;
}

/** The Dockerfile rules (its final stage). */
export function checkDockerfile(text: string): string[] {
  const lines = text.replace(/\\\n\s*/g, ' ').split('\n').map((l) => l.trim());
  const last = lines.slice(lines.map((l) => /^FROM\s/i.test(l)).lastIndexOf(true));
  const instr = (name: string): string[] => last.filter((l) => l.toUpperCase().startsWith(`${name} `)).map((l) => l.slice(name.length + 1).trim());
  const problems: string[] = [];
  const user = instr('USER').at(-1);
  if (user === undefined || /^(root|0)(:|$)/.test(user)) problems.push(`Dockerfile: the runtime stage must end with a non-root USER, got ${JSON.stringify(user ?? null)}`);
  if (instr('STOPSIGNAL').at(-1) !== 'SIGTERM') problems.push('Dockerfile: STOPSIGNAL must be SIGTERM (it starts the drain)');
  if (!instr('EXPOSE').some((p) => p.split(/\s+/).includes(String(HEADROOM_PORT)))) problems.push(`Dockerfile: EXPOSE ${HEADROOM_PORT} missing`);
  if (!instr('HEALTHCHECK').some((h) => h.includes('/ready'))) problems.push('Dockerfile: HEALTHCHECK must probe /ready');
  const entry = instr('ENTRYPOINT').at(-1) ?? '';
  if (!entry.startsWith('[') || !entry.includes('deploy/entrypoint.sh')) problems.push('Dockerfile: ENTRYPOINT must be the exec form of deploy/entrypoint.sh (a shell form would keep SIGTERM from node)');
  return problems;
}
