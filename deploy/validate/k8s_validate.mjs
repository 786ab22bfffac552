// Validates Kubernetes objects offline against the API schemas, refusing unknown fields.
//   node k8s_validate.mjs TOOLS_DIR FILE...        (FILE: a YAML stream; "-" reads stdin)
// Exit 0 when every object passes, 1 with one line per error otherwise. Two real validators,
// both generated from the Kubernetes OpenAPI definitions, run on every object:
//   1. kubernetes-models (Ajv-compiled JSON schemas): types, formats (int32, ...), enums and
//      required fields. It lets unknown fields through.
//   2. The TypeScript compiler against kubernetes-types: each object becomes a typed object
//      literal, so a misspelt field ("imagee") fails the excess-property check and a wrong type
//      ("replicas": "three") fails assignment.
// An object whose apiVersion/kind neither package knows is an error, never skipped.
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [toolsDir, ...files] = process.argv.slice(2);
if (!toolsDir || files.length === 0) {
  console.error('usage: node k8s_validate.mjs TOOLS_DIR FILE...');
  process.exit(2);
}
const modules = join(toolsDir, 'node_modules');
const require = createRequire(join(toolsDir, 'package.json'));
const yaml = require('js-yaml');
const ts = require('typescript');

// Parse every stream; objects keep where they came from for the messages.
const objects = [];
const errors = [];
for (const file of files) {
  const text = readFileSync(file === '-' ? 0 : file, 'utf8');
  let docs;
  try {
    docs = yaml.loadAll(text);
  } catch (e) {
    errors.push(`${file}: YAML does not parse: ${e.message.split('\n')[0]}`);
    continue;
  }
  docs.forEach((obj, i) => {
    if (obj === null || obj === undefined) return;  // an empty document
    const name = obj?.metadata?.name ?? '?';
    const where = `${file}: document ${i + 1} (${obj?.kind ?? '?'} ${name})`;
    if (typeof obj !== 'object' || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') {
      errors.push(`${where}: not a Kubernetes object (apiVersion and kind must be strings)`);
      return;
    }
    objects.push({ obj, where });
  });
}

// 1. kubernetes-models: "apps/v1" + "StatefulSet" -> kubernetes-models/apps/v1/StatefulSet.js
for (const { obj, where } of objects) {
  const modelFile = join(modules, 'kubernetes-models', obj.apiVersion, `${obj.kind}.js`);
  if (!existsSync(modelFile)) {
    errors.push(`${where}: kubernetes-models has no ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  const Model = (await import(pathToFileURL(modelFile).href))[obj.kind];
  // A Secret's data is base64 that kustomize folds over several lines; the API server decodes it
  // with Go's base64, which skips line breaks, so the format check sees it without them.
  const unfolded = obj.kind === 'Secret' && obj.data && typeof obj.data === 'object'
    ? { ...obj, data: Object.fromEntries(Object.entries(obj.data).map(([k, v]) => [k, typeof v === 'string' ? v.replace(/[\r\n]/g, '') : v])) }
    : obj;
  try {
    new Model(unfolded).validate();
  } catch (e) {
    for (const d of e.errors ?? [{ instancePath: '', message: e.message }]) {
      errors.push(`${where}: at ${d.instancePath || '/'}: ${d.message}`);
    }
  }
}

// 2. TypeScript: "apps/v1" -> kubernetes-types/apps/v1, "v1" -> core/v1,
//    "networking.k8s.io/v1" -> networking/v1.
function typesModule(apiVersion) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['core', apiVersion];
  return `${group.split('.')[0]}/${version}`;
}
const lines = [];
const spans = [];  // [first line, last line, where], 0-based lines of the generated file
objects.forEach(({ obj, where }, i) => {
  const mod = typesModule(obj.apiVersion);
  const dts = join(modules, 'kubernetes-types', `${mod}.d.ts`);
  if (!existsSync(dts) || !readFileSync(dts, 'utf8').includes(`export interface ${obj.kind} {`)) {
    errors.push(`${where}: kubernetes-types has no ${obj.apiVersion} ${obj.kind}`);
    return;
  }
  const first = lines.length;
  lines.push(`import type { ${obj.kind} as T${i} } from "kubernetes-types/${mod}";`);
  lines.push(...`export const o${i}: T${i} = ${JSON.stringify(obj, null, 1)};`.split('\n'));
  spans.push([first, lines.length - 1, where]);
});
if (spans.length > 0) {
  const dir = mkdtempSync(join(process.env.TEST_TMPDIR || tmpdir(), 'k8s-validate-'));
  const file = join(dir, 'objects.ts');
  writeFileSync(file, lines.join('\n'));
  const program = ts.createProgram([file], {
    noEmit: true, strict: true, skipLibCheck: true, types: [], lib: ['lib.es2020.d.ts'],
    baseUrl: modules, paths: { 'kubernetes-types/*': ['kubernetes-types/*'] },
    moduleResolution: ts.ModuleResolutionKind.Node10, module: ts.ModuleKind.ES2020,
  });
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const text = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    if (!d.file || d.file.fileName !== file) {
      errors.push(`typescript: ${text}`);
      continue;
    }
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    const span = spans.find(([a, b]) => line >= a && line <= b);
    const path = lines[line].trim().replace(/:.*$/, '');
    errors.push(`${span ? span[2] : file}: at ${path}: ${text}`);
  }
  rmSync(dir, { recursive: true, force: true });
}

for (const e of errors) console.log(e);
console.log(`k8s_validate: ${objects.length} object(s), ${errors.length} error(s)`);
process.exit(errors.length === 0 ? 0 : 1);
