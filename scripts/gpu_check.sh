#!/usr/bin/env bash
# One command that checks a GPU machine and measures it: install, the CUDA test tier, then
# scripts/bench.py --device cuda for every bench preset (every backend, replicas included), writing
# results/bench/gpu_<preset>.csv. Runs on a bare GPU machine that has torch but none of the project's
# other packages and no package index: the wheels of scripts/gpu_wheels.txt travel in .whl/.
#
#   scripts/gpu_check.sh --fetch     where a package index is reachable: put the wheels into .whl/
#   scripts/gpu_check.sh             on the GPU machine (at most about 10 minutes)
#   scripts/gpu_check.sh --dry-run   print the steps and check that every wheel is in .whl/
#
# Environment: WHEELS (default .whl), PYTHON (default python3), OUT (a folder to copy the tables and
# logs to, if set), SITE (install target, default /tmp/fedbn-site).
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-.whl}
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/fedbn-site}
LIST=scripts/gpu_wheels.txt
PRESETS=(hbn_cifar10 fbn_cifar10 fedbn_digits)
CONFIGS=typical,loop,loop_cl,vmap,packed,replicas
mode=${1:-run}

requirements() { grep -v '^\s*#' "$LIST" | grep -v '^\s*$'; }

wheel_of() {  # the wheel file in $WHEELS for NAME==VERSION, or nothing
    local name=${1%%==*} version=${1##*==}
    ls "$WHEELS"/"${name//-/_}"-"$version"-*.whl 2>/dev/null | head -n 1
}

steps() {
    echo "1. install: $PYTHON -m pip install --no-index --no-deps --target $SITE $WHEELS/*.whl; PYTHONPATH=$SITE:src"
    echo "2. CUDA tier: $PYTHON -m pytest -m cuda tests/test_cuda.py tests/test_data.py (timeout 300 s)"
    for preset in "${PRESETS[@]}"; do
        echo "3. bench: $PYTHON scripts/bench.py --preset $preset --device cuda --configs $CONFIGS -> results/bench/gpu_$preset.csv (timeout 90 s)"
    done
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
    steps
    check_wheels && echo "dry run: all $(requirements | wc -l) wheels present in $WHEELS/"
    exit $?
    ;;
run) ;;
*)
    echo "error: unknown argument '$mode' (allowed: --fetch, --dry-run, or none)" >&2
    exit 2
    ;;
esac

check_wheels || exit 1
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('GPU:', torch.cuda.get_device_name(0), 'torch', torch.__version__)" || exit 1
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    $(for r in $(requirements); do wheel_of "$r"; done) || exit 1
export PYTHONPATH="$SITE:$PWD/src" PYTHONUNBUFFERED=1
mkdir -p results/bench
failed=()
timeout 300 "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider -n 8 tests/test_cuda.py tests/test_data.py \
    2>&1 | tee results/bench/gpu_tests.log || failed+=("cuda tier")
for preset in "${PRESETS[@]}"; do
    timeout 90 "$PYTHON" scripts/bench.py --preset "$preset" --device cuda --configs "$CONFIGS" \
        2>&1 | tee "results/bench/gpu_$preset.log" || failed+=("bench $preset")
done
if [[ -n ${OUT:-} ]]; then
    cp results/bench/gpu_* "$OUT"/ 2>/dev/null
fi
if (( ${#failed[@]} )); then
    echo "gpu check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu check: passed; tables in results/bench/gpu_*.csv"
