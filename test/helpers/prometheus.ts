/**
 * Reading an agent's metrics as Prometheus would: GET /metrics over HTTP, the exposition parsed by
 * the parser of the Prometheus project's own Python client (Debian's python3-prometheus-client,
 * `text_string_to_metric_families`). A library, not our regular expressions: a test that checked
 * the format with its own would accept what Prometheus refuses. (The npm parsers tried,
 * parse-prometheus-text-format and exposition, drop the labels of histograms.)
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/** One sample line: its full name (with _bucket, _count, _sum, _total as exposed), labels, value. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** One metric family as the parser reads it. */
export interface Family {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly samples: readonly Sample[];
}

export const PYTHON = '/usr/bin/python3';

const PARSE = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value if math.isfinite(s.value) else str(s.value)} for s in f.samples]})
json.dump(out, sys.stdout)
`;

/** The exposition at http://address/metrics, checked for its content type, parsed. */
export async function scrape(address: string): Promise<Family[]> {
  const res = await fetch(`http://${address}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** Parses an exposition; throws with the parser's message when it is not valid text format. */
export function parseExposition(text: string): Family[] {
  const r = spawnSync(PYTHON, ['-c', PARSE], { input: text, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`the exposition does not parse: ${r.stderr}`);
  return JSON.parse(r.stdout) as Family[];
}

/** The value of the one sample named `name` (as exposed) whose labels include `labels`. */
export function sample(families: readonly Family[], name: string, labels: Record<string, string> = {}): number {
  const matching = families
    .flatMap((f) => f.samples)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(matching.length, 1, `one sample ${name} with ${JSON.stringify(labels)}: found ${matching.length}`);
  return (matching[0] as Sample).value;
}

/** A histogram's count for the series with these labels (0 when the series does not exist). */
export function histogramCount(families: readonly Family[], name: string, labels: Record<string, string>): number {
  const family = families.find((f) => f.name === name);
  assert.ok(family !== undefined, `${name} is exposed`);
  assert.equal(family.type, 'histogram');
  const count = family.samples.find(
    (s) => s.name === `${name}_count` && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return count?.value ?? 0;
}

/** Every sample line in the exposition. */
export function seriesCount(families: readonly Family[]): number {
  return families.reduce((n, f) => n + f.samples.length, 0);
}
