// The two lines of the official TypeScript MCP client, behind the few calls
// client.mjs makes, so that one script checks gridcity with both:
//
//   v1  @modelcontextprotocol/sdk (1.x): initialize, a 2025-11-25 session.
//   v2  @modelcontextprotocol/client (2.x), pinned to the stateless revision
//       2026-07-28: no initialize and no session; server/discover once, then
//       every request carries its protocol version and client capabilities in
//       _meta. Pinned, not 'auto': 'auto' falls back to initialize whenever
//       the server's discover answer is not definitive, and would hide a
//       server that advertises 2026-07-28 but cannot serve it.

import { readFileSync } from 'node:fs';

export const STATELESS_VERSION = '2026-07-28';

function version(pkg) {
    const url = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
    return JSON.parse(readFileSync(url, 'utf8')).version;
}

export async function loadSdk(name) {
    if (name === 'v1') {
        const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
        const { StreamableHTTPClientTransport, StreamableHTTPError } = await import(
            '@modelcontextprotocol/sdk/client/streamableHttp.js'
        );
        const { StdioClientTransport, getDefaultEnvironment } = await import('@modelcontextprotocol/sdk/client/stdio.js');
        return {
            name,
            label: `@modelcontextprotocol/sdk ${version('@modelcontextprotocol/sdk')}`,
            wantEra: 'legacy',
            newClient: (info, validator) => new Client(info, { jsonSchemaValidator: validator }),
            httpTransport: (url, headers) => new StreamableHTTPClientTransport(url, { requestInit: { headers } }),
            stdioTransport: params => new StdioClientTransport(params),
            getDefaultEnvironment,
            httpStatus: err => (err instanceof StreamableHTTPError ? err.code : undefined),
            // v1's callTool takes a result schema before the options.
            callTool: (client, params, options) => client.callTool(params, undefined, options),
            era: () => 'legacy',
            protocolVersion: (client, transport) => transport?.protocolVersion
        };
    }
    if (name === 'v2') {
        const { Client, StreamableHTTPClientTransport, SdkHttpError } = await import('@modelcontextprotocol/client');
        const { StdioClientTransport, getDefaultEnvironment } = await import('@modelcontextprotocol/client/stdio');
        return {
            name,
            label: `@modelcontextprotocol/client ${version('@modelcontextprotocol/client')}`,
            wantEra: 'modern',
            newClient: (info, validator) =>
                new Client(info, {
                    jsonSchemaValidator: validator,
                    versionNegotiation: { mode: { pin: STATELESS_VERSION } }
                }),
            httpTransport: (url, headers) => new StreamableHTTPClientTransport(url, { requestInit: { headers } }),
            stdioTransport: params => new StdioClientTransport(params),
            getDefaultEnvironment,
            httpStatus: err => (err instanceof SdkHttpError ? err.status : undefined),
            callTool: (client, params, options) => client.callTool(params, options),
            era: client => client.getProtocolEra(),
            protocolVersion: client => client.getNegotiatedProtocolVersion()
        };
    }
    throw new Error(`unknown SDK ${JSON.stringify(name)}: want v1 or v2`);
}
