'use strict';
// tq: a persistent task queue in one SQLite file (or PostgreSQL), through
// libtq's C ABI. The library is loaded when this package is required: from
// the path in the TQ_LIBRARY environment variable, else the copy inside
// the package (native/libtq.so, in a package packed with it), else the
// system's library search path. See index.d.ts for the whole API.

const native = require('./lib/native');
const errors = require('./lib/errors');
const { Durability, ParentFailure } = require('./lib/options');
const { Queue, open, openSync } = require('./lib/queue');
const { CatchUp } = require('./lib/schedule');
const { State, Task, TaskSnapshot } = require('./lib/task');
const { runWorker } = require('./lib/worker');

module.exports = {
  ...native.CONSTANTS,
  ...Object.fromEntries(Object.entries(errors).filter(([name]) => name.endsWith('Error'))),
  CatchUp,
  Durability,
  ParentFailure,
  Queue,
  State,
  Task,
  TaskSnapshot,
  libraryPath: native.LIBRARY_PATH,
  libraryVersion: () => native.lib.tq_version(),
  open,
  openSync,
  runWorker,
};
