#!/usr/bin/env bash
# Accelerator check of mmevo on ONE GPU, without hub access: builds the tiny Qwen2.5-VL locally, then runs
# scripts/gpu_check.py and writes its one JSON object to stdout and to ${OUT:-.}/gpu_check.json. Checks (see
# gpu_check.py): HF-engine rollout tok/s in fp32 and bf16; one GRPO step; packed (padding-free) against padded
# forward/backward in fp32 and bf16 (varlen flash attention on the GPU); a 1-process DeepSpeed ZeRO-2 run of the CLI;
# a 1-process ZeRO-3 run of the CLI with rollout.engine=vllm (2 steps, then a resumed run that continues at step 3);
# the 7B-shaped rehearsal (scripts/rehearse_7b.py: random Qwen2.5-VL-7B weights made on the GPU, vLLM with
# load_format=dummy, one checkpointed micro-batch at the 7B config's token budget, a 7B weight sync, measured peak
# memory beside the planner's estimate); and the vLLM engine on the default model runner of the installed build
# (which runner, tok/s, fp32 greedy parity, weight sync, sleep/wake, sleep -> train -> sync -> generate, and a saved
# model's weights loaded into the woken engine as the self-play loops' frozen roles load theirs, then the same
# through the loops' role views: on the awake engine, and after the policy's view closed and put it to sleep). Every
# check records its own error (and the subprocess ones have timeouts); the script fails only if Python itself does.
#
# Time budget on one H200 / A800-class GPU: under 8 min, estimated (not yet measured: no GPU run so far):
#   build tiny model ~10 s | hf_rollout ~20 s | grpo_step ~20 s | packed_forward ~10 s
#   deepspeed_zero2 ~40 s (imports + 2 steps)
#   zero3_vllm ~2 min (2 CLI runs of ~60 s: imports, ZeRO-3 init, eager vLLM start, 2-3 steps, checkpoint)
#   rehearsal_7b ~1.5-2 min (imports, 8.3e9 random bf16 params on the GPU, eager vLLM dummy start with a 7B
#     profile run, one 15k-token micro-batch forward/backward, a 15.4 GiB weight sync)
#   vllm ~1.5 min (fp32 start with torch.compile + CUDA graphs, cold cache; +~1 min if fp32 fails and bf16 is tried)
# = ~6.7 min. Bounds if something hangs: 200 s per `mmevo train` run (--train-timeout), 300 s for the rehearsal
# (--rehearsal-timeout), and the whole run keeps to --budget-s (480 s on a GPU; $OUT/gpu_check.json is rewritten
# after every check). Without vLLM (an image that lacks it) zero3_vllm and vllm are skipped: ~3.5 min. The GPU must
# hold the 7B rehearsal: ~16 GiB policy + vLLM's 0.6 share awake, ~43 GiB during the packed update with vLLM asleep
# (planner) -- 80 GiB is enough.
#
#   bash scripts/gpu_check.sh                    # on the GPU machine
#   DEVICE=cpu bash scripts/gpu_check.sh --quick # the same checks on CPU at toy sizes (rehearsal at --scale tiny)
#
# Environment:
#   PYTHON           interpreter with torch + transformers (default: python3); mmevo is used from this checkout
#   DEVICE           cuda (default) | cpu
#   OUT              folder for gpu_check.json (default: .)
#   OMP_NUM_THREADS  CPU threads (default: 8)
#   WHEELS           folder of wheels installed with --no-index into a private target dir first (default: .whl
#                    when it exists, as scripts/device_kit.sh makes it); vllm / deepspeed checks are skipped when
#                    they do not import
# Extra arguments go to gpu_check.py (--quick, --skip vllm,rehearsal_7b, --parity-tokens 32,
# --gpu-memory-utilization 0.3, --rehearsal-scale tiny, --zero3-cuda-graphs, --train-timeout 200).
set -euo pipefail
# the run's start: gpu_check.py's --budget-s counts from here (the wheel install and Python's start included)
GPU_CHECK_STARTED="$(date +%s.%N)"
export GPU_CHECK_STARTED
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-.}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
WHEELS="${WHEELS-$([ -d .whl ] && echo .whl || true)}"
if [ -n "${WHEELS:-}" ] && compgen -G "$WHEELS/*.whl" > /dev/null; then
  SITE="$(mktemp -d)"
  # a failed install must not end the run (set -e): the checks that need these wheels record why they are skipped
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl; then
    export PYTHONPATH="$PYTHONPATH:$SITE"
  else
    echo "gpu_check: installing the wheels in $WHEELS failed; running without them" >&2
  fi
fi
# --out: rewritten after every check, so a run stopped from outside still leaves its results in $OUT_DIR
"$PY" scripts/gpu_check.py --device "${DEVICE:-cuda}" --out "$OUT_DIR/gpu_check.json" "$@"
