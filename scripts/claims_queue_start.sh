#!/usr/bin/env bash
# Starts the claims queue (scripts/claims_queue.py) detached, so that it outlives this shell and the session: its
# code from a worktree at a fixed commit (COMMIT, default this checkout's HEAD), made once at /work/wt-queue-<commit>,
# so that later changes to the checkout never alter running jobs; its runs under QUEUE_ROOT (default /work/queue:
# results/, .claims_queue/locks and logs, data -> this checkout's data/). Runs a previous queue left there are kept:
# finished ones are skipped, interrupted ones resume (resume=auto), ones still running are left to finish.
# A queue already running on QUEUE_ROOT is stopped first (its jobs go on; the new queue skips them while they run);
# the code worktrees of earlier commits are removed once no process runs from them.
#
#   scripts/claims_queue_start.sh [COMMIT]
#   QUEUE_FILE=scripts/rerun_queue.txt scripts/claims_queue_start.sh     (another list of deciders, read at COMMIT)
#   QUEUE_ARGS=--replay scripts/claims_queue_start.sh     (then replay every run a current claim reads: issue 57)
#   tail -f /work/queue/claims_queue.log          (progress lines)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --short=7 "${1:-HEAD}")
code=/work/wt-queue-$commit
root=${QUEUE_ROOT:-/work/queue}
[ -d "$code" ] || git -C "$repo" worktree add --detach "$code" "$commit" >/dev/null
[ -e "$code/.venv" ] || ln -s "$repo/.venv" "$code/.venv"
mkdir -p "$root/.claims_queue"
[ -e "$root/data" ] || ln -s "$repo/data" "$root/data"
old=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("pid", ""))' \
      "$root/.claims_queue/queue.lock" 2>/dev/null || true)
if [ -n "$old" ] && grep -qs claims_queue.py "/proc/$old/cmdline"; then
    kill "$old" && while kill -0 "$old" 2>/dev/null; do sleep 1; done
fi
cd "$root"
PYTHONPATH="$code/src" nohup setsid "$code/.venv/bin/python" "$code/scripts/claims_queue.py" --root "$root" \
    --queue "$code/${QUEUE_FILE:-scripts/claims_queue.txt}" ${QUEUE_ARGS:-} \
    >> "$root/claims_queue.log" 2>&1 < /dev/null &
for stale in /work/wt-queue-*; do   # earlier commits' code, once no run uses it
    [ "$stale" = "$code" ] || grep -aqs "$stale/[.]venv/bin/python" /proc/[0-9]*/cmdline ||
        git -C "$repo" worktree remove --force "$stale"
done
echo "claims queue: code $code ($commit), runs under $root, log $root/claims_queue.log"
