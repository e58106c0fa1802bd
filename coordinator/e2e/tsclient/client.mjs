#!/usr/bin/env node
// End-to-end check of the gridcity MCP endpoint with the official TypeScript
// SDK client (@modelcontextprotocol/sdk). See README.md.
//
//   node client.mjs --endpoint URL --token T --client-name NAME
//                   [--expect-server NAME] [--expect-tools a,b,c] [--timeout SECONDS]
//
// stdout: exactly one JSON line,
//   {"tools":[…],"called":[…],"skipped":[…],"ok":true}            exit 0
//   {"tools":[…],"called":[…],"skipped":[…],"ok":false,"errors":[…]} exit 1 (a check failed)
// exit 2: bad usage. Diagnostics go to stderr, one line each, prefixed "tsclient:".

import { parseArgs, isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
    StreamableHTTPClientTransport,
    StreamableHTTPError
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

const ANNOTATION_HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];
const BAD_ORIGIN = 'http://evil.example';

const summary = { tools: [], called: [], skipped: [], ok: false };
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
    // Exit explicitly: keep-alive sockets must not keep the process (and the
    // Go test that runs it) waiting.
    process.exit(summary.ok ? 0 : 1);
}

function usage(msg) {
    process.stderr.write(
        `tsclient: ${msg}\n` +
            'usage: node client.mjs --endpoint URL --token T --client-name NAME ' +
            '[--expect-server NAME] [--expect-tools a,b,c] [--timeout SECONDS]\n'
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
            'expect-server': { type: 'string' },
            'expect-tools': { type: 'string' },
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
const expectTools = opts['expect-tools']
    ? opts['expect-tools'].split(',').map(s => s.trim()).filter(Boolean)
    : null;

// A hung server must not hang the caller.
setTimeout(() => {
    fail(`gave up after ${timeoutSec}s (--timeout)`);
    finish();
}, timeoutSec * 1000).unref();

function describe(err) {
    if (err instanceof StreamableHTTPError) return `HTTP ${err.code}: ${err.message}`;
    const cause = err?.cause?.code ?? err?.cause?.message;
    return (err?.message ?? String(err)) + (cause ? ` (${cause})` : '');
}

function newClient() {
    // The validator is passed explicitly (it is also the SDK's default) so the
    // structured-output check does not depend on a default changing.
    return new Client(
        { name: opts['client-name'], version: '1.0.0' },
        { jsonSchemaValidator: new AjvJsonSchemaValidator() }
    );
}

function transportFor(headers) {
    return new StreamableHTTPClientTransport(endpoint, { requestInit: { headers } });
}

// connectExpectingStatus connects with the given headers and requires the
// attempt to fail with that HTTP status.
async function connectExpectingStatus(what, headers, status) {
    const client = newClient();
    try {
        await client.connect(transportFor(headers));
    } catch (err) {
        if (err instanceof StreamableHTTPError && err.code === status) {
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

// proveSdkValidates shows that Client.callTool really checks structuredContent:
// it calls a read-only tool again with a cached outputSchema that also requires
// a property no result has, and requires the SDK to throw. The real schemas are
// cached again afterwards.
async function proveSdkValidates(client, tools, tool) {
    const probe = '__tsclient_probe__';
    const tampered = structuredClone(tool);
    tampered.outputSchema.required = [...(tampered.outputSchema.required ?? []), probe];
    client.cacheToolMetadata(tools.map(t => (t.name === tool.name ? tampered : t)));
    try {
        await client.callTool({ name: tool.name, arguments: {} });
        fail(`SDK self-check: callTool(${tool.name}) accepted structuredContent that lacks "${probe}"; the SDK does not validate output`);
    } catch (err) {
        if (String(err?.message).includes("does not match the tool's output schema") && String(err?.message).includes(probe)) {
            log(`SDK self-check: callTool validates structuredContent (a schema requiring "${probe}" was rejected)`);
        } else {
            fail(`SDK self-check: callTool(${tool.name}) failed for another reason: ${describe(err)}`);
        }
    } finally {
        client.cacheToolMetadata(tools);
    }
}

function requiredArgs(tool) {
    const r = tool.inputSchema?.required;
    return Array.isArray(r) ? r : [];
}

async function main() {
    const headers = {
        Authorization: `Bearer ${opts.token}`,
        'X-Agent-Client': opts['client-name']
    };

    // 1. The endpoint refuses a wrong token and a foreign Origin, as a TS client sees it.
    await connectExpectingStatus('wrong token', { ...headers, Authorization: 'Bearer gc_wrong-token-tsclient' }, 401);
    await connectExpectingStatus('no token', { 'X-Agent-Client': opts['client-name'] }, 401);
    await connectExpectingStatus(`Origin ${BAD_ORIGIN}`, { ...headers, Origin: BAD_ORIGIN }, 403);

    // 2. A real session.
    const client = newClient();
    const transport = transportFor(headers);
    try {
        await client.connect(transport);
    } catch (err) {
        fail(`connect to ${endpoint} failed: ${describe(err)}`);
        finish();
    }
    const info = client.getServerVersion();
    log(`connected: server ${info?.name} ${info?.version}, protocol ${transport.protocolVersion}`);
    if (!client.getServerCapabilities()?.tools) fail('server does not advertise the tools capability');

    // 3. The tool list, every page of it.
    const tools = [];
    let cursor;
    do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...page.tools);
        cursor = page.nextCursor;
    } while (cursor);
    // listTools() replaces the SDK's cache of output validators with each
    // page's tools; re-cache the whole list so callTool validates every tool.
    client.cacheToolMetadata(tools);
    summary.tools = tools.map(t => t.name);
    log(`tools: ${summary.tools.join(', ') || '(none)'}`);
    if (tools.length === 0) fail('the server lists no tools');

    if (expectTools) {
        const got = new Set(summary.tools);
        const want = new Set(expectTools);
        const missing = expectTools.filter(t => !got.has(t));
        const extra = summary.tools.filter(t => !want.has(t));
        if (missing.length) fail(`--expect-tools: missing ${missing.join(', ')}`);
        if (extra.length) fail(`--expect-tools: not expected ${extra.join(', ')}`);
    }

    // 4. Each tool's declaration, and a call to each tool that needs no argument.
    const independent = new AjvJsonSchemaValidator();
    const results = {};
    let validationProven = false;
    for (const tool of tools) {
        const validate = checkTool(tool, independent);
        const req = requiredArgs(tool);
        if (req.length) {
            summary.skipped.push(tool.name);
            log(`skipped ${tool.name}: requires ${req.join(', ')}`);
            continue;
        }
        if (tool.outputSchema && typeof client.getToolOutputValidator(tool.name) !== 'function') {
            fail(`tool ${tool.name}: the SDK client has no output validator cached; callTool would not validate`);
        }
        let res;
        try {
            // Client.callTool validates structuredContent against the cached
            // outputSchema and throws McpError when it does not match.
            res = await client.callTool({ name: tool.name, arguments: {} });
        } catch (err) {
            fail(`call ${tool.name}({}): ${describe(err)}`);
            continue;
        }
        summary.called.push(tool.name);
        if (res.isError) {
            fail(`call ${tool.name}({}): isError: ${JSON.stringify(res.content)}`);
            continue;
        }
        const sc = res.structuredContent;
        if (!sc || typeof sc !== 'object') {
            fail(`call ${tool.name}({}): no structuredContent`);
            continue;
        }
        if (validate) {
            const v = validate(sc);
            if (!v.valid) fail(`call ${tool.name}({}): structuredContent does not match outputSchema: ${v.errorMessage}`);
        }
        const texts = (res.content ?? []).filter(c => c.type === 'text');
        if (!texts.length) {
            fail(`call ${tool.name}({}): no text content`);
        } else {
            let parsed;
            try {
                parsed = JSON.parse(texts[0].text);
            } catch {
                parsed = undefined;
            }
            if (!isDeepStrictEqual(parsed, sc)) fail(`call ${tool.name}({}): text content is not the same JSON as structuredContent`);
        }
        results[tool.name] = sc;
        log(`called ${tool.name}: ok`);
        if (!validationProven && tool.annotations?.readOnlyHint === true) {
            await proveSdkValidates(client, tools, tool);
            validationProven = true;
        }
    }
    if (summary.called.length && !validationProven) {
        fail('could not prove that the SDK validates structuredContent: no read-only tool was called successfully');
    }

    // 5. The agent that the caller started is online.
    if (opts['expect-server']) {
        const want = opts['expect-server'];
        const ls = results.list_servers;
        if (!ls) {
            fail(`--expect-server ${want}: list_servers was not called successfully`);
        } else {
            const servers = Array.isArray(ls.servers) ? ls.servers : [];
            const s = servers.find(x => x.name === want) ?? servers.find(x => x.id === want);
            if (!s) fail(`--expect-server ${want}: not in list_servers (have: ${servers.map(x => x.name).join(', ') || 'none'})`);
            else if (s.status !== 'online') fail(`--expect-server ${want}: status is ${JSON.stringify(s.status)}, want "online"`);
            else log(`server ${want}: online`);
        }
    }

    await transport.terminateSession().catch(err => log(`note: ending the session: ${describe(err)}`));
    await client.close().catch(() => {});
}

main().then(finish, err => {
    fail(`unexpected error: ${err?.stack ?? err}`);
    finish();
});
