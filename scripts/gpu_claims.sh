#!/usr/bin/env bash
# Runs the claims' deciders on a GPU, at most 8 minutes a call: the same runs as the CPU queue, the cells of
# scripts/claims_queue.txt (`python scripts/claims_queue.py --plan --longest-first`: the cells under ROOT neither
# finished, i.e. summary.json completed or diverged, nor held by the CPU queue's locks, the costliest first), each
# with its queue command (its run directory spelled out, resume=auto record=true engine.threads=1) and
# device=$DEVICE. Each call expands the queue (its seconds count against the budget), then runs the cells in that
# order, starts a cell only when its estimate fits what is left of the call's budget, and stops it at the budget
# (`timeout`'s SIGTERM: an unfinished run resumes from its last checkpoint on the next call, resume=auto,
# docs/runs.md). Call it again until the dry run plans nothing.
# The runs' working directory is ROOT: they write ROOT/results/... and read ROOT/data (docs/DATASETS.md), which
# is carried with the working tree to the GPU machine. The code is this script's checkout (PYTHONPATH=its src/).
#
#   scripts/gpu_claims.sh             run this call's jobs (at most BUDGET seconds)
#   scripts/gpu_claims.sh --dry-run   print the plan: what this call would run, and what it leaves for later
#
# Environment: PYTHON (default python3), BUDGET (seconds a call, default and at most 480), ROOT (the checkout
# whose results/ holds the run directories, default this script's), DEVICE (default cuda).
# Estimates: no run has been timed on a GPU yet, so a run's GPU estimate is its CPU-seconds in claims_queue.txt
# (one thread) divided by CPU_PER_GPU_SECOND, a guess taken low so that a run is not started without the time to
# finish; a run over its estimate is still stopped at the budget.
set -uo pipefail
cd "$(dirname "$0")/.."

REPO=$PWD
PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-480}
ROOT=${ROOT:-.}
DEVICE=${DEVICE:-cuda}
LIMIT=480
CPU_PER_GPU_SECOND=10
mode=${1:-run}
if (( BUDGET > LIMIT )); then echo "error: BUDGET=$BUDGET: at most $LIMIT seconds a call" >&2; exit 2; fi
ROOT=$(cd "$ROOT" && pwd) || exit 2
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"

plan() {  # the cells left to run under ROOT, costliest first: run directory, CPU-seconds, arguments (tab-separated)
    "$PYTHON" "$REPO/scripts/claims_queue.py" --root "$ROOT" --plan --longest-first
}

finished() {  # whether the run directory $1 (under ROOT) holds a summary.json completed or diverged
    grep -qsE '"status": "(completed|diverged)"' "$ROOT/$1/summary.json"
}

start=$(date +%s)
echo "gpu_claims: budget $BUDGET s this call (at most $LIMIT), device $DEVICE, runs under $ROOT"
jobs=$(plan) || { echo "error: scripts/claims_queue.py --plan failed" >&2; exit 1; }
planned=()
while IFS=$'\t' read -r -a job; do
    (( ${#job[@]} )) || continue
    dir=${job[0]}
    estimate=$(( (job[1] + CPU_PER_GPU_SECOND - 1) / CPU_PER_GPU_SECOND ))
    command=("$PYTHON" "$REPO/run.py" "${job[@]:2}" "device=$DEVICE")
    planned+=("$dir")
    left=$(( BUDGET - ($(date +%s) - start) ))
    (( left < 0 )) && left=0
    if (( estimate > left )); then
        echo "later   $dir (estimate $estimate s > $left s left): ${command[*]}"
        continue
    fi
    if [[ $mode == --dry-run ]]; then
        echo "run     $dir (estimate $estimate s): ${command[*]}"
        start=$(( start - estimate ))   # the dry run books the estimate instead of running
        continue
    fi
    echo "run     $dir (estimate $estimate s, $left s left): ${command[*]}"
    t0=$(date +%s)
    (cd "$ROOT" && timeout "$left" "${command[@]}") > "/tmp/gpu_claims_$$.log" 2>&1
    rc=$?
    echo "        rc $rc after $(( $(date +%s) - t0 )) s"
    if (( rc != 0 )); then tail -n 5 "/tmp/gpu_claims_$$.log"; fi
done <<< "$jobs"
todo=0
for dir in "${planned[@]}"; do finished "$dir" || todo=$(( todo + 1 )); done
echo "not done: $todo job(s)"
