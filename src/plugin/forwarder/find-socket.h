/*
 * The forwarder's one piece of parsing: which unix socket a CNI network config names for the agent
 * (`ipam.socket`). See find-socket.c for the guarantees.
 */
#ifndef WARREN_FIND_SOCKET_H
#define WARREN_FIND_SOCKET_H

#include <stddef.h>

/* Deepest nesting of arrays and objects accepted; the TypeScript plugin's MAX_CONFIG_DEPTH. */
#define WARREN_MAX_DEPTH 1000

/* Longest socket path, in bytes: sockaddr_un.sun_path (108) less its terminating NUL. */
#define WARREN_SOCKET_PATH_MAX 107

enum warren_socket_answer {
  /* The config is not valid JSON, or it names no absolute `ipam.socket`: use the next rule. */
  WARREN_SOCKET_NOT_FOUND = 0,
  /* `out` holds the decoded path, NUL-terminated, starting with '/'. */
  WARREN_SOCKET_FOUND = 1,
  /* `ipam.socket` starts with '/' but is no usable path (NUL, invalid UTF-8 or a lone surrogate,
   * too long for sun_path or for `out`): the TypeScript plugin must answer. */
  WARREN_SOCKET_UNUSABLE = 2,
  /* Arrays and objects nest deeper than WARREN_MAX_DEPTH: the TypeScript plugin must answer. */
  WARREN_SOCKET_TOO_DEEP = 3,
};

enum warren_socket_answer warren_find_socket(const char *json, size_t len, char *out, size_t outlen);

#endif
