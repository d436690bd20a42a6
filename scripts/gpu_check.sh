#!/usr/bin/env bash
# The commands for a lent GPU, correctness first, each call well inside the device's 10-minute limit
# (issue 51). Runs on a bare GPU machine that has torch but none of the project's other packages and
# no package index: the wheels of scripts/gpu_wheels.txt travel in .whl/. Every step runs under its
# own time limit, and every table is written row by row as it is measured, so a step that runs out
# keeps its finished rows.
#
#   scripts/gpu_check.sh --fetch     where a package index is reachable: put the wheels into .whl/
#   scripts/gpu_check.sh             call 1, correctness (at most 6 min): which graph memory pool captures
#                                    (scripts/gpu_pool_probe.py), CUDA graphs on/off for the default
#                                    run, vmap + HBN, HBN mixing=fixed, FedAdam and hbn_cifar10
#                                    (scripts/gpu_graphs_check.py), the CUDA tier's graph and memory cases,
#                                    the float32 engine equivalence on this machine's CPU
#   scripts/gpu_check.sh --speed     call 2 (at most 8 min): the rest of the CUDA tier, then
#                                    scripts/bench.py --device cuda for every bench preset
#   scripts/gpu_check.sh --sweep     call 3: an 8-job sweep sequential vs 8 at once on the GPU
#   scripts/gpu_check.sh --dry-run   print the steps, their limits and the totals; check the wheels
#   scripts/gpu_check.sh --install   only the install step (no GPU needed); prints the PYTHONPATH used
#
# Environment: WHEELS (default .whl), PYTHON (default python3), OUT (a folder to copy the call's log and
# tables to, at most 8 files, if set), SITE (install target, default /tmp/fedbn-site), RESULTS (where the
# logs and tables go, default results/bench).
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-.whl}
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/fedbn-site}
LIST=scripts/gpu_wheels.txt
RESULTS=${RESULTS:-results/bench}
PRESETS=(hbn_cifar10 fbn_cifar10 fedbn_digits)
CONFIGS=packed,packed_eager,vmap,loop,typical,replicas
CHECK_BUDGET_S=360
SPEED_BUDGET_S=480
# Time limits in seconds. Measured on the H200 at 02ecf67: the whole tier took 47 s with -n 8; hbn_cifar10
# 6.82 s a round on the typical loop, 4.50 on loop, 0.70 on packed (packed first: the graphs' gain is the
# row that matters), about 10 s of start-up per process.
DEVICE_S=30
INSTALL_S=30
POOL_S=60
GRAPHS_S=150
TIER_GRAPHS_S=60
EQUIVALENCE_S=30
TIER_S=90
declare -A BENCH_S=([hbn_cifar10]=180 [fbn_cifar10]=60 [fedbn_digits]=60)
declare -A BENCH_ARGS=([hbn_cifar10]="--rounds 1 --replicas 8" [fbn_cifar10]="" [fedbn_digits]="")
SWEEP="device=cuda seed=0,1,2,3,4,5,6,7 rounds=10 eval_every=10 checkpoint_every=0 logger=none"
SWEEP_S=300
LOG=$RESULTS/gpu_check.log
SPEED_LOG=$RESULTS/gpu_speed.log
TIER_LOG=$RESULTS/gpu_tests.log
GRAPHS_CSV=$RESULTS/gpu_graphs_check.csv
POOL_LOG=$RESULTS/gpu_pool_probe.txt
CHECK_OUTPUTS=("$LOG" "$TIER_LOG" "$GRAPHS_CSV" "$POOL_LOG")
SPEED_OUTPUTS=("$SPEED_LOG" $(for preset in "${PRESETS[@]}"; do echo "$RESULTS/gpu_$preset.csv"; done))
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

check_total_s() { echo $((DEVICE_S + INSTALL_S + POOL_S + GRAPHS_S + TIER_GRAPHS_S + EQUIVALENCE_S)); }

speed_total_s() {
    local total=$((DEVICE_S + INSTALL_S + TIER_S)) preset
    for preset in "${PRESETS[@]}"; do total=$((total + BENCH_S[$preset])); done
    echo "$total"
}

steps() {
    echo "call 1 (scripts/gpu_check.sh):"
    echo "1. device: $PYTHON -c 'import torch; torch.cuda.is_available()' (limit ${DEVICE_S} s)"
    echo "2. install: $PYTHON -m pip install --no-index --no-deps --target $SITE $WHEELS/*.whl; PYTHONPATH=$SITE:src (limit ${INSTALL_S} s)"
    echo "3. pool probe: $PYTHON scripts/gpu_pool_probe.py --out $POOL_LOG (limit ${POOL_S} s)"
    echo "4. graphs: $PYTHON scripts/gpu_graphs_check.py --out $GRAPHS_CSV (limit ${GRAPHS_S} s)"
    echo "5. CUDA tier, graphs: $PYTHON -m pytest -m cuda tests/test_cuda.py -k 'graphed or graphs' -> $TIER_LOG (limit ${TIER_GRAPHS_S} s)"
    echo "6. float32 equivalence on this CPU: $PYTHON -m pytest tests/test_engine_equivalence.py -k f32 (limit ${EQUIVALENCE_S} s)"
    echo "call 2 (scripts/gpu_check.sh --speed):"
    echo "1-2. device and install as above"
    echo "3. CUDA tier: $PYTHON -m pytest -m cuda tests/test_cuda.py tests/test_data.py -k 'not graphed and not graphs' (limit ${TIER_S} s)"
    local preset
    for preset in "${PRESETS[@]}"; do
        echo "4. bench: $(bench_command "$preset") -> $RESULTS/gpu_$preset.csv (limit ${BENCH_S[$preset]} s)"
    done
    echo "with OUT set: copy the call's files there: ${CHECK_OUTPUTS[*]} / ${SPEED_OUTPUTS[*]}"
    local check speed
    check=$(check_total_s)
    speed=$(speed_total_s)
    echo "budget: call 1 $check s of step limits (at most $CHECK_BUDGET_S s), call 2 $speed s (at most $SPEED_BUDGET_S s)"
    echo "call 3, scripts/gpu_check.sh --sweep: install, then $(sweep_command) -> $RESULTS/gpu_sweep.csv" \
         "(its own limit $SWEEP_S s)"
    (( check <= CHECK_BUDGET_S && speed <= SPEED_BUDGET_S && DEVICE_S + INSTALL_S + SWEEP_S <= SPEED_BUDGET_S ))
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

prepare() {
    step device "$DEVICE_S" - "$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('GPU:', torch.cuda.get_device_name(0), 'torch', torch.__version__)" \
        && install
}

finish() {  # NAME: the call's verdict
    if (( ${#failed[@]} )); then
        echo "gpu check ($1): FAILED: ${failed[*]}"
        return 1
    fi
    echo "gpu check ($1): passed in $SECONDS s"
}

check() {
    prepare || { finish correctness; return 1; }
    step "pool probe" "$POOL_S" - "$PYTHON" scripts/gpu_pool_probe.py --out "$POOL_LOG"
    step graphs "$GRAPHS_S" - "$PYTHON" scripts/gpu_graphs_check.py --out "$GRAPHS_CSV"
    step "CUDA tier, graphs" "$TIER_GRAPHS_S" "$TIER_LOG" "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider -n 8 \
        tests/test_cuda.py -k "graphed or graphs"
    step "float32 equivalence" "$EQUIVALENCE_S" - "$PYTHON" -m pytest -q -p no:cacheprovider -n 8 \
        tests/test_engine_equivalence.py -k "f32"
    finish correctness
}

speed() {
    prepare || { finish speed; return 1; }
    step "CUDA tier" "$TIER_S" "$TIER_LOG" "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider -n 8 \
        tests/test_cuda.py tests/test_data.py -k "not graphed and not graphs"
    local preset
    for preset in "${PRESETS[@]}"; do
        step "bench $preset" "${BENCH_S[$preset]}" - $(bench_command "$preset")
    done
    finish speed
}

copy_out() {  # FILES...: with OUT set, copy those this call wrote (not a table committed earlier)
    [[ -n ${OUT:-} ]] || return 0
    local file
    for file in "$@"; do
        [[ -f $file && $file -nt $started ]] && cp "$file" "$OUT"/
    done
    return 0
}

started=$(mktemp)
trap 'rm -f "$started"' EXIT
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
    steps || { echo "error: the step limits exceed a call's budget"; exit 1; }
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
    copy_out "$RESULTS/gpu_sweep.log" "$RESULTS/gpu_sweep.csv"
    exit "$status"
    ;;
--speed)
    check_wheels || exit 1
    mkdir -p "$RESULTS"
    speed 2>&1 | tee "$SPEED_LOG"
    status=${PIPESTATUS[0]}
    copy_out "${SPEED_OUTPUTS[@]}"
    exit "$status"
    ;;
run)
    check_wheels || exit 1
    mkdir -p "$RESULTS"
    check 2>&1 | tee "$LOG"
    status=${PIPESTATUS[0]}
    copy_out "${CHECK_OUTPUTS[@]}" "$TIER_LOG"
    exit "$status"
    ;;
*)
    echo "error: unknown argument '$mode' (allowed: --fetch, --dry-run, --install, --speed, --sweep, or none)" >&2
    exit 2
    ;;
esac
