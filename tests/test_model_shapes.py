"""The trainers on models shaped like the ones people fine-tune (issue 23, item 6), built locally at a tiny size.

Qwen2.5: `Qwen2ForCausalLM`, tied embeddings, grouped-query attention (fewer key/value heads than heads), rope_theta
1e6, bias on the q/k/v projections. Llama 3.2: `LlamaForCausalLM` with the `llama3` rope scaling, tied embeddings,
GQA, no biases. Both get a tokenizer trained here with the library's tool-rendering ChatML template (`train_tokenizer`,
the family's own pre-tokenizer). For each: LoRA SFT, full fine-tuning with fp32 master weights under bf16 autocast,
the eager and SDPA attention kernels agreeing, `device_map='cpu'`, offline GRPO, and save -> reload -> identical logits;
the settings reach the trainers through their configs and through `knowlyr-trainer`'s flags. Last, the prepared GPU
benchmark runs its `--dry-run` so it cannot rot."""
import contextlib
import importlib.util
import io
import json
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from knowlyr_lab.cli.trainer import build_parser, config_from_args, main
from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.registry import make
from knowlyr_lab.trainer.grpo import GRPOTrainer
from knowlyr_lab.trainer.grpo_groups import GRPOConfig
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer, env_tools, oracle_trajectories, render_corpus
from knowlyr_lab.trainer.tiny import save_tiny_model, train_tokenizer
from knowlyr_lab.trajectory_io import write_trajectories
from knowlyr_lab.wrappers import RecorderWrapper

ROOT = Path(__file__).resolve().parent.parent
ENV = 'knowlyr/maze-easy'
LLAMA3_ROPE = {'rope_type': 'llama3', 'factor': 32.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}

def qwen25(tok):
    "Qwen2.5-0.5B's shape at width 64: 14 -> 4 heads, 2 KV heads, head_dim 16, tied, rope_theta 1e6, qkv bias (Qwen2's)"
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                                        tie_word_embeddings=True, use_sliding_window=False, bos_token_id=None,
                                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))

def llama32(tok):
    "Llama 3.2-1B's shape at width 64: 8 heads of 8 over 2 KV heads (its 32/8), llama3 rope scaling, theta 5e5, tied, 128k positions"
    return LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                                        num_key_value_heads=2, head_dim=8, max_position_embeddings=131072, rope_theta=500_000.0,
                                        rope_scaling=dict(LLAMA3_ROPE), rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False,
                                        mlp_bias=False, bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))

SHAPES = {'qwen2.5': ('qwen2', 512, qwen25), 'llama3.2': ('llama', 2048, llama32)}

@pytest.fixture(scope='module')
def demos():
    return oracle_trajectories(ENV, range(8)), env_tools(ENV)

@pytest.fixture(scope='module', params=list(SHAPES))
def shape(request, demos, tmp_path_factory):
    "(name, model folder) of a freshly initialised model of that shape with its tokenizer"
    trajs, tools = demos
    family, vocab, build = SHAPES[request.param]
    tok = train_tokenizer(render_corpus(trajs[:4], tools=tools), vocab, family=family)
    torch.manual_seed(0)
    return request.param, save_tiny_model(build(tok), tok, tmp_path_factory.mktemp(request.param.replace('.', '')) / 'init')

def _sft(path, out, **kw):
    trajs, tools = kw.pop('demos')
    cfg = dict(model_name_or_path=str(path), output_dir=str(out), max_steps=5, batch_size=4, num_epochs=10, learning_rate=1e-2,
               lr_scheduler='constant', logging_steps=1, mixed_precision='no', progress_bar=False, seed=0)
    return SFTTrainer(SFTConfig(**{**cfg, **kw}), train_data=trajs[:4], tools=tools)   # one batch, seen every step: the loss must fall

def _chats_ids(tok, demos):
    "Two rendered chats of different lengths as one right-padded batch (input_ids, attention_mask)"
    trajs, tools = demos
    from knowlyr_lab.trainer.data import to_chat, tokenize_chat
    ids = [tokenize_chat(tok, to_chat(t, tools=tools))['input_ids'][:96] for t in (trajs[0], trajs[3])]
    n = max(map(len, ids))
    x = torch.tensor([i + [tok.pad_token_id] * (n - len(i)) for i in ids])
    return x, torch.tensor([[1] * len(i) + [0] * (n - len(i)) for i in ids])

def _logits(model, x, m):
    model.eval()
    with torch.no_grad(): return model(input_ids=x, attention_mask=m).logits * m[..., None]

def _losses(tr): return [h['loss'] for h in tr.history if 'loss' in h]

def test_shapes_are_the_architectures(shape):
    "What makes each family itself survives save -> reload: tied head, GQA, qkv bias (Qwen2.5) or llama3 rope scaling (Llama 3.2)"
    name, path = shape
    m = AutoModelForCausalLM.from_pretrained(path)
    attn = m.model.layers[0].self_attn
    assert m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()                 # tied
    assert attn.k_proj.out_features * 2 <= attn.q_proj.out_features                             # GQA
    if name == 'qwen2.5':
        assert isinstance(m, Qwen2ForCausalLM) and attn.q_proj.bias is not None and attn.o_proj.bias is None
        assert m.config.rope_parameters['rope_theta'] == 1e6
    else:
        assert isinstance(m, LlamaForCausalLM) and attn.q_proj.bias is None
        assert m.config.rope_parameters['rope_type'] == 'llama3' and m.model.rotary_emb.rope_type == 'llama3'
        d = m.config.head_dim
        plain = 1.0 / 500_000.0 ** (torch.arange(0, d, 2).float() / d)           # unscaled rope
        got = m.model.rotary_emb.inv_freq
        assert torch.allclose(plain[0], got[0]) and not torch.allclose(plain, got)   # llama3 scaling slows the low frequencies only

def test_lora_sft_trains_and_saved_merge_reloads_identical(shape, demos, tmp_path):
    name, path = shape
    tr = _sft(path, tmp_path / 'lora', demos=demos, use_lora=True, lora_r=8, lora_alpha=16, learning_rate=5e-3,
              lora_target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'])
    base = {k: v.clone() for k, v in tr.model.get_base_model().state_dict().items() if 'lora_' not in k and 'base_layer' in k}
    tr.train()
    losses = _losses(tr)
    assert all(map(lambda v: v == v and abs(v) != float('inf'), losses)) and losses[-1] < losses[0] - 0.25, losses
    assert losses == sorted(losses, reverse=True), losses                    # steadily: the same batch every step
    after = tr.model.get_base_model().state_dict()
    assert base and all(torch.equal(v, after[k]) for k, v in base.items())     # the base weights stay frozen
    out = tr.save_model()
    x, m = _chats_ids(tr.tokenizer, demos)
    want = _logits(tr.model, x, m)                                             # adapter applied on the fly
    got = _logits(AutoModelForCausalLM.from_pretrained(out), x, m)              # merged and saved
    assert (want - got).abs().max().item() < 1e-4

def test_full_finetune_keeps_fp32_master_weights_under_bf16_autocast(shape, demos, tmp_path):
    "model_dtype float32 + mixed_precision bf16: the forward runs in bf16, weights and optimiser state stay fp32, loss falls"
    name, path = shape
    tr = _sft(path, tmp_path / 'full', demos=demos, model_dtype='float32', mixed_precision='bf16', learning_rate=3e-3)
    seen = []
    tr.model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda mod, i, o: seen.append(o.dtype))
    tr.train()
    losses = _losses(tr)
    assert tr.precision == 'bf16' and seen and set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())
    assert all(s['exp_avg'].dtype == torch.float32 for s in tr.optimizer.state_dict()['state'].values())
    assert all(map(lambda v: v == v and abs(v) != float('inf'), losses)) and losses[-1] < losses[0] - 0.5, losses
    reloaded = AutoModelForCausalLM.from_pretrained(tr.save_model())
    assert reloaded.dtype == torch.float32
    want = reloaded.state_dict()                                                # the saved weights are the trained fp32 ones
    assert all(torch.equal(w, want[k]) for k, w in tr.accelerator.unwrap_model(tr.model).state_dict().items())

def test_eager_and_sdpa_attention_agree(shape, demos, tmp_path):
    "attn_implementation reaches the loaded model; both kernels give the same logits on a padded batch (GQA and masks included)"
    name, path = shape
    logits = {}
    for impl in ('eager', 'sdpa'):
        tr = _sft(path, tmp_path / impl, demos=demos, attn_implementation=impl)
        assert tr.model.config._attn_implementation == impl
        x, m = _chats_ids(tr.tokenizer, demos)
        logits[impl] = _logits(tr.model, x, m)
    assert (logits['eager'] - logits['sdpa']).abs().max().item() < 1e-4

@pytest.fixture
def loads(monkeypatch):
    "The keyword arguments of every `AutoModelForCausalLM.from_pretrained` call (which still loads)"
    seen, orig = [], AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, 'from_pretrained', lambda *a, **kw: seen.append(kw) or orig(*a, **kw))
    return seen

def test_device_map_cpu_loads_and_trains(shape, demos, tmp_path, loads):
    name, path = shape
    tr = _sft(path, tmp_path / 'dm', demos=demos, device_map='cpu', max_steps=2)
    assert loads[-1]['device_map'] == 'cpu' and loads[-1]['dtype'] == torch.float32
    assert {p.device.type for p in tr.model.parameters()} == {'cpu'}
    s = tr.train()
    assert s['steps'] == 2 and s['loss'] == s['loss']

def _walk(seed, n=3):
    env, rng = RecorderWrapper(make(ENV)), random.Random(seed)
    ts = env.reset(seed=seed % 2)
    for _ in range(n):
        if ts.done: break
        ts = env.step({'tool': 'move', 'params': {'direction': rng.choice(['north', 'west', 'south', 'east'])}})
    return env.get_trajectory()

def test_offline_grpo_steps(shape, demos, tmp_path):
    "Two offline GRPO updates on exported groups (oracle + random walks), bf16 autocast over fp32 weights: finite, and the weights move"
    name, path = shape
    trajs, tools = demos
    DatasetExporter(trajs[:2] + [_walk(s) for s in range(3)], tools=tools).export('grpo', tmp_path / 'grpo')
    cfg = GRPOConfig(model_name_or_path=str(path), output_dir=str(tmp_path / 'run'), tasks_per_step=2, max_steps=2, learning_rate=1e-3,
                     model_dtype='float32', mixed_precision='bf16', progress_bar=False, seed=0)
    tr = GRPOTrainer(cfg, tools=tools)
    before = [p.detach().clone() for p in tr.model.parameters()]
    rows = tr.train_offline(tmp_path / 'grpo' / 'train.jsonl')
    assert tr.state['step'] == 2 and rows and all(r['loss'] == r['loss'] for r in tr.history)
    assert any(not torch.equal(a, b) for a, b in zip(before, tr.model.parameters()))
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())

def _call(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()

@pytest.mark.parametrize('shape', ['qwen2.5'], indirect=True)   # the flags are the same for every shape
def test_cli_flags_reach_the_trainer_and_eval(shape, demos, tmp_path, loads):
    "--model-dtype/--attn-implementation/--device-map load the model as they say; `eval --device --model-dtype` plays with it"
    name, path = shape
    trajs, tools = demos
    write_trajectories(trajs, tmp_path / 'train.jsonl')
    flags = ['--model-name-or-path', str(path), '--train-data', str(tmp_path / 'train.jsonl'), '--output-dir', str(tmp_path / 'run'),
             '--max-steps', '1', '--progress-bar', 'false', '--tools-from-env', ENV, '--mixed-precision', 'no',
             '--model-dtype', 'bfloat16', '--attn-implementation', 'eager', '--device-map', 'cpu']
    tr = SFTTrainer(config_from_args(SFTConfig, build_parser().parse_args(['sft', *flags])), train_data=str(tmp_path / 'train.jsonl'))
    assert (tr.model.dtype, tr.model.config._attn_implementation) == (torch.bfloat16, 'eager')
    assert (loads[-1]['dtype'], loads[-1]['attn_implementation'], loads[-1]['device_map']) == (torch.bfloat16, 'eager', 'cpu')
    rc, out, err = _call('sft', *flags)
    assert rc == 0, err
    model = json.loads(out.strip().splitlines()[-1])['model']
    assert json.loads(Path(model, 'config.json').read_text())['dtype'] == 'bfloat16'
    rc, out, err = _call('eval', '--model', model, '--env', ENV, '--episodes', '2', '--max-episode-steps', '1', '--max-new-tokens', '4',
                         '--device', 'cpu', '--model-dtype', 'bfloat16', '--attn-implementation', 'eager')
    assert rc == 0, err
    assert json.loads(out.strip().splitlines()[-1])['episodes'] == 2
    assert (loads[-1]['dtype'], loads[-1]['attn_implementation']) == (torch.bfloat16, 'eager')

def _benchmark():
    spec = importlib.util.spec_from_file_location('gpu_real_model', ROOT / 'experiments' / 'benchmarks' / 'gpu_real_model.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

def test_gpu_benchmark_refuses_without_cuda_and_its_dry_run_runs(tmp_path, capsys):
    bench = _benchmark()
    assert bench.peak_tflops('NVIDIA H100 80GB HBM3') == 989.0 and bench.peak_tflops('NVIDIA H100 PCIe') == 756.0
    assert bench.peak_tflops('NVIDIA H200', 500.0) == 500.0 and bench.peak_tflops('Tesla T4') is None
    if not torch.cuda.is_available():
        assert bench.main(['--output', str(tmp_path / 'no.json')]) == 2
        err = capsys.readouterr().err
        assert err.count('\n') == 1 and 'no CUDA device' in err and not (tmp_path / 'no.json').exists()
    assert bench.main(['--dry-run', '--peak-tflops', '100', '--output', str(tmp_path / 'r.json')]) == 0
    r = json.loads((tmp_path / 'r.json').read_text())
    assert r['dry_run'] and r['provenance']['commit'] and 'torch' in r['provenance']['packages']
    tpl = r['provenance']['chat_template']          # trn10: taken without the tokenizer, it named no template
    assert tpl and tpl['name_or_path'].endswith('tiny') and tpl['sha256'], r['provenance']
    for k in ('sft_full', 'sft_lora'):
        s = r[k]
        assert s['steps_measured'] == 2 and s['tokens_per_s'] > 0 and s['master_dtype'] == 'torch.float32' and s['mixed_precision'] == 'bf16'
        assert abs(s['mfu'] - 6 * s['params'] * s['tokens_per_s'] / 100e12) < 1e-12
    assert r['sft_lora']['trainable_params'] < r['sft_full']['trainable_params'] == r['sft_full']['params']
    g = r['grpo']
    assert g['updates'] == 1 and g['episodes'] == 4 and g['generated_tokens'] > 0 and g['generated_tokens_per_s'] > 0 and g['episodes_per_s'] > 0
