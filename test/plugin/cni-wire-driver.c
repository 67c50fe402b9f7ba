/*
 * Test driver for the forwarder's side of the CNI wire (src/plugin/forwarder/agent-exchange.c),
 * compiled by test/plugin/cni-wire-c.test.ts: reads the vector file generated from the wire's
 * definition (test/fixtures/cni-wire-vectors.txt, format in test/api/cni-wire-vectors.ts) and
 * checks, vector by vector:
 * - request: agent_request over the vector's variables, then the config and "}", is the vector's
 *   bytes; or it refuses (NULL) where the vector is `refused`;
 * - answer: agent_exchange, against a peer on a unix socket (`socket-path`) that sends the raw
 *   bytes, prints the vector's exit code and body, or hands the call back;
 * - limit: each limit of the file equals the one compiled in, and each compiled-in one is in it.
 * Prints a line per mismatch and a summary; exits 0 when all agree, 1 on a mismatch, 2 when the
 * file cannot be read.
 *
 * Usage: cni-wire-driver VECTOR-FILE SOCKET-PATH
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/plugin/forwarder/agent-exchange.h"

struct bytes {
  char *data;
  size_t len;
};

static int mismatches;
static const char *vector_file;
static int line_number;

static _Noreturn void malformed(const char *why) {
  fprintf(stderr, "%s:%d: %s\n", vector_file, line_number, why);
  exit(2);
}

/* Appends `count` copies of p[0..n) to `b`, kept NUL-terminated; one allocation a call. */
static void append_repeated(struct bytes *b, const char *p, size_t n, size_t count) {
  char *grown = realloc(b->data, b->len + n * count + 1);
  if (grown == NULL) malformed("out of memory");
  b->data = grown;
  for (size_t i = 0; i < count; i++, b->len += n) memcpy(b->data + b->len, p, n);
  b->data[b->len] = '\0';
}

static void append(struct bytes *b, const char *p, size_t n) {
  append_repeated(b, p, n, 1);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* HEX decoded into `out` (which has room for strlen(hex) / 2 bytes); its length. */
static size_t unhex(const char *hex, char *out) {
  size_t len = strlen(hex);
  if (len % 2 != 0) malformed("odd hex");
  for (size_t i = 0; i < len; i += 2) {
    int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) malformed("bad hex digit");
    out[i / 2] = (char)(hi * 16 + lo);
  }
  return len / 2;
}

/* The segments `x:HEX` and `r:COUNT:HEX` from strtok's position to the line's end, concatenated. */
static struct bytes segments(void) {
  struct bytes out = {NULL, 0};
  append(&out, "", 0);
  for (char *word = strtok(NULL, " "); word != NULL; word = strtok(NULL, " ")) {
    char *unit = malloc(strlen(word) / 2 + 1);
    if (unit == NULL) malformed("out of memory");
    if (strncmp(word, "x:", 2) == 0) {
      append(&out, unit, unhex(word + 2, unit));
    } else if (strncmp(word, "r:", 2) == 0) {
      char *end;
      unsigned long count = strtoul(word + 2, &end, 10);
      if (*end != ':') malformed("bad repeat segment");
      size_t n = unhex(end + 1, unit);
      append_repeated(&out, unit, n, count);
    } else {
      malformed("bad segment");
    }
    free(unit);
  }
  return out;
}

static void mismatch(const char *kind, const char *name, const char *why) {
  printf("mismatch %s %s: %s\n", kind, name, why);
  mismatches++;
}

/* ---- Requests -------------------------------------------------------------------------------- */

#define MAX_SET 8
static char *set_names[MAX_SET];
static struct bytes set_values[MAX_SET];
static int set_count;

/* The vector's variables, as agent_request looks them up (getenv's signature). */
static char *lookup(const char *name) {
  for (int i = 0; i < set_count; i++)
    if (strcmp(set_names[i], name) == 0) return set_values[i].data;
  return NULL;
}

static void check_request(const char *name, const struct bytes *config, const struct bytes *sends, int refused) {
  size_t len = 0;
  char *request = agent_request(lookup, config->len, &len);
  if (request == NULL) {
    if (!refused) mismatch("request", name, "agent_request refused a request the vector sends");
    return;
  }
  if (refused) {
    mismatch("request", name, "agent_request built a request the vector refuses");
  } else {
    struct bytes whole = {NULL, 0};
    append(&whole, request, len);
    append(&whole, config->data, config->len);
    append(&whole, "}", 1);
    if (whole.len != sends->len || memcmp(whole.data, sends->data, whole.len) != 0) {
      size_t at = 0;
      while (at < whole.len && at < sends->len && whole.data[at] == sends->data[at]) at++;
      char why[160];
      snprintf(why, sizeof why, "bytes differ from offset %zu (C %zu bytes, vector %zu)", at, whole.len, sends->len);
      mismatch("request", name, why);
    }
    free(whole.data);
  }
  free(request);
}

/* ---- Answers --------------------------------------------------------------------------------- */

static int listener = -1;

static void listen_at(const char *path) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) malformed("socket path too long");
  strcpy(addr.sun_path, path);
  unlink(path);
  listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 4) != 0) {
    perror("listen");
    exit(2);
  }
}

/* The peer: sends `raw`, ends its side, and reads the request until the forwarder closes. */
static _Noreturn void serve(int conn, const struct bytes *raw) {
  for (size_t off = 0; off < raw->len;) {
    ssize_t n = send(conn, raw->data + off, raw->len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0);
    off += (size_t)n;
  }
  shutdown(conn, SHUT_WR);
  char sink[4096];
  while (read(conn, sink, sizeof sink) > 0) {
  }
  _exit(0);
}

static void check_answer(const char *path, const char *name, const struct bytes *raw, int prints, int exit_code,
                         const struct bytes *body) {
  int fd = agent_connect(path);
  int conn = fd < 0 ? -1 : accept(listener, NULL, NULL);
  if (conn < 0) {
    perror("connect/accept");
    exit(2);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(2);
  }
  if (pid == 0) {
    close(fd);
    serve(conn, raw);
  }
  close(conn);
  static char request[] = "POST /v1/cni HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
  struct iovec iov = {.iov_base = request, .iov_len = sizeof request - 1};
  struct agent_answer answer;
  int answered = agent_exchange(fd, &iov, 1, &answer);
  close(fd);
  waitpid(pid, NULL, 0);
  if (!answered) {
    if (prints) mismatch("answer", name, "handed back an answer the vector prints");
    return;
  }
  if (!prints) {
    mismatch("answer", name, "printed an answer the vector hands back");
  } else if (answer.exit_code != exit_code) {
    char why[80];
    snprintf(why, sizeof why, "exit code %d, the vector's %d", answer.exit_code, exit_code);
    mismatch("answer", name, why);
  } else if (answer.body_len != body->len || memcmp(answer.body, body->data, body->len) != 0) {
    mismatch("answer", name, "the body printed is not the vector's");
  }
  free(answer.body);
}

/* ---- Limits ---------------------------------------------------------------------------------- */

static struct {
  const char *name;
  unsigned long value;
  int seen;
} limits[] = {
    {"max-config-bytes", MAX_CONFIG_BYTES, 0},
    {"max-variable-bytes", MAX_VARIABLE_BYTES, 0},
    {"max-answer-head-bytes", MAX_HEAD_BYTES, 0},
    {"max-answer-body-bytes", MAX_BODY_BYTES, 0},
    {"max-exit-code", MAX_EXIT_CODE, 0},
    {"answer-timeout-ms", AGENT_EXCHANGE_TIMEOUT_MS, 0},
};
#define LIMITS (sizeof limits / sizeof limits[0])

static void check_limit(const char *name, const char *value) {
  for (size_t i = 0; i < LIMITS; i++) {
    if (strcmp(limits[i].name, name) != 0) continue;
    limits[i].seen = 1;
    char *end;
    unsigned long v = strtoul(value, &end, 10);
    if (*end != '\0' || v != limits[i].value) {
      char why[120];
      snprintf(why, sizeof why, "the vector file says %s, the C side has %lu", value, limits[i].value);
      mismatch("limit", name, why);
    }
    return;
  }
  mismatch("limit", name, "the C side has no such limit");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s VECTOR-FILE SOCKET-PATH\n", argv[0]);
    return 2;
  }
  vector_file = argv[1];
  FILE *f = fopen(vector_file, "r");
  if (f == NULL) {
    perror(vector_file);
    return 2;
  }
  listen_at(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  int requests = 0, answers = 0, limit_count = 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  /* The vector being read: its kind, name and parts. */
  char kind[16] = "", name[128] = "";
  struct bytes config = {NULL, 0}, sends = {NULL, 0}, raw = {NULL, 0}, body = {NULL, 0};
  int refused = 0, prints = 0, exit_code = -1;
  while ((got = getline(&line, &cap, f)) >= 0) {
    line_number++;
    if (got > 0 && line[got - 1] == '\n') line[got - 1] = '\0';
    if (line[0] == '#' || line[0] == '\0') continue;
    char *word = strtok(line, " ");
    if (strcmp(word, "limit") == 0) {
      char *limit = strtok(NULL, " "), *value = strtok(NULL, " ");
      if (limit == NULL || value == NULL) malformed("limit needs a name and a value");
      check_limit(limit, value);
      limit_count++;
    } else if (strcmp(word, "request") == 0 || strcmp(word, "answer") == 0) {
      char *n = strtok(NULL, " ");
      if (n == NULL || strlen(n) >= sizeof name || kind[0] != '\0') malformed("bad vector start");
      strcpy(kind, word);
      strcpy(name, n);
      set_count = 0;
      refused = prints = 0;
      exit_code = -1;
      config.len = sends.len = raw.len = body.len = 0;
    } else if (strcmp(word, "set") == 0) {
      char *variable = strtok(NULL, " ");
      if (variable == NULL || set_count == MAX_SET) malformed("bad set");
      set_names[set_count] = strdup(variable);
      set_values[set_count] = segments();
      if (strlen(set_values[set_count].data) != set_values[set_count].len) malformed("a variable holds a NUL");
      set_count++;
    } else if (strcmp(word, "config") == 0) {
      free(config.data);
      config = segments();
    } else if (strcmp(word, "sends") == 0) {
      free(sends.data);
      sends = segments();
    } else if (strcmp(word, "refused") == 0) {
      refused = 1;
    } else if (strcmp(word, "raw") == 0) {
      free(raw.data);
      raw = segments();
    } else if (strcmp(word, "prints") == 0) {
      char *code = strtok(NULL, " ");
      if (code == NULL) malformed("prints needs an exit code");
      exit_code = atoi(code);
      prints = 1;
      free(body.data);
      body = segments();
    } else if (strcmp(word, "handed-back") == 0) {
      prints = 0;
    } else if (strcmp(word, "end") == 0) {
      if (strcmp(kind, "request") == 0) {
        check_request(name, &config, &sends, refused);
        requests++;
      } else if (strcmp(kind, "answer") == 0) {
        check_answer(argv[2], name, &raw, prints, exit_code, &body);
        answers++;
      } else {
        malformed("end without a vector");
      }
      for (int i = 0; i < set_count; i++) {
        free(set_names[i]);
        free(set_values[i].data);
      }
      set_count = 0;
      kind[0] = '\0';
    } else {
      malformed("unknown line");
    }
  }
  for (size_t i = 0; i < LIMITS; i++)
    if (!limits[i].seen) mismatch("limit", limits[i].name, "the vector file does not state it");
  printf("checked %d requests, %d answers, %d limits; %d mismatches\n", requests, answers, limit_count, mismatches);
  free(line);
  free(config.data);
  free(sends.data);
  free(raw.data);
  free(body.data);
  fclose(f);
  close(listener);
  unlink(argv[2]);
  return mismatches == 0 ? 0 : 1;
}
