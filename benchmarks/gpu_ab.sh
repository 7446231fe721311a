#!/usr/bin/env bash
# An A/B of two versions of the compiler on the lent GPU machine, in one call: the code of
# the working tree (new) and an older one unpacked into benchmarks/_old (untracked, carried),
#   git archive <rev> core backends/nvidia | tar -x -C benchmarks/_old
#   run(command="ROWS=persistent,fp16 bash benchmarks/gpu_ab.sh", carry=[".whl", "benchmarks/_old"])
# Each side runs ROUNDS times, alternating (new, old, new, old...), with the compile cache off;
# ROWS are benchmarks/gpu_matmul.py's rows (QUICK=1: two configurations a side; PAIRED=n: the
# two best launches timed n times more, alternately, for the ratio's median), ATTENTION=1
# adds benchmarks/gpu_attention.py (ATTENTION_ARGS, e.g. --descriptors), TESTS the pytest
# paths run first on the new code (TESTK: their -k expression).
set -u
OUT=${OUT:-/tmp/anytile-gpu-ab}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
start_run
OLD="PYTHONPATH=$PWD/benchmarks/_old/core:$PWD/benchmarks/_old/backends/nvidia"
export ANYTILE_NO_CACHE=1
if [ -n "${TESTS:-}" ]; then
    step "tests: $TESTS"
    timeout 400 python3 -m pytest -q -p no:cacheprovider $TESTS ${TESTK:+-k "$TESTK"} >"$OUT/tests.txt" 2>&1
    grep -E "passed|failed|Error" "$OUT/tests.txt" | tail -8
fi
quick=${QUICK:+--quick}
for round in $(seq "${ROUNDS:-1}"); do
    for side in new old; do
        env=""
        [ "$side" = old ] && env=$OLD
        if [ -n "${ROWS:-}" ]; then
            step "$side (round $round): matmul $ROWS"
            env $env python3 benchmarks/gpu_matmul.py --rows "$ROWS" $quick ${PAIRED:+--paired $PAIRED} 2>&1 \
                | tee "$OUT/matmul_${side}_$round.txt" | grep -vE "^  "
        fi
        if [ -n "${ATTENTION:-}" ]; then
            step "$side (round $round): attention ${ATTENTION_ARGS:-}"
            env $env python3 benchmarks/gpu_attention.py $quick ${ATTENTION_ARGS:-} 2>&1 \
                | tee "$OUT/attention_${side}_$round.txt" | grep -vE "^  "
        fi
    done
done
step "done"
