/*
 * The forwarder: the executable a runtime finds as `warren` in its CNI bin directory. It relays
 * one CNI call to the Warren agent and prints the agent's answer; it knows the wire, not the CNI
 * spec. Everything it cannot do alone it hands, by exec, to the TypeScript plugin installed beside
 * it (DIR/warren.d/node running DIR/warren.d/warren.cjs, DIR being this executable's directory),
 * with the same environment and the same stdin bytes, so the runtime sees that plugin's stdout
 * and exit code as this process's.
 *
 * One call:
 * 1. CNI_COMMAND unset: not a call it can relay (a bad environment, or a person running the
 *    command line): the plugin runs at once, stdin untouched, with this process's arguments.
 * 2. Reads all of stdin (at most MAX_CONFIG_BYTES; one byte more, and the plugin reports the
 *    limit). Stdin empty or not a JSON object: the plugin reports it.
 * 3. The socket: `ipam.socket` when the config names an absolute one (find-socket.c), else
 *    WARREN_SOCKET when set and not empty, else DEFAULT_SOCKET.
 * 4. POST /v1/cni with `X-Warren-Answer: stdout`: the envelope of the CNI variables with the
 *    config spliced in as read, exactly what the TypeScript plugin sends (agent-exchange.c
 *    agent_request; the wire is defined in src/api/cni-wire.ts).
 * 5. An answer `200` with `X-Warren-Exit: N` and no `X-Warren-Fallback` header: its body goes to
 *    stdout as it is and the process exits N. Anything else (no agent, refused, timed out after
 *    AGENT_EXCHANGE_TIMEOUT_MS, an answer that is not that) hands the call to the plugin, which
 *    journals a DEL, answers ADD 11, STATUS 50, reports a bad config, with its own words. When the
 *    deadline passed, the plugin is told so (WARREN_AGENT_TIMED_OUT_MS=<ms waited>) and does not
 *    wait for the agent again: a wedged agent costs one wait, not two.
 * If the plugin cannot be run either, the one message of the forwarder's own is printed: a CNI
 * error 11 naming why, exit 1.
 *
 * Guarantees:
 * - Bounded memory: stdin in a static buffer of MAX_CONFIG_BYTES + 1; the answer's head in a
 *   static MAX_HEAD_BYTES (agent-exchange.c); one allocation for the request head and envelope
 *   (agent-exchange.c; each CNI variable is at most MAX_VARIABLE_BYTES, six times that escaped),
 *   one for the answer's body (at most MAX_BODY_BYTES, its Content-Length), one for the plugin's
 *   argument vector (argc + 2 pointers). Each is freed before the process exits, on every path, a
 *   failure's too (test/plugin/sanitized-build.test.ts: a leak is reported wherever its pointer
 *   lingers). No recursion; the config is scanned once (find-socket.c) and otherwise copied as
 *   it is, never parsed.
 * - Never prints a partial answer: the body is read whole before the first byte goes to stdout,
 *   so any failure before then can still hand the call to the plugin.
 * - Never dies of SIGPIPE from the agent (MSG_NOSIGNAL) and changes no signal disposition, so the
 *   plugin it execs inherits the runtime's.
 * - The environment is passed on untouched (but for WARREN_AGENT_TIMED_OUT_MS after a timeout); no
 *   descriptor of its own leaks into the plugin.
 *
 * WARREN_FORWARDER_FALLBACK_DIR, when set and not empty, replaces DIR/warren.d (for tests).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent-exchange.h"
#include "find-socket.h"

extern char **environ;

/* The agent's default socket (src/api/socket.ts). */
#define DEFAULT_SOCKET "/run/warren/warren.sock"
/* The TypeScript plugin's FORWARDER_TIMED_OUT_ENV (src/api/limits.ts): set, to the milliseconds
 * waited, when the agent did not answer within AGENT_EXCHANGE_TIMEOUT_MS. */
#define TIMED_OUT_ENV "WARREN_AGENT_TIMED_OUT_MS"
#define STRINGIFY(x) #x
#define DECIMAL(x) STRINGIFY(x)
#define TIMED_OUT_VALUE DECIMAL(AGENT_EXCHANGE_TIMEOUT_MS)
/* run_plugin's `replay_stdin` for a call the agent did not answer in time: replayed, and told. */
#define REPLAY_TIMED_OUT 2

static char config[MAX_CONFIG_BYTES + 1];
static size_t config_len;

/* ---- The TypeScript plugin --------------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n);

/* The forwarder's one message of its own: neither the agent nor the plugin could answer. */
static _Noreturn void cannot_run_plugin(int error) {
  static const char start[] = "{\"cniVersion\":\"1.1.0\",\"code\":11,\"msg\":";
  const char *why = strerror(error);
  char reason[512];
  snprintf(reason, sizeof reason, "could not reach the agent, and the Warren plugin beside this forwarder could not be run: %s", why);
  char message[sizeof start + 6 * sizeof reason + 4];
  char *end = agent_json_string(message + sizeof start - 1, reason);
  memcpy(message, start, sizeof start - 1);
  *end++ = '}';
  (void)write_all(1, message, (size_t)(end - message));
  exit(1);
}

/* The directory the plugin is installed in: WARREN_FORWARDER_FALLBACK_DIR, or DIR/warren.d. */
static int plugin_dir(char *out, size_t size) {
  const char *override = getenv("WARREN_FORWARDER_FALLBACK_DIR");
  if (override != NULL && *override != '\0') {
    if (strlen(override) >= size) return ENAMETOOLONG;
    strcpy(out, override);
    return 0;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) return errno;
  if ((size_t)n >= sizeof self - 1) return ENAMETOOLONG;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash == NULL) return ENOENT;
  slash[1] = '\0';
  if ((size_t)snprintf(out, size, "%swarren.d", self) >= size) return ENAMETOOLONG;
  return 0;
}

/*
 * Hands the call to the TypeScript plugin by exec: it reads the same stdin (the bytes already read,
 * from a memfd, when `replay_stdin`) under the same environment. Returns only by exiting.
 */
static _Noreturn void run_plugin(int argc, char **argv, int replay_stdin) {
  if (replay_stdin == REPLAY_TIMED_OUT) {
    /* The one change to the environment: the plugin must not wait for this agent a second time. */
    if (setenv(TIMED_OUT_ENV, TIMED_OUT_VALUE, 1) != 0) cannot_run_plugin(errno);
  }
  char dir[PATH_MAX];
  char node[PATH_MAX];
  char bundle[PATH_MAX];
  int error = plugin_dir(dir, sizeof dir);
  if (error != 0) cannot_run_plugin(error);
  if ((size_t)snprintf(node, sizeof node, "%s/node", dir) >= sizeof node) cannot_run_plugin(ENAMETOOLONG);
  if ((size_t)snprintf(bundle, sizeof bundle, "%s/warren.cjs", dir) >= sizeof bundle) cannot_run_plugin(ENAMETOOLONG);
  if (replay_stdin) {
    int fd = memfd_create("warren-stdin", MFD_CLOEXEC);
    if (fd < 0) cannot_run_plugin(errno);
    for (size_t off = 0; off < config_len;) {
      ssize_t n = write(fd, config + off, config_len - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) cannot_run_plugin(n < 0 ? errno : EIO);
      off += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) cannot_run_plugin(errno);
    if (fd == 0) {
      /* stdin was closed, so the memfd took fd 0: keep it open across exec. */
      if (fcntl(0, F_SETFD, 0) != 0) cannot_run_plugin(errno);
    } else {
      if (dup2(fd, 0) != 0) cannot_run_plugin(errno);
      close(fd);
    }
  }
  /* ["node", bundle, this process's arguments...]: a runtime passes none; a person may. */
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (args == NULL) cannot_run_plugin(ENOMEM);
  args[0] = "node";
  args[1] = bundle;
  for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
  execve(node, args, environ);
  error = errno;
  free(args);
  cannot_run_plugin(error);
}

/* ---- I/O ----------------------------------------------------------------------------------- */

/* Writes all of p[0..n) to fd (partial writes, EINTR, a non-blocking fd); 0 when it cannot (the
 * caller frees what it holds, then exits 1). */
static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      poll(&pfd, 1, -1);
    } else {
      return 0;
    }
  }
  return 1;
}

enum stdin_state { STDIN_READ, STDIN_TOO_LARGE, STDIN_FAILED };

static enum stdin_state read_stdin(void) {
  for (;;) {
    if (config_len == sizeof config) return STDIN_TOO_LARGE;
    ssize_t n = read(0, config + config_len, sizeof config - config_len);
    if (n > 0) {
      config_len += (size_t)n;
    } else if (n == 0) {
      return STDIN_READ;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      struct pollfd pfd = {.fd = 0, .events = POLLIN};
      poll(&pfd, 1, -1);
    } else {
      return STDIN_FAILED;
    }
  }
}

/* The agent's socket: ipam.socket, WARREN_SOCKET, the default. 0 when the plugin must answer. */
static int choose_socket(char *path, size_t size) {
  switch (warren_find_socket(config, config_len, path, size)) {
    case WARREN_SOCKET_FOUND: return 1;
    case WARREN_SOCKET_UNUSABLE: return 0;
    case WARREN_SOCKET_TOO_DEEP: return 0;
    case WARREN_SOCKET_NOT_FOUND: break;
  }
  const char *env = getenv("WARREN_SOCKET");
  if (env == NULL || *env == '\0') env = DEFAULT_SOCKET;
  if (strlen(env) >= size) return 0;
  strcpy(path, env);
  return 1;
}

int main(int argc, char **argv) {
  if (getenv("CNI_COMMAND") == NULL) run_plugin(argc, argv, 0);
  switch (read_stdin()) {
    case STDIN_READ: break;
    case STDIN_TOO_LARGE: run_plugin(argc, argv, 1);
    case STDIN_FAILED:
      /* Nothing read: the plugin meets the same failing stdin and reports it. */
      run_plugin(argc, argv, config_len > 0);
  }
  size_t first = 0;
  while (first < config_len && (config[first] == ' ' || config[first] == '\t' || config[first] == '\n' || config[first] == '\r')) first++;
  if (first == config_len || config[first] != '{') run_plugin(argc, argv, 1);

  char path[WARREN_SOCKET_PATH_MAX + 1];
  if (!choose_socket(path, sizeof path)) run_plugin(argc, argv, 1);
  size_t request_len;
  char *request = agent_request(getenv, config_len, &request_len);
  if (request == NULL) run_plugin(argc, argv, 1);

  struct agent_answer answer;
  int answered = 0;
  int fd = agent_connect(path);
  if (fd >= 0) {
    struct iovec parts[3] = {
        {.iov_base = request, .iov_len = request_len},
        {.iov_base = config, .iov_len = config_len},
        {.iov_base = "}", .iov_len = 1},
    };
    answered = agent_exchange(fd, parts, 3, &answer);
    close(fd);
  }
  /* Freed before any way out: run_plugin ends in exec or exit, and a pointer left in this frame
   * is a leak wherever it lingers (the sanitized builds do not count stacks as roots). */
  free(request);
  /* A connect that waited out the deadline on a full backlog is a wedged agent too. */
  if (!answered) run_plugin(argc, argv, agent_deadline_passed() ? REPLAY_TIMED_OUT : 1);
  int printed = write_all(1, answer.body, answer.body_len);
  free(answer.body);
  return printed ? answer.exit_code : 1;
}
