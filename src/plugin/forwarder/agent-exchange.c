/*
 * The forwarder's exchange with the agent: one HTTP/1.1 request over a unix socket, one answer
 * read whole, within AGENT_EXCHANGE_TIMEOUT_MS. The request is the one src/api/cni-wire.ts
 * defines: the CNI variables as JSON strings in the envelope's order, then the config's bytes as
 * they are (sent by the caller); what they mean is the agent's business, not this file's. The
 * answer's head is parsed strictly (status 200, one Content-Length, one X-Warren-Exit, no
 * X-Warren-Fallback, no Transfer-Encoding, CRLF line ends): anything else is "not an answer to
 * print", and the caller hands the call to the TypeScript plugin. Memory: the request's head and
 * envelope in one allocation, the answer's head in a static MAX_HEAD_BYTES buffer, its body in one
 * allocation of its Content-Length (at most MAX_BODY_BYTES).
 */
#include "agent-exchange.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- The request ---------------------------------------------------------------------------- */

/* Bytes `s` takes as a JSON string body, escaped as JSON.stringify escapes it. */
static size_t escaped_length(const char *s) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') n += 2;
    else if (c < 0x20) n += 6;
    else n += 1;
  }
  return n;
}

char *agent_json_string(char *out, const char *s) {
  static const char hex[] = "0123456789abcdef";
  *out++ = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    switch (c) {
      case '"': *out++ = '\\'; *out++ = '"'; break;
      case '\\': *out++ = '\\'; *out++ = '\\'; break;
      case '\b': *out++ = '\\'; *out++ = 'b'; break;
      case '\f': *out++ = '\\'; *out++ = 'f'; break;
      case '\n': *out++ = '\\'; *out++ = 'n'; break;
      case '\r': *out++ = '\\'; *out++ = 'r'; break;
      case '\t': *out++ = '\\'; *out++ = 't'; break;
      default:
        if (c < 0x20) {
          memcpy(out, "\\u00", 4);
          out[4] = hex[c >> 4];
          out[5] = hex[c & 15];
          out += 6;
        } else {
          *out++ = (char)c;
        }
    }
  }
  *out++ = '"';
  return out;
}

/* The envelope's fields in the order cni-wire.ts writes them; `always`: written ("") when unset. */
static const struct {
  const char *variable;
  const char *key;
  int always;
} envelope_fields[] = {
    {"CNI_COMMAND", "{\"command\":", 1},
    {"CNI_ARGS", ",\"args\":", 1},
    {"CNI_CONTAINERID", ",\"containerID\":", 0},
    {"CNI_NETNS", ",\"netns\":", 0},
    {"CNI_IFNAME", ",\"ifname\":", 0},
};
#define ENVELOPE_FIELDS (sizeof envelope_fields / sizeof envelope_fields[0])
#define CONFIG_KEY ",\"config\":"

char *agent_request(char *(*variable)(const char *name), size_t config_len, size_t *request_len) {
  const char *values[ENVELOPE_FIELDS];
  size_t envelope = strlen(CONFIG_KEY);
  for (size_t i = 0; i < ENVELOPE_FIELDS; i++) {
    values[i] = variable(envelope_fields[i].variable);
    if (values[i] == NULL && i == 0) return NULL; /* no CNI_COMMAND: not a call to send */
    if (values[i] == NULL && envelope_fields[i].always) values[i] = "";
    if (values[i] == NULL) continue;
    if (strlen(values[i]) > MAX_VARIABLE_BYTES) return NULL;
    envelope += strlen(envelope_fields[i].key) + escaped_length(values[i]) + 2;
  }
  const size_t body_len = envelope + config_len + 1;
  char http[256];
  int http_len = snprintf(http, sizeof http,
                          "POST /v1/cni HTTP/1.1\r\nHost: warren\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nX-Warren-Answer: stdout\r\n"
                          "Content-Length: %zu\r\n\r\n",
                          body_len);
  char *request = malloc((size_t)http_len + envelope);
  if (request == NULL) return NULL;
  memcpy(request, http, (size_t)http_len);
  char *p = request + http_len;
  for (size_t i = 0; i < ENVELOPE_FIELDS; i++) {
    if (values[i] == NULL) continue;
    p = stpcpy(p, envelope_fields[i].key);
    p = agent_json_string(p, values[i]);
  }
  p = stpcpy(p, CONFIG_KEY);
  *request_len = (size_t)(p - request);
  return request;
}

/* ---- The exchange --------------------------------------------------------------------------- */

static char head[MAX_HEAD_BYTES];
static int64_t deadline_ms;

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events`, within the exchange's deadline; 0 when it is not. */
static int wait_for(int fd, short events) {
  for (;;) {
    int64_t left = deadline_ms - now_ms();
    if (left <= 0) return 0;
    struct pollfd pfd = {.fd = fd, .events = events};
    int r = poll(&pfd, 1, (int)left);
    if (r > 0) return 1;
    if (r == 0) return 0;
    if (errno != EINTR) return 0;
  }
}

int agent_deadline_passed(void) {
  return now_ms() >= deadline_ms;
}

int agent_connect(const char *path) {
  deadline_ms = now_ms() + AGENT_EXCHANGE_TIMEOUT_MS;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  if (len >= sizeof addr.sun_path) return -1;
  memcpy(addr.sun_path, path, len);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  /* A unix-socket connect waits only while the listener's backlog is full, and for this long. */
  struct timeval wait = {.tv_sec = AGENT_EXCHANGE_TIMEOUT_MS / 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  if (connect(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, struct iovec *iov, int count) {
  while (count > 0) {
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)count};
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(fd, POLLOUT)) continue;
      return 0;
    }
    size_t sent = (size_t)n;
    while (count > 0 && sent >= iov->iov_len) {
      sent -= iov->iov_len;
      iov++;
      count--;
    }
    if (count > 0) {
      iov->iov_base = (char *)iov->iov_base + sent;
      iov->iov_len -= sent;
    }
  }
  return 1;
}

/* Reads up to `size` bytes; >0 read, 0 end of stream, -1 error or deadline. */
static ssize_t receive(int fd, char *p, size_t size) {
  for (;;) {
    if (!wait_for(fd, POLLIN)) return -1;
    ssize_t n = recv(fd, p, size, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  }
}

static int is_space(char c) {
  return c == ' ' || c == '\t';
}

/* Header names compare case-insensitively (RFC 9110); `lower` is in lower case. */
static int header_is(const char *name, size_t len, const char *lower) {
  if (strlen(lower) != len) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != lower[i]) return 0;
  }
  return 1;
}

/* A decimal field of digits only, at most `max`; -1 otherwise. */
static int64_t decimal(const char *p, size_t len, int64_t max) {
  if (len == 0) return -1;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (p[i] - '0');
    if (v > max) return -1;
  }
  return v;
}

/*
 * Parses the head (head[0..len), its final CRLF CRLF included). Returns 1 with the exit code and
 * Content-Length when it is an answer to print: status 200, X-Warren-Exit, no X-Warren-Fallback.
 */
static int parse_head(size_t len, int *exit_code, size_t *content_length) {
  const char *p = head;
  const char *end = head + len - 2; /* the last line's CRLF ends the last header */
  if (len < 14 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ') return 0;
  if (memcmp(p + 9, "200", 3) != 0 || (p[12] != ' ' && p[12] != '\r')) return 0;
  const char *line = memchr(p, '\n', len);
  if (line == NULL) return 0;
  line++;
  int64_t exit_value = -1;
  int64_t length = -1;
  while (line < end) {
    const char *eol = memchr(line, '\r', (size_t)(end - line));
    if (eol == NULL || eol[1] != '\n') return 0;
    /* A bare LF would let one line carry two headers past this parser. */
    if (memchr(line, '\n', (size_t)(eol - line)) != NULL) return 0;
    const char *colon = memchr(line, ':', (size_t)(eol - line));
    if (colon == NULL || colon == line || is_space(line[0])) return 0;
    const char *value = colon + 1;
    const char *value_end = eol;
    while (value < value_end && is_space(*value)) value++;
    while (value_end > value && is_space(value_end[-1])) value_end--;
    size_t name_len = (size_t)(colon - line);
    size_t value_len = (size_t)(value_end - value);
    if (header_is(line, name_len, "x-warren-fallback")) return 0;
    if (header_is(line, name_len, "transfer-encoding")) return 0;
    if (header_is(line, name_len, "content-length")) {
      if (length >= 0) return 0;
      length = decimal(value, value_len, MAX_BODY_BYTES);
      if (length < 0) return 0;
    } else if (header_is(line, name_len, "x-warren-exit")) {
      if (exit_value >= 0) return 0;
      exit_value = decimal(value, value_len, MAX_EXIT_CODE);
      if (exit_value < 0) return 0;
    }
    line = eol + 2;
  }
  if (exit_value < 0 || length < 0) return 0;
  *exit_code = (int)exit_value;
  *content_length = (size_t)length;
  return 1;
}

int agent_exchange(int fd, struct iovec *request, int parts, struct agent_answer *answer) {
  if (!send_all(fd, request, parts)) return 0;

  size_t have = 0;
  size_t head_len = 0;
  while (head_len == 0) {
    if (have == sizeof head) return 0;
    ssize_t n = receive(fd, head + have, sizeof head - have);
    if (n <= 0) return 0;
    size_t from = have >= 3 ? have - 3 : 0;
    have += (size_t)n;
    for (size_t i = from; i + 4 <= have; i++) {
      if (memcmp(head + i, "\r\n\r\n", 4) == 0) {
        head_len = i + 4;
        break;
      }
    }
  }
  size_t length;
  if (!parse_head(head_len, &answer->exit_code, &length)) return 0;
  char *body = malloc(length > 0 ? length : 1);
  if (body == NULL) return 0;
  size_t got = have - head_len;
  if (got > length) got = length; /* bytes past the declared body are not the answer */
  memcpy(body, head + head_len, got);
  while (got < length) {
    ssize_t n = receive(fd, body + got, length - got);
    if (n <= 0) {
      free(body);
      return 0;
    }
    got += (size_t)n;
  }
  answer->body = body;
  answer->body_len = length;
  return 1;
}
