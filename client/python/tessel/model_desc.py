"""The model description (docs/models.md): the ops of a model, each a tessel kernel at one shape.

Written by the importers (tessel.from_torch, tessel.from_onnx) and read by `tessel tune-model`.
Plain Python and the standard library only, so that reading and checking a description needs
neither torch nor onnx.
"""

import json
import math
import os
import sys

FORMAT_VERSION = 1

# Each kernel's dims, in the order `tessel kernels` lists them.
KERNEL_DIMS = {
    "matmul": ("M", "N", "K"),
    "bmm": ("B", "M", "N", "K"),
    "conv2d": ("N", "C", "H", "W", "K", "R", "S", "stride", "padding"),
    "attention": ("batch", "heads", "seq_q", "seq_k", "head_dim", "causal"),
    "softmax": ("rows", "cols"),
    "layernorm": ("rows", "cols"),
    "rmsnorm": ("rows", "cols"),
}
DTYPES = ("bf16", "fp32", "fp8")


def flops(kernel, dims):
    """Floating-point operations of one call: 2 per multiply-add for the GEMM-like kernels, the
    usual per-element counts for the row-wise ones (softmax 5, layernorm 8, rmsnorm 4). Used for
    the shares the importers report, not for timing."""
    d = dims
    if kernel == "matmul":
        return 2 * d["M"] * d["N"] * d["K"]
    if kernel == "bmm":
        return 2 * d["B"] * d["M"] * d["N"] * d["K"]
    if kernel == "conv2d":
        p = (d["H"] + 2 * d["padding"] - d["R"]) // d["stride"] + 1
        q = (d["W"] + 2 * d["padding"] - d["S"]) // d["stride"] + 1
        return 2 * d["N"] * d["K"] * p * q * d["C"] * d["R"] * d["S"]
    if kernel == "attention":
        pairs = d["seq_q"] * d["seq_k"]
        if d["causal"] == 1:  # bottom-right aligned mask: the pairs at or below the diagonal
            lower = min(d["seq_q"], d["seq_k"])
            pairs = lower * (lower + 1) // 2 + max(0, d["seq_k"] - d["seq_q"]) * d["seq_q"]
        return 4 * d["batch"] * d["heads"] * pairs * d["head_dim"]
    per_element = {"softmax": 5, "layernorm": 8, "rmsnorm": 4}[kernel]
    return per_element * d["rows"] * d["cols"]


def dims_text(kernel, dims):
    """"M=1024,N=2048,K=512": the dims in the kernel's order."""
    return ",".join(f"{name}={dims[name]}" for name in KERNEL_DIMS[kernel])


def parse_dims(text):
    """{"M": 1024, ...} from "M=1024,N=2048,K=512"; ValueError naming the bad part."""
    dims = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"'{part}' is not NAME=VALUE")
        try:
            dims[name.strip()] = int(value)
        except ValueError:
            raise ValueError(f"{name.strip()}={value} is not an integer") from None
    return dims


class Model:
    """Ops in the order the model runs them. Identical workloads (kernel, dims, dtype) are one op
    with a count; `names` keeps every source op it stands for."""

    def __init__(self, name, source):
        self.name = name
        self.source = source
        self.ops = []
        self.unmapped = []  # {"name", "op", "flops"}
        self._by_workload = {}

    def add(self, name, kernel, dims, dtype, count=1, fuses=None):
        for dim in KERNEL_DIMS[kernel]:
            if dims.get(dim, 0) <= 0 and not (kernel == "conv2d" and dim == "padding"):
                raise ValueError(f"op {name}: {kernel} needs a positive {dim} (got {dims.get(dim)})")
        key = (kernel, dims_text(kernel, dims), dtype, tuple(fuses or ()))
        if key in self._by_workload:
            op = self._by_workload[key]
            op["count"] += count
            op["names"].append(name)
            return op
        op = {"name": name, "kernel": kernel, "dims": key[1], "dtype": dtype, "count": count,
              "names": [name]}
        if fuses:
            op["fuses"] = list(fuses)
        self.ops.append(op)
        self._by_workload[key] = op
        return op

    def add_unmapped(self, name, op, op_flops):
        self.unmapped.append({"name": name, "op": op, "flops": int(op_flops)})

    def to_json(self):
        mapped = sum(flops(op["kernel"], parse_dims(op["dims"])) * op["count"] for op in self.ops)
        unmapped = sum(u["flops"] for u in self.unmapped)
        total = mapped + unmapped
        share = (lambda f: round(f / total, 6)) if total > 0 else (lambda f: 0.0)
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "ops": self.ops,
            "unmapped": [dict(u, share=share(u["flops"])) for u in self.unmapped],
            "flops": {"mapped": mapped, "unmapped": unmapped,
                      "unmapped_share": share(unmapped)},
        }


def write(model, path):
    """Writes the description whole (a temporary file renamed), so a reader never sees half."""
    text = json.dumps(model.to_json(), indent=2) + "\n"
    if path == "-":
        print(text, end="")
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def add_output_args(parser, name_default):
    """The options every importer takes: --out, --dtype and --name (`name_default` says what the
    name is without it)."""
    parser.add_argument("--out", default="-", help="output file (default: stdout)")
    parser.add_argument("--dtype", default="bf16", choices=DTYPES,
                        help="the dtype the ops are tuned for (default: bf16)")
    parser.add_argument("--name", help=f"the model's name (default: {name_default})")


def finish(model, out, tool):
    """An importer's last step: writes the description to `out` ("-": stdout), lists the unmapped
    ops on stderr and says where the description went. Returns the exit code, 0."""
    write(model, out)
    report_unmapped(model, sys.stderr)
    if out != "-":
        print(f"{tool}: {len(model.ops)} ops -> {out}", file=sys.stderr)
    return 0


def report_unmapped(model, stream):
    """One line per unmapped op, with its share of the model's FLOPs, then the total."""
    data = model.to_json()
    for u in data["unmapped"]:
        print(f"unmapped: {u['name']} ({u['op']}): {u['flops']} FLOPs, "
              f"{100 * u['share']:.3g}% of the model", file=stream)
    if data["unmapped"]:
        print(f"unmapped in all: {len(data['unmapped'])} ops, "
              f"{100 * data['flops']['unmapped_share']:.3g}% of the model's FLOPs", file=stream)


def numel(shape):
    return math.prod(int(s) for s in shape)
