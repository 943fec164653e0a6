// generate.mjs lists the tools of real, public MCP servers from npm, for the
// search evaluation corpus (hack/search/corpus/tools.json).
//
//   node hack/search/corpus/generate.mjs [--only PACKAGE] [--keep DIR]
//
// For each server in servers.json it installs the pinned package into a
// directory of its own under a temporary directory (npm install
// --ignore-scripts: nothing downloads a browser or builds native code), reads
// its package.json (name, version, licence, repository), starts its bin over
// stdio with placeholder settings, lists its tools (every page) with the
// TypeScript SDK client that hack/interop installs, and closes it. Servers
// that fail to install or start are reported and left out. It writes
// tools.json sorted by package, tools in the order the server lists them.
// The temporary directory is removed unless --keep names one to reuse.
// Nothing it installs is committed: run it again to regenerate the corpus.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const interop = path.resolve(here, '../../interop/package.json');
const require = createRequire(interop);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const only = flag('--only');
const keep = flag('--keep');

const config = JSON.parse(fs.readFileSync(path.join(here, 'servers.json'), 'utf8'));
const servers = config.servers.filter((s) => !only || s.package === only);
const work = keep ? path.resolve(keep) : fs.mkdtempSync(path.join(os.tmpdir(), 'toolplane-search-corpus-'));
fs.mkdirSync(work, { recursive: true });

const listTimeoutMs = 90_000;
const installTimeoutMs = 600_000;

function dirOf(s) {
  return path.join(work, s.package.replace(/[@/]/g, '_'));
}

// install installs s into a directory of its own and returns the package's
// directory; an installed one is reused.
async function install(s) {
  const dir = dirOf(s);
  const pkgDir = path.join(dir, 'node_modules', ...s.package.split('/'));
  if (fs.existsSync(path.join(pkgDir, 'package.json'))) return pkgDir;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"private":true}\n');
  const child = spawn('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', `${s.package}@${s.version}`],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: installTimeoutMs });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-2000); });
  const code = await new Promise((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`npm install exited ${code}: ${stderr}`);
  return pkgDir;
}

function binOf(pkgDir, pkg) {
  let bin = pkg.bin;
  if (typeof bin === 'object' && bin !== null) {
    const names = Object.keys(bin);
    const short = pkg.name.split('/').pop();
    bin = bin[short] ?? bin[names[0]];
  }
  if (!bin && pkg.main) bin = pkg.main;
  if (!bin) throw new Error('package has no bin');
  return path.join(pkgDir, bin);
}

const subst = (v, tmp) => v.replaceAll('{tmp}', tmp);

async function list(s, pkgDir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const tmp = fs.mkdtempSync(path.join(work, 'run-'));
  const env = {
    PATH: process.env.PATH, HOME: tmp, TMPDIR: tmp, NODE_ENV: 'production',
    // No telemetry, no update checks, no browser downloads.
    DO_NOT_TRACK: '1', MDB_MCP_TELEMETRY: 'disabled', PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1', PUPPETEER_SKIP_DOWNLOAD: '1',
    AZURE_MCP_COLLECT_TELEMETRY: 'false',
  };
  for (const [k, v] of Object.entries(s.env ?? {})) env[k] = subst(v, tmp);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [binOf(pkgDir, pkg), ...(s.args ?? []).map((a) => subst(a, tmp))],
    env, cwd: tmp, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const client = new Client({ name: 'toolplane-search-corpus', version: '0.0.0' });
  const timer = setTimeout(() => transport.close(), listTimeoutMs);
  try {
    await client.connect(transport, { timeout: listTimeoutMs });
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout: listTimeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && tools.length < 10_000);
    return {
      package: pkg.name, version: pkg.version, license: licenseOf(pkg, pkgDir),
      repository: typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url ?? '',
      prefix: s.prefix, tools,
    };
  } catch (err) {
    throw new Error(`${err.message}; stderr: ${stderr.slice(-1500)}`);
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => {});
  }
}

// licenseOf is the package's licence as its package.json says, with the
// licence file's first line where it only points at the file.
function licenseOf(pkg, pkgDir) {
  let l = typeof pkg.license === 'string' ? pkg.license : pkg.license?.type ?? '';
  if (l && !/^SEE LICEN[CS]E/i.test(l)) return l;
  const f = fs.readdirSync(pkgDir).find((n) => /^licen[cs]e/i.test(n));
  if (!f) return l || 'none given';
  const first = fs.readFileSync(path.join(pkgDir, f), 'utf8').split('\n').map((x) => x.trim()).find((x) => x);
  return `${l || 'file ' + f}: ${first ?? ''}`.trim();
}

// Installs run a few at a time (they wait on the registry); servers are
// listed one at a time, so that none is starved of the 2 cores.
const installs = new Map();
let next = 0;
async function installer() {
  while (next < servers.length) {
    const s = servers[next++];
    installs.set(s.package, await install(s).then((dir) => ({ dir }), (err) => ({ err })));
  }
}
const installing = Promise.all(Array.from({ length: 4 }, installer));

const results = [];
const failures = [];
for (const s of servers) {
  while (!installs.has(s.package)) await new Promise((r) => setTimeout(r, 200));
  try {
    const { dir, err } = installs.get(s.package);
    if (err) throw err;
    const r = await list(s, dir);
    if (r.tools.length === 0) throw new Error('no tools listed');
    results.push(r);
    console.error(`ok   ${s.package}@${r.version}: ${r.tools.length} tools (${r.license})`);
  } catch (err) {
    failures.push(s.package);
    console.error(`FAIL ${s.package}: ${err.message.slice(0, 3000)}`);
  }
}
await installing;

const out = path.join(here, 'tools.json');
let prior = { servers: [] };
if (only && fs.existsSync(out)) prior = JSON.parse(fs.readFileSync(out, 'utf8'));
const merged = [...prior.servers.filter((p) => !results.some((r) => r.package === p.package)), ...results]
  .sort((a, b) => a.package.localeCompare(b.package));
fs.writeFileSync(out, JSON.stringify({
  comment: 'Generated by hack/search/corpus/generate.mjs from the npm packages of servers.json: the tools each server lists, as it lists them. Do not edit.',
  servers: merged,
}, null, 1) + '\n');
const total = merged.reduce((n, s) => n + s.tools.length, 0);
console.error(`${merged.length} servers, ${total} tools written to ${path.relative(process.cwd(), out)}; failed: ${failures.join(', ') || 'none'}`);
if (!keep) fs.rmSync(work, { recursive: true, force: true });
process.exit(0);
