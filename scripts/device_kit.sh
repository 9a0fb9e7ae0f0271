#!/usr/bin/env bash
# The wheels that a lent GPU machine's image lacks for scripts/gpu_check.sh, into .whl/ (git-ignored; ~6 MB).
#
# That image has CUDA torch, transformers, accelerate, peft, numpy, pillow, ... for CPython 3.12 on x86-64, and no
# network: what mmevo's checks import beyond it travels as wheels, which gpu_check.sh installs (--no-index, into a
# private dir) before it starts. Measured on CPU in a venv with the image's transformers 5.17 and no other mmevo
# dependency: the HF rollout, GRPO step, packed-forward and 7B-rehearsal checks need nothing more; `mmevo train`
# under DeepSpeed (deepspeed_zero2) needs DeepSpeed and what it imports that the image lacks (hjson, pydantic and
# pydantic's own needs). DeepSpeed ships as a source archive: it is built here into a wheel without prebuilt ops
# (ZeRO with mmevo's torch AdamW compiles none).
#
# vLLM cannot travel: its CUDA wheel is several hundred MB (a device call carries at most 64 MiB) and it pins a torch
# other than the image's. There the vLLM checks (zero3_vllm, vllm, the rehearsal's engine phases) record
# "vllm not importable" and the rest still runs.
#
#   bash scripts/device_kit.sh           # here, once; then on the device:  bash scripts/gpu_check.sh  (carry .whl)
#
# Environment: PYTHON (default .venv/bin/python: needs pip, and torch to build DeepSpeed), KIT (default .whl).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
KIT="${KIT:-.whl}"
mkdir -p "$KIT"
# the versions mmevo's CPU tests run with (pyproject's dev extra); pydantic-core is the one pydantic pins
PURE="hjson==3.1.0 pydantic==2.14.4 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions>=4.16"
BINARY="pydantic-core==2.50.5"
DEEPSPEED="deepspeed==0.19.8"
TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps "${TARGET[@]}" -d "$KIT" $PURE $BINARY
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$KIT" "$DEEPSPEED"
# one version of each package: two would stop the install there
dupes="$(ls "$KIT"/*.whl | xargs -n1 basename | cut -d- -f1 | tr 'A-Z-' 'a-z_' | sort | uniq -d)"
if [ -n "$dupes" ]; then
  echo "device_kit: more than one wheel of: $dupes (delete $KIT and run again)" >&2
  exit 1
fi
ls -l "$KIT"/*.whl >&2
du -sh "$KIT" >&2
