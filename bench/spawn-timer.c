/*
 * spawn-timer: times plugin calls without the benchmark's own process-spawning overhead.
 * Usage: spawn-timer N WIDTH STDIN_FILE -- EXE [ARGS...]
 * Runs N calls of EXE, at most WIDTH in flight, each with stdin from STDIN_FILE, stdout captured
 * (at most 64 KiB per call; written to $SPAWN_TIMER_OUT/<index> when that is set), stderr to
 * /dev/null, and the driver's own environment, in which every "%i" in the values of
 * CNI_CONTAINERID and CNI_NETNS is replaced by the call's index. Each call is timed from just
 * before posix_spawn to its reaping (CLOCK_MONOTONIC). Prints "index code us" per call, in order
 * of completion (code: exit status, 128+signal if killed, 127 if it could not be spawned), then
 * "total_us T" (first spawn to last exit).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAP (64 * 1024)
#define MAXW 256
#define VALCAP 4096

extern char **environ;

struct slot {
  pid_t pid;          /* 0 when free */
  int fd;             /* read end of the child's stdout, -1 once closed */
  long index;
  long long start;
  size_t len;
  char buf[CAP];
};

static struct slot slots[MAXW];
static int sigpipe_w = -1;

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static void on_chld(int sig) {
  (void)sig;
  int e = errno;
  if (write(sigpipe_w, "x", 1) < 0) { /* pipe full: a wakeup is already pending */ }
  errno = e;
}

/* Writes `prefix` + value with each "%i" replaced by index into out (VALCAP bytes). */
static int substitute(char *out, const char *entry, long index) {
  size_t o = 0;
  char num[32];
  int nl = snprintf(num, sizeof num, "%ld", index);
  for (const char *p = entry; *p; p++) {
    const char *eq = strchr(entry, '=');
    if (p > eq && p[0] == '%' && p[1] == 'i') {
      if (o + (size_t)nl >= VALCAP) return -1;
      memcpy(out + o, num, (size_t)nl);
      o += (size_t)nl;
      p++;
    } else {
      if (o + 1 >= VALCAP) return -1;
      out[o++] = *p;
    }
  }
  out[o] = 0;
  return 0;
}

static void drain(struct slot *s) {
  while (s->fd >= 0) {
    char tmp[4096];
    ssize_t r = read(s->fd, tmp, sizeof tmp);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    if (r <= 0) { close(s->fd); s->fd = -1; return; }
    size_t keep = (size_t)r;
    if (keep > CAP - s->len) keep = CAP - s->len;
    memcpy(s->buf + s->len, tmp, keep);
    s->len += keep;
  }
}

static void finish(struct slot *s, int code, long long end, const char *outdir) {
  drain(s);
  if (s->fd >= 0) { close(s->fd); s->fd = -1; }
  if (outdir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%ld", outdir, s->index);
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(s->buf, 1, s->len, f); fclose(f); }
  }
  printf("%ld %d %lld\n", s->index, code, end - s->start);
  s->pid = 0;
}

int main(int argc, char **argv) {
  if (argc < 6 || strcmp(argv[4], "--") != 0) {
    fprintf(stderr, "usage: spawn-timer N WIDTH STDIN_FILE -- EXE [ARGS...]\n");
    return 2;
  }
  long n = atol(argv[1]);
  int width = atoi(argv[2]);
  const char *stdin_file = argv[3];
  char **child_argv = argv + 5;
  const char *outdir = getenv("SPAWN_TIMER_OUT");
  if (n < 0 || width < 1 || width > MAXW) { fprintf(stderr, "spawn-timer: bad N or WIDTH\n"); return 2; }

  size_t envc = 0;
  while (environ[envc]) envc++;
  char **envp = calloc(envc + 1, sizeof *envp);
  if (!envp) return 2;
  int templ[2] = {-1, -1};
  for (size_t i = 0; i < envc; i++) {
    envp[i] = environ[i];
    if (strncmp(environ[i], "CNI_CONTAINERID=", 16) == 0) templ[0] = (int)i;
    if (strncmp(environ[i], "CNI_NETNS=", 10) == 0) templ[1] = (int)i;
  }
  static char values[2][VALCAP];

  int sp[2];
  if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) < 0) { perror("pipe2"); return 2; }
  sigpipe_w = sp[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  for (int i = 0; i < width; i++) slots[i].fd = -1;

  long next = 0, done = 0;
  int running = 0;
  long long t0 = now_us(), tend = t0;
  while (done < n) {
    /* Fill free slots. */
    for (int i = 0; i < width && next < n; i++) {
      struct slot *s = &slots[i];
      if (s->pid != 0) continue;
      int p[2];
      if (pipe2(p, O_CLOEXEC) < 0) { perror("pipe2"); return 2; }
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      for (int k = 0; k < 2; k++) {
        if (templ[k] < 0) continue;
        if (substitute(values[k], environ[templ[k]], next) < 0) { fprintf(stderr, "spawn-timer: value too long\n"); return 2; }
        envp[templ[k]] = values[k];
      }
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 0, stdin_file, O_RDONLY, 0);
      posix_spawn_file_actions_adddup2(&fa, p[1], 1);
      posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
      s->index = next++;
      s->len = 0;
      s->fd = p[0];
      s->start = now_us();
      pid_t pid;
      int err = posix_spawnp(&pid, child_argv[0], &fa, NULL, child_argv, envp);
      posix_spawn_file_actions_destroy(&fa);
      close(p[1]);
      if (err != 0) {
        s->pid = -1;
        finish(s, 127, now_us(), outdir);
        done++;
        continue;
      }
      s->pid = pid;
      running++;
    }
    if (running == 0) continue;

    /* Wait for output or a child's exit. */
    struct pollfd pfd[MAXW + 1];
    int map[MAXW + 1], np = 0;
    pfd[np].fd = sp[0]; pfd[np].events = POLLIN; map[np++] = -1;
    for (int i = 0; i < width; i++)
      if (slots[i].pid > 0 && slots[i].fd >= 0) { pfd[np].fd = slots[i].fd; pfd[np].events = POLLIN; map[np++] = i; }
    if (poll(pfd, (nfds_t)np, -1) < 0 && errno != EINTR) { perror("poll"); return 2; }
    for (int j = 1; j < np; j++)
      if (pfd[j].revents) drain(&slots[map[j]]);
    char junk[64];
    while (read(sp[0], junk, sizeof junk) > 0) {}
    for (;;) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      long long end = now_us();
      for (int i = 0; i < width; i++) {
        if (slots[i].pid != pid) continue;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        finish(&slots[i], code, end, outdir);
        running--;
        done++;
        tend = end;
        break;
      }
    }
  }
  printf("total_us %lld\n", tend - t0);
  free(envp);
  return 0;
}
