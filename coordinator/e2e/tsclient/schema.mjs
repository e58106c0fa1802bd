// The JSON Schema validator of record for the TypeScript clients: Ajv (pinned
// in package-lock.json) in its draft 2020-12 dialect, the dialect MCP gives a
// schema without "$schema". It is handed to each SDK's Client as its
// jsonSchemaValidator, so that the SDK's own output check in callTool runs on
// it, and it counts the validations per tool so that a caller can prove that
// the SDK did validate; reject() makes the next validations fail, to prove
// that the SDK acts on a failure.

import Ajv2020 from 'ajv/dist/2020.js';

export class PinnedAjv {
    constructor() {
        // strict: a keyword Ajv does not know, or an unknown format, is an
        // error when the schema compiles, not silently ignored.
        this.ajv = new Ajv2020({ strict: true, allErrors: true });
        this.counts = new Map();
        this.rejecting = null;
    }

    // getValidator is the interface both SDKs call: a function from a value to
    // {valid, data, errorMessage}.
    getValidator(schema) {
        const key = JSON.stringify(schema);
        const check = this.ajv.compile(schema);
        return input => {
            this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
            if (this.rejecting) return { valid: false, data: undefined, errorMessage: this.rejecting };
            if (check(input)) return { valid: true, data: input, errorMessage: undefined };
            return { valid: false, data: undefined, errorMessage: this.ajv.errorsText(check.errors) };
        };
    }

    // validations is how many values were checked against this schema so far.
    validations(schema) {
        return this.counts.get(JSON.stringify(schema)) ?? 0;
    }

    // reject makes every validation fail with message until the returned
    // function is called.
    reject(message) {
        this.rejecting = message;
        return () => {
            this.rejecting = null;
        };
    }
}
