// `node tools/check-links.mjs` (part of `npm run lint`, so CI): every relative link in the docs
// must resolve. A link to a file or folder must name one that exists; a `#anchor` must name a
// heading (GitHub's slug of it) or an explicit `<a id>` of the page it points into. External
// links (http:, https:, mailto:) are not fetched. Node built-ins only.
//
// Checked: README.md, CHANGELOG.md, docs/**/*.md and the layers' READMEs under src/. Links inside
// code (fenced blocks, `inline code`) and HTML comments are not links and are skipped.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function markdownFiles() {
  const files = ['README.md', 'CHANGELOG.md'].map((f) => join(root, f)).filter((f) => existsSync(f));
  const walk = (dir) => {
    for (const f of readdirSync(dir)) {
      const path = join(dir, f);
      if (statSync(path).isDirectory()) walk(path);
      else if (f.endsWith('.md')) files.push(path);
    }
  };
  walk(join(root, 'docs'));
  for (const dir of readdirSync(join(root, 'src'))) {
    const readme = join(root, 'src', dir, 'README.md');
    if (existsSync(readme)) files.push(readme);
  }
  return files;
}

/** The text a reader sees as prose: fenced code blocks, inline code and HTML comments blanked out (line numbers kept). */
function prose(text) {
  let inFence = false;
  const lines = text
    .replace(/<!--[\s\S]*?-->/g, (comment) => comment.replace(/[^\n]/g, ' '))
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line;
    });
  return lines.map((line) => line.replace(/(`+)[\s\S]*?\1/g, (code) => ' '.repeat(code.length)));
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
function slug(heading) {
  return heading
    .replace(/`/g, '')
    .replace(/<[^>]+>/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

const anchorCache = new Map();

/** The anchors a markdown file defines: its headings' slugs (repeats numbered as GitHub does) and `<a id|name>`. */
function anchorsOf(file) {
  if (anchorCache.has(file)) return anchorCache.get(file);
  const anchors = new Set();
  const seen = new Map();
  let inFence = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    if (inFence) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

/** Inline links and images `[text](target "title")`, and reference definitions `[name]: target`. */
function linksOf(line) {
  const targets = [];
  for (const m of line.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) targets.push(m[1].replace(/^<|>$/g, ''));
  const definition = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(line);
  if (definition) targets.push(definition[1]);
  return targets;
}

const problems = [];
let checked = 0;
for (const file of markdownFiles()) {
  const lines = prose(readFileSync(file, 'utf8'));
  lines.forEach((line, i) => {
    for (const target of linksOf(line)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      checked++;
      const where = `${relative(root, file)}:${i + 1}`;
      const [path, anchor] = target.split('#', 2);
      const into = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!existsSync(into)) {
        problems.push(`${where}: ${target}: no such file`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(into).isDirectory() || !into.endsWith('.md')) {
        problems.push(`${where}: ${target}: an anchor into something that is not a markdown page`);
        continue;
      }
      if (!anchorsOf(into).has(decodeURIComponent(anchor))) problems.push(`${where}: ${target}: no heading with that anchor`);
    }
  });
}

if (problems.length > 0) {
  console.error(`${problems.length} broken link(s):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log(`links: ${checked} relative links checked, all resolve`);
