// The uses a project with @types/node makes of Node.js types: a Buffer is a
// payload, and Symbol.dispose is declared by both @types/node and the lib
// index.d.ts refers to. Compiled, never run, by test/typescript.test.js.

import * as tq from '../..';

async function withNodeTypes(queue: tq.Queue): Promise<void> {
  const id: number = await queue.push(Buffer.from('{"a":1}'));
  const ids: number[] = await queue.pushMany([Buffer.from('[1]'), Buffer.alloc(1, '2')]);
  using task = await queue.pull({ signal: AbortSignal.timeout(1000) });
  console.log(id, ids, task?.id, process.pid);
}
