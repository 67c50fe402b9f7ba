/*
 * The forwarder's exchange with the agent (agent-exchange.c): connect to its unix socket, send one
 * request, read the answer to print.
 */
#ifndef WARREN_AGENT_EXCHANGE_H
#define WARREN_AGENT_EXCHANGE_H

#include <stddef.h>
#include <sys/uio.h>

/* How long connecting, sending and reading the answer may take together, from agent_connect.
 * Equal to AGENT_ANSWER_TIMEOUT_MS (src/api/limits.ts; a test holds them equal): a wedged agent
 * costs one wait, and a DEL is journaled well within the kubelet's 2-minute request timeout. */
#define AGENT_EXCHANGE_TIMEOUT_MS 30000

/* The answer the agent gave the call, when it is one the forwarder may print. */
struct agent_answer {
  int exit_code;
  char *body; /* malloc'd; the caller frees it */
  size_t body_len;
};

/* A connected socket to the agent at `path`, or -1. */
int agent_connect(const char *path);

/* Sends the `parts` buffers of `request` as they are and reads the answer; 1 with `answer` filled
 * when it is an answer to print (status 200, X-Warren-Exit, no X-Warren-Fallback), else 0. */
int agent_exchange(int fd, struct iovec *request, int parts, struct agent_answer *answer);

/* 1 when the exchange's deadline (AGENT_EXCHANGE_TIMEOUT_MS from agent_connect) has passed. */
int agent_deadline_passed(void);

#endif
