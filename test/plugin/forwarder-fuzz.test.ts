/**
 * The forwarder's one parser, fuzzed: the libFuzzer harness (src/plugin/forwarder/fuzz/) built
 * with clang under AddressSanitizer and UBSan, run for a bounded time over a copy of the seed
 * corpus in the repository. Any sanitizer finding, crash, hang or broken promise of the harness
 * fails the test and leaves its input in the output. WARREN_FUZZ_RUNS and WARREN_FUZZ_SECONDS run
 * it longer. Skipped only where clang or its libFuzzer runtime is missing (scripts/setup.sh
 * installs both: clang, libclang-rt-14-dev).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FORWARDER_SOURCE_DIR } from '../../scripts/build.ts';
import { tempDir } from '../helpers/processes.ts';

const FUZZ_DIR = join(FORWARDER_SOURCE_DIR, 'fuzz');
const RUNS = process.env.WARREN_FUZZ_RUNS ?? '200000';
const SECONDS = process.env.WARREN_FUZZ_SECONDS ?? '20';

/** Builds the harness into `dir`; a reason to skip when this machine cannot. */
function buildHarness(dir: string): { binary: string } | { skip: string } {
  const binary = join(dir, 'find-socket-fuzz');
  const args = [
    '-std=c11',
    '-g',
    '-O1',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-D_GNU_SOURCE',
    '-fsanitize=fuzzer,address,undefined',
    '-fno-sanitize-recover=all',
    join(FUZZ_DIR, 'find-socket-fuzz.c'),
    join(FORWARDER_SOURCE_DIR, 'find-socket.c'),
    '-o',
    binary,
  ];
  const built = spawnSync('clang', args, { encoding: 'utf8' });
  if (built.error !== undefined && (built.error as NodeJS.ErrnoException).code === 'ENOENT') {
    return { skip: 'clang is not installed (scripts/setup.sh installs clang and libclang-rt-14-dev)' };
  }
  if (built.status !== 0 && /libclang_rt\.\w+/.test(built.stderr)) {
    return {
      skip: `clang lacks its libFuzzer or sanitizer runtimes (apt-get install libclang-rt-14-dev): ${built.stderr.trim()}`,
    };
  }
  assert.equal(built.status, 0, `clang ${args.join(' ')} failed:\n${built.stderr}`);
  return { binary };
}

describe('forwarder fuzz (find-socket under libFuzzer, ASan and UBSan)', () => {
  const dir = tempDir('warren-fuzz-');
  const harness = buildHarness(dir);
  const skip = 'skip' in harness ? harness.skip : false;

  it('runs the seed corpus and a bounded fuzzing session with no finding', {
    skip,
    timeout: (Number(SECONDS) + 60) * 1000,
  }, () => {
    assert.ok('binary' in harness);
    const corpus = join(dir, 'corpus');
    cpSync(join(FUZZ_DIR, 'corpus'), corpus, { recursive: true });
    const seeds = readdirSync(corpus).length;
    assert.ok(seeds >= 12, `only ${seeds} seeds`);
    const artifacts = join(dir, 'artifacts');
    mkdirSync(artifacts);
    const run = spawnSync(
      harness.binary,
      [
        `-runs=${RUNS}`,
        `-max_total_time=${SECONDS}`,
        '-max_len=16384',
        '-timeout=10',
        `-dict=${join(FUZZ_DIR, 'find-socket.dict')}`,
        `-artifact_prefix=${artifacts}/`,
        '-print_final_stats=1',
        corpus,
      ],
      {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, ASAN_OPTIONS: 'abort_on_error=1:detect_leaks=1' },
      },
    );
    const tail = run.stderr.split('\n').slice(-40).join('\n');
    assert.equal(run.status, 0, `libFuzzer exited ${run.status} (${run.signal ?? 'no signal'}):\n${tail}`);
    assert.deepEqual(readdirSync(artifacts), [], `libFuzzer left crash artifacts:\n${tail}`);
    const executed = /stat::number_of_executed_units:\s*(\d+)/.exec(run.stderr);
    assert.ok(executed !== null && Number(executed[1]) > seeds, `libFuzzer ran no inputs beyond the seeds:\n${tail}`);
  });
});
