"""Training throughput of tinyscope's Transformer (no hooks attached) relative to the same
shape written as a bare nanoGPT-style module, measured in one process with interleaved rounds.

    .venv/bin/python benchmarks/core/hook_overhead.py [--rounds 7] [--steps 30]

Throughput is tokens per CPU-second of this process (one intra-op thread by default), which other
jobs on a shared machine disturb far less than wall time. Prints both throughputs and, last, the
ratio tinyscope / bare (target >= 0.95).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from tinyscope.models.transformer import Transformer, TransformerConfig

V, T, D, H, L, D_MLP, B = 16, 64, 128, 4, 2, 512, 32


class BareBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)
        self.fc, self.out = nn.Linear(D, D_MLP), nn.Linear(D_MLP, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)  # (B, T, D) each
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))  # (B, H, T, Dh)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class BareGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(BareBlock() for _ in range(L))
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def tinyscope_model() -> nn.Module:
    return Transformer(TransformerConfig(vocab_size=V, n_ctx=T, d_model=D, d_head=D // H, n_heads=[H] * L,
                                         d_mlp=[D_MLP] * L, act="gelu", norm="pre", final_norm=True,
                                         attn_out_proj=True, unembed_bias=False, init="gpt2"))


def tokens_per_second(model: nn.Module, steps: int, data: torch.Tensor) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = data[:, :-1], data[:, 1:]
    start = time.process_time()  # CPU seconds of this process: robust to other jobs on a shared machine
    for _ in range(steps):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return steps * x.numel() / (time.process_time() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = torch.randint(0, V, (B, T + 1))
    ours, bare = tinyscope_model(), BareGPT()
    n_ours, n_bare = (sum(p.numel() for p in m.parameters()) for m in (ours, bare))
    assert n_ours == n_bare, (n_ours, n_bare)
    tokens_per_second(ours, 5, data), tokens_per_second(bare, 5, data)  # warm up
    ratios, a_all, b_all = [], [], []
    for _ in range(args.rounds):  # interleave so that machine noise hits both alike
        a = tokens_per_second(ours, args.steps, data)
        b = tokens_per_second(bare, args.steps, data)
        ratios.append(a / b)
        a_all.append(a)
        b_all.append(b)
    print(f"shape: B={B} T={T} d_model={D} heads={H} layers={L} d_mlp={D_MLP} params={n_ours:,} threads={torch.get_num_threads()}")
    print(f"tinyscope (no hooks): best {max(a_all):,.0f}  median {statistics.median(a_all):,.0f} tokens/s")
    print(f"bare nanoGPT-style:   best {max(b_all):,.0f}  median {statistics.median(b_all):,.0f} tokens/s")
    print(f"best-of-rounds ratio: {max(a_all) / max(b_all):.3f}")
    print(f"throughput ratio tinyscope/bare (median of {args.rounds} interleaved rounds): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
