/**
 * Sentences of the docs that state what the code does, held to the code (issue 34, item 13): the
 * block sizes docs/ipam-keys.md gives for ranges without `block_size` are what the allocator
 * computes (it sizes blocks to the range; the page said /26 whatever the range), and the code the
 * README's troubleshooting table gives for an `IP=` outside every range is the one the agent
 * answers (101; the table said 7).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { matchRequested } from '../../src/allocator/assignment.ts';
import { ALL_CNI_CODES } from '../../src/api/errors.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseRange } from '../../src/cni/ipam-range.ts';
import { type IPAddress, parseIP } from '../../src/ipam/address.ts';
import { type RangeSpec, adaptiveBlockPrefix } from '../../src/ipam/range.ts';
import { REPO } from '../helpers/processes.ts';
import { codeSpans, docPage, tableColumn } from './doc-tables.ts';

/** A range as a config writes it, with no other key. */
function rangeOf(range: string): RangeSpec {
  const raw = { range, range_start: undefined, range_end: undefined, exclude: undefined };
  return parseRange(
    { ...raw, gateway: undefined, block_size: undefined },
    'ipam',
    { networkName: 'docs', apart: false },
    false,
  );
}

describe('docs/ipam-keys.md, block_size', () => {
  const row = docPage('ipam-keys.md')
    .split('\n')
    .find((line) => codeSpans(line.split('|')[1] ?? '').includes('block_size'));

  it('gives, for a range without block_size, the block size the allocator sizes it to', () => {
    assert.ok(row !== undefined, 'the block_size row');
    const examples = [...row.matchAll(/a \/(\d+) gets \/(\d+) blocks/g)].map((m) => [Number(m[1]), Number(m[2])]);
    assert.ok(examples.length >= 4, `the row gives examples: ${row}`);
    const v6 = row.indexOf('IPv6 a /');
    const starts = [...row.matchAll(/a \/(\d+) gets/g)].map((m) => m.index);
    for (const [index, [length, said]] of examples.entries()) {
      const at: number = starts[index] ?? 0;
      const range: string = at > v6 && v6 >= 0 ? `fd00:34::/${length}` : `10.34.0.0/${length}`;
      const spec = rangeOf(range);
      assert.equal(adaptiveBlockPrefix(spec.family, spec.first, spec.last), said, `${range}: the page says /${said}`);
    }
  });

  it('no longer calls /26 the default whatever the range', () => {
    assert.doesNotMatch(row ?? '', /default 26/);
  });
});

describe("README's troubleshooting table", () => {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('**The common errors**'));
  const codes = tableColumn(table, 0);
  const says = tableColumn(table, 1);

  it('gives the code the agent answers for an address IP= asks for outside every range', () => {
    const range = rangeOf('10.34.0.0/24');
    let answered: number | undefined;
    try {
      matchRequested([range], [parseIP('10.99.0.7') as IPAddress]);
    } catch (error) {
      if (isWarrenError(error)) answered = ALL_CNI_CODES[error.code as keyof typeof ALL_CNI_CODES];
    }
    assert.equal(answered, 101);
    const rows = says.flatMap((text, i) =>
      text.includes('`IP=`') && text.includes('outside every range') ? [Number(codes[i])] : [],
    );
    assert.deepEqual(rows, [answered], 'exactly one row says it, with the code the agent answers');
  });
});
