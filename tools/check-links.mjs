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

// The package ships README.md, CHANGELOG.md and docs/ (package.json's `files`), not src/, examples/
// or the tools: a link from a shipped page to those would break in node_modules, so it names the
// file in the repository (REPO below, checked here as a path of this checkout), never a relative one.
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const REPO = `${pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, '')}/`;
const IN_REPO = new RegExp(`^${REPO.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(?:blob|tree)/main/`);
const shipped = (path) => ['package.json', 'LICENSE', ...pkg.files].some((entry) => path === entry || path.startsWith(`${entry}/`));

const problems = [];
let checked = 0;
for (const file of markdownFiles()) {
  const lines = prose(readFileSync(file, 'utf8'));
  lines.forEach((line, i) => {
    for (const target of linksOf(line)) {
      const inRepo = IN_REPO.test(target);
      if (!inRepo && /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      checked++;
      const where = `${relative(root, file)}:${i + 1}`;
      const [path, anchor] = (inRepo ? target.replace(IN_REPO, '') : target).split('#', 2);
      const base = inRepo ? root : dirname(file);
      const into = path === '' ? file : resolve(base, decodeURIComponent(path));
      if (!existsSync(into)) {
        problems.push(`${where}: ${target}: no such file`);
        continue;
      }
      if (!inRepo && shipped(relative(root, file)) && !shipped(relative(root, into))) {
        problems.push(`${where}: ${target}: not in the package, so broken there: link to ${REPO}blob/main/${relative(root, into)}`);
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
console.log(`links: ${checked} relative and repository links checked, all resolve`);
