import { describe, expect, it } from 'vitest';
import { RateLimitedError } from '../src/core/errors';
import {
  afterFailure,
  combine,
  conclusion,
  laneEnd,
  nothingClaimed,
  stoppedFor,
  stoppedSlice,
  type Finished,
  type RunOutcome,
} from '../src/engine/decisions';

/** The run's decisions, without Redis: what a lane settles when it ends, and how a run concludes. */

describe('stoppedSlice (the one rule for a stopped slice)', () => {
  it('restores a slice that gave up, acks one whose handler asked for a hold, and leaves a finished one to the release', () => {
    expect(stoppedSlice({ kind: 'stopped', reason: 'shutdown', restore: true })).toEqual({ how: 'restore', holdMs: undefined });
    expect(stoppedSlice({ kind: 'stopped', reason: 'rate_limited', restore: true, holdMs: 50 })).toEqual({ how: 'restore', holdMs: 50 });
    expect(stoppedSlice({ kind: 'stopped', reason: 'rate_limited', holdMs: 50 })).toEqual({ how: 'ack', holdMs: 50 });
    expect(stoppedSlice({ kind: 'stopped', reason: 'max_runtime' })).toBeUndefined();
  });
});

describe('laneEnd', () => {
  it("settles a stopped lane's own slice, except lane 0's (the run's conclusion does)", () => {
    expect(laneEnd(0, { kind: 'stopped', reason: 'shutdown', restore: true })).toBeUndefined();
    expect(laneEnd(2, { kind: 'stopped', reason: 'shutdown', restore: true })).toEqual({ how: 'restore', holdMs: undefined });
    expect(laneEnd(1, { kind: 'stopped', reason: 'max_runtime' })).toEqual({ how: 'ack', holdMs: undefined });
  });

  it('settles nothing for a lane that drained, waits or lost the lock', () => {
    expect(laneEnd(1, { kind: 'drained', released: false })).toBeUndefined();
    expect(laneEnd(1, { kind: 'waiting', waitMs: 10, released: false })).toBeUndefined();
    expect(laneEnd(1, { kind: 'lock_lost' })).toBeUndefined();
  });
});

describe('afterFailure (a slice whose handler threw)', () => {
  it('is stopping, not failing, when the run stopped: a shutdown hands the slice back, a lost lock settles nothing', () => {
    expect(afterFailure('shutdown', new Error('aborted'))).toEqual({ kind: 'stopped', reason: 'shutdown', restore: true });
    expect(afterFailure('lock_lost', new Error('aborted'))).toEqual({ kind: 'lock_lost' });
  });

  it('hands a retryAfter slice back and holds the key at least 1 ms, no attempt spent', () => {
    expect(afterFailure(undefined, new RateLimitedError({ retryAfterMs: 0 }))).toEqual({
      kind: 'stopped',
      reason: 'rate_limited',
      restore: true,
      holdMs: 1,
    });
    expect(afterFailure(undefined, new RateLimitedError({ retryAfterMs: 300 }))).toMatchObject({ holdMs: 300 });
  });

  it('leaves anything else (a timeout included) a failure to settle', () => {
    expect(afterFailure(undefined, new Error('boom'))).toBeUndefined();
  });
});

describe('stoppedFor and nothingClaimed', () => {
  it('makes a lost lock no stop, and restores only a slice stopped before it ran', () => {
    expect(stoppedFor(undefined)).toBeUndefined();
    expect(stoppedFor('lock_lost', true)).toEqual({ kind: 'lock_lost' });
    expect(stoppedFor('shutdown', true)).toEqual({ kind: 'stopped', reason: 'shutdown', restore: true });
    expect(stoppedFor('preempted')).toEqual({ kind: 'stopped', reason: 'preempted' });
  });

  it('waits for what is due, or drains', () => {
    expect(nothingClaimed(30, true)).toEqual({ kind: 'waiting', waitMs: 30, released: true });
    expect(nothingClaimed(0, false)).toEqual({ kind: 'drained', released: false });
  });
});

describe('conclusion', () => {
  const finished = { settled: [] } satisfies Finished;

  it('leaves a job its last claim completed to BullMQ, and releases nothing more', () => {
    expect(conclusion({ kind: 'drained', released: true, finished }, 'fifo')).toEqual({ job: { to: 'completed' } });
  });

  it('releases a drained run with lanes, and requeues its job when ids were pushed meanwhile', () => {
    expect(conclusion({ kind: 'drained', released: true }, 'fifo')).toEqual({ job: { to: 'done' } });
    expect(conclusion({ kind: 'drained', released: false }, 'fifo')).toEqual({ release: 'ack', job: { to: 'done', ifPending: 'requeue' } });
  });

  it('delays a waiting run until something is due', () => {
    expect(conclusion({ kind: 'waiting', waitMs: 40, released: true }, 'fair')).toEqual({ job: { to: 'delayed', waitMs: 40 } });
    expect(conclusion({ kind: 'waiting', waitMs: 40, released: false }, 'fair')).toEqual({
      release: 'ack',
      job: { to: 'delayed', waitMs: 40 },
    });
  });

  it('restores a stopped slice that gave up and keeps the key in flight for the release, then requeues', () => {
    expect(conclusion({ kind: 'stopped', reason: 'shutdown', restore: true }, 'fair')).toEqual({
      settle: { how: 'restore', holdMs: undefined },
      release: 'keep',
      job: { to: 'requeued', demote: false },
      interrupted: 'shutdown',
    });
    // A run a lowered concurrency sent away had no turn: it keeps its level.
    expect(conclusion({ kind: 'stopped', reason: 'concurrency_lowered', restore: true }, 'fair')).toEqual({
      settle: { how: 'restore', holdMs: undefined },
      release: 'keep',
      job: { to: 'requeued', demote: false },
      interrupted: 'concurrency_lowered',
    });
  });

  it('acks a finished slice in the release, and demotes a key that had its turn under fair scheduling only', () => {
    const turn: RunOutcome = { kind: 'stopped', reason: 'max_runtime' };
    expect(conclusion(turn, 'fair')).toEqual({ release: 'ack', job: { to: 'requeued', demote: true }, interrupted: 'max_runtime' });
    expect(conclusion(turn, 'fifo').job).toEqual({ to: 'requeued', demote: false });
    expect(conclusion({ kind: 'stopped', reason: 'preempted' }, 'fair').job).toEqual({ to: 'requeued', demote: true });
    expect(conclusion({ kind: 'stopped', reason: 'slice_timeout' }, 'fair').job).toEqual({ to: 'requeued', demote: false });
  });

  it('holds a rate-limited key: its job waits out the hold', () => {
    expect(conclusion({ kind: 'stopped', reason: 'rate_limited', restore: true, holdMs: 250 }, 'fair')).toEqual({
      settle: { how: 'restore', holdMs: 250 },
      release: 'keep',
      job: { to: 'delayed', waitMs: 250, held: true },
      interrupted: 'rate_limited',
    });
  });

  it('settles and releases nothing after a lost lock: the job goes back for the next holder', () => {
    expect(conclusion({ kind: 'lock_lost' }, 'fair')).toEqual({ job: { to: 'requeued', demote: false }, interrupted: 'lock_lost' });
  });
});

describe('combine', () => {
  it('takes a lost lock over a stop, a stop over a wait, the shortest wait over drained', () => {
    const waiting = (waitMs: number): RunOutcome => ({ kind: 'waiting', waitMs, released: false });
    expect(combine([{ kind: 'drained', released: false }, waiting(500), waiting(200)])).toEqual(waiting(200));
    expect(combine([{ kind: 'stopped', reason: 'shutdown' }, { kind: 'lock_lost' }])).toEqual({ kind: 'lock_lost' });
  });
});
