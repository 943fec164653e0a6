// interop.mjs drives a toolkit /mcp endpoint with the official TypeScript MCP
// SDK client, so that the Go test in toolkit/server can check that a client
// it did not write lists and calls toolkit's tools.
//
//   node interop.mjs <mcp-url> <tool> <arguments-json> [--await-list-changed] [--progress] [--tasks=<cap> --long=<arguments-json>] [--elicit <content-json>]
//
// It prints one JSON object per line on stdout, each with an "event":
//   {"event":"connected","protocolVersion":…,"sessionId":…,"serverInfo":…,"capabilities":…}
//   {"event":"tools","tools":[…]}            the full tools/list, every page
//   {"event":"progress","progress":…,"total":…,"message":…}
//                                             only with --progress: each
//                                             notifications/progress of the call,
//                                             which asks for them with a progressToken
//   {"event":"log","level":…,"logger":…,"data":…}
//                                             only with --progress: each
//                                             notifications/message, at level info and up
//   {"event":"elicited","message":…,"requestedSchema":…}
//                                             only with --elicit: each elicitation/create
//                                             the client answers, declaring the elicitation
//                                             capability; it accepts with <content-json>
//   {"event":"called","result":{…}}           tools/call with the arguments as given
//   {"event":"changed","tools":[…]}           only with --await-list-changed: the
//                                             list after notifications/tools/list_changed
// With INTEROP_OAUTH_CLIENT_ID and INTEROP_OAUTH_CLIENT_SECRET in the
// environment, the client signs in as the MCP authorization spec has it: it
// is given no token and no authorization server, takes both from the
// server's 401 (WWW-Authenticate resource_metadata) and its protected
// resource metadata (RFC 9728), and gets a token with the SDK's
// ClientCredentialsProvider; it prints {"event":"authorized","tokenType":…}
// once it has one. NODE_EXTRA_CA_CERTS makes node trust a test's IdP.
// The arguments are sent exactly as given: the point is to send the sloppy
// arguments a model would, and see toolkit repair them.
// With --tasks=<cap> --long=<arguments-json>, the call is an MCP task
// (2025-11-25) instead, through the SDK's experimental tasks API, and the
// harness goes on to cancel one and to fill the caller's cap of <cap>
// running tasks; it prints, after "tools":
//   {"event":"taskCompleted","task":…,"statuses":[…],"result":…}
//                                             callToolStream: created, polled
//                                             with tasks/get, read with tasks/result
//   {"event":"taskRunning","task":…}          a task with the long arguments,
//                                             once tasks/get shows a status message
//   {"event":"taskCancelled","task":…,"after":…}
//                                             tasks/cancel's answer, then tasks/get's
//   {"event":"capRefused","error":{code,message},"running":<cap>}
//                                             the task past the cap
//   {"event":"otherCaller","task":…,"foreignGet":{code,message},"listed":[ids]}
//                                             a second client (its own session)
//                                             starts a task, asks for one of the
//                                             first client's, and lists its own
//   {"event":"ownList","tasks":[{taskId,status}]}
//                                             the first client's tasks, once it
//                                             has cancelled those it left running
// Every wait is bounded; any failure exits non-zero with the reason on stderr.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const [url, tool, rawArgs, ...flags] = process.argv.slice(2);
if (!url || !tool || rawArgs === undefined) {
  console.error('usage: node interop.mjs <mcp-url> <tool> <arguments-json> [--await-list-changed] [--progress] [--tasks=<cap> --long=<arguments-json>] [--elicit <content-json>]');
  process.exit(2);
}
const awaitListChanged = flags.includes('--await-list-changed');
const wantProgress = flags.includes('--progress');
const flagValue = (name) => flags.find((f) => f.startsWith(name + '='))?.slice(name.length + 1);
const taskCap = flagValue('--tasks');
const elicitAt = flags.indexOf('--elicit');
const elicitContent = elicitAt >= 0 ? JSON.parse(flags[elicitAt + 1]) : undefined;
const timeoutMs = 20000;

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

const fail = (err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
};
const deadline = setTimeout(() => fail(new Error(`interop: gave up after ${timeoutMs} ms`)), timeoutMs);

let changed;
const changedOnce = new Promise((resolve) => { changed = resolve; });

const client = new Client(
  { name: 'toolplane-interop', version: '1.0.0' },
  {
    capabilities: elicitContent ? { elicitation: { form: {} } } : {},
    listChanged: {
      tools: {
        debounceMs: 0,
        onChanged: (err, tools) => (err ? fail(err) : changed(tools)),
      },
    },
  },
);

async function listAll() {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const rpcError = (e) => ({ code: e?.code, message: e?.message });

// startTask sends a task-augmented tools/call and returns its task.
async function startTask(c, args) {
  const res = await c.request({ method: 'tools/call', params: { name: tool, arguments: args } }, CreateTaskResultSchema, { task: { ttl: 60000 } });
  return res.task;
}

async function runTasks(cap, longArgs) {
  const tasks = client.experimental.tasks;
  // Created, polled with tasks/get to completion, read with tasks/result.
  const statuses = [];
  let created;
  let result;
  const stream = tasks.callToolStream({ name: tool, arguments: JSON.parse(rawArgs) }, CallToolResultSchema, { task: { ttl: 60000 } });
  for await (const m of stream) {
    if (m.type === 'taskCreated') created = m.task;
    else if (m.type === 'taskStatus') statuses.push({ status: m.task.status, statusMessage: m.task.statusMessage });
    else if (m.type === 'result') result = m.result;
    else if (m.type === 'error') throw m.error;
  }
  emit({ event: 'taskCompleted', task: created, statuses, result });

  // Cancelled mid-run, once it shows it runs.
  const long = await startTask(client, longArgs);
  let running;
  do {
    await sleep(long.pollInterval ?? 100);
    running = await tasks.getTask(long.taskId);
  } while (running.status === 'working' && !running.statusMessage);
  emit({ event: 'taskRunning', task: running });
  const cancelled = await tasks.cancelTask(long.taskId);
  emit({ event: 'taskCancelled', task: cancelled, after: await tasks.getTask(long.taskId) });

  // The caller's cap: cap tasks run, the next is refused.
  const ids = [];
  for (let i = 0; i < cap; i++) ids.push((await startTask(client, longArgs)).taskId);
  let refused = null;
  try {
    const extra = await startTask(client, longArgs);
    ids.push(extra.taskId);
  } catch (e) {
    refused = rpcError(e);
  }
  emit({ event: 'capRefused', error: refused, running: ids.length });

  // Another caller, in a session of its own, is not held by the first
  // one's cap, and cannot see its tasks.
  const other = new Client({ name: 'toolplane-interop-other', version: '1.0.0' }, { capabilities: {} });
  await other.connect(new StreamableHTTPClientTransport(new URL(url)));
  const theirs = await startTask(other, longArgs);
  let foreignGet = null;
  try {
    await other.experimental.tasks.getTask(ids[0]);
  } catch (e) {
    foreignGet = rpcError(e);
  }
  const listed = (await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  emit({ event: 'otherCaller', task: theirs, foreignGet, listed });
  await other.experimental.tasks.cancelTask(theirs.taskId);
  await other.close();

  for (const id of ids) await tasks.cancelTask(id);
  const own = (await tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));
  emit({ event: 'ownList', tasks: own });
}

try {
  let authProvider;
  if (process.env.INTEROP_OAUTH_CLIENT_ID) {
    authProvider = new ClientCredentialsProvider({
      clientId: process.env.INTEROP_OAUTH_CLIENT_ID,
      clientSecret: process.env.INTEROP_OAUTH_CLIENT_SECRET,
    });
    const save = authProvider.saveTokens.bind(authProvider);
    authProvider.saveTokens = (tokens) => {
      save(tokens);
      emit({ event: 'authorized', tokenType: tokens.token_type });
    };
  }
  if (elicitContent) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      emit({ event: 'elicited', message: req.params.message, requestedSchema: req.params.requestedSchema });
      return { action: 'accept', content: elicitContent };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  await client.connect(transport);
  emit({
    event: 'connected',
    protocolVersion: transport.protocolVersion,
    sessionId: transport.sessionId ?? null,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
  });

  emit({ event: 'tools', tools: await listAll() });

  if (taskCap !== undefined) {
    await runTasks(Number(taskCap), JSON.parse(flagValue('--long') ?? '{}'));
    await client.close();
    clearTimeout(deadline);
    process.exit(0);
  }

  let options;
  if (wantProgress) {
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
      emit({ event: 'log', level: n.params.level, logger: n.params.logger, data: n.params.data }));
    await client.setLoggingLevel('info');
    // onprogress makes the SDK send a progressToken with the call.
    options = { onprogress: (p) => emit({ event: 'progress', progress: p.progress, total: p.total, message: p.message }) };
  }
  // The arguments go out as parsed from the command line, unvalidated: a
  // string where a number belongs stays a string.
  const result = await client.callTool({ name: tool, arguments: JSON.parse(rawArgs) }, undefined, options);
  emit({ event: 'called', result });

  if (awaitListChanged) {
    emit({ event: 'ready' });
    emit({ event: 'changed', tools: await changedOnce });
  }
  await client.close();
  clearTimeout(deadline);
} catch (err) {
  fail(err);
}
