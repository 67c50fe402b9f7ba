/**
 * Host-local's data dir of a network, as Warren reads and writes it (the takeover,
 * host-local-takeover.ts, decides when): one reservation file per address, named after it, holding
 * the container and the interface it is reserved for (cni/host-local-reservation.ts).
 *
 * Guarantees:
 * - Files are read bounded and non-blocking, never through a symlink (core/bounded-read.ts): a
 *   FIFO, a device, a symlink or a huge file is never opened for a blocking read. At most
 *   MAX_RESERVATION_FILES names of a directory are looked at (the first, sorted), and that a
 *   directory held more, or could not be listed, is reported; a missing directory holds none.
 * - writeHeld makes the directory say what Warren holds in the target's ranges: a reservation file,
 *   written atomically in host-local's format and mode, for every address held (one that says so
 *   already is left as it is); the files of addresses in those ranges that Warren does not hold
 *   removed. Files of addresses outside the ranges are never touched. What cannot be written or
 *   removed is reported, never thrown.
 * - removeReleased removes an address's file only when it names the same container and interface.
 */
import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic-file.ts';
import { readRegularFile } from '../../core/bounded-read.ts';
import { messageOf } from '../../core/errors.ts';
import { type IPAddress, formatIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { type RangeSpec, inSubnet } from '../../ipam/range.ts';
import {
  MAX_RESERVATION_BYTES,
  MAX_RESERVATION_FILES,
  parseReservation,
  renderReservation,
  reservationAddress,
  reservationName,
} from '../../cni/host-local-reservation.ts';
import type { HandBackReport } from '../../api/status.ts';
import { makeDirectory } from '../../core/make-directory.ts';

/** A network whose range Warren takes over from host-local. */
export interface HostLocalTarget {
  readonly network: string;
  /** host-local's data dir for this network (its dataDir joined with the network's name). */
  readonly dataDir: string;
  readonly ranges: readonly RangeSpec[];
}

/** The reservation files of a data dir (address names), bounded; a missing dir holds none. */
export function listReservations(dir: string, problems: string[]): Array<[string, IPAddress]> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      problems.push(`${dir} cannot be listed: ${messageOf(error)}`);
    return [];
  }
  if (names.length > MAX_RESERVATION_FILES) {
    problems.push(`${dir} holds ${names.length} names; only the first ${MAX_RESERVATION_FILES} are looked at`);
    names = names.sort().slice(0, MAX_RESERVATION_FILES);
  }
  const out: Array<[string, IPAddress]> = [];
  for (const name of names) {
    const ip = reservationAddress(name);
    if (ip !== undefined && reservationName(ip) === name) out.push([name, ip]);
  }
  return out;
}

/**
 * Makes `target`'s data dir say what Warren holds in its ranges (`held`: Warren's allocations
 * there, on this node); see the module header. The counts and problems, for the hand-back report.
 */
export function writeHeld(target: HostLocalTarget, held: readonly Allocation[]): HandBackReport {
  const report = {
    network: target.network,
    dataDir: target.dataDir,
    written: 0,
    kept: 0,
    removed: 0,
    problems: [] as string[],
  };
  makeDirectory(target.dataDir, 0o755);
  const byAddress = new Map(held.map((a) => [a.address, a]));
  for (const a of held) {
    const file = join(target.dataDir, a.address);
    const text = renderReservation(a.containerID, a.ifname);
    const current = safeRead(file);
    if (current !== undefined && current === text) {
      report.kept += 1;
      continue;
    }
    try {
      // host-local's own mode; the rename replaces whatever was there (Warren's record is what runs).
      writeFileAtomic(file, text, 0o644);
      report.written += 1;
    } catch (error) {
      report.problems.push(`${file}: could not be written: ${messageOf(error)}`);
    }
  }
  for (const [name, ip] of listReservations(target.dataDir, report.problems)) {
    if (byAddress.has(formatIP(ip)) || !target.ranges.some((r) => r.family === ip.family && inSubnet(r, ip))) continue;
    // In Warren's range and not held by Warren: its container went while Warren served.
    try {
      unlinkSync(join(target.dataDir, name));
      report.removed += 1;
    } catch (error) {
      report.problems.push(`${join(target.dataDir, name)}: could not be removed: ${messageOf(error)}`);
    }
  }
  return report;
}

/** Removes the reservation file of a released allocation, when it names the same container and interface. */
export function removeReleased(dataDir: string, a: Allocation): void {
  const file = join(dataDir, a.address);
  const read = safeRead(file);
  if (read === undefined) return;
  const owner = parseReservation(read);
  if (owner.ok && owner.containerID === a.containerID && owner.ifname === a.ifname) {
    try {
      unlinkSync(file);
    } catch {
      // gone already (host-local's own DEL)
    }
  }
}

function safeRead(file: string): string | undefined {
  try {
    const read = readRegularFile(file, MAX_RESERVATION_BYTES, { noFollow: true });
    return read.kind === 'read' ? read.text : undefined;
  } catch {
    return undefined;
  }
}
