#!/usr/bin/env node
// End-to-end check of the gridcity MCP endpoint with the official TypeScript
// client, over Streamable HTTP or over the stdio bridge (`gridcity mcp
// --stdio`): --sdk v1 is @modelcontextprotocol/sdk 1.x in a 2025-11-25
// session, --sdk v2 is @modelcontextprotocol/client 2.x pinned to the
// stateless revision 2026-07-28 (sdk.mjs). See README.md.
//
//   node client.mjs --endpoint URL --token T --client-name NAME
//                   [--sdk v1|v2] [--stdio GRIDCITY_BINARY]
//                   [--expect-server NAME] [--expect-tools a,b,c] [--expect-refused a,b]
//                   [--run-command CMD] [--expect-run completed|denied|waiting]
//                   [--expect-resources uri,uri-template,…] [--expect-unreadable uri,…]
//                   [--expect-prompts a,b] [--timeout SECONDS]
//
// stdout: exactly one JSON line,
//   {"sdk":…,"era":…,"protocolVersion":…,"transport":…,"tools":[…],"called":[…],"refused":[…],"resources":[…],"read":[…],"prompts":[…],
//    "run":{"status","waitStatus","progress"},"ok":true}                                    exit 0
//   the same with "ok":false,"errors":[…]                                                   exit 1 (a check failed)
// exit 2: bad usage. Diagnostics go to stderr, one line each, prefixed "tsclient:"
// (the bridge's own log lines, prefixed "bridge:").

import { parseArgs, isDeepStrictEqual } from 'node:util';
import { loadSdk } from './sdk.mjs';
import { PinnedAjv } from './schema.mjs';

const ANNOTATION_HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];
const BAD_ORIGIN = 'http://evil.example';

const summary = { sdk: null, era: null, protocolVersion: null, transport: 'http', tools: [], called: [], refused: [], resources: [], read: [], prompts: [], run: null, ok: false };
const errors = [];

function log(msg) {
    process.stderr.write(`tsclient: ${msg}\n`);
}

function fail(msg) {
    errors.push(msg);
    log(`FAIL: ${msg}`);
}

function finish() {
    summary.ok = errors.length === 0;
    if (!summary.ok) summary.errors = errors;
    process.stdout.write(JSON.stringify(summary) + '\n');
    log(summary.ok ? 'all checks passed' : `${errors.length} check(s) failed`);
    // Exit explicitly: keep-alive sockets (or a bridge process) must not keep
    // this process (and the Go test that runs it) waiting.
    process.exit(summary.ok ? 0 : 1);
}

function usage(msg) {
    process.stderr.write(
        `tsclient: ${msg}\n` +
            'usage: node client.mjs --endpoint URL --token T --client-name NAME [--sdk v1|v2] [--stdio GRIDCITY_BINARY] ' +
            '[--expect-server NAME] [--expect-tools a,b,c] [--expect-refused a,b] [--run-command CMD] ' +
            '[--expect-run completed|denied|waiting] [--expect-resources uri,…] [--expect-unreadable uri,…] ' +
            '[--expect-prompts a,b] [--timeout SECONDS]\n'
    );
    process.exit(2);
}

let opts;
try {
    ({ values: opts } = parseArgs({
        options: {
            endpoint: { type: 'string' },
            token: { type: 'string' },
            'client-name': { type: 'string' },
            sdk: { type: 'string', default: 'v1' },
            stdio: { type: 'string' },
            'expect-server': { type: 'string' },
            'expect-tools': { type: 'string' },
            'expect-refused': { type: 'string' },
            'run-command': { type: 'string' },
            'expect-run': { type: 'string' },
            'expect-resources': { type: 'string' },
            'expect-unreadable': { type: 'string' },
            'expect-prompts': { type: 'string' },
            timeout: { type: 'string', default: '60' }
        },
        strict: true,
        allowPositionals: false
    }));
} catch (e) {
    usage(e.message);
}
for (const k of ['endpoint', 'token', 'client-name']) {
    if (!opts[k]) usage(`--${k} is required`);
}
let endpoint;
try {
    endpoint = new URL(opts.endpoint);
} catch {
    usage(`--endpoint ${JSON.stringify(opts.endpoint)} is not a URL`);
}
const timeoutSec = Number(opts.timeout);
if (!(timeoutSec > 0)) usage('--timeout must be a positive number of seconds');
const list = name => (opts[name] ? opts[name].split(',').map(s => s.trim()).filter(Boolean) : null);
const expectTools = list('expect-tools');
const expectRefused = list('expect-refused') ?? [];
const expectResources = list('expect-resources');
const expectUnreadable = list('expect-unreadable') ?? [];
const expectPrompts = list('expect-prompts');
if (opts['expect-run'] && !opts['run-command']) usage('--expect-run needs --run-command');
if (opts.stdio) summary.transport = 'stdio';
let sdk;
try {
    sdk = await loadSdk(opts.sdk);
} catch (err) {
    usage(`--sdk: ${err.message}`);
}
summary.sdk = sdk.label;
// Ajv, pinned: the SDK's own output check runs on it, and so does ours.
const ajv = new PinnedAjv();

// A hung server must not hang the caller.
setTimeout(() => {
    fail(`gave up after ${timeoutSec}s (--timeout)`);
    finish();
}, timeoutSec * 1000).unref();

function describe(err) {
    const status = sdk.httpStatus(err);
    if (status !== undefined) return `HTTP ${status}: ${err.message}`;
    const cause = err?.cause?.code ?? err?.cause?.message;
    // An SDK error's data is the server's answer (e.g. the versions it
    // supports): the message alone would not say what the server said.
    const data = err?.data !== undefined ? ` ${JSON.stringify(err.data)}` : '';
    return (err?.message ?? String(err)) + (cause ? ` (${cause})` : '') + data;
}

function newClient() {
    // The validator is passed explicitly, so that the SDK's structured-output
    // check runs on the pinned Ajv whatever the SDK's default.
    return sdk.newClient({ name: opts['client-name'], version: '1.0.0' }, ajv);
}

function httpTransport(headers) {
    return sdk.httpTransport(endpoint, headers);
}

// stdioTransport starts `gridcity mcp --stdio` with the coordinator's endpoint
// and the token in the environment, as a desktop client's config does. Only
// the SDK's default environment is passed on besides: nothing from the data
// directory can leak in.
function stdioTransport(token, label) {
    const transport = sdk.stdioTransport({
        command: opts.stdio,
        args: ['mcp', '--stdio'],
        env: {
            ...sdk.getDefaultEnvironment(),
            GRIDCITY_URL: endpoint.href,
            GRIDCITY_TOKEN: token,
            GRIDCITY_CLIENT: opts['client-name']
        },
        stderr: 'pipe'
    });
    let rest = '';
    transport.stderr?.on('data', chunk => {
        const lines = (rest + chunk.toString()).split('\n');
        rest = lines.pop();
        for (const line of lines) if (line) process.stderr.write(`bridge${label}: ${line}\n`);
    });
    return transport;
}

// connectExpectingStatus connects with the given headers and requires the
// attempt to fail with that HTTP status.
async function connectExpectingStatus(what, headers, status) {
    const client = newClient();
    try {
        await client.connect(httpTransport(headers));
    } catch (err) {
        if (sdk.httpStatus(err) === status) {
            log(`${what}: refused with HTTP ${status} as expected`);
            return;
        }
        fail(`${what}: expected HTTP ${status}, got ${describe(err)}`);
        return;
    } finally {
        await client.close().catch(() => {});
    }
    fail(`${what}: expected HTTP ${status}, but the connection succeeded`);
}

// bridgeWithWrongToken: the bridge starts whatever the token, lists the
// tools, and a call comes back as an isError result that says what is wrong.
async function bridgeWithWrongToken() {
    const client = newClient();
    try {
        await client.connect(stdioTransport('gc_wrong-token-tsclient', ' (wrong token)'));
        const { tools } = await client.listTools();
        if (!tools.some(t => t.name === 'list_servers')) fail('bridge with a wrong token: list_servers is not listed');
        const res = await sdk.callTool(client, { name: 'list_servers', arguments: {} });
        const text = (res.content ?? []).map(c => c.text ?? '').join(' ');
        if (res.isError !== true || res.structuredContent !== undefined || !text.includes('refused the token')) {
            fail(`bridge with a wrong token: want an isError result about the token, got ${JSON.stringify(res)}`);
        } else {
            log('bridge with a wrong token: isError as expected');
        }
    } catch (err) {
        fail(`bridge with a wrong token: ${describe(err)}`);
    } finally {
        await client.close().catch(() => {});
    }
}

function checkTool(tool, independent) {
    const n = tool.name;
    const a = tool.annotations;
    if (!a || typeof a !== 'object') {
        fail(`tool ${n}: no annotations`);
    } else {
        for (const h of ANNOTATION_HINTS) {
            if (typeof a[h] !== 'boolean') fail(`tool ${n}: annotations.${h} is not set explicitly (got ${JSON.stringify(a[h])})`);
        }
        if (typeof a.title !== 'string' || a.title.trim() === '') fail(`tool ${n}: annotations.title is not set`);
    }
    if (typeof tool.description !== 'string' || tool.description.trim() === '') fail(`tool ${n}: no description`);

    const input = tool.inputSchema;
    if (!input || input.type !== 'object') fail(`tool ${n}: inputSchema.type is not "object"`);
    else if (input.additionalProperties !== false) {
        fail(`tool ${n}: inputSchema.additionalProperties is ${JSON.stringify(input.additionalProperties)}, want false`);
    }

    const output = tool.outputSchema;
    if (!output) {
        fail(`tool ${n}: no outputSchema`);
        return null;
    }
    if (output.type !== 'object') fail(`tool ${n}: outputSchema.type is not "object"`);
    let validate;
    try {
        validate = independent.getValidator(output);
    } catch (err) {
        fail(`tool ${n}: Ajv cannot compile the outputSchema: ${err.message}`);
        return null;
    }
    // Prove the validator really rejects something: output schemas are objects,
    // so a number must fail.
    if (validate(42).valid) fail(`tool ${n}: outputSchema accepts the number 42; validation would prove nothing`);
    return validate;
}

// proveSdkValidates shows that Client.callTool acts on its structuredContent
// check: it calls a read-only tool again while the pinned Ajv (the SDK's
// validator) rejects every value, and requires the SDK to throw.
async function proveSdkValidates(client, tool) {
    const probe = '__tsclient_probe__';
    const stop = ajv.reject(`${probe}: the self-check rejects every value`);
    try {
        await sdk.callTool(client, { name: tool.name, arguments: {} });
        fail(`SDK self-check: callTool(${tool.name}) accepted structuredContent its validator rejected; ${sdk.label} does not validate output`);
    } catch (err) {
        if (String(err?.message).includes("does not match the tool's output schema") && String(err?.message).includes(probe)) {
            log(`SDK self-check: callTool validates structuredContent (a rejection by its validator was an error)`);
        } else {
            fail(`SDK self-check: callTool(${tool.name}) failed for another reason: ${describe(err)}`);
        }
    } finally {
        stop();
    }
}

function requiredArgs(tool) {
    const r = tool.inputSchema?.required;
    return Array.isArray(r) ? r : [];
}

// RENDERED_TEXT names the tools whose text content is a rendering written
// for a model rather than the JSON again, each with the facts of its
// structuredContent that the text must carry.
const RENDERED_TEXT = {
    list_servers: sc => [`${sc.total} servers`, ...(sc.rows ?? []).map(r => r.name), ...(sc.others ?? [])],
};

// TOOL_ARGS gives the arguments of gridcity's tools that need some, in the
// order they are called (after every tool that needs none). A new tool with
// required inputs fails the run until it is added here: every tool is called.
const TOOL_ARGS = {
    diagnose: () => ({ target: opts['expect-server'] }),
    get_metrics: () => ({ target: opts['expect-server'] }),
    run_command: () => ({
        server: opts['expect-server'],
        command: opts['run-command'],
        reason: 'tsclient e2e: see that commands go through a person',
        timeout_seconds: 30
    }),
    wait_for_command: results => ({ request_id: results.run_command?.requestId })
};

// callAndCheck calls a tool and checks the result as a client would see it:
// validated by the SDK against the outputSchema (it must have asked the
// pinned Ajv), by the pinned Ajv again on our side, and the text content the
// same JSON as structuredContent.
async function callAndCheck(client, tool, validate, args, options) {
    let res;
    const validated = tool.outputSchema ? ajv.validations(tool.outputSchema) : 0;
    try {
        // Client.callTool validates structuredContent against the
        // outputSchema from tools/list and throws when it does not match.
        res = await sdk.callTool(client, { name: tool.name, arguments: args }, options);
    } catch (err) {
        fail(`call ${tool.name}(${JSON.stringify(args)}): ${describe(err)}`);
        return null;
    }
    summary.called.push(tool.name);
    if (res.isError) {
        fail(`call ${tool.name}(${JSON.stringify(args)}): isError: ${JSON.stringify(res.content)}`);
        return null;
    }
    const sc = res.structuredContent;
    if (!sc || typeof sc !== 'object') {
        fail(`call ${tool.name}: no structuredContent`);
        return null;
    }
    if (tool.outputSchema && ajv.validations(tool.outputSchema) === validated) {
        fail(`call ${tool.name}: ${sdk.label} returned structuredContent without validating it against the outputSchema`);
    }
    if (validate) {
        const v = validate(sc);
        if (!v.valid) fail(`call ${tool.name}: structuredContent does not match outputSchema: ${v.errorMessage}`);
    }
    const texts = (res.content ?? []).filter(c => c.type === 'text');
    if (!texts.length) {
        fail(`call ${tool.name}: no text content`);
    } else if (RENDERED_TEXT[tool.name]) {
        // A compact rendering for a model, carrying the same facts.
        const missing = RENDERED_TEXT[tool.name](sc).filter(fact => !texts[0].text.includes(fact));
        if (missing.length) fail(`call ${tool.name}: text content lacks ${JSON.stringify(missing)} of structuredContent`);
    } else {
        let parsed;
        try {
            parsed = JSON.parse(texts[0].text);
        } catch {
            parsed = undefined;
        }
        if (!isDeepStrictEqual(parsed, sc)) fail(`call ${tool.name}: text content is not the same JSON as structuredContent`);
    }
    log(`called ${tool.name}: ok${sc.status ? ` (status ${sc.status})` : ''}`);
    return sc;
}

function sameSet(what, got, want) {
    const g = new Set(got);
    const w = new Set(want);
    const missing = want.filter(x => !g.has(x));
    const extra = got.filter(x => !w.has(x));
    if (missing.length) fail(`${what}: missing ${missing.join(', ')}`);
    if (extra.length) fail(`${what}: not expected ${extra.join(', ')}`);
}

async function all(fetchPage, key) {
    const items = [];
    let cursor;
    do {
        const page = await fetchPage(cursor ? { cursor } : undefined);
        items.push(...page[key]);
        cursor = page.nextCursor;
    } while (cursor);
    return items;
}

async function checkResources(client) {
    if (!client.getServerCapabilities()?.resources) {
        if (expectResources?.length) fail('the server does not advertise the resources capability');
        return;
    }
    const resources = await all(p => client.listResources(p), 'resources');
    const templates = await all(p => client.listResourceTemplates(p), 'resourceTemplates');
    summary.resources = [...resources.map(r => r.uri), ...templates.map(t => t.uriTemplate)];
    log(`resources: ${summary.resources.join(', ') || '(none)'}`);
    if (expectResources) sameSet('--expect-resources', summary.resources, expectResources);

    const uris = resources.map(r => r.uri);
    // Each template is read once, filled in with the expected server.
    for (const t of templates) {
        if (!opts['expect-server']) continue;
        uris.push(t.uriTemplate.replace(/\{[^}]+\}/g, encodeURIComponent(opts['expect-server'])));
    }
    for (const uri of uris) {
        try {
            const res = await client.readResource({ uri });
            const c = res.contents?.[0];
            if (res.contents?.length !== 1 || c.uri !== uri || c.mimeType !== 'application/json' || typeof c.text !== 'string') {
                fail(`read ${uri}: want one application/json text, got ${JSON.stringify(res).slice(0, 300)}`);
                continue;
            }
            const v = JSON.parse(c.text);
            if (uri.startsWith('gridcity://servers/') && v.name !== opts['expect-server']) fail(`read ${uri}: name is ${JSON.stringify(v.name)}`);
            summary.read.push(uri);
            log(`read ${uri}: ok`);
        } catch (err) {
            fail(`read ${uri}: ${describe(err)}`);
        }
    }
    for (const uri of expectUnreadable) {
        if (summary.resources.includes(uri)) fail(`${uri} is listed; --expect-unreadable says it must not be`);
        try {
            await client.readResource({ uri });
            fail(`read ${uri}: succeeded; --expect-unreadable says it must not`);
        } catch (err) {
            log(`read ${uri}: refused as expected (${describe(err)})`);
        }
    }
}

async function checkPrompts(client) {
    if (!client.getServerCapabilities()?.prompts) {
        if (expectPrompts?.length) fail('the server does not advertise the prompts capability');
        return;
    }
    const prompts = await all(p => client.listPrompts(p), 'prompts');
    summary.prompts = prompts.map(p => p.name);
    log(`prompts: ${summary.prompts.join(', ') || '(none)'}`);
    if (expectPrompts) sameSet('--expect-prompts', summary.prompts, expectPrompts);
    for (const p of prompts) {
        const args = {};
        for (const a of p.arguments ?? []) args[a.name] = opts['expect-server'] ?? 'x';
        try {
            const res = await client.getPrompt({ name: p.name, arguments: args });
            const text = res.messages?.[0]?.content?.text;
            if (typeof text !== 'string' || text.trim() === '') fail(`prompt ${p.name}: no text message`);
            else log(`prompt ${p.name}: ${text.length} characters`);
        } catch (err) {
            fail(`prompt ${p.name}: ${describe(err)}`);
        }
    }
}

async function main() {
    const headers = {
        Authorization: `Bearer ${opts.token}`,
        'X-Agent-Client': opts['client-name']
    };

    // 1. Refusals as a TS client sees them: over HTTP, a wrong or missing token
    // and a foreign Origin; over stdio, a bridge holding a wrong token.
    if (opts.stdio) {
        await bridgeWithWrongToken();
    } else {
        await connectExpectingStatus('wrong token', { ...headers, Authorization: 'Bearer gc_wrong-token-tsclient' }, 401);
        await connectExpectingStatus('no token', { 'X-Agent-Client': opts['client-name'] }, 401);
        await connectExpectingStatus(`Origin ${BAD_ORIGIN}`, { ...headers, Origin: BAD_ORIGIN }, 403);
    }

    // 2. A real session.
    const client = newClient();
    const transport = opts.stdio ? stdioTransport(opts.token, '') : httpTransport(headers);
    try {
        await client.connect(transport);
    } catch (err) {
        fail(`connect over ${summary.transport} failed: ${describe(err)}`);
        finish();
    }
    if (opts.stdio) {
        // A line on stdout that is not a JSON-RPC message surfaces here.
        client.onerror = err => fail(`stdio stream: ${describe(err)}`);
    }
    const info = client.getServerVersion();
    summary.era = sdk.era(client);
    summary.protocolVersion = sdk.protocolVersion(client, transport) ?? null;
    log(`${sdk.label} connected over ${summary.transport} (${summary.era} era, protocol ${summary.protocolVersion}): server ${info?.name} ${info?.version}`);
    if (summary.era !== sdk.wantEra) fail(`${sdk.label}: connected in the ${summary.era} era; want ${sdk.wantEra}`);
    if (!client.getServerCapabilities()?.tools) fail('server does not advertise the tools capability');

    // 3. The tool list, every page of it.
    const tools = await all(p => client.listTools(p), 'tools');
    // v1's listTools() replaces its cache of output validators with each
    // page's tools; re-cache the whole list so callTool validates every tool
    // (v2 walks every page itself and keeps them all).
    if (typeof client.cacheToolMetadata === 'function') client.cacheToolMetadata(tools);
    summary.tools = tools.map(t => t.name);
    log(`tools: ${summary.tools.join(', ') || '(none)'}`);
    if (tools.length === 0) fail('the server lists no tools');
    if (expectTools) sameSet('--expect-tools', summary.tools, expectTools);

    // 4. Every tool: its declaration, then a call — first those without
    // inputs, then those in TOOL_ARGS, in its order.
    const validators = {};
    for (const tool of tools) validators[tool.name] = checkTool(tool, ajv);
    const results = {};
    let validationProven = false;
    const noInput = tools.filter(t => requiredArgs(t).length === 0 && !(t.name in TOOL_ARGS));
    for (const tool of noInput) {
        results[tool.name] = await callAndCheck(client, tool, validators[tool.name], {});
        if (results[tool.name] && !validationProven && tool.annotations?.readOnlyHint === true) {
            await proveSdkValidates(client, tool);
            validationProven = true;
        }
    }
    for (const tool of tools) {
        if (noInput.includes(tool) || tool.name in TOOL_ARGS) continue;
        fail(`tool ${tool.name} requires ${requiredArgs(tool).join(', ')}: add its arguments to TOOL_ARGS in client.mjs, so that it is called`);
    }
    for (const name of Object.keys(TOOL_ARGS)) {
        const tool = tools.find(t => t.name === name);
        if (!tool) continue;
        if (name === 'diagnose' && !opts['expect-server']) {
            fail('diagnose needs a target: give --expect-server');
            continue;
        }
        if ((name === 'run_command' || name === 'wait_for_command') && !opts['run-command']) {
            fail(`${name} is listed: give --run-command so that it is called`);
            continue;
        }
        if (name === 'wait_for_command' && !results.run_command) {
            fail('wait_for_command: run_command gave no requestId to wait for');
            continue;
        }
        let progress = 0;
        const options =
            name === 'run_command'
                ? { onprogress: () => progress++, timeout: 60_000 }
                : { timeout: 60_000 };
        results[name] = await callAndCheck(client, tool, validators[name], TOOL_ARGS[name](results), options);
        if (name === 'run_command') summary.run = { status: results.run_command?.status, progress };
        if (name === 'wait_for_command' && summary.run) summary.run.waitStatus = results.wait_for_command?.status;
    }
    if (summary.called.length && !validationProven) {
        fail('could not prove that the SDK validates structuredContent: no read-only tool was called successfully');
    }
    if (opts['expect-run']) {
        const want = opts['expect-run'];
        if (summary.run?.status !== want || summary.run?.waitStatus !== want) {
            fail(`--expect-run ${want}: run_command gave ${summary.run?.status}, wait_for_command ${summary.run?.waitStatus}`);
        }
    }

    // 5. Tools this token must neither see nor call.
    for (const name of expectRefused) {
        if (summary.tools.includes(name)) fail(`${name} is listed; --expect-refused says it must not be`);
        try {
            const res = await sdk.callTool(client, { name, arguments: {} });
            if (res.isError) {
                summary.refused.push(name);
                log(`call ${name}: refused as expected (isError)`);
            } else {
                fail(`call ${name}: succeeded; --expect-refused says it must not`);
            }
        } catch (err) {
            summary.refused.push(name);
            log(`call ${name}: refused as expected (${describe(err)})`);
        }
    }

    // 6. Resources and prompts.
    await checkResources(client);
    await checkPrompts(client);

    // 7. The agent that the caller started is online.
    if (opts['expect-server']) {
        const want = opts['expect-server'];
        const ls = results.list_servers;
        if (!ls) {
            fail(`--expect-server ${want}: list_servers was not called successfully`);
        } else {
            // The fleet at a glance: one row per server (the others, online
            // with nothing serious, by name only when their rows do not fit).
            const rows = Array.isArray(ls.rows) ? ls.rows : [];
            const others = Array.isArray(ls.others) ? ls.others.map(name => ({ name, status: 'online' })) : [];
            const servers = rows.concat(others);
            const s = servers.find(x => x.name === want);
            if (!s) fail(`--expect-server ${want}: not in list_servers (have: ${servers.map(x => x.name).join(', ') || 'none'})`);
            else if (s.status !== 'online') fail(`--expect-server ${want}: status is ${JSON.stringify(s.status)}, want "online"`);
            else log(`server ${want}: online`);
        }
    }

    if (!opts.stdio && transport.sessionId) {
        // A stateless answer carries no session: nothing may tie a later
        // request to the coordinator that answered this one.
        if (summary.era === 'modern') fail(`the stateless connection was given session ${transport.sessionId}`);
        else await transport.terminateSession().catch(err => log(`note: ending the session: ${describe(err)}`));
    }
    client.onerror = undefined;
    await client.close().catch(() => {});
}

main().then(finish, err => {
    fail(`unexpected error: ${err?.stack ?? err}`);
    finish();
});
