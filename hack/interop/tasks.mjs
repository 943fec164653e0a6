// tasks.mjs drives MCP tasks (2025-11-25, experimental) with the official
// TypeScript SDK client, one command at a time, so that a Go test can run
// a task through the gateway step by step as a real client does.
//
//   node tasks.mjs <mcp-url> [<bearer-token>]
//
// It connects, prints {"event":"connected","protocolVersion":…,"capabilities":…},
// then reads one JSON command a line on stdin and prints one JSON line for
// each, with the command's "id":
//   {"op":"list"}                           {"event":"tools","tools":[…]} (every page)
//   {"op":"stream","tool":…,"args":{…},"ttl":N}
//                                           the SDK's callToolStream: it starts
//                                           the task and polls tasks/get to the
//                                           end, then reads tasks/result;
//                                           {"event":"streamed","messages":[{type,task|result|error}…]}
//   {"op":"start","tool":…,"args":{…},"ttl":N}
//                                           tools/call with params.task;
//                                           {"event":"started","task":{…}}
//   {"op":"get","taskId":…}                 {"event":"task","task":{…}}
//   {"op":"result","taskId":…}              {"event":"result","result":{…}}
//   {"op":"cancel","taskId":…}              {"event":"cancelled","task":{…}}
//   {"op":"listTasks"}                      {"event":"tasks","tasks":[…]}
//   {"op":"close"}                          closes the client and exits
// A failed command prints {"event":"error","code":…,"message":…}. Every
// command is bounded in time; stdin's end exits.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, token] = process.argv.slice(2);
if (!url) {
  console.error('usage: node tasks.mjs <mcp-url> [<bearer-token>]');
  process.exit(2);
}
const timeout = 20000;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

const client = new Client({ name: 'toolplane-tasks-interop', version: '1.0.0' }, { capabilities: {}, enforceStrictCapabilities: true });
const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });

async function run(cmd) {
  const opts = { timeout };
  switch (cmd.op) {
    case 'list': {
      const tools = [];
      let cursor;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, opts);
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      return { event: 'tools', tools };
    }
    case 'stream': {
      const messages = [];
      const stream = client.experimental.tasks.callToolStream({ name: cmd.tool, arguments: cmd.args ?? {} }, CallToolResultSchema,
        { ...opts, task: { ttl: cmd.ttl } });
      for await (const m of stream) {
        messages.push(m.type === 'error' ? { type: 'error', error: { code: m.error.code, message: m.error.message } } : m);
      }
      return { event: 'streamed', messages };
    }
    case 'start': {
      const res = await client.request({ method: 'tools/call', params: { name: cmd.tool, arguments: cmd.args ?? {} } }, CreateTaskResultSchema,
        { ...opts, task: cmd.ttl === undefined ? {} : { ttl: cmd.ttl } });
      return { event: 'started', task: res.task };
    }
    case 'get':
      return { event: 'task', task: await client.experimental.tasks.getTask(cmd.taskId, opts) };
    case 'result':
      return { event: 'result', result: await client.experimental.tasks.getTaskResult(cmd.taskId, CallToolResultSchema, opts) };
    case 'cancel':
      return { event: 'cancelled', task: await client.experimental.tasks.cancelTask(cmd.taskId, opts) };
    case 'listTasks':
      return { event: 'tasks', tasks: (await client.experimental.tasks.listTasks(undefined, opts)).tasks };
    case 'close':
      await client.close();
      process.exit(0);
  }
  throw new Error(`unknown op ${cmd.op}`);
}

try {
  await client.connect(transport, { timeout });
  emit({ event: 'connected', protocolVersion: transport.protocolVersion, capabilities: client.getServerCapabilities() });
} catch (err) {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    emit({ id: cmd.id, ...(await run(cmd)) });
  } catch (err) {
    emit({ id: cmd?.id, event: 'error', code: err?.code ?? null, message: String(err?.message ?? err) });
  }
}
process.exit(0);
