import { bullmqSystem } from './bullmq';
import { groupmqSystem } from './groupmq';
import { oursSystem } from './ours';
import { rawSystem } from './raw';
import type { System, SystemSpec } from './types';

/** Rebuilds a system from its spec; the one place that maps ids to adapters. */
export function systemFor(spec: SystemSpec): System {
  switch (spec.id) {
    case 'ours':
      return oursSystem(spec.variant);
    case 'bullmq-per-id':
      return bullmqSystem('bullmq-per-id', 1);
    case 'bullmq-chunks':
      return bullmqSystem('bullmq-chunks', 100);
    case 'bullmq-per-key':
      return bullmqSystem('bullmq-per-key', Number.POSITIVE_INFINITY);
    case 'groupmq':
      return groupmqSystem();
    case 'raw':
      return rawSystem();
  }
}

export const PEERS: readonly SystemSpec[] = [{ id: 'bullmq-per-id' }, { id: 'bullmq-chunks' }, { id: 'groupmq' }, { id: 'raw' }];
export const ALL: readonly SystemSpec[] = [{ id: 'ours' }, ...PEERS];

export type { System, SystemSpec } from './types';
