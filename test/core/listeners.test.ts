/** Listeners (src/core/listeners.ts): each told once per `tell` until removed, a throwing one failing alone. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Listeners } from '../../src/core/listeners.ts';

describe('Listeners', () => {
  it('tells every listener added and not removed; one added twice is two', () => {
    const listeners = new Listeners();
    const told: string[] = [];
    const a = () => told.push('a');
    const removeFirst = listeners.add(a);
    listeners.add(a);
    const removeB = listeners.add(() => told.push('b'));
    listeners.tell();
    assert.deepEqual(told, ['a', 'a', 'b']);
    removeFirst();
    removeB();
    told.length = 0;
    listeners.tell();
    assert.deepEqual(told, ['a'], 'the other addition of a stays');
  });

  it('tells the others when one throws, and that one again next time', () => {
    const listeners = new Listeners();
    let thrown = 0;
    let told = 0;
    listeners.add(() => {
      thrown += 1;
      throw new Error('its own failure');
    });
    listeners.add(() => {
      told += 1;
    });
    listeners.tell();
    listeners.tell();
    assert.deepEqual([thrown, told], [2, 2]);
  });
});
