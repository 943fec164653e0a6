// mcp-server.mjs is a small MCP server on the official TypeScript SDK, for
// the operator's tests: an MCP server that toolkit did not write, in the
// 2025 protocol era (initialize, a session, tools/list, DELETE).
//
//   node mcp-server.mjs [--page-size N] [--stateless]
//
// It listens on 127.0.0.1 on a free port and prints one JSON line on stdout:
//   {"event":"listening","port":N}
// and serves:
//   /mcp            MCP Streamable HTTP. tools/list is paginated, N tools a
//                   page (default 2), with an opaque cursor. Sessions unless
//                   --stateless.
//   PUT /control/tools  replaces the tools with the JSON array in the body,
//                   each {"name","description","inputSchema"}: the way a test
//                   changes what the server serves. Open sessions get
//                   notifications/tools/list_changed.
//   GET /control/stats  {"lists":N,"calls":N,"sessions":N,"deletes":N,
//                   "methods":{method:N},"tasks":{"created":N,"completed":N,"cancelled":N}}
//
// A tool whose execution.taskSupport is "optional" or "required" runs as a
// task (MCP 2025-11-25) when the call asks for one: the call returns the
// task at once, and the tool works for arguments.ms milliseconds (default
// 200) before it completes, unless tasks/cancel cancels it first, which
// it notices and counts. The task store is the SDK's InMemoryTaskStore,
// one for the server: a task belongs to the session it was created in, as
// the SDK has it, and tasks/get, tasks/result, tasks/list and tasks/cancel
// are the SDK's own.
//
// Every tool answers tools/call with the same blocks: a text block naming
// the tool and its arguments, then an image, an audio clip, an embedded
// resource and a resource link, each as MCP defines it, so that a client can
// check that every content type reaches it unchanged. A tool named "fail"
// answers with isError.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const pageSize = Math.max(1, parseInt(option('--page-size', '2'), 10) || 2);
const stateless = flag('--stateless');
const maxBody = 1 << 20;

let tools = [
  {
    name: 'ts_echo',
    description: 'Echoes its message.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  },
];
const stats = { lists: 0, calls: 0, sessions: 0, deletes: 0, methods: {}, tasks: { created: 0, completed: 0, cancelled: 0 } };
const taskStore = new InMemoryTaskStore();

const isTaskTool = (t) => ['optional', 'required'].includes(t?.execution?.taskSupport);

// runTask works for ms milliseconds, looking every 10ms whether the task
// was cancelled, then stores its result.
function runTask(store, taskId, name, toolArgs) {
  const ms = Number.isFinite(toolArgs?.ms) ? toolArgs.ms : 200;
  const start = Date.now();
  const step = async () => {
    const task = await store.getTask(taskId);
    if (!task) return;
    if (task.status === 'cancelled') {
      stats.tasks.cancelled++;
      return;
    }
    if (Date.now() - start < ms) {
      setTimeout(step, 10);
      return;
    }
    await store.storeTaskResult(taskId, 'completed', {
      content: [{ type: 'text', text: `${name} done after ${ms}ms` }],
      structuredContent: { tool: name, ms },
    });
    stats.tasks.completed++;
  };
  setTimeout(step, 10);
}

// A 1x1 PNG and a short WAV header: content a client must pass on as given.
export const imageData = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
export const audioData = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

function newServer() {
  const server = new Server({ name: 'toolplane-ts-interop', version: '1.0.0' }, {
    capabilities: { tools: { listChanged: true }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore,
  });
  server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    stats.lists++;
    const start = req.params?.cursor ? parseInt(Buffer.from(req.params.cursor, 'base64url').toString(), 10) : 0;
    if (!Number.isInteger(start) || start < 0 || start > tools.length) {
      throw new Error('invalid cursor');
    }
    const page = tools.slice(start, start + pageSize);
    const next = start + pageSize;
    return next < tools.length ? { tools: page, nextCursor: Buffer.from(String(next)).toString('base64url') } : { tools: page };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    stats.calls++;
    const { name, arguments: toolArgs } = req.params;
    const tool = tools.find((t) => t.name === name);
    if (!tool) {
      return { isError: true, content: [{ type: 'text', text: `unknown tool ${name}` }] };
    }
    if (req.params.task && isTaskTool(tool)) {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: 50 });
      stats.tasks.created++;
      runTask(extra.taskStore, task.taskId, name, toolArgs);
      return { task };
    }
    if (name === 'fail') {
      return { isError: true, content: [{ type: 'text', text: 'failed as asked' }] };
    }
    return {
      content: [
        { type: 'text', text: `${name} ${JSON.stringify(toolArgs ?? {})}` },
        { type: 'image', data: imageData, mimeType: 'image/png' },
        { type: 'audio', data: audioData, mimeType: 'audio/wav', annotations: { audience: ['user'] } },
        { type: 'resource', resource: { uri: 'mem://interop/note.txt', mimeType: 'text/plain', text: 'an embedded note' } },
        { type: 'resource_link', uri: 'mem://interop/doc', name: 'doc', mimeType: 'text/markdown' },
      ],
      structuredContent: { tool: name, arguments: toolArgs ?? {} },
    };
  });
  return server;
}

const sessions = new Map();

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > maxBody) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString()));
    req.on('error', reject);
  });
}

function json(res, status, value) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(value));
}

async function handleMCP(req, res) {
  let body;
  if (req.method === 'POST') {
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      json(res, 400, { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
      return;
    }
    if (typeof body?.method === 'string') stats.methods[body.method] = (stats.methods[body.method] ?? 0) + 1;
  }
  if (stateless) {
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    return;
  }
  const sid = req.headers['mcp-session-id'];
  if (sid && sessions.has(sid)) {
    if (req.method === 'DELETE') stats.deletes++;
    await sessions.get(sid).transport.handleRequest(req, res, body);
    return;
  }
  if (!sid && req.method === 'POST' && isInitializeRequest(body)) {
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { sessions.set(id, { server, transport }); stats.sessions++; },
    });
    transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    return;
  }
  // What a 2025 server says to anything but initialize outside a session,
  // server/discover from a 2026 client included.
  json(res, 400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: body?.id ?? null });
}

const http = createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname === '/mcp') {
      await handleMCP(req, res);
    } else if (url.pathname === '/control/tools' && req.method === 'PUT') {
      const next = JSON.parse(await readBody(req));
      if (!Array.isArray(next)) throw new Error('want a JSON array of tools');
      tools = next;
      for (const { server } of sessions.values()) {
        server.sendToolListChanged().catch(() => {});
      }
      json(res, 200, { tools: tools.length });
    } else if (url.pathname === '/control/stats') {
      json(res, 200, { ...stats, open: sessions.size });
    } else {
      json(res, 404, { error: 'not found' });
    }
  } catch (err) {
    if (!res.headersSent) json(res, 500, { error: String(err && err.message ? err.message : err) });
  }
});

http.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ event: 'listening', port: http.address().port }) + '\n');
});

const stop = () => {
  for (const { transport } of sessions.values()) transport.close().catch(() => {});
  http.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The test that started the server may die without a signal: stop with it.
process.stdin.on('end', stop);
process.stdin.resume();
