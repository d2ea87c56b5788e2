// TypeScript declarations for tq, the Node.js binding of libtq.
//
// They use no Node.js types, so that a project compiles them without
// @types/node: a Buffer is a Uint8Array, and Symbol.dispose and
// Symbol.asyncDispose come from TypeScript's own lib below.

/// <reference lib="esnext.disposable" />
//
// Durations are in milliseconds. Every call that may wait (for the file's
// write lock, a flush of the disk, a PostgreSQL server) returns a promise
// and runs on one of libuv's worker threads, so the event loop keeps
// running; reading a task's fields is synchronous. A Queue holds at most 4
// of those threads at once (2 short calls, 1 waiting pull, 1 wait for
// changes shared by every wait() and watchCancellation()). The `...Sync`
// forms, for scripts, run on the calling thread.

/** The largest payload any queue accepts, in bytes. */
export const MAX_PAYLOAD_LEN: number;
/** The longest queue name, in bytes. */
export const MAX_QUEUE_NAME_LEN: number;
/** The longest unique key, in bytes. */
export const MAX_UNIQUE_KEY_LEN: number;
/** The longest failure reason kept, in bytes; a longer one is cut. */
export const MAX_REASON_LEN: number;
/** How many deliveries a task gets unless its queue or its push says otherwise. */
export const DEFAULT_MAX_ATTEMPTS: number;
/** How many connections a PostgreSQL handle keeps at most by default. */
export const DEFAULT_POOL_SIZE: number;
/** The largest connection pool a handle may have. */
export const MAX_POOL_SIZE: number;
/** The most tasks one task may wait for. */
export const MAX_PARENTS: number;
/** The most tasks of one ordered group delivered at once. */
export const MAX_GROUP_AT_ONCE: number;
/** The longest schedule name, in bytes. */
export const MAX_SCHEDULE_NAME_LEN: number;
/** The longest step name (Task.step), in bytes. */
export const MAX_STEP_NAME_LEN: number;
/** How many ended attempts a snapshot keeps of a task: the newest. */
export const ATTEMPTS_KEPT: number;
export const MAX_EVENT_KEY_LEN: number;
export const MAX_SLEEP_NAME_LEN: number;
/** The most slots a catch-up of each missed slot enqueues in one go. */
export const MAX_CATCH_UP: number;
/** The most claims a rate limit's window may allow. */
export const MAX_RATE_CLAIMS: number;
/** The smallest weight of a fairness key (setFairWeight). */
export const MIN_FAIR_WEIGHT: number;
/** The largest weight of a fairness key (setFairWeight). */
export const MAX_FAIR_WEIGHT: number;
/** The header's TQ_UNTIL_RESUMED (INT64_MAX); pause() and pausedUntil() say Infinity. */
export const UNTIL_RESUMED: bigint;

/** Where the loaded libtq came from: TQ_LIBRARY's path, the package's copy or the SONAME. */
export const libraryPath: string;
/** The loaded libtq's version, such as "0.3.0". */
export function libraryVersion(): string;

/** How far a write must reach before a call returns. */
export const Durability: Readonly<{
  /** Flushed to disk: survives a process crash and a power loss (the default). */
  FULL: 0;
  /** Survives a process crash; a power loss may lose the latest commits. */
  NORMAL: 1;
}>;
export type DurabilityValue = 0 | 1 | 'full' | 'normal';

/** A task's states, for count, list and purge. */
export const State: Readonly<{ PENDING: 0; LEASED: 1; DONE: 2; DEAD: 3; CANCELLED: 4 }>;
export type StateName = 'pending' | 'leased' | 'done' | 'dead' | 'cancelled';
export type StateValue = 0 | 1 | 2 | 3 | 4 | StateName;

/** What a task does when a task it waits for ends dead or cancelled. */
export const ParentFailure: Readonly<{
  /** The task is cancelled, with a reason naming that task, and so in turn
   * are the tasks waiting for it (the default). */
  CANCEL: 0;
  /** The end counts as finished: the task runs anyway. */
  RUN_ANYWAY: 1;
}>;
export type ParentFailureValue = 0 | 1 | 'cancel' | 'runAnyway';

/** What the slots of a schedule that came due while nothing drove it (no
 * process pulled) become when something next does. */
export const CatchUp: Readonly<{
  /** The latest due slot runs if it came due at most a minute ago; the others are skipped. */
  SKIP: 0;
  /** The latest due slot runs, however late: one run for all missed (the default). */
  ONE: 1;
  /** Every due slot runs, the latest `catchUpLimit` of them, in slot order. */
  EACH: 2;
}>;
export type CatchUpName = 'skip' | 'one' | 'each';
export type CatchUpValue = 0 | 1 | 2 | CatchUpName;

/** A payload: a string or bytes (a Buffer or any Uint8Array) of JSON text,
 * taken exactly as given, or any value JSON.stringify serializes. */
export type Payload = string | Uint8Array | number | boolean | null | object;

export interface OpenOptions {
  /** The queue's name in the file (default "default"); a file holds any number. */
  queue?: string;
  /** 'full' (default) or 'normal'. */
  durability?: DurabilityValue;
  /** How long a call waits for other writers before BusyError (default 5000). */
  busyTimeout?: number;
  /** Keep finished tasks as done (default false). */
  keepHistory?: boolean;
  /** How long a task finished here with a result is kept for it when the
   * handle keeps no history, in milliseconds: 1 to one year (default 7
   * days). Later finishes with a result delete the tasks whose time has
   * passed; with keepHistory a result stays with its done task until purge. */
  resultRetention?: number;
  /** The largest payload this handle pushes, in bytes. */
  maxPayloadLen?: number;
  /** Deliveries a task pushed here gets before a failure makes it dead (default 25). */
  maxAttempts?: number;
  /** Pauses before a failed task is retried: `min` after the first failure,
   * doubling up to `max`, with jitter (default 1000 and 3600000). */
  retryBackoff?: { min: number; max: number };
  /** PostgreSQL only: connections the handle keeps at most (1 to MAX_POOL_SIZE, default 4). */
  poolSize?: number;
  /** PostgreSQL only: the schema holding tq's tables (default "tq"). */
  postgresSchema?: string;
}

export interface PushOptions {
  /** Ready `delay` milliseconds after the push (not with runAt). */
  delay?: number;
  /** Ready at this time (a Date or milliseconds since the epoch; not with delay). */
  runAt?: Date | number;
  /** The task's first delivery never starts once this many milliseconds
   * have passed since the push: a pull ends it as dead ("expired") instead
   * (not with expireAt). */
  expireAfter?: number;
  /** As expireAfter, at this time (a Date or milliseconds since the epoch). */
  expireAt?: Date | number;
  /** No delivery, first or retry, starts once this many milliseconds have
   * passed since the push: a pull ends it as dead ("deadline passed"), and
   * a failure whose retry would fall after it ends it so at once; a
   * delivery running then runs to its end (not with deadlineAt). */
  deadlineAfter?: number;
  /** As deadlineAfter, at this time (a Date or milliseconds since the epoch). */
  deadlineAt?: Date | number;
  /** Any 32-bit integer, default 0; higher is claimed first. */
  priority?: number;
  /** Deliveries before a failure makes it dead, instead of the queue's default. */
  maxAttempts?: number;
  /** While a task of the queue holding the key is pending or leased, nothing
   * is stored and that task's id is returned (pushUnique tells the cases apart). */
  uniqueKey?: string;
  /** Keeps the key reserved this many milliseconds after the task is done. */
  uniqueFor?: number;
  /** With uniqueKey: a pending task holding the key (ready, delayed, waiting
   * for a retry or for other tasks, not being delivered) takes this push's
   * payload, and its id is returned. A task being delivered is never
   * changed. Not with after or group. */
  replacePending?: boolean;
  /** With uniqueKey: a pending holder's run time moves to this push's own
   * (now plus delay, or runAt), but never later than this many milliseconds
   * after the holder was first pushed. Not with after or group. */
  debounce?: number;
  /** Ids of tasks of this queue the task waits for: it is stored blocked
   * (counted and listed as pending, never pulled) until each is done. Each
   * must be stored at the push: not yet finished, or kept as history; else
   * the push throws InvalidArgumentError and stores nothing. At most
   * MAX_PARENTS in all. */
  after?: readonly number[];
  /** What the task does when a task it waits for ends dead or cancelled
   * (default 'cancel': it is cancelled too). */
  onParentFailure?: ParentFailureValue;
  /** The ordered group of the queue the task belongs to (1 to
   * MAX_UNIQUE_KEY_LEN bytes): the group's tasks are delivered at most
   * `groupMax` at a time, in push order for 1, while other groups proceed.
   * The task waits for the `groupMax`-th most recent unfinished task of the
   * group, if any (in `waitingFor` while blocked, not in `parents`); that
   * task ending in any way lets it run. */
  group?: string;
  /** How many tasks of `group` run at once: 1 (the default) to MAX_GROUP_AT_ONCE. */
  groupMax?: number;
  /** When the queue is at its cap on pending tasks (setMaxPending), wait up
   * to this many milliseconds for room instead of rejecting with FullError
   * at once. */
  waitForRoom?: number;
  /** The task's fairness key (1 to MAX_UNIQUE_KEY_LEN bytes), a tenant say:
   * once a queue has one, its pulls share their deliveries between the keys
   * with ready tasks in proportion to their weights (setFairWeight, default
   * 1); tasks without one share the key ''. SQLite only. */
  fairKey?: string;
}

/** pushMany's options apply to every task; a group's tasks of one call wait
 * for each other in order. */
export type PushManyOptions = Omit<PushOptions, 'uniqueKey' | 'uniqueFor' | 'replacePending' | 'debounce'>;

/** One task of pushItems: its payload and its own push options. */
export interface PushItem extends PushOptions {
  payload: Payload;
  /** Indexes of earlier items of the same call the task waits for, as
   * `after` does for stored tasks. */
  afterItems?: readonly number[];
}

export interface ScheduleOptions {
  /** A cron expression: five fields (minute, hour, day of month, month, day
   * of week) or six (seconds first), or an alias such as "@daily", read in
   * `timeZone`. Give cron or every (null counts as not given). */
  cron?: string | null;
  /** An interval in milliseconds (1 ms to 366 days); the first slot is one
   * interval after the schedule is added. */
  every?: number | null;
  /** The IANA time zone the cron expression is read in (default "UTC");
   * an interval takes no other. */
  timeZone?: string;
  /** The priority of the schedule's tasks (default 0). */
  priority?: number;
  /** Deliveries each of its tasks gets (at least 1; default the queue's). */
  maxAttempts?: number;
  /** What slots missed while nothing drove the schedule become (default 'one'). */
  catchUp?: CatchUpValue;
  /** For catchUp 'each', the most slots run at once: 1 to 10,000 (default 1). */
  catchUpLimit?: number;
}

/** A schedule of the queue, as schedules() lists it. */
export interface Schedule {
  name: string;
  /** The cron expression, or null for an interval. */
  cron: string | null;
  /** The interval in milliseconds, or null for a cron expression. */
  every: number | null;
  timeZone: string;
  /** The payload's JSON text, exactly as given. */
  raw: string;
  /** The payload parsed from JSON. */
  payload: any;
  priority: number;
  maxAttempts: number;
  catchUp: CatchUpName;
  /** The most slots catchUp 'each' runs at once (1 for the others). */
  catchUpLimit: number;
  paused: boolean;
  /** Its next slot not yet enqueued (on PostgreSQL, on the server's clock). */
  nextSlot: Date;
}

export interface PullOptions {
  /** How long to wait for a task when none is ready, in milliseconds
   * (default 0; Infinity waits until one comes). A push from any process
   * ends the wait at once. */
  wait?: number;
  /** How long the task is reserved for this worker (default 30000). */
  lease?: number;
  /** Ends the wait: the pull rejects with the signal's reason (a task
   * already claimed is still returned). */
  signal?: AbortSignal;
}

export interface TasksOptions extends PullOptions {
  /** How long to wait for each task (default Infinity): the loop ends when none came in that time. */
  wait?: number;
}

/** The fields of a pulled task and of a listed snapshot, all read-only and
 * readable after the delivery ended or the queue was closed. */
export interface TaskFields {
  /** The id push returned. */
  readonly id: number;
  /** The payload's JSON text, exactly as pushed. */
  readonly raw: string;
  /** The payload parsed from JSON (on first use). */
  readonly payload: any;
  /** How many times the task was claimed, this delivery included (1 on the first). */
  readonly attempts: number;
  readonly priority: number;
  readonly maxAttempts: number;
  /** When the task became (or becomes) ready. */
  readonly runAt: Date;
  /** For a snapshot, its expiry (expireAfter), or null: none, or a pulled task. */
  readonly expiresAt: Date | null;
  /** For a snapshot, its deadline (deadlineAfter), or null: none, or a pulled task. */
  readonly deadline: Date | null;
  /** Why the previous delivery ended (a fail reason, or the library's words
   * for a lost lease or a dead holder), or null. */
  readonly lastError: string | null;
  /** 'leased' for a pulled task; the listed state for a snapshot. */
  readonly state: StateName;
  /** For a pulled task, the ids of the tasks it was pushed to wait for
   * (`after`), ascending: each has ended. Empty for a snapshot. */
  readonly parents: readonly number[];
  /** For a snapshot, the ids of the tasks it still waits for, ascending:
   * empty unless it is pending and blocked. Empty for a pulled task. */
  readonly waitingFor: readonly number[];
  /** For a snapshot, the ordered group it was pushed to, or null. Null for a pulled task. */
  readonly group: string | null;
}

/**
 * One delivery of a task. End it with finish(), fail() or finishAndPull();
 * keep a long task's lease with extend(). Once the delivery ended, the
 * library's copy is freed and further calls throw NotHeldError; after
 * close() (or close() of its queue) they throw ClosedError. A task dropped
 * without finishing is freed by the garbage collector and claimed again
 * when its lease runs out.
 */
export class Task implements TaskFields {
  private constructor();
  readonly id: number;
  /** The token of this delivery: with `id`, it finishes the task in SQL,
   * `SELECT tq_finish(id, token)` through tq's SQLite extension, in the
   * same commit as the worker's own writes. */
  readonly token: bigint;
  readonly raw: string;
  readonly payload: any;
  readonly attempts: number;
  readonly priority: number;
  readonly maxAttempts: number;
  readonly runAt: Date;
  readonly expiresAt: Date | null;
  readonly deadline: Date | null;
  readonly lastError: string | null;
  readonly state: StateName;
  readonly parents: readonly number[];
  readonly waitingFor: readonly number[];
  readonly group: string | null;
  /** True once the delivery ended: finished, failed, lost or closed. */
  readonly closed: boolean;
  /** Completes this delivery: the task is deleted (or kept as done with
   * keepHistory). Throws NotHeldError when the delivery is no longer current.
   * `result` (a Payload: a string or bytes are JSON text as given, null is
   * JSON null) is kept with the task for any process to read (Queue.task)
   * or wait for (Queue.wait): without keepHistory for the queue's
   * resultRetention. A bad result (InvalidJsonError, InvalidArgumentError:
   * not UTF-8, over the payload limit) changes nothing: the task is still held. */
  finish(options?: { result?: Payload }): Promise<void>;
  /** finish() without a result, on the calling thread, for scripts: the
   * event loop waits for the commit (and the file's write lock). */
  finishSync(): void;
  /** Ends this delivery as failed, keeping `reason` (an Error is kept as
   * "Name: message") as the task's lastError: pending again after the
   * queue's back-off, or dead after its last attempt. */
  fail(reason?: string | Error): Promise<void>;
  /** Renews the lease: it now expires `lease` milliseconds from now.
   * Throws NotHeldError when the lease was lost, CancelledError when the
   * task was cancelled: stop working on the task. `progress` (a Payload,
   * refused as finish's result is) is recorded with the task for anyone to
   * read (Queue.task) until the next progress replaces it, a later
   * delivery's included. */
  extend(lease: number, options?: { progress?: Payload }): Promise<void>;
  /** Hands this delivery back: the task runs again `delay` milliseconds
   * from now (default 0); this delivery does not count as an attempt. */
  snooze(delay?: number): Promise<void>;
  /** Runs step `name` of this task once across its deliveries: resolves to
   * the output an earlier delivery recorded, without calling `fn`;
   * otherwise awaits `fn()` and records what it returns (a Payload) with
   * the task in one commit, then resolves to it, parsed. A rejection of
   * `fn` records nothing. The first output recorded is kept. Rejects with
   * NotHeldError when the delivery is no longer current. */
  step(name: string, fn: () => Payload | Promise<Payload>): Promise<any>;
  /** Waits up to `timeout` milliseconds for an event under `key`
   * (Queue.signal) and resolves to its payload, parsed. A kept event is
   * taken at once; otherwise the task is handed back to wait (no attempt
   * spent, steps kept) and the call rejects with SuspendedError: let it
   * leave the handler. The next delivery's same call resolves to the
   * payload or rejects with EventTimeoutError. */
  waitFor(key: string, options: { timeout: number }): Promise<any>;
  /** Sleeps the task for `duration` milliseconds from the first call of the
   * sleep `name`, as sleepUntil does. */
  sleep(name: string, duration: number): Promise<void>;
  /** Sleeps the task until `when`, durably: before the end recorded by the
   * first call, the task is handed back until then and the call rejects
   * with SuspendedError; once it has passed, resolves at once. */
  sleepUntil(name: string, when: Date | number): Promise<void>;
  /** Finishes this delivery and claims the next ready task in the same
   * transaction (one commit instead of two); null when none is ready. Never waits. */
  finishAndPull(options?: { lease?: number }): Promise<Task | null>;
  /** Resolves to 'cancelled' as soon as this task's cancellation is
   * recorded (Queue.cancelTask, from any process), without polling; to
   * 'ended' once the delivery is over. Rejects with the signal's reason
   * when `signal` aborts, ClosedError when the queue closes; a task that
   * cannot be read for now (BusyError, IoError) is read again after a
   * short wait. Holds one of libuv's worker threads while it waits; one
   * watch per task at a time. */
  watchCancellation(options?: { signal?: AbortSignal }): Promise<'cancelled' | 'ended'>;
  /** Frees the delivery without finishing the task. Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

/** A task as Queue.list, Queue.task or Queue.wait read it: not held, so it
 * cannot be finished. */
/** A step of a task as a snapshot lists it. */
export interface StepRecord {
  readonly name: string;
  /** The output parsed from JSON. */
  readonly output: any;
  /** The JSON text recorded, exactly as given. */
  readonly rawOutput: string;
  readonly recordedAt: Date;
}

/** A delivery that ended without finishing its task, as a snapshot lists it. */
export interface AttemptRecord {
  /** Which delivery it was: 1 for the first (again from 1 after a retry of the dead). */
  readonly attempt: number;
  readonly outcome: 'failed' | 'lease expired' | 'holder died' | 'cancelled';
  readonly reason: string | null;
  /** Its holder's id and process id, null when unknown (the pid on SQLite only). */
  readonly holderId: number | null;
  readonly holderPid: number | null;
  /** When it was claimed, null when unknown; when it ended. */
  readonly startedAt: Date | null;
  readonly endedAt: Date;
}

export class TaskSnapshot implements TaskFields {
  /** The steps its deliveries recorded (Task.step), in recording order, as
   * Queue.task or Queue.wait read them; none in a list. */
  readonly steps: readonly StepRecord[];
  /** Its deliveries that ended without finishing it, oldest first: the
   * newest ATTEMPTS_KEPT, as Queue.task or Queue.wait read them; none in a list. */
  readonly endedAttempts: readonly AttemptRecord[];
  private constructor();
  readonly id: number;
  readonly raw: string;
  readonly payload: any;
  readonly attempts: number;
  readonly priority: number;
  readonly maxAttempts: number;
  readonly runAt: Date;
  readonly expiresAt: Date | null;
  readonly deadline: Date | null;
  readonly lastError: string | null;
  readonly state: StateName;
  readonly parents: readonly number[];
  readonly waitingFor: readonly number[];
  readonly group: string | null;
  /** The JSON text the task was finished with (Task.finish's result),
   * exactly as given, or null when it has none. */
  readonly rawResult: string | null;
  /** The result parsed from JSON, or undefined when it has none. */
  readonly result: any;
  /** The JSON text its holder last recorded (Task.extend's progress), in
   * this delivery or an earlier one, or null. */
  readonly rawProgress: string | null;
  /** The progress parsed from JSON, or undefined when none was recorded. */
  readonly progress: any;
}

export interface WaitOptions {
  /** How long to wait for the task to end, in milliseconds (default
   * Infinity; 0 only looks). */
  timeout?: number;
  /** Ends the wait: the promise rejects with the signal's reason at once. */
  signal?: AbortSignal;
}

/**
 * A named queue in one SQLite file, or in a PostgreSQL database when the
 * location is a postgres:// or postgresql:// URL. Several processes and
 * worker threads may open the same file, each with its own Queue.
 */
export class Queue {
  /** Not for direct use: open a queue with `await open(location, options)`
   * (or openSync in a script). */
  private constructor();
  /** The queue's name in its file. */
  readonly name: string;
  /** The location as messages show it (a URL without its password). */
  readonly location: string;
  /** True once close() was called. */
  readonly closed: boolean;
  /** Closes: waiting pulls and waits reject with ClosedError, as do calls
   * not yet started, and the handle is freed once the calls in progress
   * returned; resolves then. Idempotent. Later calls reject with
   * ClosedError; pulled tasks stay readable and can be closed. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;

  /** Stores a task; resolves to its id once stored at the queue's
   * durability. Rejects with InvalidJsonError, InvalidArgumentError,
   * BusyError, IoError. */
  push(payload: Payload, options?: PushOptions): Promise<number>;
  /** push() on the calling thread, for scripts: the event loop waits for
   * the commit (and for the file's write lock, up to the busy timeout). */
  pushSync(payload: Payload, options?: PushOptions): number;
  /** Pushes with a unique key; `created` is false when a task of the queue
   * already held the key, nothing was stored, and `id` is that task's;
   * `merged` is true when that task was pending and took this push
   * (replacePending, debounce). */
  pushUnique(
    payload: Payload,
    uniqueKey: string,
    options?: Omit<PushOptions, 'uniqueKey'>,
  ): Promise<{ id: number; created: boolean; merged: boolean }>;
  /** Stores every payload in one transaction, all or none; resolves to the
   * ids. The position of a payload that is not JSON, or cannot be encoded,
   * is in the error's `index`. */
  pushMany(payloads: Iterable<Payload>, options?: PushManyOptions): Promise<number[]>;
  /** Stores each item as push would, in order, in one transaction, all or
   * none, and returns their ids (for an item whose unique key a task holds,
   * that task's). An item may wait for earlier items of the same call
   * (`afterItems`), so that a graph of tasks is stored whole. The position
   * of an item whose payload is not JSON, or whose options are refused
   * before the call, is in the error's `index` (and its message). */
  pushItems(items: Iterable<PushItem>): Promise<number[]>;

  /** Claims the ready task first in line (highest priority, then ready
   * longest), waiting up to `wait` for one; null when none came. Rejects
   * with the signal's reason on abort, ClosedError on close(),
   * InterruptedError after interrupt(). */
  pull(options?: PullOptions): Promise<Task | null>;
  /** Claims a ready task on the calling thread, for scripts, or returns
   * null; never waits for one (the event loop waits for the commit). */
  pullSync(options?: { lease?: number }): Task | null;
  /** Claims up to `n` ready tasks in one transaction; empty when none came within `wait`. */
  pullMany(n: number, options?: PullOptions): Promise<Task[]>;
  /** Every task as it becomes ready, for `for await`; ends when none came
   * within `wait`, on abort, or when the queue is closed. */
  tasks(options?: TasksOptions): AsyncGenerator<Task, void, undefined>;
  /** Finishes many tasks in one transaction: true for each finished, false
   * for each whose delivery was no longer current. */
  finishMany(tasks: Iterable<Task>): Promise<boolean[]>;
  /** Finishes `tasks` as finishMany does and claims up to `n` ready tasks
   * as pullMany does, in one transaction (one commit): `[finished,
   * claimed]`. Never waits: when `claimed` is empty, wait with pull(). */
  finishAndPullMany(tasks: Iterable<Task>, n: number, options?: { lease?: number }): Promise<[boolean[], Task[]]>;
  /** Ends the wait of every pull, wait() and watchCancellation() on this
   * handle with InterruptedError, now and from then on. Never waits. */
  interrupt(): void;

  /** Takes back the tasks of expired leases and of dead holder processes;
   * returns how many. Safe at every start-up. */
  recover(): Promise<number>;
  /** How many tasks of this queue are in `state` (default 'pending'). */
  count(state?: StateValue): Promise<number>;
  /** The number of tasks in each state. */
  counts(): Promise<Record<StateName, number>>;
  /** How long the task ready longest has waited, in milliseconds, or null when none is ready. */
  oldestReadyAge(): Promise<number | null>;
  /** How many ordered groups of this queue have tasks waiting for their
   * turn behind the group's earlier tasks; those tasks count as pending. */
  groupsWaiting(): Promise<number>;
  /** Task `id` of this queue as it is now, with its result and progress;
   * null when the queue has no such task (never pushed, or ended and not
   * kept: finish it with a result, or keep history). */
  task(id: number): Promise<TaskSnapshot | null>;
  /** Resolves to task `id` as it ended: 'done' with its result, 'dead' or
   * 'cancelled' with its lastError; at once when it has ended already, null
   * when `timeout` passed first. Only reads: it wakes when the task ends
   * through this process or, through another, by a write that wakes
   * waiting pulls. Rejects with InvalidArgumentError for a task the queue
   * does not have or that ended without being kept, ClosedError when the
   * queue is closed, InterruptedError after interrupt(), or the signal's
   * reason. Every wait() and watchCancellation() of a Queue share one of
   * libuv's worker threads, however many there are. */
  wait(id: number, options?: WaitOptions): Promise<TaskSnapshot | null>;
  /** A page of this queue's tasks in `state`, with ids above `afterId`, by id. */
  list(state?: StateValue, options?: { afterId?: number; limit?: number }): Promise<TaskSnapshot[]>;
  /** Every task of this queue in `state`, by id, read a page at a time. */
  iterTasks(state?: StateValue, options?: { pageSize?: number }): AsyncGenerator<TaskSnapshot, void, undefined>;
  /** Makes the dead task `id` pending again, with all its attempts ahead of it. */
  retryDead(id: number): Promise<void>;
  /** Makes every dead task pending again; returns how many. */
  retryAllDead(): Promise<number>;
  /** Deletes the steps of task `id` recorded after its step `name`, so that
   * its next delivery runs them again; resolves to how many. Rejects with
   * InvalidArgumentError, changing nothing, for a task not in the queue,
   * one a worker holds, or one without a step `name`. */
  clearStepsAfter(id: number, name: string): Promise<number>;
  /** Sends an event under `key`: resolves to the id of the waiting task
   * that took it, or null when it was kept (for `retention` ms, 7 days by
   * default) for the first task that waits. */
  signal(key: string, payload: Payload, options?: { retention?: number }): Promise<number | null>;
  /** Deletes tasks in `state` ('done' by default, 'dead' or 'cancelled') at least
   * `olderThan` milliseconds old (0: all); returns how many. */
  purge(options?: { state?: StateValue; olderThan?: number }): Promise<number>;
  /** Checkpoints the write-ahead log; returns its size afterwards in bytes.
   * SQLite only. */
  checkpoint(): Promise<number>;
  /** The write-ahead log's size in bytes. SQLite only. */
  walSize(): Promise<number>;

  /** Cancels task `id`, keeping `reason` as its last error: 'cancelled'
   * when it left the line at once (pending, delayed or dead), 'leased' when
   * its holder learns of it at its next call on the delivery, which throws
   * CancelledError. Throws InvalidArgumentError for no such task or a done one. */
  cancelTask(id: number, reason?: string | Error): Promise<'cancelled' | 'leased'>;
  /** Pauses this queue for every process until resume() or `until` (a Date
   * or milliseconds since the epoch, in the future; default Infinity: no
   * end). Pulls find nothing meanwhile; waiting pulls keep waiting. */
  pause(until?: Date | number): Promise<void>;
  /** Ends the pause, if any, and wakes the waiting pulls in every process. */
  resume(): Promise<void>;
  /** When the pause ends: a Date, Infinity for no end, or null when not paused. */
  pausedUntil(): Promise<Date | number | null>;
  /** Limits this queue to `limit` tasks leased at once across every process
   * (at least 1); null removes the limit. */
  setConcurrencyLimit(limit: number | null): Promise<void>;
  /** The concurrency limit, or null when there is none. */
  concurrencyLimit(): Promise<number | null>;
  /** Caps this queue at `cap` pending tasks (ready, delayed, waiting; not
   * leased) across every process; null or 0 removes the cap. A push beyond
   * it stores nothing and rejects with FullError. */
  setMaxPending(cap: number | null): Promise<void>;
  /** The cap on pending tasks, or null when there is none. */
  maxPending(): Promise<number | null>;
  /** Sets the weight of fairness key `key` ('': the tasks pushed without
   * one), 0.001 to 1,000,000, default 1. SQLite only. */
  /** Caps each fairness key at `cap` pending tasks unless it has its own (null removes it; SQLite only). */
  setMaxPendingPerKey(cap: number | null): Promise<void>;
  maxPendingPerKey(): Promise<number | null>;
  /** Caps fairness key `key` at `cap` pending tasks in place of the default (null removes it). */
  setKeyMaxPending(key: string, cap: number | null): Promise<void>;
  /** The cap in force for fairness key `key`, or null. */
  keyMaxPending(key: string): Promise<number | null>;
  setFairWeight(key: string, weight: number): Promise<void>;
  /** The weight of fairness key `key`: 1 unless one was set. */
  fairWeight(key: string): Promise<number>;
  /** Allows at most `claims` deliveries in any window of `perMs`
   * milliseconds, across every process; `null` removes the limit. */
  setRateLimit(claims: number | null, perMs?: number): Promise<void>;
  /** The rate limit, or null when there is none. */
  rateLimit(): Promise<{ claims: number; perMs: number } | null>;

  /** Adds to this queue the schedule `name` (1 to 200 bytes), which
   * enqueues a task of `payload` (taken as push takes it) at every slot of
   * `cron` or `every`, the first one after now. Each slot is enqueued
   * exactly once however many processes drive the queue's schedules, as a
   * task with the unique key "schedule:<name>:<slot ms>" due at the slot:
   * pulls drive them by themselves (a waiting pull wakes at the next slot),
   * and so does runDueSchedules. Throws InvalidArgumentError (a name the
   * queue has, a bad cron expression or time zone, named in the message),
   * InvalidJsonError, BusyError, IoError; on any error nothing is stored. */
  addSchedule(name: string, payload: Payload, options: ScheduleOptions): Promise<void>;
  /** As addSchedule, overwriting a schedule of the same name: its next slot
   * is computed afresh and it is no longer paused. A slot enqueued before is
   * not enqueued again. */
  replaceSchedule(name: string, payload: Payload, options: ScheduleOptions): Promise<void>;
  /** Declares a schedule, as an application does at every start: as
   * addSchedule, or an update of the schedule of the same name that keeps
   * its next slot while its timing (cron or every, time zone, catch-up) is
   * unchanged. A changed timing's next slot is computed afresh; a paused
   * schedule stays paused. */
  upsertSchedule(name: string, payload: Payload, options: ScheduleOptions): Promise<void>;
  /** This queue's schedules, by name. */
  schedules(): Promise<Schedule[]>;
  /** Deletes the schedule `name` (the tasks it enqueued stay);
   * InvalidArgumentError when there is none. */
  removeSchedule(name: string): Promise<void>;
  /** Pauses the schedule `name`: its slots are skipped until resumeSchedule. */
  pauseSchedule(name: string): Promise<void>;
  /** Resumes the schedule `name` from its first slot from now on (slots that
   * fell while it was paused are skipped). */
  resumeSchedule(name: string): Promise<void>;
  /** Enqueues the task of every due slot of this queue's schedules and
   * returns how many it stored; safe from any number of processes at once.
   * Pulls do this by themselves: call it where nothing pulls. */
  runDueSchedules(): Promise<number>;
}

/** Opens (creating if needed) a queue, on one of libuv's worker threads (an
 * open may wait for the file's lock, run a migration or connect to a
 * server). Rejects with IoError, NotADatabaseError, InvalidArgumentError or
 * BusyError when it cannot be opened as a queue. */
export function open(location: string, options?: OpenOptions): Promise<Queue>;
/** open() on the calling thread, for scripts: the event loop waits meanwhile. */
export function openSync(location: string, options?: OpenOptions): Queue;

export interface WorkerOptions {
  /** How many handlers run at once (default 4). */
  concurrency?: number;
  /** Each task's lease (default 30000). */
  lease?: number;
  /** How often a running handler's lease is renewed (default lease / 3). */
  heartbeat?: number;
  /** Stops the worker when aborted. */
  signal?: AbortSignal;
  /** Stop on SIGINT and SIGTERM (default true). */
  stopOnSignals?: boolean;
  /** Called when finishing, failing or extending a task fails (default:
   * console.error): a lost lease, a cancelled task, a busy file; and with
   * task null when a pull is refused for a while (BusyError, IoError: a
   * busy file, a PostgreSQL server restarting), which is tried again after
   * 50 ms, doubling to 2 s. An onError that throws is reported with
   * process.emitWarning (a 'TqWarning' whose cause is what it threw); the
   * worker goes on. */
  onError?: (error: Error, task: Task | null) => void;
}

/**
 * Runs `handler` on the queue's tasks, `concurrency` at a time, renewing
 * each task's lease while its handler's promise is pending. One commit
 * finishes the tasks of the handlers that resolved and claims for every
 * free handler (finishAndPullMany); it never holds more tasks than
 * handlers. A handler that
 * resolves finishes its task; one that throws fails it. The handler's
 * `signal` aborts (with the error) when a renewal finds the delivery lost
 * or the task cancelled: stop working then. On SIGINT, SIGTERM or
 * `signal`, takes no new task, lets the running handlers end, and resolves
 * with the counts (`lost`: deliveries that could not be finished or failed).
 * Does not close the queue.
 */
export function runWorker(
  queue: Queue,
  handler: (task: Task, context: { signal: AbortSignal }) => unknown | Promise<unknown>,
  options?: WorkerOptions,
): Promise<{ finished: number; failed: number; lost: number }>;

/** A tq call failed; `status` is the C status (negative). A failed `...Sync`
 * call carries the library's message; a call run on a worker thread
 * carries the call's name and the status's description (the library keeps
 * its message on the thread that made the call). */
/** Task.waitFor or Task.sleep handed the task back to wait: its delivery
 * is over. Not a failure: Queue.work neither finishes nor fails it. */
export class SuspendedError extends Error {}
/** Task.waitFor's wait timed out before an event came. */
export class EventTimeoutError extends Error {}
export class TqError extends Error {
  readonly status: number;
  /** pushMany and pushItems: the position of the payload or item that failed the call. */
  index?: number;
}
/** TQ_ERR_INVALID_ARGUMENT */
export class InvalidArgumentError extends TqError {}
/** A Queue or Task used after close(), or a pull waiting when its queue closed. */
export class ClosedError extends InvalidArgumentError {}
/** TQ_ERR_INVALID_JSON: nothing was stored. */
export class InvalidJsonError extends TqError {}
/** TQ_ERR_NOT_HELD: the delivery is no longer current. */
export class NotHeldError extends TqError {}
/** TQ_ERR_BUSY: locked by other writers past the busy timeout; may be tried again. */
export class BusyError extends TqError {}
/** TQ_ERR_IO: the operating system refused. */
export class IoError extends TqError {}
/** TQ_ERR_NOT_A_DATABASE: not SQLite, corrupt, or a newer tq schema; left untouched. */
export class NotADatabaseError extends TqError {}
/** TQ_ERR_INTERNAL: a bug in tq; the queue remains usable. */
export class InternalError extends TqError {}
/** TQ_ERR_INTERRUPTED: a wait ended by interrupt(). */
export class InterruptedError extends TqError {}
/** TQ_ERR_UNKNOWN_OUTCOME: the write may or may not last. */
export class UnknownOutcomeError extends TqError {}
/** TQ_ERR_CANCELLED: the task was cancelled while this delivery held it; stop working on it. */
export class CancelledError extends TqError {}
/** TQ_ERR_FULL: the queue is at its cap on pending tasks; nothing was stored. */
export class FullError extends TqError {}
