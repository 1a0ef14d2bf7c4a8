/** Text written to Redis: cut to a cap without splitting a surrogate pair, and always well-formed. */

/** A lone surrogate (half of a pair whose other half is missing). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `text` cut to `max` code units, never between the halves of a pair, with any lone surrogate
 * (a message may end mid-emoji: `title.slice(0, 13)`) replaced by U+FFFD: Redis's cjson refuses
 * JSON holding a lone surrogate, and a refused failure would count as a crashed run.
 */
export function wellFormedText(text: string, max: number): string {
  let cut = text;
  if (text.length > max) {
    const end = /[\uD800-\uDBFF]/.test(text[max - 1] ?? '') ? max - 1 : max;
    cut = text.slice(0, end);
  }
  return cut.replace(LONE_SURROGATE, '\uFFFD');
}

/** String(read()), or a placeholder when reading or printing throws (a getter, or a toString, that throws). */
export function textOf(read: () => unknown): string {
  try {
    return String(read());
  } catch {
    return '(an unprintable value)';
  }
}

/** String(value), or a placeholder when even that throws (an object whose toString throws). */
export function safeString(value: unknown): string {
  return textOf(() => value);
}
