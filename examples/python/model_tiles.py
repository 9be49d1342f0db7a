"""A PyTorch module that picks its tiles from tessel's tuned configs (issue 21, runtime use).

The model's configs come from `tessel export --model MODEL.json --format json --out C.json`
after `tessel tune-model MODEL.json`. TiledLinear computes y = x W^T + b in the output tiles the
tuned matmul config of its op says (tile_m x block_m rows by tile_n x block_n columns), so the
host-side blocking follows the accelerator kernel's; the result equals nn.Linear's.

    PYTHONPATH=build/client/python python3 examples/python/model_tiles.py C.json OP IN OUT ROWS
"""

import sys

import torch
import torch.nn as nn

import tessel


class TiledLinear(nn.Linear):
    def __init__(self, model, op, in_features, out_features):
        super().__init__(in_features, out_features)
        config = model.config(op)
        if model.op(op)["kernel"] != "matmul":
            raise ValueError(f"op {op} is a {model.op(op)['kernel']}, not a matmul")
        self.rows = config["tile_m"] * config.get("block_m", 1)
        self.cols = config["tile_n"] * config.get("block_n", 1)

    def forward(self, x):
        flat = x.reshape(-1, self.in_features)
        out = torch.empty(flat.shape[0], self.out_features, dtype=x.dtype)
        for r in range(0, flat.shape[0], self.rows):
            for c in range(0, self.out_features, self.cols):
                out[r:r + self.rows, c:c + self.cols] = (
                    flat[r:r + self.rows] @ self.weight[c:c + self.cols].T + self.bias[c:c + self.cols])
        return out.reshape(*x.shape[:-1], self.out_features)


def main():
    path, op, in_features, out_features, rows = sys.argv[1:6]
    model = tessel.Model(path)
    layer = TiledLinear(model, op, int(in_features), int(out_features))
    x = torch.randn(int(rows), int(in_features))
    reference = nn.functional.linear(x, layer.weight, layer.bias)
    error = (layer(x) - reference).abs().max().item()
    print(f"{op}: {layer.rows}x{layer.cols} output tiles from {model.name} on {model.target}; "
          f"max |tiled - nn.Linear| = {error:.2e}")
    return 0 if error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
