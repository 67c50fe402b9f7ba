/*
 * The forwarder's exchange with the agent (agent-exchange.c): build the request, connect to the
 * agent's unix socket, send the request, read the answer to print. This is the C side of the wire
 * src/api/cni-wire.ts defines; test/plugin/cni-wire-c.test.ts holds it to that definition's vectors
 * (test/fixtures/cni-wire-vectors.txt): the request's bytes, how each answer is read, and the
 * limits below (each named there as in the comment beside it).
 */
#ifndef WARREN_AGENT_EXCHANGE_H
#define WARREN_AGENT_EXCHANGE_H

#include <stddef.h>
#include <sys/uio.h>

/* How long connecting, sending and reading the answer may take together, from agent_connect.
 * Equal to AGENT_ANSWER_TIMEOUT_MS (src/api/limits.ts; a test holds them equal): a wedged agent
 * costs one wait, and a DEL is journaled well within the kubelet's 2-minute request timeout. */
#define AGENT_EXCHANGE_TIMEOUT_MS 30000

/* The TypeScript plugin's MAX_CONFIG_BYTES (src/api/limits.ts; max-config-bytes). */
#define MAX_CONFIG_BYTES (4u * 1024 * 1024)
/* Linux's MAX_ARG_STRLEN: no environment string can be longer (max-variable-bytes). */
#define MAX_VARIABLE_BYTES (128u * 1024)
/* The most of an answer's head read (max-answer-head-bytes). */
#define MAX_HEAD_BYTES (64u * 1024)
/* The largest answer body read, its Content-Length (max-answer-body-bytes). */
#define MAX_BODY_BYTES (64u * 1024 * 1024)
/* The largest X-Warren-Exit (max-exit-code). */
#define MAX_EXIT_CODE 255

/* The answer the agent gave the call, when it is one the forwarder may print. */
struct agent_answer {
  int exit_code;
  char *body; /* malloc'd; the caller frees it */
  size_t body_len;
};

/*
 * The request's head and envelope: everything before the config, malloc'd, its length in
 * `request_len`. The caller sends the config's `config_len` bytes after it, then "}". `variable`
 * looks up a CNI variable (getenv). NULL when CNI_COMMAND is unset, a variable is longer than
 * MAX_VARIABLE_BYTES, or memory runs out: the call is not one to send.
 */
char *agent_request(char *(*variable)(const char *name), size_t config_len, size_t *request_len);

/* Writes `s` as a JSON string (quotes included, escaped as JSON.stringify escapes it; other bytes
 * verbatim) at `out`, which has room for 6 bytes a byte of `s` and 2; returns the end. */
char *agent_json_string(char *out, const char *s);

/* A connected socket to the agent at `path`, or -1. */
int agent_connect(const char *path);

/* Sends the `parts` buffers of `request` as they are and reads the answer; 1 with `answer` filled
 * when it is an answer to print (status 200, X-Warren-Exit, no X-Warren-Fallback), else 0. */
int agent_exchange(int fd, struct iovec *request, int parts, struct agent_answer *answer);

/* 1 when the exchange's deadline (AGENT_EXCHANGE_TIMEOUT_MS from agent_connect) has passed. */
int agent_deadline_passed(void);

#endif
