#!/usr/bin/env bash
# Every metric measurement of benchmarks/gpu_results.md in one call, within 10 minutes on an
# H100 or H200, on a GPU machine that has torch and transformers 5 but not unbabel-comet: WHEELS
# holds the COMET environment's wheels (envs/comet-requirements.txt's pins, for the machine's
# Python) and those of the project's own imports the machine lacks. Writes each benchmark's
# JSON and log under OUT:
#   WHEELS=.whl OUT=/tmp/out bash benchmarks/gpu_metrics.sh
# - MetricX-24 XL (metricx_flops.py): the model as built and with each speed-up, the fused
#   attention's last among them, each warm (a pass untimed, then 3 timed: their spread), its
#   seconds per batch and share of the bfloat16 peak; why SDPA takes the path it takes;
# - COMET-22 and xCOMET-XL (comet_gpu.py): ours (batches sized by tokens, bfloat16) against
#   comet-score (float16, batches of 16), warm against warm and cold against cold, 3 repeats
#   each (xCOMET-XL's cold: 1, its loads take 40 s), with the share of the peak.
# The time limits (seconds) of each part can be set: METRICX_SECONDS, COMET_SECONDS,
# XCOMET_SECONDS; a part stopped at its limit leaves what it measured so far in its log.
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
(cd benchmarks && PYTHONPATH=../scripts:/tmp/site timeout "${METRICX_SECONDS:-200}" \
    python3 metricx_flops.py --segments 2048 --repeats 3 --attention \
    --output "$OUT/metricx_flops.json") 2>&1 | grep -v Warning | tee "$OUT/metricx_flops.log"
run_comet() {
    PYTHONPATH=/tmp/comet:/tmp/site:scripts timeout "$1" python3 benchmarks/comet_gpu.py \
        --shape "$2" --segments "$3" --cold-repeats "$4" --output "$OUT/$2.json" 2>&1 |
        grep -v -i "warning\|pkg_resources" | tee "$OUT/$2.log"
}
run_comet "${COMET_SECONDS:-150}" comet 1920 3
run_comet "${XCOMET_SECONDS:-220}" xcomet 960 1
