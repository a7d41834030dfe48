"""A LoRA trained on a merged adapter (online GRPO from an SFT warm start) loads as it was trained: the merged model names
its adapter folder as its own, so the new adapter's `base_model_name_or_path` points at the warm start, and loading
follows the chain (base -> warm-start adapter -> new adapter). Before, the new adapter named the original base and loaded
without the warm start's delta: a different policy, silently."""
import json

import pytest
import torch

peft = pytest.importorskip('peft')

from transformers import AutoModelForCausalLM

from knowlyr_lab.serving import AgentInference
from knowlyr_lab.trainer.tiny import make_tiny_model


def _adapter(model, path, tok, seed):
    "A LoRA with non-zero weights on `model` (a fresh LoRA adds nothing), saved with the tokenizer; the peft model"
    torch.manual_seed(seed)
    m = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=['q_proj', 'v_proj'], init_lora_weights=False))
    m.save_pretrained(path); tok.save_pretrained(path)
    return m

@pytest.fixture
def chain(tmp_path):
    base, tok = make_tiny_model(hidden_size=32, save_dir=tmp_path / 'base')
    _adapter(AutoModelForCausalLM.from_pretrained(tmp_path / 'base'), tmp_path / 'sft', tok, seed=1)
    warm = AgentInference.from_pretrained(tmp_path / 'sft')
    grpo = _adapter(warm.model, tmp_path / 'grpo', tok, seed=2)
    return tmp_path, tok, grpo

def test_an_adapter_on_a_merged_adapter_loads_as_trained(chain):
    d, tok, grpo = chain
    assert json.loads((d / 'grpo' / 'adapter_config.json').read_text())['base_model_name_or_path'] == str((d / 'sft').resolve())
    x = torch.tensor([tok.encode('You are at row 0, col 0. Where next?')])
    with torch.no_grad():
        trained = grpo(x).logits
        again = AgentInference.from_pretrained(d / 'grpo').model(x).logits
        without_warm_start = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(d / 'base'), d / 'grpo')(x).logits
    assert torch.allclose(again, trained, atol=1e-5)
    assert not torch.allclose(without_warm_start, trained, atol=1e-3)   # what loading on the original base gave

def test_a_missing_or_looping_base_is_named(chain):
    d, tok, grpo = chain
    cfg = d / 'grpo' / 'adapter_config.json'
    c = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({**c, 'base_model_name_or_path': str(d / 'gone')}))
    with pytest.raises(FileNotFoundError, match=r"grpo: adapter_config.json: base_model_name_or_path '.*gone' does not exist"):
        AgentInference.from_pretrained(d / 'grpo')
    cfg.write_text(json.dumps({**c, 'base_model_name_or_path': str(d / 'grpo')}))
    with pytest.raises(ValueError, match='adapters name each other as their base'):
        AgentInference.from_pretrained(d / 'grpo')
