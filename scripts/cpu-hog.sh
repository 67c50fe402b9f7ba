#!/usr/bin/env bash
# Loads the machine on purpose, to show that the suite and the agent hold on a busy node:
#   scripts/cpu-hog.sh start [N]   starts N busy-looping processes (default 8), records their PIDs
#   scripts/cpu-hog.sh stop        stops exactly those processes, by PID
#   scripts/cpu-hog.sh run [N] -- CMD...   starts N, runs CMD, stops them whatever CMD did; CMD's exit code
# The PID file is private to this checkout (.warren/cpu-hog.pids), so hogs of another checkout are
# never touched. Each hog is a plain `sh` loop at normal priority: it competes with the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
pids_file=.warren/cpu-hog.pids

start() {
  local n=${1:-8}
  mkdir -p .warren
  if [ -s "$pids_file" ]; then
    echo "cpu-hog: already running ($(wc -l <"$pids_file") processes); stop them first" >&2
    exit 1
  fi
  for _ in $(seq "$n"); do
    sh -c 'while :; do :; done' &
    echo $! >>"$pids_file"
  done
  echo "cpu-hog: started $n busy loops"
}

stop() {
  [ -f "$pids_file" ] || return 0
  while read -r pid; do
    # Only a process that is still our busy loop: a PID reused since is left alone.
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'while :; do :; done'; then
      kill "$pid" 2>/dev/null || true
    fi
  done <"$pids_file"
  rm -f "$pids_file"
  echo "cpu-hog: stopped"
}

case "${1:-}" in
  start) start "${2:-8}" ;;
  stop) stop ;;
  run)
    shift
    n=8
    if [ "${1:-}" != "--" ]; then n=$1; shift; fi
    [ "${1:-}" = "--" ] && shift
    start "$n"
    trap stop EXIT
    set +e
    "$@"
    rc=$?
    exit "$rc"
    ;;
  *)
    echo "usage: scripts/cpu-hog.sh start [N] | stop | run [N] -- CMD..." >&2
    exit 2
    ;;
esac
