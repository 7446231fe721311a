# Sourced by the scripts run on the lent GPU machine (gpu_check.sh, multi_gpu.sh,
# triton_compat_gpu.sh): the offline install and the step banner they share.
#   install_anytile LOG [more -e paths]   # core, nvidia, conformance (+ more), from .whl
#   step TEXT                             # "== TEXT (time)"
#   start_run                             # mkdir $OUT, install, the GPU's name into $OUT/gpu.txt
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
    install_anytile "$OUT/install.log"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
}
