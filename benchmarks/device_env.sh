# Sourced by benchmarks/gpu.sh on a GPU machine without network: the offline install of
# anytile (the working tree, editable, with the wheels in .whl/ that benchmarks/device_wheels.sh
# downloads beforehand on a machine with network) and the step banner.
#   install_anytile LOG [more -e paths]   # core, nvidia, conformance (+ more)
#   step TEXT                             # "== TEXT (time)"
#   start_run [more -e paths]             # mkdir $OUT, install, the GPU's name into $OUT/gpu.txt,
#                                         # then the tests in $PYTEST (-k $PYTEST_K), if any
export PYTHONUNBUFFERED=1
step() { echo "== $1 ($(date +%T))"; }
install_anytile() {
    local log=$1
    shift
    python3 -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . \
        -e backends/nvidia -e conformance "$@" >"$log" 2>&1 || { echo "install failed:"; tail -20 "$log"; }
}
start_run() {
    mkdir -p "$OUT"
    step "install"
    install_anytile "$OUT/install.log" "$@"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    if [ -n "${PYTEST:-}" ]; then
        step "tests: $PYTEST"
        timeout ${PYTEST_TIMEOUT:-400} python3 -m pytest -q -p no:cacheprovider $PYTEST \
            ${PYTEST_K:+-k "$PYTEST_K"} >"$OUT/tests.txt" 2>&1
        grep -E "passed|failed|Error" "$OUT/tests.txt" | tail -8
    fi
}
