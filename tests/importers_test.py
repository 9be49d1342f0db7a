"""Issue 21, importers: a small Llama-like block built in torch (random weights, built here) and
an ONNX graph built with onnx.helper become the expected op lists, shapes and counts; unmapped
ops are listed with their share of the FLOPs. Also nn.MultiheadAttention + LayerNorm, plain and
grouped convolutions, and the command lines' errors.

Usage: PYTHONPATH=build/client/python python3 tests/importers_test.py
Exits 77 (skipped) with the reason when Debian's python3-torch or python3-onnx is missing.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
    import torch.nn as nn
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:
    print(f"SKIP: the importers need Debian's python3-torch and python3-onnx ({e})")
    sys.exit(77)

from tessel import from_onnx, from_torch, model_desc


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LlamaBlock(nn.Module):
    """A Llama-style decoder layer: RMSNorm, GQA attention with a causal mask, SwiGLU MLP."""

    def __init__(self, hidden=64, heads=4, kv_heads=2, ffn=160):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.attn_norm, self.mlp_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, mask):
        b, s, h = x.size(0), x.size(1), x.size(2)  # fx traces size() calls, not unpacking
        y = self.attn_norm(x)
        q = self.q_proj(y).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + mask
        attn = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, s, h))
        y = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))


def ops_of(model):
    return {(op["kernel"], op["dims"]): op["count"] for op in model.to_json()["ops"]}


class TorchImporterTest(unittest.TestCase):
    def test_a_llama_block_becomes_its_kernels(self):
        torch.manual_seed(0)
        batch, seq = 2, 32
        x = torch.randn(batch, seq, 64)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        model = from_torch.import_module(LlamaBlock(), (x, mask), "llama-block")
        rows = batch * seq
        self.assertEqual(ops_of(model), {
            ("rmsnorm", f"rows={rows},cols=64"): 2,
            ("matmul", f"M={rows},N=64,K=64"): 2,   # q_proj, o_proj
            ("matmul", f"M={rows},N=32,K=64"): 2,   # k_proj, v_proj (2 KV heads)
            ("attention", "batch=2,heads=4,seq_q=32,seq_k=32,head_dim=16,causal=1"): 1,
            ("matmul", f"M={rows},N=160,K=64"): 2,  # gate, up
            ("matmul", f"M={rows},N=64,K=160"): 1,  # down
        })
        data = model.to_json()
        unmapped = sorted(u["op"] for u in data["unmapped"])
        self.assertEqual(unmapped, ["add", "add", "mul", "silu"])
        # silu and the gate product act on rows x 160, the residual adds on rows x 64.
        self.assertEqual(data["flops"]["unmapped"], 2 * rows * 160 + 2 * rows * 64)
        share = data["flops"]["unmapped_share"]
        self.assertGreater(share, 0)
        self.assertLess(share, 0.05)
        self.assertAlmostEqual(sum(u["share"] for u in data["unmapped"]), share, places=5)
        names = [n for op in data["ops"] for n in op["names"]]
        self.assertIn("q_proj", names)
        self.assertIn("o_proj", names)

    def test_multihead_attention_and_layernorm(self):
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = nn.MultiheadAttention(64, 4, batch_first=True)
                self.norm = nn.LayerNorm(64)
                self.ffn = nn.Linear(64, 256)

            def forward(self, x):
                a = self.mha(x, x, x, need_weights=False)[0]  # fx cannot unpack a traced tuple
                return nn.functional.gelu(self.ffn(self.norm(x + a)))

        model = from_torch.import_module(Encoder(), torch.randn(3, 10, 64), "encoder")
        self.assertEqual(ops_of(model), {
            ("matmul", "M=30,N=64,K=64"): 4,  # q, k, v and out projections
            ("attention", "batch=3,heads=4,seq_q=10,seq_k=10,head_dim=16,causal=2"): 1,
            ("layernorm", "rows=30,cols=64"): 1,
            ("matmul", "M=30,N=256,K=64"): 1,
        })
        self.assertEqual(sorted(u["op"] for u in model.to_json()["unmapped"]),
                         ["add", "gelu"])

    def test_convolutions_plain_and_grouped(self):
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(8, 16, 3, stride=2, padding=1),
                            nn.Conv2d(16, 16, 3, padding=1, groups=4))
        model = from_torch.import_module(net, torch.randn(2, 3, 16, 16), "convs")
        self.assertEqual(ops_of(model), {
            ("conv2d", "N=2,C=3,H=16,W=16,K=8,R=3,S=3,stride=1,padding=1"): 1,
            ("conv2d", "N=2,C=8,H=16,W=16,K=16,R=3,S=3,stride=2,padding=1"): 1,
        })
        unmapped = {u["op"]: u for u in model.to_json()["unmapped"]}
        self.assertEqual(set(unmapped), {"ReLU", "Conv2d (groups, dilation or uneven "
                                                  "stride/padding)"})
        grouped = unmapped["Conv2d (groups, dilation or uneven stride/padding)"]
        self.assertEqual(grouped["flops"], 2 * (2 * 16 * 8 * 8) * 4 * 9)


class OnnxImporterTest(unittest.TestCase):
    def test_a_graph_becomes_its_kernels(self):
        def init(name, *shape):
            return helper.make_tensor(name, TensorProto.FLOAT, shape,
                                      [0.0] * math.prod(shape))
        nodes = [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="proj"),        # [2,16,64]x[64,128]
            helper.make_node("Relu", ["h"], ["r"], name="act"),
            helper.make_node("Reshape", ["r", "shape"], ["r2"], name="flat"),
            helper.make_node("Gemm", ["r2", "w2"], ["g"], name="fc", transB=1),  # [32,128]x[96,128]^T
            helper.make_node("Softmax", ["g"], ["p"], name="probs", axis=-1),
            helper.make_node("LayerNormalization", ["p", "gamma", "beta"], ["n"], name="norm",
                             axis=-1),
            helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),        # batched
            helper.make_node("Conv", ["img", "wc"], ["c"], name="conv", pads=[1, 1, 1, 1],
                             strides=[1, 1]),
        ]
        graph = helper.make_graph(
            nodes, "tiny",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 64]),
             helper.make_tensor_value_info("q", TensorProto.FLOAT, [4, 8, 32, 16]),
             helper.make_tensor_value_info("k", TensorProto.FLOAT, [4, 8, 16, 32]),
             helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 8, 8])],
            [helper.make_tensor_value_info("n", TensorProto.FLOAT, [32, 96]),
             helper.make_tensor_value_info("s", TensorProto.FLOAT, [4, 8, 32, 32]),
             helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 6, 8, 8])],
            [init("w1", 64, 128), init("w2", 96, 128), init("gamma", 96), init("beta", 96),
             init("wc", 6, 3, 3, 3),
             helper.make_tensor("shape", TensorProto.INT64, [2], [32, 128])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        desc = from_onnx.import_model(model, "tiny")
        self.assertEqual(ops_of(desc), {
            ("matmul", "M=32,N=128,K=64"): 1,
            ("matmul", "M=32,N=96,K=128"): 1,
            ("softmax", "rows=32,cols=96"): 1,
            ("layernorm", "rows=32,cols=96"): 1,
            ("bmm", "B=32,M=32,N=32,K=16"): 1,
            ("conv2d", "N=1,C=3,H=8,W=8,K=6,R=3,S=3,stride=1,padding=1"): 1,
        })
        data = desc.to_json()
        self.assertEqual([(u["name"], u["op"], u["flops"]) for u in data["unmapped"]],
                         [("act", "Relu", 2 * 16 * 128)])
        self.assertGreater(data["unmapped"][0]["share"], 0)


class CommandLineTest(unittest.TestCase):
    def run_module(self, *args):
        return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                              env=dict(os.environ))

    def test_from_torch_writes_the_description_and_names_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "block.py")
            with open(src, "w") as f:
                f.write("import torch\nblock = torch.nn.Sequential(torch.nn.Linear(32, 48), "
                        "torch.nn.ReLU())\nx = torch.randn(4, 32)\n")
            out = os.path.join(tmp, "block.json")
            done = self.run_module("tessel.from_torch", src, "--model", "block", "--example", "x",
                                   "--out", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            data = json.load(open(out))
            self.assertEqual(data["format"], model_desc.FORMAT_VERSION)
            self.assertEqual([(o["name"], o["kernel"], o["dims"], o["dtype"], o["count"])
                              for o in data["ops"]], [("0", "matmul", "M=4,N=48,K=32", "bf16", 1)])
            self.assertIn("unmapped: 1 (ReLU)", done.stderr)
            missing = self.run_module("tessel.from_torch", src, "--model", "nope", "--example",
                                      "x", "--out", out)
            self.assertEqual(missing.returncode, 1)
            self.assertIn("defines no 'nope'", missing.stderr)

    def test_from_onnx_names_a_file_that_is_not_onnx(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.onnx")
            with open(bad, "w") as f:
                f.write("not a model")
            done = self.run_module("tessel.from_onnx", bad)
            self.assertEqual(done.returncode, 1)
            self.assertIn("bad.onnx", done.stderr)


class ExamplesTest(unittest.TestCase):
    """examples/models/*.json are what examples/models/generate.sh writes today."""

    def test_the_committed_descriptions_are_current(self):
        here = os.path.dirname(os.path.abspath(__file__))
        models = os.path.join(here, "..", "examples", "models")
        # The build tree the package was imported from: BUILD/client/python/tessel/model_desc.py.
        build = os.path.abspath(os.path.join(os.path.dirname(model_desc.__file__), "..", "..",
                                             ".."))
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([os.path.join(models, "generate.sh"), build, tmp],
                                  capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            written = sorted(f for f in os.listdir(tmp) if f.endswith(".json"))
            self.assertEqual(written, ["bert_base.json", "llama3_8b_decode.json",
                                       "llama3_8b_prefill.json", "resnet50.json"])
            for name in written:
                with open(os.path.join(tmp, name)) as fresh, \
                        open(os.path.join(models, name)) as committed:
                    self.assertEqual(json.load(fresh), json.load(committed),
                                     f"{name} is stale: run examples/models/generate.sh")
        prefill = json.load(open(os.path.join(models, "llama3_8b_prefill.json")))
        self.assertIn({"name": "attention", "kernel": "attention",
                       "dims": "batch=1,heads=32,seq_q=2048,seq_k=2048,head_dim=128,causal=1",
                       "dtype": "bf16", "count": 1, "names": ["attention"]}, prefill["ops"])
        resnet = json.load(open(os.path.join(models, "resnet50.json")))
        convs = [op for op in resnet["ops"] if op["kernel"] == "conv2d"]
        self.assertEqual((len(convs), sum(op["count"] for op in convs)), (23, 53))


if __name__ == "__main__":
    unittest.main(verbosity=2)
