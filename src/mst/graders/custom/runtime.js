'use strict';
// mst custom JavaScript grader runtime (docs/graders.md), run by mst/graders/custom/js.py as:
//   prlimit ... unshare --net node --experimental-permission --allow-fs-read=<this file> ... runtime.js
// with an empty environment and a fresh temporary cwd. The process boundary (permission model,
// network namespace, heap and address-space limits, wall-clock kill) is what contains a grader;
// the vm context below only decides what a grader can *name*: nothing but ECMAScript built-ins
// (minus clocks, randomness, code generation and shared memory) and frozen copies of its inputs.
//
// stdin:  one header line {"graders":[{"id","script","config","timeoutMs"}], "maxMessageChars"}
//         then the payload: the JSON text of {"session": [...], "lookups": {...}}.
// stdout: one line per grader, in order, as soon as it finishes: {"id": ..., "r": <result>} where
//         <result> is {"value": number|null, "message"?: string} or {"error": string}.
// Nothing a grader produces is ever inspected by code outside its own context: its result is
// serialised to a string inside the context (by functions captured before the grader ran), and
// this file only checks that it received a string of bounded length.

const fs = require('fs');
const util = require('util');
const vm = require('vm');

// Runs inside each fresh context before the grader, as one script (so it is covered by the
// timeout). It takes its inputs from three sandbox slots (primitive strings and the compiled
// grader function, none of them host objects), deletes them, removes the capabilities a grader
// must not have, freezes its inputs and returns the serialised result as a string.
const BOOTSTRAP = `(function () {
  'use strict';
  const g = globalThis;
  const payload = g.__mstPayload, configText = g.__mstConfig, grader = g.__mstGrader;
  const maxMessage = g.__mstMaxMessage;
  delete g.__mstPayload; delete g.__mstConfig; delete g.__mstGrader; delete g.__mstMaxMessage;
  const parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze;
  const isFinite = Number.isFinite, isArray = Array.isArray, StringCtor = String;
  for (const name of ['Date', 'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'Intl', 'WeakRef',
                      'FinalizationRegistry', 'eval', 'Function', 'setTimeout', 'setInterval',
                      'setImmediate', 'queueMicrotask', 'performance', 'console']) {
    delete g[name];
  }
  delete Math.random;
  Object.defineProperty(Error, 'prepareStackTrace', { value: undefined, writable: false, configurable: false });
  // Recursive with for-in: several times faster than a work list over Reflect.ownKeys on large
  // sessions. JSON.parse output has no accessors or cycles; depth is that of the session's JSON.
  const deepFreeze = (v) => {
    freeze(v);
    if (isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const c = v[i];
        if (c !== null && typeof c === 'object') deepFreeze(c);
      }
    } else {
      for (const k in v) {
        const c = v[k];
        if (c !== null && typeof c === 'object') deepFreeze(c);
      }
    }
    return v;
  };
  const describe = (e) => {
    try {
      if (e !== null && typeof e === 'object') {
        const name = typeof e.name === 'string' ? e.name : 'Error';
        const message = typeof e.message === 'string' ? e.message : '';
        return (name + ': ' + message).slice(0, 2000);
      }
      return ('a thrown ' + typeof e + ' (' + StringCtor(e) + ')').slice(0, 2000);
    } catch (_) {
      return 'a thrown value that could not be described';
    }
  };
  // Results are assembled as text from primitives: serialising an object would consult
  // Object.prototype.toJSON, which the grader may have replaced.
  const fail = (message) => '{"error":' + stringify(StringCtor(message)) + '}';
  const ok = (value, message) => '{"value":' + (value === null ? 'null' : StringCtor(value)) +
    (message === undefined ? '' : ',"message":' + stringify(message)) + '}';
  const judge = (r) => {
    if (r === null) return ok(null);
    if (typeof r === 'number') {
      return isFinite(r) ? ok(r) : fail('returned a non-finite number (' + StringCtor(r) + ')');
    }
    if (typeof r !== 'object') {
      return fail('returned ' + (r === undefined ? 'undefined' : 'a ' + typeof r) +
                  '; return a finite number, null, or an object with a finite or null "value"');
    }
    if (typeof r.then === 'function') return fail('returned a Promise; graders must be synchronous');
    const value = r.value;
    if (value !== null && !(typeof value === 'number' && isFinite(value))) {
      return fail('returned an object whose "value" is ' + (value === undefined ? 'missing' :
                  typeof value === 'number' ? 'non-finite (' + StringCtor(value) + ')' : 'a ' + typeof value) +
                  '; it must be a finite number or null');
    }
    const message = r.message;
    if (message === undefined || message === null) return ok(value);
    if (typeof message !== 'string') return fail('returned a "message" that is not a string');
    if (message.length > maxMessage) {
      return fail('returned a message of ' + message.length + ' characters; the limit is ' + maxMessage);
    }
    return ok(value, message);
  };
  try {
    const data = deepFreeze(parse(payload));
    const config = deepFreeze(parse(configText));
    let r;
    try {
      r = grader.call(undefined, data.session, config, data.lookups);
    } catch (e) {
      return fail('threw ' + describe(e));
    }
    return judge(r);
  } catch (e) {
    return fail('failed while checking its result: ' + describe(e));
  }
})()`;

const bootstrap = new vm.Script(BOOTSTRAP, { filename: 'mst-grader-bootstrap' });

function readInput() {
  const data = fs.readFileSync(0);
  const cut = data.indexOf(10);
  return { header: JSON.parse(data.toString('utf8', 0, cut)), payload: data.toString('utf8', cut + 1) };
}

function emit(id, resultJson) {
  process.stdout.write('{"id":' + JSON.stringify(id) + ',"r":' + resultJson + '}\n');
}

function errorJson(message) {
  return JSON.stringify({ error: message });
}

// One grader in one fresh context. The sandbox has a null prototype: a sandbox inheriting from
// the host's Object.prototype would let `this.constructor.constructor` reach the host Function.
function runGrader(grader, payload, maxMessage) {
  const sandbox = Object.create(null);
  const context = vm.createContext(sandbox, {
    name: 'grader:' + grader.id,
    codeGeneration: { strings: false, wasm: false },
    microtaskMode: 'afterEvaluate',
  });
  let fn;
  try {
    fn = vm.compileFunction(grader.script, ['session', 'config', 'lookups'], {
      parsingContext: context,
      filename: 'grader:' + grader.id,
    });
  } catch (e) {
    // Compilation runs no grader code, so the error V8 made is still pristine; read it with care anyway.
    const message = util.types.isNativeError(e) && typeof e.message === 'string' ? e.message : 'could not be compiled';
    return errorJson('script does not compile: ' + message);
  }
  sandbox.__mstPayload = payload;
  sandbox.__mstConfig = JSON.stringify(grader.config);
  sandbox.__mstGrader = fn;
  sandbox.__mstMaxMessage = maxMessage;
  const started = process.hrtime.bigint();
  let out;
  try {
    out = bootstrap.runInContext(context, { timeout: grader.timeoutMs, breakOnSigint: false });
  } catch (e) {
    // Only a host-created error reaches here (the bootstrap catches everything the grader throws);
    // still, the value is not inspected, only the elapsed time, so no grader code runs out here.
    const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
    return errorJson(elapsedMs >= grader.timeoutMs * 0.9
      ? 'timed out after ' + grader.timeoutMs / 1000 + ' s'
      : 'failed in the runtime');
  }
  if (typeof out !== 'string' || out.length > maxMessage * 6 + 200) return errorJson('produced no usable result');
  return out;
}

function main() {
  const { header, payload } = readInput();
  for (const grader of header.graders) {
    emit(grader.id, runGrader(grader, payload, header.maxMessageChars));
  }
}

main();
