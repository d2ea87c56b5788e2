'use strict';
// The binding's declarations against include/tq.h: every function declared
// with the header's types and nothing else, every status known, the same
// constants and version. A change to the header fails here until the
// binding follows it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PACKAGE_DIR, REPOSITORY, tq } = require('./helpers');
const native = require('../lib/native');
const errors = require('../lib/errors');

const HEADER = fs.readFileSync(path.join(REPOSITORY, 'include', 'tq.h'), 'utf8');
const { koffi, lib } = native;

// Where the binding deliberately declares another type than the header's:
// bytes whose length is passed beside them, and JSON texts ending with a
// NUL byte, given as Buffers.
const DELIBERATE = new Map([
  ['tq_push 1', 'const uint8_t *'],
  ['tq_location_redacted 1', 'uint8_t *'],
  ['tq_finish_with_result 2', 'const uint8_t *'],
  ['tq_extend_with_progress 3', 'const uint8_t *'],
  ['tq_step_put 3', 'const uint8_t *'],
  // A string tq hands out, kept as an address for tq_string_free.
  ['tq_step_get 3', 'void **'],
  ['tq_string_free 0', 'void *'],
  ['tq_signal 2', 'const uint8_t *'],
  ['tq_wait_for_event 4', 'void **'],
]);

/** name -> { result, args } (C types as written) for every function of the header. */
function headerFunctions() {
  const functions = new Map();
  const pattern = /^([a-z][\w ]*?[\s*]+)(tq_\w+)\(([^)]*)\);/gm;
  for (const [, result, name, list] of HEADER.matchAll(pattern)) {
    const args = list.trim() === 'void' ? [] : list.split(',').map((arg) => arg.trim().replace(/\w+$/, '').trim());
    functions.set(name, { result: result.trim(), args });
  }
  return functions;
}

/** The koffi type for a C type written as in the header. */
function koffiType(cType) {
  const plain = cType.replace(/\b(struct|const) /g, '').replace('enum tq_status', 'int');
  return koffi.type(plain);
}

/** The type's shape: its name and primitive, down through its pointers. */
function shape(type) {
  const levels = [];
  for (let level = type; level; level = level.ref) levels.push(`${level.primitive}:${level.name.replace(/\bconst /g, '')}`);
  return levels.join(' -> ');
}

const FUNCTIONS = headerFunctions();

test('the header parses into functions', () => {
  assert.ok(FUNCTIONS.size >= 59, `only ${FUNCTIONS.size} functions`);
  assert.deepEqual(FUNCTIONS.get('tq_push').args, [
    'struct tq_queue *',
    'const char *',
    'size_t',
    'const struct tq_push_options *',
    'int64_t *',
  ]);
});

test('every function of the header is declared, and nothing else', () => {
  assert.deepEqual(Object.keys(lib).sort(), [...FUNCTIONS.keys()].sort());
});

test('each function has the header types', () => {
  for (const [name, { result, args }] of FUNCTIONS) {
    const { info } = lib[name];
    assert.equal(shape(info.result), shape(koffiType(result)), `${name}: result`);
    assert.equal(info.arguments.length, args.length, `${name}: argument count`);
    args.forEach((arg, i) => {
      const declared = info.arguments[i];
      const expected = DELIBERATE.get(`${name} ${i}`) ?? arg;
      assert.equal(shape(declared.type), shape(koffiType(expected)), `${name}: argument ${i} (${arg})`);
      // Only a pointer the library writes through may be an output.
      if (declared.direction !== 'Input') {
        assert.ok(arg.endsWith('*') && !arg.startsWith('const'), `${name}: argument ${i} (${arg}) is no output`);
      }
    });
  }
  assert.deepEqual([...DELIBERATE.keys()].filter((key) => !FUNCTIONS.has(key.split(' ')[0])), []);
});

/** The members of `typedef enum name { ... } name;` as { NAME: value }. */
function headerEnum(name) {
  const body = new RegExp(`typedef enum ${name} \\{([\\s\\S]*?)\\} ${name};`).exec(HEADER)[1];
  return Object.fromEntries([...body.matchAll(/^\s*(TQ_\w+) = (-?\d+),/gm)].map(([, key, value]) => [key, Number(value)]));
}

test('every error status has its class, named after it', () => {
  const statuses = headerEnum('tq_status');
  const negative = Object.entries(statuses).filter(([, value]) => value < 0);
  assert.deepEqual(
    negative.map(([, value]) => value).sort(),
    [...errors.BY_STATUS.keys()].sort(),
  );
  for (const [key, value] of negative) {
    // TQ_ERR_NOT_A_DATABASE -> NotADatabaseError, TQ_ERR_INVALID_JSON -> InvalidJsonError.
    const words = key.slice('TQ_ERR_'.length).toLowerCase().split('_');
    const expected = words.map((word) => word[0].toUpperCase() + word.slice(1)).join('') + 'Error';
    assert.equal(errors.BY_STATUS.get(value).name, expected);
    assert.equal(tq[expected], errors.BY_STATUS.get(value));
  }
  assert.deepEqual(
    Object.entries(statuses).filter(([, value]) => value >= 0),
    [
      ['TQ_OK', 0],
      ['TQ_EMPTY', 1],
      ['TQ_DUPLICATE', 2],
      ['TQ_MERGED', 3],
      ['TQ_SUSPENDED', 4],
      ['TQ_TIMEOUT', 5],
    ],
  );
});

test('states, durabilities, parent failures and catch-ups match the header', () => {
  for (const [exported, name, prefix] of [
    [tq.State, 'tq_state', 'TQ_STATE_'],
    [tq.Durability, 'tq_durability', 'TQ_DURABILITY_'],
    [tq.ParentFailure, 'tq_parent_failure', 'TQ_PARENT_FAILURE_'],
    [tq.CatchUp, 'tq_catch_up', 'TQ_CATCH_UP_'],
  ]) {
    const members = Object.fromEntries(Object.entries(headerEnum(name)).map(([key, value]) => [key.slice(prefix.length), value]));
    assert.deepEqual({ ...exported }, members, name);
  }
});

test('the constants and the version match the header', () => {
  for (const [name, value] of Object.entries(native.CONSTANTS)) {
    const match = new RegExp(`^#define TQ_${name} (.+)$`, 'm').exec(HEADER);
    assert.ok(match, `TQ_${name} is not in the header`);
    // The values are integer literals, products of them, as "(64 * 1024)",
    // or INT64_MAX.
    const headerValue =
      match[1] === 'INT64_MAX'
        ? 2n ** 63n - 1n
        : match[1].replace(/[()]/g, '').split('*').reduce((product, factor) => product * Number(factor.trim()), 1);
    assert.equal(value, headerValue, name);
  }
  const defined = [...HEADER.matchAll(/^#define TQ_(\w+) /gm)].map(([, name]) => name).filter((name) => !name.startsWith('VERSION'));
  assert.deepEqual(defined.sort(), Object.keys(native.CONSTANTS).sort());
  const major = Number(/#define TQ_VERSION_MAJOR (\d+)/.exec(HEADER)[1]);
  const minor = Number(/#define TQ_VERSION_MINOR (\d+)/.exec(HEADER)[1]);
  assert.deepEqual(native.ABI_VERSION, [major, minor]);
  assert.equal(native.SONAME, `libtq.so.${major}.${minor}`);
  const version = /#define TQ_VERSION "(.+)"/.exec(HEADER)[1];
  assert.equal(tq.libraryVersion(), version);
  assert.equal(JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'package.json'))).version, version);
});

test('index.d.ts declares every export and every method', () => {
  const declarations = fs.readFileSync(path.join(PACKAGE_DIR, 'index.d.ts'), 'utf8');
  for (const name of Object.keys(tq)) {
    assert.match(declarations, new RegExp(`^export (const|function|class) ${name}\\b`, 'm'), `export ${name}`);
  }
  for (const cls of [tq.Queue, tq.Task, tq.TaskSnapshot]) {
    const members = [];
    for (let proto = cls.prototype; proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      members.push(...Object.getOwnPropertyNames(proto).filter((name) => name !== 'constructor' && !name.startsWith('_')));
    }
    const body = new RegExp(`^export class ${cls.name}\\b[^{]*\\{([\\s\\S]*?)^\\}`, 'm').exec(declarations)[1];
    for (const member of members) {
      assert.match(body, new RegExp(`^  (readonly )?${member}\\b`, 'm'), `${cls.name}.${member}`);
    }
  }
});
