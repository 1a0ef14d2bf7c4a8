import type { Config } from '../config';

export type Cell = string | number | null;

export interface Column {
  key: string;
  label: string;
  /** Decimal places for numbers; integers get thousands separators. */
  digits?: number;
}

export interface Ratio {
  name: string;
  value: number | null;
  /** The goal the project set for this ratio, if any, e.g. ">= 50". Reported, never enforced. */
  target?: string;
}

export interface ScenarioResult {
  id: string;
  title: string;
  /** The parameters in one sentence, printed above the table. */
  setup: string;
  columns: Column[];
  rows: Record<string, Cell>[];
  ratios: Ratio[];
  notes: string[];
  /** Every figure of every run, for results.json. */
  details: unknown;
}

export interface Scenario {
  id: string;
  run(config: Config): Promise<ScenarioResult>;
}
