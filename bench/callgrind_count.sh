#!/usr/bin/env bash
# Count the instructions one `mst` command executes (valgrind's callgrind, the whole process):
# unlike CPU time on a shared VM, the count does not move with the machine's load, so two
# revisions can be compared at any time. Usage, from the repository root:
#
#   bench/callgrind_count.sh SRC OUTDIR -- run EVAL.yaml --runs-dir OUTDIR/runs --json
#
# SRC is the `src` folder of the revision to count (this checkout's, or an older worktree's);
# compile its .pyc files first (run the command once), or the count includes compiling them.
set -euo pipefail
src=$1 out=$2
shift 2
[ "$1" = "--" ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out" && mkdir -p "$out"
env -u PYTHONDONTWRITEBYTECODE PYTHONHASHSEED=0 PYTHONPATH="$src" \
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "$root/.venv/bin/python" -m mst "$@" >/dev/null 2>"$out/valgrind.log"
grep -o "Collected : [0-9]*" "$out/valgrind.log"
