"""A BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, GELU, post-LayerNorm), from the
model's public configuration, on one 512-token sequence; weights on PyTorch's meta device.

    python3 -m tessel.from_torch examples/models/bert_base_layer.py --model layer \\
        --example tokens --name bert-base --out examples/models/bert_base.json
"""

import math

import torch
import torch.nn as nn

META = torch.device("meta")
HIDDEN, HEADS, FFN, SEQ = 768, 12, 3072, 512
HEAD_DIM = HIDDEN // HEADS


class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        linear = lambda i, o: nn.Linear(i, o, device=META)  # noqa: E731
        self.query, self.key, self.value = (linear(HIDDEN, HIDDEN) for _ in range(3))
        self.attn_out = linear(HIDDEN, HIDDEN)
        self.attn_norm = nn.LayerNorm(HIDDEN, device=META)
        self.intermediate = linear(HIDDEN, FFN)
        self.output = linear(FFN, HIDDEN)
        self.out_norm = nn.LayerNorm(HIDDEN, device=META)

    def heads(self, x):
        return x.view(x.size(0), x.size(1), HEADS, HEAD_DIM).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HEAD_DIM)
        a = torch.matmul(torch.softmax(scores, dim=-1), v)
        a = a.transpose(1, 2).reshape(x.size(0), x.size(1), HIDDEN)
        x = self.attn_norm(x + self.attn_out(a))
        return self.out_norm(x + self.output(nn.functional.gelu(self.intermediate(x))))


layer = BertLayer()
tokens = torch.empty(1, SEQ, HIDDEN, device=META)
