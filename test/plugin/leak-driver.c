/*
 * A program that leaves one block of LEAK_BYTES behind at exit, for
 * test/plugin/sanitized-build.test.ts to show what the sanitized builds' leak check reports:
 * - `lingering`: the block is not freed, and its pointer is still in a slot of main's frame when
 *   exit() runs (volatile, so the compiler keeps it there): a leak, to be reported although the
 *   word is on the stack;
 * - `global`: the block's pointer is in a global: still in use, not a leak;
 * - `freed`: the block is freed before exit: nothing to report.
 */
#include <stdlib.h>
#include <string.h>

#define LEAK_BYTES 4242

/* Written and never read here: volatile, so the store is not optimised away. */
char *volatile kept;

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char *volatile lingering = malloc(LEAK_BYTES);
  if (lingering == NULL) return 2;
  memset(lingering, 1, LEAK_BYTES);
  if (strcmp(argv[1], "global") == 0) {
    kept = lingering;
    lingering = NULL;
  } else if (strcmp(argv[1], "freed") == 0) {
    free(lingering);
    lingering = NULL;
  } else if (strcmp(argv[1], "lingering") != 0) {
    return 2;
  }
  exit(0);
}
