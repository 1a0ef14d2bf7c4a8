import { describe, expect, it } from 'vitest';
import { SlotBudget } from '../src/engine/slots';

describe("the shard workers' slot budget (engine/slots.ts)", () => {
  it('with its limit lowered below the slots in use, sends away only as many running jobs as the limit needs, however many ask at once', () => {
    let limit = 5;
    const slots = new SlotBudget(() => limit);
    for (let i = 0; i < 5; i++) expect(slots.tryTake()).toBe(true);
    limit = 2;
    expect(slots.over).toBe(true);
    // Every running job asks before its next slice, before any of those sent away has ended.
    const sent = Array.from({ length: 5 }, () => slots.shed());
    expect(sent).toEqual([true, true, true, false, false]);
    expect(slots.over).toBe(false);
    // Those leaving still hold their slots until their jobs end.
    expect(slots.tryTake()).toBe(false);
    for (let i = 0; i < 3; i++) {
      slots.left();
      slots.give();
    }
    expect(slots.tryTake()).toBe(false);
    limit = 3;
    expect(slots.tryTake()).toBe(true);
    expect(slots.shed()).toBe(false);
  });
});
