#!/usr/bin/env bash
# Kernel durations under Nsight Compute (its locked clocks keep them to about 1%, where timed
# sweeps drift 5-10% on these hosts) for versions of the compiler and Triton, in one call:
#   git archive <rev> core backends/nvidia | tar -x -C benchmarks/_old      # the "old" side
#   run(command="CASES='persistent:128,256,64,8,3' VARIANTS='new old triton' bash benchmarks/gpu_ncu_ab.sh",
#       carry=[".whl", "benchmarks/_old"])
# CASES as gpu_profile.sh's (kernel:BM,BN,BK,warps,stages; benchmarks/gpu_profile_matmul.py);
# VARIANTS: new (the working tree), old (benchmarks/_old), triton, or label:VAR=value[,VAR=value]
# (the working tree with those environment variables set).  Each case's variants run ROUNDS times,
# alternating; the durations are printed as a table and written to $OUT/durations.txt.
# DRIVER: the launch script (gpu_profile_matmul.py, or gpu_profile_attention.py).
set -u
OUT=${OUT:-/tmp/anytile-gpu-ncu-ab}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
start_run
export ANYTILE_NO_CACHE=1
OLD="PYTHONPATH=$PWD/benchmarks/_old/core:$PWD/benchmarks/_old/backends/nvidia"
table=$OUT/durations.txt
: >"$table"
for case in ${CASES:-persistent:128,256,64,8,3}; do
    which=${case%%:*}
    cfg=${case#*:}
    for round in $(seq "${ROUNDS:-1}"); do
        for variant in ${VARIANTS:-new old triton}; do
            side=anytile env=""
            case $variant in
                old) env=$OLD ;;
                triton) side=triton ;;
                *:*) env=${variant#*:}; env=${env//,/ } ;;
            esac
            log=$OUT/run.log
            env $env timeout 240 /usr/local/cuda/bin/ncu --kernel-name "regex:^${which}$" --launch-skip 2 \
                --launch-count 1 --section SpeedOfLight --section LaunchStats \
                python3 benchmarks/${DRIVER:-gpu_profile_matmul.py} "$side" "$which" "$cfg" >"$log" 2>&1
            ok=$(grep -oE "ok|WRONG" "$log" | head -1)
            dur=$(awk '/Duration/ {print $(NF-1), $NF; exit}' "$log")
            regs=$(awk '/Registers Per Thread/ {print $NF; exit}' "$log")
            printf '%-16s %-22s %-28s round %s  %-8s %s  regs %s\n' "$which" "$cfg" "${variant%%:*}" \
                "$round" "${ok:-ERR}" "$dur" "$regs" | tee -a "$table"
            [ -z "$ok" ] && tail -5 "$log"
        done
    done
done
step "done"
