/*
 * Test driver for warren_find_socket (src/plugin/forwarder/find-socket.c), compiled by
 * test/plugin/find-socket.test.ts: for each file named on the command line (or stdin when none),
 * prints one line: the answer (found, not-found, unusable, too-deep) and, when found, the path as
 * hexadecimal bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/plugin/forwarder/find-socket.h"

static char *slurp(FILE *f, size_t *len) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while (buf != NULL && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  *len = n;
  return buf;
}

static void answer(FILE *f) {
  size_t len;
  char *text = slurp(f, &len);
  if (text == NULL) exit(2);
  /* Exact size, so a sanitized build of the driver would see a read past the end. */
  char *exact = malloc(len > 0 ? len : 1);
  memcpy(exact, text, len);
  free(text);
  char out[WARREN_SOCKET_PATH_MAX + 1];
  enum warren_socket_answer a = warren_find_socket(exact, len, out, sizeof out);
  free(exact);
  switch (a) {
    case WARREN_SOCKET_FOUND:
      printf("found ");
      for (const unsigned char *p = (const unsigned char *)out; *p; p++) printf("%02x", *p);
      printf("\n");
      break;
    case WARREN_SOCKET_NOT_FOUND: printf("not-found\n"); break;
    case WARREN_SOCKET_UNUSABLE: printf("unusable\n"); break;
    case WARREN_SOCKET_TOO_DEEP: printf("too-deep\n"); break;
  }
}

int main(int argc, char **argv) {
  if (argc == 1) answer(stdin);
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (f == NULL) {
      perror(argv[i]);
      return 2;
    }
    answer(f);
    fclose(f);
  }
  return 0;
}
