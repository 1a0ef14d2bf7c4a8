/** What the dashboard's page and its charts share. */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Keys, ids and error messages are user data. */
export const esc = (value: unknown): string => String(value).replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3600_000).toFixed(1)} h`;
}
