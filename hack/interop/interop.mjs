// interop.mjs drives a toolkit /mcp endpoint with the official TypeScript MCP
// SDK client, so that the Go test in toolkit/server can check that a client
// it did not write lists and calls toolkit's tools.
//
//   node interop.mjs <mcp-url> <tool> <arguments-json> [--await-list-changed] [--progress] [--elicit <content-json>]
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
// Every wait is bounded; any failure exits non-zero with the reason on stderr.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const [url, tool, rawArgs, ...flags] = process.argv.slice(2);
if (!url || !tool || rawArgs === undefined) {
  console.error('usage: node interop.mjs <mcp-url> <tool> <arguments-json> [--await-list-changed] [--progress] [--elicit <content-json>]');
  process.exit(2);
}
const awaitListChanged = flags.includes('--await-list-changed');
const wantProgress = flags.includes('--progress');
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
