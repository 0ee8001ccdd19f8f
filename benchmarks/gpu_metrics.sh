#!/usr/bin/env bash
# The metric measurements of benchmarks/gpu_results.md, in one run on a GPU machine that has
# torch and transformers 5 but not unbabel-comet: WHEELS holds the COMET environment's wheels
# (envs/comet-requirements.txt's pins, for the machine's Python) and those of the project's
# own imports the machine lacks. Writes each benchmark's JSON and log under OUT.
#   WHEELS=.whl OUT=/tmp/out bash benchmarks/gpu_metrics.sh
set -u
WHEELS=${WHEELS:-.whl}
OUT=${OUT:-gpu-metrics}
mkdir -p "$OUT"
install() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$2" "$1"/*.whl
}
install "$WHEELS/common" /tmp/site && install "$WHEELS/comet" /tmp/comet || exit 1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
(cd benchmarks && PYTHONPATH=../scripts:/tmp/site timeout "${METRICX_SECONDS:-240}" \
    python3 metricx_flops.py --compile --output "$OUT/metricx_flops.json") 2>&1 |
    grep -v Warning | tee "$OUT/metricx_flops.log"
for shape in comet xcomet; do
    segments=1920
    [ "$shape" = xcomet ] && segments=960
    PYTHONPATH=/tmp/comet:/tmp/site:scripts timeout "${COMET_SECONDS:-160}" \
        python3 benchmarks/comet_gpu.py --shape "$shape" --segments "$segments" \
        --output "$OUT/$shape.json" 2>&1 | grep -v -i "warning\|pkg_resources" |
        tee "$OUT/$shape.log"
done
