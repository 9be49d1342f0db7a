"""A Llama-3-8B decoder layer (hidden 4096, FFN 14336, 32 query heads, 8 KV heads, head dim 128,
RMSNorm, SwiGLU), from the model's public configuration; weights on PyTorch's meta device, so
nothing is allocated or downloaded. Two example inputs:

- prefill: one sequence of 2048 tokens with a causal mask (`layer`, `prefill`);
- decode: a batch of 8, one new token each, attending to a 4096-token KV cache (`decode_layer`,
  `decode`).

    python3 -m tessel.from_torch examples/models/llama3_8b_layer.py --model layer \\
        --example prefill --name llama3-8b-prefill --out examples/models/llama3_8b_prefill.json
"""

import math

import torch
import torch.nn as nn

META = torch.device("meta")
HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 4096, 14336, 32, 8, 128


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=META))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LlamaLayer(nn.Module):
    def __init__(self):
        super().__init__()
        linear = lambda i, o: nn.Linear(i, o, bias=False, device=META)  # noqa: E731
        self.attn_norm, self.mlp_norm = RMSNorm(HIDDEN), RMSNorm(HIDDEN)
        self.q_proj = linear(HIDDEN, HEADS * HEAD_DIM)
        self.k_proj = linear(HIDDEN, KV_HEADS * HEAD_DIM)
        self.v_proj = linear(HIDDEN, KV_HEADS * HEAD_DIM)
        self.o_proj = linear(HEADS * HEAD_DIM, HIDDEN)
        self.gate_proj = linear(HIDDEN, FFN)
        self.up_proj = linear(HIDDEN, FFN)
        self.down_proj = linear(FFN, HIDDEN)

    def attend(self, q, k, v, mask):
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HEAD_DIM)
        if mask is not None:
            scores = scores + mask
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    @staticmethod
    def repeat_kv(x):
        """Grouped-query attention: each KV head serves HEADS / KV_HEADS query heads."""
        b, s = x.size(0), x.size(2)
        rep = HEADS // KV_HEADS
        return x[:, :, None, :, :].expand(b, KV_HEADS, rep, s, HEAD_DIM).reshape(
            b, HEADS, s, HEAD_DIM)

    def heads(self, x, n):
        return x.view(x.size(0), x.size(1), n, HEAD_DIM).transpose(1, 2)

    def forward(self, x, mask):
        y = self.attn_norm(x)
        q = self.heads(self.q_proj(y), HEADS)
        k = self.heads(self.k_proj(y), KV_HEADS)
        v = self.heads(self.v_proj(y), KV_HEADS)
        a = self.attend(q, k, v, mask).transpose(1, 2).reshape(x.size(0), x.size(1), HIDDEN)
        x = x + self.o_proj(a)
        y = self.mlp_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(y)) * self.up_proj(y))


class LlamaDecodeLayer(LlamaLayer):
    """One new token per sequence; keys and values of the context come from the KV cache."""

    def forward(self, x, k_cache, v_cache):
        y = self.attn_norm(x)
        q = self.heads(self.q_proj(y), HEADS)
        k = torch.cat([k_cache, self.heads(self.k_proj(y), KV_HEADS)], dim=2)
        v = torch.cat([v_cache, self.heads(self.v_proj(y), KV_HEADS)], dim=2)
        a = self.attend(q, k, v, None).transpose(1, 2).reshape(x.size(0), x.size(1), HIDDEN)
        x = x + self.o_proj(a)
        y = self.mlp_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(y)) * self.up_proj(y))


SEQ = 2048
layer = LlamaLayer()
prefill = (torch.empty(1, SEQ, HIDDEN, device=META),
           torch.full((SEQ, SEQ), float("-inf"), device=META).triu(1))

BATCH, CONTEXT = 8, 4096
decode_layer = LlamaDecodeLayer()
decode = (torch.empty(BATCH, 1, HIDDEN, device=META),
          torch.empty(BATCH, KV_HEADS, CONTEXT - 1, HEAD_DIM, device=META),
          torch.empty(BATCH, KV_HEADS, CONTEXT - 1, HEAD_DIM, device=META))
