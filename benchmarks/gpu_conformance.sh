#!/usr/bin/env bash
# The full conformance suite on $DEVICE (default cuda:0), split into SHARDS processes sharing
# the GPU (the machine's CPU cores compile in parallel).  On the lent GPU machine, in one call:
#   run(command="bash benchmarks/gpu_conformance.sh", carry=[".whl"])
# Reports land in $OUT (conformance-K.json per shard); the verdict is printed last.
set -u
OUT=${OUT:-/tmp/anytile-conformance}
SHARDS=${SHARDS:-8}
DEVICE=${DEVICE:-cuda:0}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
case "$DEVICE" in opencl*) PLUGINS="-e plugins/opencl" ;; *) PLUGINS="" ;; esac
python3 -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . -e backends/nvidia \
    $PLUGINS -e conformance >"$OUT/install.log" 2>&1 || { echo "install failed:"; tail -20 "$OUT/install.log"; }
start=$(date +%s)
for k in $(seq 0 $((SHARDS - 1))); do
  timeout ${SHARD_TIMEOUT:-540} python3 -m anytile conformance --full --device "$DEVICE" --shard "$k/$SHARDS" \
      --json "$OUT/conformance-$k.json" >"$OUT/shard-$k.txt" 2>&1 &
done
wait
echo "full conformance on $DEVICE in $SHARDS shards: $(( $(date +%s) - start )) s"
python3 - "$OUT" "$SHARDS" <<'PY'
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
