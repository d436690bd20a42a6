#!/usr/bin/env bash
# One command that checks a GPU machine and measures it: install, the CUDA test tier, then
# scripts/bench.py --device cuda for every bench preset (every backend, replicas included; all
# configurations of a preset in one process), writing results/bench/gpu_<preset>.csv. Runs on a bare
# GPU machine that has torch but none of the project's other packages and no package index: the
# wheels of scripts/gpu_wheels.txt travel in .whl/. Every step runs under its own time limit, and
# the limits add up to at most 8 minutes (--dry-run prints them).
#
#   scripts/gpu_check.sh --fetch     where a package index is reachable: put the wheels into .whl/
#   scripts/gpu_check.sh             on the GPU machine (at most 8 minutes)
#   scripts/gpu_check.sh --dry-run   print the steps, their limits and the total; check that every wheel is in .whl/
#   scripts/gpu_check.sh --install   only the install step (no GPU needed); prints the PYTHONPATH the check uses
#   scripts/gpu_check.sh --sweep     after the check, in a second call: an 8-job sweep sequential vs 8 at once
#
# Environment: WHEELS (default .whl), PYTHON (default python3), OUT (a folder to copy the check's
# log, the tier's log and the tables to, at most 8 files, if set), SITE (install target, default
# /tmp/fedbn-site), RESULTS (where the logs and tables go, default results/bench).
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-.whl}
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/fedbn-site}
LIST=scripts/gpu_wheels.txt
RESULTS=${RESULTS:-results/bench}
PRESETS=(hbn_cifar10 fbn_cifar10 fedbn_digits)
CONFIGS=typical,loop,loop_cl,vmap,packed,packed_eager,replicas
BUDGET_S=480
# Time limits in seconds. Measured on the H200 at 02ecf67: the tier took 47 s with -n 8; hbn_cifar10
# 6.82 s a round on the typical loop, 4.50 on loop, 0.70 on packed, and each configuration's fresh
# process about 10 s of start-up, which one process per preset now pays once. A configuration runs
# warm-up + timed rounds and two more (FLOPs, ATen operations): hbn_cifar10 about 4 x (6.8 + 4.5 x 2
# + 1.6 + 0.7 x 2) s plus replicas, estimated, not yet measured.
DEVICE_S=30
INSTALL_S=30
TIER_S=120
declare -A BENCH_S=([hbn_cifar10]=150 [fbn_cifar10]=50 [fedbn_digits]=60)
declare -A BENCH_ARGS=([hbn_cifar10]="--rounds 1 --replicas 8" [fbn_cifar10]="" [fedbn_digits]="")
# --sweep (a second call): 8 seeds of the default run as one `run.py -m` sweep, one job after another
# and 8 at once on the GPU (our process launcher, hydra/launcher=joblib), 8 x about 15 s sequential
# (start-up included) plus the parallel sweep, estimated.
SWEEP="device=cuda seed=0,1,2,3,4,5,6,7 rounds=10 eval_every=10 checkpoint_every=0"
SWEEP_S=300
LOG=$RESULTS/gpu_check.log
TIER_LOG=$RESULTS/gpu_tests.log
OUTPUTS=("$LOG" "$TIER_LOG" $(for preset in "${PRESETS[@]}"; do echo "$RESULTS/gpu_$preset.csv"; done))
mode=${1:-run}

requirements() { grep -v '^\s*#' "$LIST" | grep -v '^\s*$'; }

wheel_of() {  # the wheel file in $WHEELS for NAME==VERSION, or nothing
    local name=${1%%==*} version=${1##*==}
    ls "$WHEELS"/"${name//-/_}"-"$version"-*.whl 2>/dev/null | head -n 1
}

bench_command() {  # the bench invocation of one preset
    local command="$PYTHON scripts/bench.py --preset $1 --device cuda --configs $CONFIGS --out $RESULTS"
    echo "$command${BENCH_ARGS[$1]:+ ${BENCH_ARGS[$1]}}"
}

total_s() {
    local total=$((DEVICE_S + INSTALL_S + TIER_S)) preset
    for preset in "${PRESETS[@]}"; do total=$((total + BENCH_S[$preset])); done
    echo "$total"
}

steps() {
    echo "1. device: $PYTHON -c 'import torch; torch.cuda.is_available()' (limit ${DEVICE_S} s)"
    echo "2. install: $PYTHON -m pip install --no-index --no-deps --target $SITE $WHEELS/*.whl; PYTHONPATH=$SITE:src (limit ${INSTALL_S} s)"
    echo "3. CUDA tier: $PYTHON -m pytest -m cuda tests/test_cuda.py tests/test_data.py -> $TIER_LOG (limit ${TIER_S} s)"
    local preset
    for preset in "${PRESETS[@]}"; do
        echo "4. bench: $(bench_command "$preset") -> $RESULTS/gpu_$preset.csv (limit ${BENCH_S[$preset]} s)"
    done
    echo "5. with OUT set: copy ${#OUTPUTS[@]} files there: ${OUTPUTS[*]}"
    local total
    total=$(total_s)
    echo "budget: $total s ($((total / 60)) min $((total % 60)) s) of step limits, at most $BUDGET_S s"
    echo "second call, scripts/gpu_check.sh --sweep: install, then $(sweep_command) -> $RESULTS/gpu_sweep.csv" \
         "(its own limit $SWEEP_S s)"
    (( total <= BUDGET_S && DEVICE_S + INSTALL_S + SWEEP_S <= BUDGET_S ))
}

sweep_command() {
    echo "$PYTHON scripts/bench.py --sweep \"$SWEEP\" --n-jobs 8 --out $RESULTS/sweep"
}

sweep() {  # the --sweep call: the same device check and install, then the sweep, its table as gpu_sweep.csv
    step device "$DEVICE_S" - "$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'" \
        && install || return 1
    rm -rf "$RESULTS/sweep"
    step sweep "$SWEEP_S" - "$PYTHON" scripts/bench.py --sweep "$SWEEP" --n-jobs 8 --out "$RESULTS/sweep" || return 1
    cp "$RESULTS"/sweep/*.csv "$RESULTS/gpu_sweep.csv"
}

check_wheels() {
    local missing=0 requirement
    while read -r requirement; do
        if [[ -z $(wheel_of "$requirement") ]]; then
            echo "missing wheel: $requirement (in $WHEELS/; scripts/gpu_check.sh --fetch downloads it)"
            missing=1
        fi
    done < <(requirements)
    return $missing
}

failed=()
step() {  # NAME LIMIT_S LOG COMMAND...: run COMMAND under its limit (LOG: its output's file, - for the terminal)
    local name=$1 limit=$2 log=$3 start=$SECONDS rc
    shift 3
    if [[ $log == - ]]; then
        timeout "$limit" "$@"
        rc=$?
    else
        timeout "$limit" "$@" >"$log" 2>&1
        rc=$?
        tail -n 25 "$log"
    fi
    echo "step '$name': exit $rc after $((SECONDS - start)) s (limit $limit s$( ((rc == 124)) && echo ', ran out'))"
    (( rc == 0 )) || failed+=("$name")
    return $rc
}

install() {
    local wheels
    wheels=$(for r in $(requirements); do wheel_of "$r"; done)
    step install "$INSTALL_S" - "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SITE" $wheels || return 1
    export PYTHONPATH="$SITE:$PWD/src" PYTHONUNBUFFERED=1
}

check() {
    step device "$DEVICE_S" - "$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('GPU:', torch.cuda.get_device_name(0), 'torch', torch.__version__)" \
        && install || { echo "gpu check: FAILED: ${failed[*]}"; return 1; }
    step "CUDA tier" "$TIER_S" "$TIER_LOG" "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider -n 8 \
        tests/test_cuda.py tests/test_data.py
    local preset
    for preset in "${PRESETS[@]}"; do
        step "bench $preset" "${BENCH_S[$preset]}" - $(bench_command "$preset")
    done
    if (( ${#failed[@]} )); then
        echo "gpu check: FAILED: ${failed[*]}"
        return 1
    fi
    echo "gpu check: passed in $SECONDS s; tables in $RESULTS/gpu_<preset>.csv"
}

case $mode in
--fetch)
    mkdir -p "$WHEELS"
    for requirement in $(requirements); do
        "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS" "$requirement" 2>/dev/null \
            || "$PYTHON" -m pip wheel --quiet --no-deps -w "$WHEELS" "$requirement" || exit 1
    done
    check_wheels && echo "wheels ready in $WHEELS/ ($(du -sh "$WHEELS" | cut -f1))"
    exit $?
    ;;
--dry-run)
    steps || { echo "error: the step limits exceed $BUDGET_S s"; exit 1; }
    check_wheels && echo "dry run: all $(requirements | wc -l) wheels present in $WHEELS/"
    exit $?
    ;;
--install)
    check_wheels || exit 1
    install || exit 1
    echo "PYTHONPATH=$PYTHONPATH"
    exit 0
    ;;
--sweep)
    check_wheels || exit 1
    mkdir -p "$RESULTS"
    sweep 2>&1 | tee "$RESULTS/gpu_sweep.log"
    status=${PIPESTATUS[0]}
    [[ -n ${OUT:-} ]] && cp "$RESULTS/gpu_sweep.log" $( ((status == 0)) && echo "$RESULTS/gpu_sweep.csv") "$OUT"/
    exit "$status"
    ;;
run) ;;
*)
    echo "error: unknown argument '$mode' (allowed: --fetch, --dry-run, --install, --sweep, or none)" >&2
    exit 2
    ;;
esac

check_wheels || exit 1
mkdir -p "$RESULTS"
started=$(mktemp)
check 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
if [[ -n ${OUT:-} ]]; then
    for file in "${OUTPUTS[@]}"; do  # only what this check wrote, not a table committed earlier
        [[ $file -nt $started ]] && cp "$file" "$OUT"/
    done
fi
rm -f "$started"
exit "$status"
