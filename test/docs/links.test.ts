/**
 * The README and every page under docs/ link only to what the repository has: each relative link
 * names a file or directory that exists, and each anchor (`#...`, in the same page or another
 * Markdown page) names a heading there, by the slug GitHub gives it (lower case, punctuation other
 * than `-` and `_` dropped, spaces to `-`, a repeated slug numbered `-1`, `-2`, ...). Links inside
 * code (fenced blocks, inline spans) are text, not links, and are skipped; absolute URLs are not
 * fetched (the machine has no internet) and are not checked here.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../helpers/processes.ts';

const FENCED = /^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm;

/** Markdown with code blocks and inline code blanked out (their text is not Markdown). */
function withoutCode(text: string): string {
  return text.replace(FENCED, '').replace(/`[^`\n]*`/g, '``');
}

/** GitHub's anchor for a heading's text. */
export function slugOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/<[^>]*>/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/**
 * Every anchor a Markdown page's headings give, numbered as GitHub numbers repeats. A heading's
 * inline code keeps its text in the anchor (only the backticks go).
 */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of text.replace(FENCED, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = slugOf((m[1] ?? '').replace(/`/g, ''));
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** What is wrong with the links of one page: one line per broken link. */
export function brokenLinks(file: string): string[] {
  const text = withoutCode(readFileSync(file, 'utf8'));
  const problems: string[] = [];
  const targets = [
    ...[...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? ''),
    ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1] ?? ''),
  ];
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [path = '', anchor] = target.split('#', 2);
    const resolved = path === '' ? file : join(dirname(file), decodeURIComponent(path));
    const where = `${relative(REPO, file)}: (${target})`;
    if (!existsSync(resolved)) {
      problems.push(`${where} names ${relative(REPO, resolved)}, which the repository does not have`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
      problems.push(`${where} has an anchor into something that is not a Markdown page`);
    } else if (!anchorsOf(readFileSync(resolved, 'utf8')).has(decodeURIComponent(anchor))) {
      problems.push(`${where}: ${relative(REPO, resolved)} has no heading whose anchor is #${anchor}`);
    }
  }
  return problems;
}

function pages(): string[] {
  const docs = join(REPO, 'docs');
  const underDocs = existsSync(docs)
    ? readdirSync(docs, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.md'))
        .map((f) => join(docs, f))
    : [];
  return [join(REPO, 'README.md'), join(REPO, 'CHANGELOG.md'), ...underDocs];
}

describe('links in the README and docs/', () => {
  it('give anchors as GitHub does', () => {
    assert.equal(slugOf('Pools shared by many nodes (etcd)'), 'pools-shared-by-many-nodes-etcd');
    assert.equal(slugOf('The node’s CNI config'), 'the-nodes-cni-config');
    assert.equal(
      slugOf('What an operator sees: metrics, the dashboard and warren doctor'),
      'what-an-operator-sees-metrics-the-dashboard-and-warren-doctor',
    );
    assert.equal(slugOf('Life of an ADD and of a DEL'), 'life-of-an-add-and-of-a-del');
    assert.deepEqual([...anchorsOf('# A\n## B\n## B\n```\n# not a heading\n```\n')], ['a', 'b', 'b-1']);
  });

  it('are found broken when a file or an anchor is missing, and not inside code', () => {
    const dir = mkdtempSync(join(tmpdir(), 'warren-links-'));
    try {
      const page = join(dir, 'page.md');
      writeFileSync(join(dir, 'other.md'), '# Other page\n');
      writeFileSync(
        page,
        '# Here\n[ok](#here) [ok](other.md#other-page) [gone](missing.md) [no anchor](#nowhere) ' +
          '[no anchor there](other.md#elsewhere)\n`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n',
      );
      const problems = brokenLinks(page);
      assert.equal(problems.length, 3, problems.join('\n'));
      assert.match(problems[0] ?? '', /missing\.md/);
      assert.match(problems[1] ?? '', /#nowhere/);
      assert.match(problems[2] ?? '', /#elsewhere/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('resolve, every relative link and every anchor', () => {
    const problems = pages().flatMap(brokenLinks);
    assert.deepEqual(problems, []);
  });
});
