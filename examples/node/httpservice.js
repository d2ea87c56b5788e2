'use strict';
// A small HTTP service that enqueues, with a pool of workers in the same
// process (tq.runWorker), stopped gracefully on SIGINT and SIGTERM.
//
//   node examples/node/httpservice.js [--port 8080] [--db tasks.db] [--workers 4]
//   node examples/node/httpservice.js --selftest   serve on a free port, check
//                                                  the answers through HTTP, exit
//
// POST /tasks stores the request body (one JSON text) as a task and answers
// 201 {"id": N}, or 400 with tq's message; with an Idempotency-Key header, a
// task of that key still pending or running is not stored again, and the
// answer is 200 {"id": N, "duplicate": true}. The workers run each task
// ({"work_ms": 100} takes 100 ms); a task {"fail": "reason"} fails, is
// retried, and is dead after its last attempt. GET /stats answers the
// counts of each state and how many tasks this process processed and
// failed; GET /dead lists the dead tasks with their last error.

const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const tq = require('tq');

const MAX_BODY = 1 << 20;
const MAX_WORK_MS = 10_000;

/** Serves `queue` on `port` with `workers` handlers until `signal` aborts
 * (or SIGINT/SIGTERM); resolves once the server and the workers stopped. */
async function serve(queue, { port, workers, signal, onListening = () => {} }) {
  const recovered = await queue.recover(); // tasks a crashed run left leased
  if (recovered) console.log(`recovered ${recovered} tasks`);
  const stats = { processed: 0, failed: 0 };

  const server = http.createServer((request, response) => {
    handle(queue, stats, request, response).catch((error) => reply(response, 500, { error: error.message }));
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  onListening(server.address().port);

  const stop = new AbortController();
  signal?.addEventListener('abort', () => stop.abort(), { once: true });
  const working = tq.runWorker(
    queue,
    async (task) => {
      const { work_ms: workMs = 0, fail } = task.payload ?? {};
      await sleep(Math.min(Number(workMs) || 0, MAX_WORK_MS));
      if (fail !== undefined) {
        stats.failed++;
        throw new Error(String(fail));
      }
      stats.processed++;
    },
    { concurrency: workers, signal: stop.signal },
  );
  // runWorker resolves on SIGINT, SIGTERM or the signal: then stop serving.
  await working;
  await new Promise((resolve) => server.close(resolve));
}

async function handle(queue, stats, request, response) {
  const { pathname } = new URL(request.url, 'http://localhost');
  if (request.method === 'POST' && pathname === '/tasks') {
    const body = await readBody(request);
    if (body === null) return reply(response, 413, { error: `the body is over ${MAX_BODY} bytes` });
    const key = request.headers['idempotency-key'];
    try {
      if (key === undefined) return reply(response, 201, { id: await queue.push(body) });
      const { id, created } = await queue.pushUnique(body, key);
      return created ? reply(response, 201, { id }) : reply(response, 200, { id, duplicate: true });
    } catch (error) {
      if (error instanceof tq.InvalidJsonError || error instanceof tq.InvalidArgumentError) {
        return reply(response, 400, { error: error.message });
      }
      throw error;
    }
  }
  if (request.method === 'GET' && pathname === '/stats') {
    return reply(response, 200, { ...(await queue.counts()), ...stats });
  }
  if (request.method === 'GET' && pathname === '/dead') {
    const dead = [];
    for await (const task of queue.iterTasks('dead')) {
      dead.push({ id: task.id, payload: task.payload, last_error: task.lastError });
    }
    return reply(response, 200, dead);
  }
  return reply(response, 404, { error: `no route for ${request.method} ${pathname}` });
}

/** The request's body as a Buffer, or null when it is over MAX_BODY. */
async function readBody(request) {
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function reply(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

/** Runs the service on a free port with a queue in a new temporary
 * directory, drives it through HTTP and checks its answers. */
async function selfTest() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-httpservice-'));
  const queue = await tq.open(path.join(dir, 'tasks.db'), { keepHistory: true, maxAttempts: 2, retryBackoff: { min: 0, max: 0 } });
  const stop = new AbortController();
  let base;
  const listening = new Promise((resolve) => {
    base = resolve;
  });
  const serving = serve(queue, { port: 0, workers: 4, signal: stop.signal, onListening: (port) => base(`http://127.0.0.1:${port}`) });
  const url = await listening;
  const call = async (method, route, body, headers = {}) => {
    const response = await fetch(url + route, { method, body, headers });
    return { status: response.status, body: await response.json() };
  };
  const expect = (what, actual, expected) => {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
    }
  };
  try {
    for (let i = 0; i < 20; i++) expect('push', (await call('POST', '/tasks', JSON.stringify({ work_ms: 5, i }))).status, 201);
    for (let i = 0; i < 3; i++) await call('POST', '/tasks', JSON.stringify({ fail: `bad ${i}` }));
    const first = await call('POST', '/tasks', '{"work_ms": 1000}', { 'idempotency-key': 'once' });
    const again = await call('POST', '/tasks', '{"work_ms": 1000}', { 'idempotency-key': 'once' });
    expect('duplicate', again, { status: 200, body: { id: first.body.id, duplicate: true } });
    expect('bad JSON', (await call('POST', '/tasks', 'not json')).status, 400);
    expect('unknown route', (await call('GET', '/nowhere')).status, 404);
    let stats;
    do {
      await sleep(20);
      stats = (await call('GET', '/stats')).body;
    } while (stats.done + stats.dead < 24);
    expect('stats', stats, { pending: 0, leased: 0, done: 21, dead: 3, cancelled: 0, processed: 21, failed: 6 });
    const dead = (await call('GET', '/dead')).body;
    expect('dead', dead.map((task) => task.last_error).sort(), ['Error: bad 0', 'Error: bad 1', 'Error: bad 2']);
    console.log('selftest passed: 21 tasks processed, 3 dead after 2 attempts, a duplicate and bad requests refused');
  } finally {
    stop.abort();
    await serving;
    await queue.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
}

async function main() {
  if (process.argv.includes('--selftest')) return selfTest();
  const queue = await tq.open(option('db', 'tasks.db'));
  try {
    await serve(queue, {
      port: Number(option('port', 8080)),
      workers: Number(option('workers', 4)),
      onListening: (port) => console.log(`listening on http://127.0.0.1:${port}`),
    });
  } finally {
    await queue.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
