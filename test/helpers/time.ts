/**
 * Simulated work: a handler that takes `ms`, a pusher's pace. Never a way to wait for an outcome
 * (poll with `waitFor` from ./redis, or await an event).
 */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
