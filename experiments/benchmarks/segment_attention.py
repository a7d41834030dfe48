"""Packed-row attention, the per-sample loop against the padded single call (`knowlyr_lab.trainer.attention`), at
SmolLM2-135M's attention shapes (9 query heads, 3 key/value heads, head dim 64) on 32 samples of 200-700 tokens:
milliseconds per forward+backward of one layer's attention, and the largest output and gradient differences, in fp32
and bf16. On a GPU the padded call is the default; the CPU keeps the loop.

    python experiments/benchmarks/segment_attention.py          # CUDA when there is one, else the CPU
"""
import time

import torch

from knowlyr_lab.trainer.attention import segment_attention


def main():
    dev = 'cuda' if torch.cuda.is_available() else 'cpu'
    sync = torch.cuda.synchronize if dev == 'cuda' else (lambda: None)
    torch.manual_seed(0)
    sizes = [int(x) for x in torch.randint(200, 700, (32,))]
    pos = torch.cat([torch.arange(n) for n in sizes])[None].to(dev)
    T = sum(sizes)
    print(f"device {torch.cuda.get_device_name(0) if dev == 'cuda' else 'cpu'}, torch {torch.__version__}, {len(sizes)} samples, {T} tokens")
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(1, h, T, 64, device=dev, dtype=dtype, requires_grad=True) for h in (9, 3, 3))
        res = {}
        for padded in (False, True):
            def run(q=q, k=k, v=v, padded=padded):
                o, _ = segment_attention(None, q, k, v, None, scaling=0.125, position_ids=pos, padded=padded)
                o.float().pow(2).sum().backward()
                return o
            run(); sync()
            for t in (q, k, v): t.grad = None
            t0 = time.perf_counter()
            for _ in range(10): o = run()
            sync(); ms = (time.perf_counter() - t0) / 10 * 1e3
            res[padded] = (o.detach().float(), [t.grad.float() / 10 for t in (q, k, v)], ms)
            for t in (q, k, v): t.grad = None
        d = (res[False][0] - res[True][0]).abs().max().item()
        dg = max((a - b).abs().max().item() for a, b in zip(res[False][1], res[True][1]))
        print(f"{dtype}: loop {res[False][2]:.1f} ms, padded {res[True][2]:.1f} ms (forward+backward), ratio {res[False][2] / res[True][2]:.1f}x; "
              f"max |output difference| {d:.2e}, max |gradient difference| {dg:.2e}")

if __name__ == '__main__': main()
