/**
 * node:http, taken without an ES import. An ES import of a built-in module reads every one of its
 * exports to make the namespace, and node:http's lazy ones (WebSocket, fetch's classes) load
 * undici: about 45 ms of CPU at every agent start, for nothing the agent uses. Modules on the
 * agent's start path import the types from node:http (erased) and the values from here.
 */
export const nodeHttp = process.getBuiltinModule('node:http') as typeof import('node:http');
