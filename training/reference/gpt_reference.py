#!/usr/bin/env python3
"""PyTorch twin of strata-train's model, optimizer step and clipping, for the gradient check.

    gpt_reference.py IN OUT [--dtype float64|float32]

IN (little-endian, written by tests/training/test_gradcheck.cpp):
    int32[8]    vocab, ctx, layers, heads, dim, B, T, adam_steps
    float32[5]  lr, weight_decay, clip, beta1, beta2        (eps is 1e-8)
    float32[P]  parameters in canonical order (see training/layout.cpp)
    int32[B*T]  inputs, then int32[B*T] targets
OUT:
    float64[adam_steps + 1]  loss before each AdamW step and after the last
    float64[P]               gradient of the first loss
    float64[P]               parameters after adam_steps steps of clip + AdamW

The model is written with ordinary torch modules and autograd, independently of the C++.
By default it computes in float64, so that the comparison measures the C++ fp32 error.
"""
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.NH
        q, k, v = (t.view(B, T, self.NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = Attention(C, NH)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V, ctx, L, NH, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(ctx, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def canonical(self):
        """Parameters in strata-train's storage order."""
        ps = [self.wte.weight, self.wpe.weight]
        for b in self.h:
            ps += [b.ln_1.weight, b.ln_1.bias, b.attn.c_attn.weight, b.attn.c_attn.bias,
                   b.attn.c_proj.weight, b.attn.c_proj.bias, b.ln_2.weight, b.ln_2.bias,
                   b.mlp.c_fc.weight, b.mlp.c_fc.bias, b.mlp.c_proj.weight, b.mlp.c_proj.bias]
        return ps + [self.ln_f.weight, self.ln_f.bias]


def main():
    args = sys.argv[1:]
    dtype = torch.float64
    if "--dtype" in args:
        i = args.index("--dtype")
        dtype = {"float64": torch.float64, "float32": torch.float32}[args[i + 1]]
        del args[i:i + 2]
    src, dst = args
    torch.set_default_dtype(dtype)
    with open(src, "rb") as f:
        blob = f.read()
    V, ctx, L, NH, C, B, T, steps = struct.unpack_from("<8i", blob, 0)
    lr, wd, clip, beta1, beta2 = struct.unpack_from("<5f", blob, 32)
    off = 52

    model = GPT(V, ctx, L, NH, C)
    params = model.canonical()
    P = sum(p.numel() for p in params)
    flat = torch.frombuffer(bytearray(blob[off:off + 4 * P]), dtype=torch.float32).to(dtype)
    off += 4 * P
    with torch.no_grad():
        i = 0
        for p in params:
            p.copy_(flat[i:i + p.numel()].view_as(p))
            i += p.numel()
    tok = torch.frombuffer(bytearray(blob[off:off + 8 * B * T]), dtype=torch.int32).long()
    idx, targets = tok[:B * T].view(B, T), tok[B * T:].view(B, T)

    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(beta1, beta2), eps=1e-8)
    losses, first_grad = [], None
    for step in range(steps + 1):
        opt.zero_grad()
        loss = model(idx, targets)
        losses.append(loss.item())
        if step == steps and first_grad is not None:
            break
        loss.backward()
        if first_grad is None:
            first_grad = torch.cat([p.grad.reshape(-1) for p in params]).clone()
        if step == steps:
            break
        # strata-train's clipping: scale by clip/norm when the global norm exceeds clip.
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)).item()
        if clip > 0 and norm > clip:
            for p in params:
                p.grad.mul_(clip / norm)
        opt.step()
    final = torch.cat([p.detach().reshape(-1) for p in params])
    with open(dst, "wb") as f:
        f.write(struct.pack("<%dd" % len(losses), *losses))
        f.write(first_grad.double().numpy().tobytes())
        f.write(final.double().numpy().tobytes())


if __name__ == "__main__":
    main()
