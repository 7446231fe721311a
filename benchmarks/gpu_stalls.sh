#!/usr/bin/env bash
# Nsight Compute's per-instruction view (warp stall samples on each SASS instruction) of matmul
# launches of both compilers, in one call on the lent GPU machine:
#   run(command="CASES='persistent:128,256,64,8,3' bash benchmarks/gpu_stalls.sh", carry=[".whl"])
# For each case and side: the durations and stall reasons of the third launch
# (benchmarks/gpu_profile_matmul.py, sections as gpu_profile.sh) and its source page as CSV
# (ncu --page source --print-source sass), all packed into $OUT/stalls.tgz; the durations and
# the instructions that gather the most samples are printed.  DRIVER: the launch script
# (benchmarks/gpu_profile_matmul.py, or gpu_profile_attention.py with its kernels and configs).
set -u
OUT=${OUT:-/tmp/anytile-gpu-stalls}
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
start_run
export ANYTILE_NO_CACHE=1
NCU=/usr/local/cuda/bin/ncu
work=$OUT/stalls
mkdir -p "$work"
for case in ${CASES:-persistent:128,256,64,8,3}; do
    which=${case%%:*}
    cfg=${case#*:}
    name=${which}_${cfg//,/x}
    for side in ${SIDES:-anytile triton}; do
        step "$side $which $cfg"
        rep=$work/${side}_$name
        timeout 300 $NCU --kernel-name "regex:^${which}$" --launch-skip 2 --launch-count 1 \
            --section WarpStateStats --section SourceCounters --section SpeedOfLight \
            --section LaunchStats --import-source no -f -o "$rep" \
            python3 benchmarks/${DRIVER:-gpu_profile_matmul.py} "$side" "$which" "$cfg" >"$rep.log" 2>&1
        grep -E "ok|WRONG|ERR" "$rep.log" | head -5
        $NCU -i "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
        grep -E "Duration|Compute \(SM\)|Warp Cycles Per Issued|Registers Per" "$rep.txt"
        $NCU -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>&1
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
