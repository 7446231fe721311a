#!/usr/bin/env bash
# Nsight Compute on matmul launches of both compilers, in one call on the lent GPU machine:
#   run(command="CASES='matmul:128,128,32,4,3 persistent:128,256,64,8,3' bash benchmarks/gpu_profile.sh", carry=[".whl"])
# For each case and side: ncu's warp-state, scheduler and compute sections of the third launch
# (benchmarks/gpu_profile_matmul.py) with instruction counts and stall reasons, into
# $OUT/<side>_<case>.txt, and its SASS (cuobjdump) into <side>_<case>.sass; the figures are printed.
set -u
OUT=${OUT:-/tmp/anytile-gpu-profile}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
start_run
export ANYTILE_NO_CACHE=1
stalls=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle dispatch_stall \
        membar lg_throttle sleeping selected not_selected no_instruction branch_resolving; do
    stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
METRICS="smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_gmma.sum$stalls"
for case in ${CASES:-matmul:128,128,32,4,3}; do
    which=${case%%:*}
    cfg=${case#*:}
    name=${which}_${cfg//,/x}
    for side in anytile triton; do
        step "$side $which $cfg"
        timeout 240 /usr/local/cuda/bin/ncu --kernel-name "regex:^${which}$" --launch-skip 2 --launch-count 1 \
            --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
            --section SpeedOfLight --section LaunchStats --section Occupancy \
            --metrics "$METRICS" ${NCU_ARGS:-} \
            python3 benchmarks/gpu_profile_matmul.py "$side" "$which" "$cfg" "$OUT/${side}_$name.cubin" \
            >"$OUT/${side}_$name.txt" 2>&1
        /usr/local/cuda/bin/cuobjdump -sass "$OUT/${side}_$name.cubin" >"$OUT/${side}_$name.sass" 2>&1
        grep -E "ok|WRONG|Duration|Stall|Issue Slots|Warp Cycles|Registers|Achieved Occupancy|Compute \(SM\)|Memory Throughput|Executed Ipc|ERR" \
            "$OUT/${side}_$name.txt" | head -30
        grep -E "inst_executed|stalled" "$OUT/${side}_$name.txt"
    done
done
step "done"
