#!/usr/bin/env bash
# The one entry point on an NVIDIA GPU machine without network, run from the repository root
# with the wheels of benchmarks/device_wheels.sh in .whl/:
#   bash benchmarks/gpu.sh [MODE]
# Installs anytile offline (benchmarks/device_env.sh), then runs MODE; everything lands in
# $OUT, the summary is printed last.  Modes, their variables and what each measures:
# benchmarks/README.md.  In any mode, PYTEST names test paths run right after the install
# (-k PYTEST_K).
set -u
MODE=${1:-quick}
OUT=${OUT:-/tmp/anytile-gpu-$MODE}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
OLD="PYTHONPATH=$PWD/benchmarks/_old/core:$PWD/benchmarks/_old/backends/nvidia"

# the full conformance suite on $DEVICE in $SHARDS processes sharing the GPU; reports in $1
conformance_full() {
    local dir=$1 device=${DEVICE:-cuda:0} shards=${SHARDS:-8}
    mkdir -p "$dir"
    local start=$(date +%s)
    for k in $(seq 0 $((shards - 1))); do
        timeout ${SHARD_TIMEOUT:-300} python3 -m anytile conformance --full --device "$device" \
            --shard "$k/$shards" --json "$dir/conformance-$k.json" >"$dir/shard-$k.txt" 2>&1 &
    done
    wait
    echo "full conformance on $device in $shards shards: $(( $(date +%s) - start )) s"
    python3 - "$dir" "$shards" <<'PY'
import json, sys
out, shards = sys.argv[1], int(sys.argv[2])
totals, failed, missing = {}, [], []
for k in range(shards):
    try:
        report = json.load(open(f"{out}/conformance-{k}.json"))
    except (OSError, ValueError):
        missing.append(k)
        continue
    for case in report["results"]:
        totals[case["status"]] = totals.get(case["status"], 0) + 1
        if case["status"] not in ("passed", "skipped"):
            failed.append(f'{case["case_id"]}: {case["message"][:300]}')
print("cases:", ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
for line in failed[:40]:
    print("  FAILED", line)
if missing:
    print("shards without a report (crashed or timed out):", missing)
print("VERDICT:", "CONFORMANT" if not failed and not missing else "NOT CONFORMANT")
PY
}

# the differential fuzzer: $FUZZ random kernels on $1 against the interpreter
fuzz() {
    [ -n "${FUZZ:-}" ] || return 0
    step "fuzzer: $FUZZ kernels on $1, seed ${SEED:-8}"
    timeout ${FUZZ_TIMEOUT:-240} python3 -m anytile conformance --device "$1" --fuzz "$FUZZ" \
        --seed "${SEED:-8}" --fuzz-dir "$OUT/fuzz" >"$OUT/fuzz.txt" 2>&1
    tail -3 "$OUT/fuzz.txt"
}

mode_quick() {   # ~6 min: tests/kernels, gpu.py beside Triton and torch, examples, quick conformance
    start_run
    python3 -m anytile backends | tee "$OUT/backends.txt"
    step "tests/kernels on cuda:0"
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels -k cuda >"$OUT/test_kernels.txt" 2>&1
    tail -3 "$OUT/test_kernels.txt"
    step "benchmarks"
    timeout 200 python3 benchmarks/gpu.py --out "$OUT/gpu_bench.md" >"$OUT/bench.log" 2>&1
    tail -5 "$OUT/bench.log"
    step "examples on cuda:0"
    for ex in examples/vector_add.py examples/softmax.py examples/layernorm.py examples/matmul.py; do
        echo "$ex: $(timeout 60 python3 "$ex" cuda:0 2>&1 | tail -1)"
    done | tee "$OUT/examples.txt"
    step "conformance (quick) on cuda:0"
    timeout 150 python3 -m anytile conformance --device cuda:0 --json "$OUT/conformance.json" \
        >"$OUT/conformance.txt" 2>&1
    tail -3 "$OUT/conformance.txt"
    step "done"
    sed -n '/^# /,/^<details>/p' "$OUT/gpu_bench.md" 2>/dev/null
}

mode_check() {   # 5-10 min: every test on the GPU, checked mode, full conformance, gpu.py; FUZZ=N
    start_run
    step "device tests on cuda:0"
    timeout 480 python3 -m pytest -q -p no:cacheprovider backends/nvidia/tests \
        --ignore=backends/nvidia/tests/test_simulated.py >"$OUT/test_nvidia.txt" 2>&1
    tail -3 "$OUT/test_nvidia.txt"
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/language -k cuda \
        >"$OUT/test_core.txt" 2>&1
    tail -3 "$OUT/test_core.txt"
    step "checked mode (debug=True): the quick conformance suite, and what it costs"
    ANYTILE_DEBUG=1 timeout 240 python3 -m anytile conformance --device cuda:0 --quick \
        >"$OUT/conformance_checked.txt" 2>&1
    tail -2 "$OUT/conformance_checked.txt"
    timeout 150 python3 benchmarks/gpu_checked.py --out "$OUT/gpu_checked.md" >"$OUT/checked.log" 2>&1
    tail -8 "$OUT/checked.log"
    step "full conformance on cuda:0"
    conformance_full "$OUT/conformance" | tee "$OUT/conformance_summary.txt"
    fuzz cuda:0
    step "benchmarks"
    timeout 170 python3 benchmarks/gpu.py --out "$OUT/gpu_bench.md" >"$OUT/bench.log" 2>&1
    tail -3 "$OUT/bench.log"
    step "done"
    grep -h "passed\|failed" "$OUT/test_nvidia.txt" "$OUT/test_core.txt" | tail -2
    grep VERDICT "$OUT/conformance_summary.txt"
    sed -n '/^# /,/^<details>/p' "$OUT/gpu_bench.md" 2>/dev/null
}

mode_conformance() {   # the full suite on DEVICE (default cuda:0) in SHARDS shards; FUZZ=N
    case "${DEVICE:-cuda:0}" in opencl*) start_run -e plugins/opencl ;; *) start_run ;; esac
    conformance_full "$OUT/conformance"
    fuzz "${DEVICE:-cuda:0}"
}

mode_matmul() {   # benchmarks/gpu_matmul.py: ROWS, PAIRED=N, CLOCKS=1, QUICK=1 (AT_TMA=0, AT_WGMMA=0)
    start_run
    step "matmul rows beside Triton"
    timeout ${MATMUL_TIMEOUT:-540} python3 benchmarks/gpu_matmul.py ${ROWS:+--rows "$ROWS"} \
        ${PAIRED:+--paired "$PAIRED"} ${CLOCKS:+--clocks} ${QUICK:+--quick} --out "$OUT/matmul.md" \
        2>&1 | tee "$OUT/matmul.log" | grep -vE "^  "
    step "done"
}

mode_attention() {   # benchmarks/gpu_attention.py with ARGS (--descriptors, --ablation, --quick)
    start_run
    step "attention forward beside Triton and SDPA ${ARGS:-}"
    timeout ${ATTENTION_TIMEOUT:-540} python3 benchmarks/gpu_attention.py ${ARGS:-} \
        --out "$OUT/attention.md" 2>&1 | tee "$OUT/attention.log" | tail -40
    step "done"
}

mode_launch() {   # benchmarks/gpu_launch.py: where a launch's and a first call's time goes
    start_run
    timeout 300 python3 benchmarks/gpu_launch.py ${ARGS:-} 2>&1 | tee "$OUT/launch.txt"
    step "done"
}

mode_ab() {   # the working tree (new) against benchmarks/_old, alternating ROUNDS times
    start_run
    export ANYTILE_NO_CACHE=1
    for round in $(seq "${ROUNDS:-1}"); do
        for side in new old; do
            env=""
            [ "$side" = old ] && env=$OLD
            if [ -n "${ROWS:-}" ]; then
                step "$side (round $round): matmul $ROWS"
                env $env python3 benchmarks/gpu_matmul.py --rows "$ROWS" ${QUICK:+--quick} \
                    ${PAIRED:+--paired $PAIRED} 2>&1 | tee "$OUT/matmul_${side}_$round.txt" | grep -vE "^  "
            fi
            if [ -n "${ATTENTION:-}" ]; then
                step "$side (round $round): attention ${ARGS:-}"
                env $env python3 benchmarks/gpu_attention.py ${QUICK:+--quick} ${ARGS:-} 2>&1 \
                    | tee "$OUT/attention_${side}_$round.txt" | grep -vE "^  "
            fi
        done
    done
    step "done"
}

mode_ncu() {   # kernel durations under Nsight Compute: CASES x VARIANTS, ROUNDS times
    start_run
    export ANYTILE_NO_CACHE=1
    local table=$OUT/durations.txt log=$OUT/run.log
    : >"$table"
    for case in ${CASES:-persistent:128,256,64,8,3}; do
        local which=${case%%:*} cfg=${case#*:}
        for round in $(seq "${ROUNDS:-1}"); do
            for variant in ${VARIANTS:-new old triton}; do
                local side=anytile env=""
                case $variant in
                    old) env=$OLD ;;
                    triton) side=triton ;;
                    *:*) env=${variant#*:}; env=${env//,/ } ;;
                esac
                env $env timeout 240 /usr/local/cuda/bin/ncu --kernel-name "regex:^${which}$" \
                    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section LaunchStats \
                    python3 benchmarks/gpu_profile.py "$side" "$which" "$cfg" >"$log" 2>&1
                local ok=$(grep -oE "ok|WRONG" "$log" | head -1)
                local dur=$(awk '/Duration/ {print $(NF-1), $NF; exit}' "$log")
                local regs=$(awk '/Registers Per Thread/ {print $NF; exit}' "$log")
                printf '%-16s %-22s %-28s round %s  %-8s %s  regs %s\n' "$which" "$cfg" "${variant%%:*}" \
                    "$round" "${ok:-ERR}" "$dur" "$regs" | tee -a "$table"
                [ -z "$ok" ] && tail -5 "$log"
            done
        done
    done
    step "done"
}

mode_profile() {   # Nsight Compute sections, instruction counts, stall reasons and SASS per CASE
    start_run
    export ANYTILE_NO_CACHE=1
    local stalls="" r
    for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle dispatch_stall \
            membar lg_throttle sleeping selected not_selected no_instruction branch_resolving; do
        stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
    done
    local metrics="smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_gmma.sum$stalls"
    for case in ${CASES:-matmul:128,128,32,4,3}; do
        local which=${case%%:*} cfg=${case#*:}
        local name=${which}_${cfg//,/x}
        for side in ${SIDES:-anytile triton}; do
            step "$side $which $cfg"
            timeout 240 /usr/local/cuda/bin/ncu --kernel-name "regex:^${which}$" --launch-skip 2 \
                --launch-count 1 --section WarpStateStats --section SchedulerStats \
                --section ComputeWorkloadAnalysis --section SpeedOfLight --section LaunchStats \
                --section Occupancy --metrics "$metrics" ${NCU_ARGS:-} \
                python3 benchmarks/gpu_profile.py "$side" "$which" "$cfg" "$OUT/${side}_$name.cubin" \
                >"$OUT/${side}_$name.txt" 2>&1
            /usr/local/cuda/bin/cuobjdump -sass "$OUT/${side}_$name.cubin" >"$OUT/${side}_$name.sass" 2>&1
            grep -E "ok|WRONG|Duration|Stall|Issue Slots|Warp Cycles|Registers|Achieved Occupancy|Compute \(SM\)|Memory Throughput|Executed Ipc|ERR" \
                "$OUT/${side}_$name.txt" | head -30
            grep -E "inst_executed|stalled" "$OUT/${side}_$name.txt"
        done
    done
    step "done"
}

mode_stalls() {   # Nsight Compute's warp-stall samples on every SASS instruction, per CASE
    start_run
    export ANYTILE_NO_CACHE=1
    local ncu=/usr/local/cuda/bin/ncu work=$OUT/stalls
    mkdir -p "$work"
    for case in ${CASES:-persistent:128,256,64,8,3}; do
        local which=${case%%:*} cfg=${case#*:}
        local name=${which}_${cfg//,/x}
        for side in ${SIDES:-anytile triton}; do
            step "$side $which $cfg"
            local rep=$work/${side}_$name
            timeout 300 $ncu --kernel-name "regex:^${which}$" --launch-skip 2 --launch-count 1 \
                --section WarpStateStats --section SourceCounters --section SpeedOfLight \
                --section LaunchStats --import-source no -f -o "$rep" \
                python3 benchmarks/gpu_profile.py "$side" "$which" "$cfg" >"$rep.log" 2>&1
            grep -E "ok|WRONG|ERR" "$rep.log" | head -5
            $ncu -i "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
            grep -E "Duration|Compute \(SM\)|Warp Cycles Per Issued|Registers Per" "$rep.txt"
            $ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>&1
            python3 - "$rep.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if "Source" in r), None)
if head is None:
    print("no source page:", open(sys.argv[1]).read()[:400]); sys.exit()
names = rows[head]
src = names.index("Source")
col = next((i for i, n in enumerate(names) if n.startswith("Warp Stall Sampling (All")), None)
if col is None:
    print("columns:", names); sys.exit()
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[head + 1:] if len(r) > col]
total = sum(num(r[col]) for r in body) or 1
print(f"  samples {total:.0f}; most sampled instructions:")
for r in sorted(body, key=lambda r: -num(r[col]))[:12]:
    print(f"  {100 * num(r[col]) / total:5.1f}%  {r[src].strip()[:90]}")
PY
            rm -f "$rep.ncu-rep"
        done
    done
    tar -czf "$OUT/stalls.tgz" -C "$OUT" stalls && rm -rf "$work"
    step "done"
}

mode_runtime() {   # benchmarks/runtime.py on cuda:0, this checkout beside .before/ (another one)
    start_run
    step "runtime: launch and first call, against .before"
    timeout 400 python3 benchmarks/runtime.py --device cuda:0 --against .before --rounds ${ROUNDS:-5}
    step "done"
}

mode_multi() {   # two GPUs (kind nvidia-h200-x2): tests, torchrun example, conformance on cuda:1
    start_run -e backends/cpu
    nvidia-smi topo -m >"$OUT/topology.txt" 2>&1; head -4 "$OUT/topology.txt"
    step "two-GPU tests and the device tests"
    timeout 200 python3 -m pytest -q -p no:cacheprovider -rs backends/nvidia/tests/test_multi_gpu.py \
        backends/nvidia/tests/test_device.py backends/nvidia/tests/test_driver.py \
        backends/nvidia/tests/test_raw_launch.py tests/runtime/test_multi_device.py >"$OUT/tests.txt" 2>&1
    tail -4 "$OUT/tests.txt"
    step "distributed example"
    local ex=examples/distributed_layernorm.py
    timeout 120 python3 $ex --save "$OUT/y_one.npy" 2>&1 | tail -2 | tee "$OUT/example_one.txt"
    timeout 180 python3 -m torch.distributed.run --nproc-per-node 2 $ex --save "$OUT/y_nccl.npy" \
        >"$OUT/example_nccl.txt" 2>&1
    tail -2 "$OUT/example_nccl.txt"
    timeout 180 python3 -m torch.distributed.run --nproc-per-node 2 $ex --cpu --save "$OUT/y_gloo.npy" \
        >"$OUT/example_gloo.txt" 2>&1
    tail -2 "$OUT/example_gloo.txt"
    python3 - "$OUT" <<'PY'
import sys, numpy as np
out = sys.argv[1]
try:
    one = np.load(f"{out}/y_one.npy")
    for name in ("nccl", "gloo"):
        print(f"torchrun {name} vs one process: max |diff| {np.abs(np.load(f'{out}/y_{name}.npy') - one).max():.1e}")
except OSError as exc:
    print("missing result:", exc)
PY
    step "full conformance on cuda:1"
    DEVICE=cuda:1 conformance_full "$OUT/conformance" | tee "$OUT/conformance_summary.txt" | tail -8
    step "copies and launches"
    timeout 120 python3 benchmarks/multi_gpu.py --out "$OUT/multi_gpu.md" >"$OUT/bench.log" 2>&1
    tail -8 "$OUT/bench.log"
    CUDA_VISIBLE_DEVICES=0 timeout 60 python3 benchmarks/multi_gpu.py --one-gpu 2>&1 | tail -1
    step "done"
}

mode_opencl() {   # NVIDIA's OpenCL: full conformance on opencl:0, then opencl.py beside cuda:0
    export OCL_ICD_VENDORS=libnvidia-opencl.so.1   # NVIDIA's ICD only (PoCL is installed too)
    start_run -e plugins/opencl
    python3 -m anytile backends | tee "$OUT/backends.txt"
    step "full conformance on opencl:0 (8 shards)"
    DEVICE=opencl:0 SHARD_TIMEOUT=${SHARD_TIMEOUT:-330} conformance_full "$OUT/conformance" \
        | tee "$OUT/conformance_summary.txt"
    step "benchmark beside the nvidia backend"
    timeout 180 python3 benchmarks/opencl.py --device opencl:0 --out "$OUT/opencl_bench.md" \
        >"$OUT/bench.log" 2>&1
    tail -3 "$OUT/bench.log"
    step "done"
    grep VERDICT "$OUT/conformance_summary.txt"
    cat "$OUT/opencl_bench.md" 2>/dev/null
}

mode_opencl_extra() {   # NVIDIA's OpenCL: the plugin's tests, core tests, 4 x 250 fuzzed kernels
    export OCL_ICD_VENDORS=libnvidia-opencl.so.1
    start_run -e plugins/opencl
    step "plugin tests on opencl:0"
    timeout 200 python3 -m pytest -q -p no:cacheprovider plugins/opencl/tests \
        --ignore=plugins/opencl/tests/test_gpu_path_conformance.py >"$OUT/test_plugin.txt" 2>&1
    tail -4 "$OUT/test_plugin.txt"
    step "core tests on opencl:0"
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests -k opencl --ignore=tests/packaging \
        >"$OUT/test_core.txt" 2>&1
    tail -4 "$OUT/test_core.txt"
    step "fuzz 4 x 250 kernels on opencl:0"
    for seed in 1 2 3 4; do
        timeout 170 python3 -m anytile conformance --device opencl:0 --fuzz 250 --seed "$seed" \
            --fuzz-dir "$OUT/fuzz" >"$OUT/fuzz_$seed.txt" 2>&1 &
    done
    wait
    for seed in 1 2 3 4; do echo "seed $seed: $(tail -1 "$OUT/fuzz_$seed.txt")"; done | tee "$OUT/fuzz_summary.txt"
    step "done"
}

case "$MODE" in
    quick|check|conformance|matmul|attention|launch|ab|ncu|profile|stalls|runtime|multi|opencl) ;;
    opencl-extra) MODE=opencl_extra ;;
    triton-compat) exec bash benchmarks/triton_compat.sh ;;
    *) echo "unknown mode '$MODE'; modes: quick check conformance matmul attention launch ab ncu" \
            "profile stalls runtime multi opencl opencl-extra triton-compat (benchmarks/README.md)" >&2
       exit 2 ;;
esac
"mode_$MODE"
