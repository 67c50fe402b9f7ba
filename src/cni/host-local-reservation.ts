/**
 * host-local's reservations on disk, as its `backend/disk` store keeps them: in its data dir
 * (`dataDir`, default /var/lib/cni/networks, joined with the network's name) one file per address,
 * named by the address as Go prints it (`10.0.0.5`, `fd00::5`), holding `<containerID>\r\n<ifname>`
 * (files of host-local before it recorded the interface hold the container ID alone). Beside them
 * `last_reserved_ip.<range>` and `lock`, which are not reservations. Pure: names and text in and out.
 *
 * Guarantees: a name is a reservation only when it is an address; a content is one only when it
 * names a container ID and an interface the CNI rules accept (cni/args.ts), so a hostile file can
 * neither forge an owner Warren would refuse at ADD nor smuggle a path. What Warren writes back
 * (renderReservation) is exactly what host-local writes, so host-local's DEL finds it.
 */
import { type IPAddress, formatIP, parseIP } from '../ipam/address.ts';
import { isValidContainerID, isValidIfname, printable } from './args.ts';

/** host-local's separator between container ID and interface name. */
const LINE_BREAK = '\r\n';

/** The interface a reservation of host-local's older format (container ID only) is taken for. */
export const LEGACY_IFNAME = 'eth0';

/** A reservation file is a few dozen bytes; anything larger is not one. */
export const MAX_RESERVATION_BYTES = 1024;

/** At most this many names are looked at in one data dir (a /16 has 65,536 addresses). */
export const MAX_RESERVATION_FILES = 1 << 17;

/** The address a file name stands for; undefined for host-local's other files and anything else. */
export function reservationAddress(name: string): IPAddress | undefined {
  if (name.startsWith('.') || name === 'lock' || name.startsWith('last_reserved_ip.')) return undefined;
  return parseIP(name);
}

/** The file name host-local gives the reservation of `ip`. */
export function reservationName(ip: IPAddress): string {
  return formatIP(ip);
}

export type ReservationOwner =
  | { readonly ok: true; readonly containerID: string; readonly ifname: string; readonly legacy: boolean }
  | { readonly ok: false; readonly reason: string };

/** The owner a reservation file's text names, or why it names none. */
export function parseReservation(text: string): ReservationOwner {
  const at = text.indexOf(LINE_BREAK);
  // host-local trims the container ID when it writes and when it matches; so does this.
  const containerID = (at < 0 ? text : text.slice(0, at)).trim();
  const ifname = at < 0 ? LEGACY_IFNAME : text.slice(at + LINE_BREAK.length).trim();
  if (!isValidContainerID(containerID))
    return {
      ok: false,
      reason: `container ID "${printable(containerID.slice(0, 80))}" is not a valid CNI container ID`,
    };
  if (!isValidIfname(ifname))
    return {
      ok: false,
      reason: `interface name "${printable(ifname.slice(0, 80))}" is not a valid CNI interface name`,
    };
  return { ok: true, containerID, ifname, legacy: at < 0 };
}

/** The text host-local writes for a reservation. */
export function renderReservation(containerID: string, ifname: string): string {
  return `${containerID}${LINE_BREAK}${ifname}`;
}
