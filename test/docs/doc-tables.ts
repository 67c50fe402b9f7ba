/**
 * Reading the reference tables of docs/ pages for the tests that hold them to the code: the cells
 * of one column of every table row, and the inline-code spans in them. A page is read as text;
 * nothing here knows what a table means.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../helpers/processes.ts';

/** The text of docs/<name>. */
export function docPage(name: string): string {
  return readFileSync(join(REPO, 'docs', name), 'utf8');
}

/** The given column (0-based) of every table row of `text` that is not a header or its rule. */
export function tableColumn(text: string, column: number): string[] {
  const rows = text.split('\n').filter((line) => line.startsWith('|'));
  const cells: string[] = [];
  for (const [i, row] of rows.entries()) {
    if (/^\|[-|\s:]+\|$/.test(row) || /^\|[-|\s:]+\|$/.test(rows[i + 1] ?? '')) continue;
    cells.push(row.split('|')[column + 1]?.trim() ?? '');
  }
  return cells;
}

/** The inline-code spans of a cell, without their backticks. */
export function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
}

/** Sorted, with repeats kept: so a name listed twice shows in a comparison. */
export function sorted(values: Iterable<string>): string[] {
  return [...values].sort();
}
