#!/usr/bin/env bash
# Triton compatibility on an NVIDIA GPU machine (`bash benchmarks/gpu.sh triton-compat`):
# Triton's tutorials through `anytile run --as-triton --device cuda:0`, and a list of Triton's
# own test_core.py tests run twice, through anytile and with the Triton installed there (the
# baseline: "what Triton passes there").  Nothing of Triton's is stored in this repository:
# TRITON_SRC is a checkout (or the files of one) carried to the machine as an ignored folder,
# and TESTS a file of test ids (relative to python/test/unit), one per line, or collect:N (N
# drawn from Triton's own collection, seed 5); FILTER=REGEX draws only from the ids matching it.
#   TRITON_SRC=.triton-src TESTS=collect:1200 bash benchmarks/gpu.sh triton-compat
# SKIP_TUTORIALS=1 leaves the tutorials out, TESTS=none the tests, SKIP_TRITON=1 Triton's own
# run; TUTORIAL=09 runs that one tutorial alone, its output streamed (T_ARGS: its arguments).
set -u
RESULTS=${OUT:-}                 # the caller's $OUT: only the summaries are copied there
OUT=/tmp/anytile-triton-compat
SHARDS=${SHARDS:-16}
SRC=$(realpath "${TRITON_SRC:?a Triton checkout}")
TESTS=${TESTS:-collect:1200}     # a file of test ids, or collect:N (N drawn from Triton's own collection)
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh

step "install"
install_anytile "$OUT/install.log" -e backends/cpu

if [ -n "${TUTORIAL:-}" ]; then
    step "tutorial $TUTORIAL through anytile on cuda:0"
    ( cd "$OUT" && timeout ${TUTORIAL_TIMEOUT:-480} python3 -u -m anytile run --as-triton --device cuda:0 \
        "$SRC"/python/tutorials/"$TUTORIAL"-*.py ${T_ARGS:-} 2>&1 | tee "$OUT/tutorial.log" | \
        grep -v "^\s*$" | cut -c1-160 | tail -60; echo "exit ${PIPESTATUS[0]}" )
    step "done"
    exit 0
fi

if [ -z "${SKIP_TUTORIALS:-}" ]; then
step "tutorials on cuda:0"
timeout ${TUTORIAL_TIMEOUT:-240} python3 tests/triton_compat/run_upstream.py --triton "$SRC" --device cuda:0 \
    --jobs 4 --timeout $(( ${TUTORIAL_TIMEOUT:-240} - 40 )) --json "$OUT/tutorials.json" --logs "$OUT/tutorial-logs" \
    >"$OUT/tutorials.txt" 2>&1
cat "$OUT/tutorials.txt"
[ -n "$RESULTS" ] && tar czf "$RESULTS/tutorial-logs.tgz" -C "$OUT" tutorial-logs tutorials.txt 2>/dev/null
grep -h "match\|differ\|✅\|❌" "$OUT"/tutorial-logs/03-*.log "$OUT"/tutorial-logs/09-*.log 2>/dev/null | cut -c1-100

step "tutorial 06's own test (test_op: forward and backward against torch), anytile then Triton"
( cd "$OUT" && timeout 300 python3 -m anytile run --as-triton --device cuda:0 "$(command -v pytest)" \
    "$SRC/python/tutorials/06-fused-attention.py" -q -p no:cacheprovider -k test_op 2>&1 | tail -3 )
( cd "$OUT" && timeout 300 python3 -m pytest "$SRC/python/tutorials/06-fused-attention.py" -q \
    -p no:cacheprovider -k test_op 2>&1 | tail -3 )

step "Triton itself runs the tutorials (the baseline)"
for t in "$SRC"/python/tutorials/0[1-9]*.py; do
    ( cd "$OUT" && timeout 90 python3 "$t" >"$OUT/triton-$(basename "$t" .py).log" 2>&1; \
      status=$?; echo "$(basename "$t"): exit $status (124: still running its benchmark at 90 s)" ) &
done | sort
wait
fi

case "$TESTS" in
none)
    step "done (TESTS=none: no test_core run)"
    if [ -n "$RESULTS" ]; then
        cp "$OUT/tutorials.txt" "$RESULTS/" 2>/dev/null
        tar czf "$RESULTS/logs.tgz" -C "$OUT" $(cd "$OUT" && ls -d triton-*.log tutorial-logs 2>/dev/null)
    fi
    exit 0 ;;
collect:*)
    n=${TESTS#collect:}
    ( cd "$SRC/python/test/unit" && python3 -m pytest --co -q language/test_core.py --device cuda \
        -p no:cacheprovider 2>/dev/null ) | grep "::" | sed 's|^.*language/test_core.py::|language/test_core.py::|' \
        | grep -E -- "${FILTER:-.}" >"$OUT/collected.txt"     # FILTER: a regex over the ids
    python3 -c "import random,sys; ids=open(sys.argv[1]).read().split(chr(10)); ids=[i for i in ids if i]; random.Random(5).shuffle(ids); print(chr(10).join(sorted(ids[:int(sys.argv[2])])))" \
        "$OUT/collected.txt" "$n" >"$OUT/sample.txt"
    echo "collected $(wc -l <"$OUT/collected.txt") tests on cuda; sampled $(wc -l <"$OUT/sample.txt")"
    TESTS="$OUT/sample.txt" ;;
*) TESTS=$(realpath "$TESTS") ;;
esac
step "test_core: $(wc -l <"$TESTS") tests, anytile and Triton, $SHARDS shards each"
split -n "r/$SHARDS" -d "$TESTS" "$OUT/shard-"
run_shards() {   # $1: anytile|triton
    for shard in "$OUT"/shard-??; do
        k=$(basename "$shard")
        (
            cd "$SRC/python/test/unit"
            mapfile -t ids <"$shard"
            if [ "$1" = anytile ]; then
                ANYTILE_TRITON_SOURCE="$SRC/python" timeout ${SHARD_TIMEOUT:-200} python3 -m anytile run \
                    --as-triton --device cuda:0 "$(command -v pytest)" "${ids[@]}" --device cuda -q \
                    -p no:cacheprovider --tb=line --junitxml="$OUT/$1-$k.xml" >"$OUT/$1-$k.txt" 2>&1
            else
                timeout ${SHARD_TIMEOUT:-200} python3 -m pytest "${ids[@]}" --device cuda -q \
                    -p no:cacheprovider --tb=line --junitxml="$OUT/$1-$k.xml" >"$OUT/$1-$k.txt" 2>&1
            fi
        ) &
    done
    wait
}
run_shards anytile
if [ -z "${SKIP_TRITON:-}" ]; then     # SKIP_TRITON=1: compare with an earlier run's Triton results
step "Triton's own run"
run_shards triton
fi
step "summary"
python3 - "$OUT" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
out = sys.argv[1]
def results(side):
    got = {}
    for path in glob.glob(f"{out}/{side}-shard-*.xml"):
        for case in ET.parse(path).iter("testcase"):
            name = f'{case.get("classname")}::{case.get("name")}'
            kids = [c.tag for c in case]
            state = "failed" if ("failure" in kids or "error" in kids) else "skipped" if "skipped" in kids else "passed"
            msg = ""
            for c in case:
                if c.tag in ("failure", "error"):
                    msg = (c.get("message") or "")[:200].replace("\n", " ")
            got[name] = (state, msg)
    return got
ours, theirs = results("anytile"), results("triton")
print(f"anytile: {sum(s == 'passed' for s, _ in ours.values())} passed, "
      f"{sum(s == 'failed' for s, _ in ours.values())} failed, {sum(s == 'skipped' for s, _ in ours.values())} skipped of {len(ours)}")
print(f"Triton:  {sum(s == 'passed' for s, _ in theirs.values())} passed, "
      f"{sum(s == 'failed' for s, _ in theirs.values())} failed, {sum(s == 'skipped' for s, _ in theirs.values())} skipped of {len(theirs)}")
both = [n for n, (s, _) in theirs.items() if s == "passed"]
ok = [n for n in both if ours.get(n, ("missing",))[0] == "passed"]
print(f"of the {len(both)} Triton passes, anytile passes {len(ok)} ({100 * len(ok) / max(1, len(both)):.1f}%)")
# tests that fail only where they read Triton's own IR or PTX spellings (anytile's IR and PTX text are its own)
TEXT = ("Generated by LLVM NVPTX", "triton.compile is not provided", "KeyError: 'ttir'",
        "KeyError: 'ttgir'", "asm[", ".asm")
reads_text = [n for n in both if n not in ok and any(t in ours.get(n, ("", ""))[1] for t in TEXT)]
rest = len(both) - len(reads_text)
print(f"leaving out the {len(reads_text)} that fail on reading Triton's IR/PTX text: "
      f"{len(ok)} of {rest} ({100 * len(ok) / max(1, rest):.1f}%)")
with open(f"{out}/missed.txt", "w") as f:
    for n in both:
        state, msg = ours.get(n, ("missing", ""))
        if state != "passed":
            f.write(f"{n}\t{state}{' (reads text)' if n in reads_text else ''}\t{msg}\n")
PY
cut -f1 "$OUT/missed.txt" | sed 's/\[.*//' | sort | uniq -c | sort -rn | head -30
grep -h "^E  \|Error" "$OUT"/anytile-shard-00.txt | head -5
if [ -n "$RESULTS" ]; then
    cp "$OUT/tutorials.txt" "$OUT/missed.txt" "$RESULTS/" 2>/dev/null
    tar czf "$RESULTS/logs.tgz" -C "$OUT" $(cd "$OUT" && ls -d triton-*.log tutorial-logs) 2>/dev/null
    tar czf "$RESULTS/shards.tgz" -C "$OUT" . 2>/dev/null
fi
step "done"
