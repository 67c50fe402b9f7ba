/**
 * Names and labels of Warren's objects (src/store/kubernetes/names.ts): valid for the API server
 * whatever they name, a function of what they name (two claims of one block collide), distinct for
 * distinct things, readable where they can be.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blockKey } from '../../../src/ipam/blocks.ts';
import {
  blockName,
  isSubdomain,
  labelValue,
  lenderLabel,
  nodeLeaseName,
  rangeName,
  requestName,
  spaceName,
  taskLeaseName,
} from '../../../src/store/kubernetes/names.ts';

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const longName = `net-${'x'.repeat(249)}`;
const awkward = ['10.0.0.0/24', '10.0.0.0/24@net', `10.0.0.0/24@${longName}`, 'fd00::/64@Ünïcødé-ÑET', '::/0'];

describe('object names', () => {
  it('are valid RFC 1123 subdomains whatever they name', () => {
    const names = [
      ...awkward.map(rangeName),
      ...awkward.map((p) => blockName(blockKey(p, '::1/128'))),
      ...awkward.map((p) => blockName(blockKey(p, '10.0.0.64/26'))),
      ...awkward.map((p) => requestName(p, `Node_${'y'.repeat(300)}`)),
      ...awkward.map((p) => spaceName(`v6@${p}`)),
      nodeLeaseName('-Bad_Node.'),
      nodeLeaseName('n'.repeat(400)),
      taskLeaseName('forget-node/Node_With/Slashes'),
    ];
    for (const name of names) assert.ok(isSubdomain(name), `${name} (${name.length})`);
  });

  it('derive a block name from the block alone, so two claims of one block name one object', () => {
    const key = blockKey('10.0.0.0/24@net', '10.0.0.64/26');
    assert.equal(blockName(key), blockName(`${'10.0.0.0/24@net'}#10.0.0.64/26`));
    assert.match(blockName(key), /^10-0-0-64-26\.[0-9a-f]{16}$/, 'the CIDR is readable in the name');
  });

  it('differ for different things, even where the readable parts agree', () => {
    const names = [
      blockName(blockKey('10.0.0.0/24@a', '10.0.0.64/26')),
      blockName(blockKey('10.0.0.0/24@b', '10.0.0.64/26')),
      blockName(blockKey('10.0.0.0/24@a', '10.0.0.128/26')),
      rangeName('10.0.0.0/24@a'),
      rangeName('10.0.0.0/24@A'),
      requestName('10.0.0.0/24@a', 'n1'),
      requestName('10.0.0.0/24@a', 'n2'),
      nodeLeaseName('node_1'),
      nodeLeaseName('node-1'),
      taskLeaseName('forget-node/node-1'),
    ];
    assert.equal(new Set(names).size, names.length);
  });

  it('keep what they can read: nodes and ranges appear in their names', () => {
    assert.match(nodeLeaseName('worker-3'), /^warren-node\.worker-3\.[0-9a-f]{16}$/);
    assert.match(requestName('10.1.0.0/16@blue', 'worker-3'), /^worker-3\.10-1-0-0-16-blue\.[0-9a-f]{16}$/);
  });
});

describe('label values', () => {
  it('are the text itself when it is a valid value', () => {
    assert.equal(labelValue('worker-3'), 'worker-3');
    assert.equal(labelValue('a.b_c'), 'a.b_c');
  });

  it('are valid and distinct for text that is not a valid value', () => {
    const texts = ['10.0.0.0/24', '10.0.0.0/24@net', 'x'.repeat(64), 'x'.repeat(65), '-lead', 'tail-', '/'];
    const values = texts.map(labelValue);
    for (const v of values) assert.ok(v.length <= 63 && LABEL_VALUE.test(v) && v !== '', v);
    assert.equal(new Set(values).size, values.length);
  });

  it('make lender label keys whose name part is valid', () => {
    const key = lenderLabel('n'.repeat(200));
    const [prefix, name] = key.split('/');
    assert.equal(prefix, 'lender.warren.dev');
    assert.ok((name ?? '').length <= 63 && LABEL_VALUE.test(name ?? ''));
  });
});
