#!/usr/bin/env bash
# Time one `mst` command with an older revision and with this checkout, alternately, pinned to
# core 0: on a machine whose speed drifts (a shared VM), the ratio of the two is the steady
# figure. Usage, from the repository root:
#
#   bench/compare_rev.sh REV ROUNDS -- grade RUN_DIR --runs-dir /dev/shm/ab-out --json
#   bench/compare_rev.sh REV ROUNDS -- run EVAL.yaml --runs-dir /dev/shm/ab-out --json
#
# REV is checked out in a temporary worktree; both sides run with this venv, the older one with
# PYTHONPATH pointing at its sources. The directory given to --runs-dir is emptied between runs.
set -euo pipefail
rev=$1 rounds=$2
shift 2
[ "$1" = "--" ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
old=$(mktemp -d /dev/shm/mst-rev.XXXXXX)
trap 'git -C "$root" worktree remove --force "$old" >/dev/null 2>&1 || rm -rf "$old"' EXIT
git -C "$root" worktree add --detach -f "$old" "$rev" >/dev/null 2>&1
out=""
prev=""
for arg in "$@"; do
  [ "$prev" = "--runs-dir" ] && out=$arg
  prev=$arg
done
for _ in $(seq "$rounds"); do
  for side in old new; do
    src=$root/src
    [ "$side" = old ] && src=$old/src
    [ -n "$out" ] && rm -rf "$out"
    /usr/bin/time -f "$side: %e s wall, %U s user, %S s sys, %M KB peak RSS" \
      env PYTHONPATH="$src" taskset -c 0 "$root/.venv/bin/mst" "$@" >/dev/null || {
        # A documented non-zero exit (3: cases incomplete, as after `run --no-grade`) still
        # timed the whole command; say so and go on.
        echo "$side: exit $?"
      }
  done
done
[ -n "$out" ] && rm -rf "$out"
