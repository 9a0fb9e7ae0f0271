#!/usr/bin/env bash
# Accelerator check of mmevo, for a GPU machine without hub access: builds the tiny Qwen2.5-VL locally, then runs
# scripts/gpu_check.py (HF-engine rollout tok/s in fp32 and bf16, one GRPO step, a 1-process DeepSpeed ZeRO-2 step
# if deepspeed imports, the vLLM engine if vllm imports) and writes its one JSON object to stdout and to
# ${OUT:-.}/gpu_check.json. Every check records its own error; the script fails only if Python itself does.
#
#   bash scripts/gpu_check.sh                    # on the GPU machine
#   DEVICE=cpu bash scripts/gpu_check.sh --quick # the same checks on CPU at toy sizes
#
# Environment:
#   PYTHON           interpreter with torch + transformers (default: python3); mmevo is used from this checkout
#   DEVICE           cuda (default) | cpu
#   OUT              folder for gpu_check.json (default: .)
#   OMP_NUM_THREADS  CPU threads (default: 8)
#   WHEELS           optional folder of wheels (e.g. deepspeed, math-verify) installed with --no-index into a
#                    private target dir first; vllm / deepspeed checks are skipped when they do not import
# Extra arguments go to gpu_check.py (--quick, --skip vllm, --parity-tokens 32, --gpu-memory-utilization 0.3).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-.}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${WHEELS:-}" ] && compgen -G "$WHEELS/*.whl" > /dev/null; then
  SITE="$(mktemp -d)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl
  export PYTHONPATH="$PYTHONPATH:$SITE"
fi
"$PY" scripts/gpu_check.py --device "${DEVICE:-cuda}" "$@" | tee "$OUT_DIR/gpu_check.json"
