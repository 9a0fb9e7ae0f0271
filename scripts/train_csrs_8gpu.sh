#!/usr/bin/env bash
# CSRS on Qwen2.5-VL-7B-Instruct / Geometry3K with 8 GPUs per node (the paper's Table 6 setup: 8x A800 80GB).
#
# Every rank runs the same `mmevo train`: it samples its own whole prompt groups (256 prompts per step / world size)
# with its own vLLM engine on its own GPU (gpu_memory_utilization 0.6, asleep while the policy trains), trains under
# DeepSpeed ZeRO-3, and after each update streams the ZeRO-3 weights, gathered bucket by bucket, into its engine.
# Rank 0 writes metrics, checkpoints and the final model. See README "Scaling to 8 GPUs and several nodes".
#
# One node:        bash scripts/train_csrs_8gpu.sh [section.key=value ...]
# Several nodes:   on every node, with the same MASTER_ADDR (node 0's address) and its own NODE_RANK:
#                  NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash scripts/train_csrs_8gpu.sh   # node 0
#                  NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 bash scripts/train_csrs_8gpu.sh   # node 1
# Preview:         DRY_RUN=1 bash scripts/train_csrs_8gpu.sh   (prints the command, runs nothing)
#
# Environment (defaults in brackets):
#   CONFIG           the run's config [configs/csrs_qwen2_5_vl_7b_geometry3k.yaml]; the MM-UPT (majority vote) baseline
#                    under the same settings: CONFIG=configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml
#   MODEL_PATH       policy to start from: a local checkpoint dir or a hub id [Qwen/Qwen2.5-VL-7B-Instruct]
#   DATA_TRAIN       Geometry3K-schema train file/dir (images, problem with <image>, answer)
#                    [data/geometry3k/train.parquet]
#   DATA_TEST        held-out file/dir for the before/after evaluation; "" disables it [data/geometry3k/test.parquet]
#   OUTPUT_DIR       metrics.jsonl, checkpoints/, final/ [runs/<CONFIG's file name without .yaml>]
#   NPROC_PER_NODE   GPUs (ranks) per node [8]
#   NNODES           nodes [1]; NODE_RANK this node's index [0]
#   MASTER_ADDR      node 0's address, reachable from every node [127.0.0.1]; MASTER_PORT [29500]
#   DS_CONFIG        DeepSpeed config [configs/deepspeed/zero3.json]
#   GPU_MEM_UTIL     vLLM's share of each GPU (weights + KV cache) [0.6]
#   SLEEP_MODE       true: vLLM frees its weights and KV cache while the policy trains [true] (the 7B configs'
#                    rollout.sleep_level=2 discards both, no host copy: the weights are synced in after each update)
#   WANDB_MODE       offline | online | disabled [offline]
#   TORCHRUN         launcher command [torchrun]; e.g. "python -m torch.distributed.run" for a given interpreter
#   OMP_NUM_THREADS  CPU threads per rank [8]
# Arguments after the script name are passed on as config overrides, e.g. trainer.steps=10 trainer.save_every=5.
#
# The global batch (trainer.prompts_per_step=256) must divide by NNODES*NPROC_PER_NODE; per rank that is 32 prompts,
# 32*8 maternal responses and 32*8*5 re-inferences per step. Rerunning with the same OUTPUT_DIR and as many ranks
# resumes from the newest checkpoint (weights, ZeRO optimizer partitions, scheduler, data position, RNG).
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG="${CONFIG:-configs/csrs_qwen2_5_vl_7b_geometry3k.yaml}"
if [ ! -f "$CONFIG" ]; then echo "train_csrs_8gpu.sh: CONFIG=$CONFIG: no such file" >&2; exit 2; fi
MODEL_PATH="${MODEL_PATH:-Qwen/Qwen2.5-VL-7B-Instruct}"
DATA_TRAIN="${DATA_TRAIN:-data/geometry3k/train.parquet}"
DATA_TEST="${DATA_TEST-data/geometry3k/test.parquet}"
CONFIG_NAME="$(basename "$CONFIG")"
OUTPUT_DIR="${OUTPUT_DIR:-runs/${CONFIG_NAME%.yaml}}"
NPROC_PER_NODE="${NPROC_PER_NODE:-8}"
NNODES="${NNODES:-1}"
NODE_RANK="${NODE_RANK:-0}"
MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
MASTER_PORT="${MASTER_PORT:-29500}"
DS_CONFIG="${DS_CONFIG:-configs/deepspeed/zero3.json}"
GPU_MEM_UTIL="${GPU_MEM_UTIL:-0.6}"
SLEEP_MODE="${SLEEP_MODE:-true}"
TORCHRUN="${TORCHRUN:-torchrun}"
export WANDB_MODE="${WANDB_MODE:-offline}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
export TOKENIZERS_PARALLELISM=false

if [ "$NNODES" -gt 1 ]; then
  LAUNCH=(--nnodes "$NNODES" --node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT"
          --nproc_per_node "$NPROC_PER_NODE")
else
  LAUNCH=(--standalone --nproc_per_node "$NPROC_PER_NODE")
fi
# Multi-node, spelled out (node 0 of 2; run the same on node 1 with --node_rank 1):
#   torchrun --nnodes 2 --node_rank 0 --master_addr 10.0.0.1 --master_port 29500 --nproc_per_node 8 \
#     -m mmevo.cli train configs/csrs_qwen2_5_vl_7b_geometry3k.yaml trainer.deepspeed=configs/deepspeed/zero3.json \
#     rollout.engine=vllm rollout.gpu_memory_utilization=0.6 rollout.enable_sleep_mode=true ...

read -r -a LAUNCHER <<< "$TORCHRUN"  # may be several words, e.g. "python -m torch.distributed.run"
CMD=("${LAUNCHER[@]}" "${LAUNCH[@]}" -m mmevo.cli train "$CONFIG"
     "model.path=$MODEL_PATH"
     model.dtype=bfloat16
     model.device=cuda
     "data.train=$DATA_TRAIN"
     "data.heldout=$DATA_TEST"
     "trainer.output_dir=$OUTPUT_DIR"
     "trainer.deepspeed=$DS_CONFIG"
     rollout.engine=vllm
     "rollout.gpu_memory_utilization=$GPU_MEM_UTIL"
     "rollout.enable_sleep_mode=$SLEEP_MODE"
     rollout.tensor_parallel_size=1
     "trainer.wandb_mode=$WANDB_MODE"
     "$@")

echo "[train_csrs_8gpu] ${CMD[*]}" >&2
if [ -n "${DRY_RUN:-}" ]; then
  exit 0
fi
exec "${CMD[@]}"
