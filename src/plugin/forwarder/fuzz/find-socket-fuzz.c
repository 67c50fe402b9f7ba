/*
 * libFuzzer harness for warren_find_socket (find-socket.c), built with
 * `clang -fsanitize=fuzzer,address,undefined` by test/plugin/forwarder-fuzz.test.ts over the seed
 * corpus beside it. Besides the sanitizers' findings (any read outside the input, any write outside
 * `out`, any undefined behaviour), it aborts when an answer breaks the scanner's promises:
 * - the answer is one of the four;
 * - FOUND: `out` is NUL-terminated within WARREN_SOCKET_PATH_MAX bytes, starts with '/';
 * - any other answer leaves out[0] NUL;
 * - the answer does not depend on the room in `out` while the path fits, and a path that does not
 *   fit is UNUSABLE, never written past the end (each call gets an exact-size heap buffer);
 * - the answer is the same with JSON whitespace appended (the text's end is not read past).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../find-socket.h"

static enum warren_socket_answer find(const uint8_t *data, size_t size, char *out, size_t outlen) {
  /* An exact-size copy: AddressSanitizer reports a read one byte past the text. */
  char *text = malloc(size > 0 ? size : 1);
  if (text == NULL) abort();
  if (size > 0) memcpy(text, data, size);
  enum warren_socket_answer answer = warren_find_socket(text, size, out, outlen);
  free(text);
  return answer;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char out[WARREN_SOCKET_PATH_MAX + 1];
  memset(out, 'x', sizeof out);
  enum warren_socket_answer answer = find(data, size, out, sizeof out);
  switch (answer) {
    case WARREN_SOCKET_FOUND: {
      const char *nul = memchr(out, '\0', sizeof out);
      if (nul == NULL || nul == out || out[0] != '/') abort();
      break;
    }
    case WARREN_SOCKET_NOT_FOUND:
    case WARREN_SOCKET_UNUSABLE:
    case WARREN_SOCKET_TOO_DEEP:
      if (out[0] != '\0') abort();
      break;
    default:
      abort();
  }

  /* Less room: the same answer while the path fits, UNUSABLE once it does not. */
  size_t room = size > 0 ? data[0] % (sizeof out + 1) : 0;
  char *small = malloc(room > 0 ? room : 1);
  if (small == NULL) abort();
  enum warren_socket_answer again = find(data, size, room > 0 ? small : NULL, room);
  if (answer == WARREN_SOCKET_FOUND) {
    size_t len = strlen(out);
    if (len < room) {
      if (again != WARREN_SOCKET_FOUND || strcmp(small, out) != 0) abort();
    } else if (again != WARREN_SOCKET_UNUSABLE) {
      abort();
    }
  } else if (again != answer) {
    abort();
  }
  free(small);

  /* Trailing whitespace changes nothing. */
  uint8_t *padded = malloc(size + 2);
  if (padded == NULL) abort();
  if (size > 0) memcpy(padded, data, size);
  padded[size] = ' ';
  padded[size + 1] = '\n';
  char out2[sizeof out];
  enum warren_socket_answer padded_answer = find(padded, size + 2, out2, sizeof out2);
  free(padded);
  if (padded_answer != answer) abort();
  if (answer == WARREN_SOCKET_FOUND && strcmp(out, out2) != 0) abort();
  return 0;
}
