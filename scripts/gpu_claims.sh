#!/usr/bin/env bash
# Runs the longest claims that had not converged on the CPU (results/CLAIMS.md: "fails (not converged)", and
# the declared hbn/table1_phi0.6_100_rounds) at the paper's length on a GPU, at most 8 minutes a call: each call
# runs the plan's jobs in order, skips a job whose run directory already holds a completed summary.json, starts a
# job only when its estimate fits what is left of the call's budget, and stops it at the budget (`timeout`'s
# SIGTERM: an unfinished job resumes from its last checkpoint on the next call, resume=auto, docs/runs.md).
# Call it again until the dry run says nothing is left.
# The data travels with the tree: data/FashionMNIST/raw (python scripts/download_data.py fashion_mnist --from
# /usr/share/datasets/fashion-mnist --root data), carried with the working tree to the GPU machine.
#
#   scripts/gpu_claims.sh             run this call's jobs (at most BUDGET seconds)
#   scripts/gpu_claims.sh --dry-run   print the plan, which jobs are done, and what this call would run
#
# Environment: PYTHON (default python3), BUDGET (seconds a call, default and at most 480), ROOT (the repository
# whose results/ holds the run directories, default this script's), DEVICE (default cuda).
# Estimates are per run on one GPU, guessed from the measured CPU times in the presets (not measured on a GPU:
# the first call's wall times replace them); a job over its estimate is still stopped at the budget.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-480}
ROOT=${ROOT:-.}
DEVICE=${DEVICE:-cuda}
LIMIT=480
mode=${1:-run}
if (( BUDGET > LIMIT )); then echo "error: BUDGET=$BUDGET: at most $LIMIT seconds a call" >&2; exit 2; fi

# name|estimate in seconds|run directory|overrides (one run each; the preset's sweep writes the same directory).
# First the declared claim no run has decided yet (hbn/table1_phi0.6_100_rounds), then FBN Fig. 4 at 3000 steps.
plan() {
    local seed row scenario
    for seed in 0 1 2; do
        for row in hbn_100_rounds bn fixbn; do
            echo "hbn/table1 phi 0.6 100 rounds $row seed $seed|150|results/hbn/table1_100_rounds_fmnist/runs/$row-alpha0.6-seed$seed|experiment=hbn/table1_100_rounds_fmnist +experiment/hbn/fmnist_row=$row alpha=0.6 seed=$seed"
        done
    done
    for seed in 0 1 2; do
        for scenario in sf clean sf_defended; do
            echo "fbn/fig4 3000 steps $scenario seed $seed|120|results/fbn/fig4_3000_fmnist/runs/fbn-$scenario-gamma0.0-seed$seed|experiment=fbn/fig4_3000_fmnist +experiment/fbn/byzantine_scenario=$scenario seed=$seed"
        done
    done
}

done_run() {  # whether the run directory $1 (under ROOT) holds a completed summary.json
    grep -qs '"status": "completed"' "$ROOT/$1/summary.json"
}

left=$BUDGET
start=$(date +%s)
echo "gpu_claims: budget $BUDGET s this call (at most $LIMIT), device $DEVICE"
while IFS='|' read -r name estimate dir overrides; do
    command="$PYTHON run.py $overrides device=$DEVICE engine.threads=1 hydra.run.dir=$ROOT/$dir resume=auto"
    if done_run "$dir"; then
        echo "done    $name (estimate $estimate s): $command"
        continue
    fi
    left=$(( BUDGET - ($(date +%s) - start) ))
    (( left < 0 )) && left=0
    if (( estimate > left )); then
        echo "later   $name (estimate $estimate s > $left s left): $command"
        continue
    fi
    if [[ $mode == --dry-run ]]; then
        echo "run     $name (estimate $estimate s): $command"
        start=$(( start - estimate ))   # the dry run books the estimate instead of running
        continue
    fi
    echo "run     $name (estimate $estimate s, $left s left): $command"
    t0=$(date +%s)
    # shellcheck disable=SC2086  # the overrides are words
    timeout "$left" $command > "/tmp/gpu_claims_$$.log" 2>&1
    rc=$?
    echo "        rc $rc after $(( $(date +%s) - t0 )) s"
    if (( rc != 0 )); then tail -n 5 "/tmp/gpu_claims_$$.log"; fi
done < <(plan)
todo=$(plan | while IFS='|' read -r _ _ dir _; do done_run "$dir" || echo x; done | wc -l)
echo "not done: $todo job(s)"
