"""Imports a PyTorch model into a tessel model description (docs/models.md).

    python3 -m tessel.from_torch FILE.py --model NAME --example NAME --out model.json

FILE.py defines a module instance (NAME) and an example input (a tensor or a tuple of tensors).
The module is traced with torch.fx and its shapes propagated with ShapeProp. Mapped:
nn.Linear, F.linear, matmul/bmm/@ (matmul, or bmm when both operands carry batch dims),
nn.Conv2d (conv2d), softmax over the last dim, nn.LayerNorm / F.layer_norm (layernorm), RMSNorm
by its pattern x * rsqrt(mean(x^2) + eps) (rmsnorm), attention by its pattern q @ k^T [scale]
[mask] -> softmax -> @ v and nn.MultiheadAttention (attention, with its projections as matmuls).
Every other op that computes is listed as unmapped with its share of the FLOPs; layout ops
(views, transposes, casts, indexing) and dropout compute nothing and are not listed.
"""

import argparse
import operator
import os
import runpy
import sys

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from tessel import model_desc
from tessel.model_desc import numel

# Ops that move or reinterpret data and compute nothing.
_LAYOUT_METHODS = {"view", "reshape", "transpose", "permute", "contiguous", "size", "flatten",
                   "expand", "unsqueeze", "squeeze", "to", "float", "half", "bfloat16",
                   "type_as", "chunk", "split", "repeat_interleave", "dim", "t", "clone"}
_LAYOUT_FUNCTIONS = {torch.reshape, torch.transpose, torch.permute, torch.flatten,
                     torch.unsqueeze, torch.squeeze, torch.chunk, torch.split, torch.cat,
                     torch.stack, torch.repeat_interleave, torch.t, operator.getitem, getattr,
                     F.dropout}
_MATMUL_FUNCTIONS = {torch.matmul, operator.matmul, torch.bmm}
_SOFTMAX_FUNCTIONS = {torch.softmax, F.softmax}


def _shape(node):
    meta = node.meta.get("tensor_meta") if isinstance(node, torch.fx.Node) else None
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _is_call(node, functions=(), methods=()):
    return isinstance(node, torch.fx.Node) and (
        (node.op == "call_function" and node.target in functions) or
        (node.op == "call_method" and node.target in methods))


class _Importer:
    def __init__(self, gm, dtype, model):
        self.gm = gm
        self.dtype = dtype
        self.model = model
        self.modules = dict(gm.named_modules())
        self.done = set()  # nodes already accounted for by a pattern

    def module_of(self, node):
        return self.modules.get(node.target) if node.op == "call_module" else None

    def is_layout(self, node):
        if node.op == "call_method":
            return node.target in _LAYOUT_METHODS
        if node.op == "call_function":
            return node.target in _LAYOUT_FUNCTIONS
        module = self.module_of(node)
        return isinstance(module, (torch.nn.Dropout, torch.nn.Identity, torch.nn.Flatten))

    def through_layout(self, node):
        """The node itself, or the first non-layout producer behind a chain of layout ops."""
        while isinstance(node, torch.fx.Node) and self.is_layout(node) and node.args:
            node = node.args[0]
        return node

    def single_user(self, node):
        users = [u for u in node.users]
        while len(users) == 1 and self.is_layout(users[0]):
            users = list(users[0].users)
        return users[0] if len(users) == 1 else None

    # ---- patterns ----
    def softmax_dim(self, node):
        module = self.module_of(node)
        if isinstance(module, torch.nn.Softmax):
            return module.dim
        if _is_call(node, _SOFTMAX_FUNCTIONS, {"softmax"}):
            if len(node.args) > 1:
                return node.args[1]
            return node.kwargs.get("dim")
        return None

    def is_last_dim(self, node, dim):
        shape = _shape(node)
        return dim is not None and shape is not None and dim in (-1, len(shape) - 1)

    def match_attention(self, softmax):
        """q @ k^T [* or / scale] [+ mask | masked_fill] -> softmax(-1) [dropout] -> @ v."""
        chain = [softmax]
        causal = 2
        x = softmax.args[0]
        while isinstance(x, torch.fx.Node):
            if _is_call(x, {operator.truediv, operator.mul, torch.div, torch.mul},
                        {"div", "mul"}) and not isinstance(x.args[1], torch.fx.Node):
                chain.append(x)
                x = x.args[0]
            elif _is_call(x, {operator.add, torch.add}, {"add"}) or \
                    _is_call(x, {torch.masked_fill}, {"masked_fill"}):
                causal = 1  # a mask (documented: any mask is read as causal)
                chain.append(x)
                x = x.args[0]
            elif self.is_layout(x):
                chain.append(x)
                x = x.args[0]
            else:
                break
        if not _is_call(x, _MATMUL_FUNCTIONS, {"matmul", "bmm"}):
            return None
        qk = x
        after = self.single_user(softmax)
        if after is None or not _is_call(after, _MATMUL_FUNCTIONS, {"matmul", "bmm"}):
            return None
        if self.through_layout(after.args[0]) is not softmax and after.args[0] is not softmax:
            return None
        q, v, out = _shape(qk.args[0]), _shape(after.args[1]), _shape(after)
        scores = _shape(qk)
        if q is None or v is None or scores is None or len(q) < 3:
            return None
        seq_q, head_dim, seq_k = q[-2], q[-1], scores[-1]
        lead = q[:-2]
        batch, heads = (lead[0], lead[1]) if len(lead) == 2 else (1, numel(lead))
        chain += [qk, after]
        return chain, {"batch": batch, "heads": heads, "seq_q": seq_q, "seq_k": seq_k,
                       "head_dim": head_dim, "causal": causal}

    def match_rmsnorm(self, rsqrt):
        """x * rsqrt(mean(x^2, -1) + eps) [* weight]: returns (its nodes, x, a name or None)."""
        add = rsqrt.args[0]
        if not _is_call(add, {operator.add, torch.add}, {"add"}):
            return None
        mean = add.args[0]
        if not _is_call(mean, {torch.mean}, {"mean"}):
            return None
        power = mean.args[0]
        if not _is_call(power, {torch.pow, operator.pow}, {"pow"}) or power.args[1] != 2:
            return None
        x = power.args[0]
        users = list(rsqrt.users)
        if len(users) != 1 or not _is_call(users[0], {operator.mul, torch.mul}, {"mul"}):
            return None
        nodes = [power, mean, add, rsqrt, users[0]]
        out, name = users[0], None
        following = self.single_user(out)
        if following is not None and _is_call(following, {operator.mul, torch.mul}, {"mul"}):
            other = [a for a in following.args if a is not out and
                     self.through_layout(a) is not out]
            if other and isinstance(other[0], torch.fx.Node) and \
                    self.through_layout(other[0]).op == "get_attr":
                nodes.append(following)
                # Named by its weight's module: attn_norm.weight -> attn_norm.
                name = self.through_layout(other[0]).target.rpartition(".")[0] or None
        return nodes, x, name

    # ---- the walk ----
    def run(self):
        nodes = list(self.gm.graph.nodes)
        anchored = {}  # a matched pattern's op, added where its anchor node runs
        for node in nodes:  # patterns first: they claim their nodes
            dim = self.softmax_dim(node)
            if dim is not None and self.is_last_dim(node, dim):
                found = self.match_attention(node)
                if found:
                    chain, dims = found
                    self.done.update(chain)
                    anchored[node] = (node.name.replace("softmax", "attention"), "attention", dims)
            if _is_call(node, {torch.rsqrt}, {"rsqrt"}):
                found = self.match_rmsnorm(node)
                if found:
                    chain, x, name = found
                    shape = _shape(x)
                    self.done.update(chain)
                    anchored[node] = (name or node.name.replace("rsqrt", "rmsnorm"), "rmsnorm",
                                      {"rows": numel(shape[:-1]), "cols": shape[-1]})
        for node in nodes:  # then every op in the order the model runs them
            if node in anchored:
                name, kernel, dims = anchored[node]
                self.model.add(name, kernel, dims, self.dtype)
                continue
            if node in self.done or node.op in ("placeholder", "output", "get_attr"):
                continue
            if self.is_layout(node):
                continue
            self.map_node(node)
        return self.model

    def map_node(self, node):
        # A module's op is named by its path in the model (layers.0.q_proj), a function's by the
        # traced node (matmul_1).
        name = node.target if node.op == "call_module" else node.name
        out = _shape(node)
        module = self.module_of(node)
        add = self.model.add
        if isinstance(module, torch.nn.Linear) or _is_call(node, {F.linear}):
            x = _shape(node.args[0])
            n = module.out_features if module is not None else _shape(node.args[1])[0]
            add(name, "matmul", {"M": numel(x[:-1]), "N": n, "K": x[-1]}, self.dtype)
            return
        if _is_call(node, _MATMUL_FUNCTIONS, {"matmul", "bmm"}):
            a, b = _shape(node.args[0]), _shape(node.args[1])
            if len(b) == 2:  # one right-hand matrix for every row of a
                add(name, "matmul", {"M": numel(a[:-1]), "N": b[-1], "K": a[-1]}, self.dtype)
            else:
                add(name, "bmm", {"B": numel(out[:-2]), "M": a[-2], "N": b[-1], "K": a[-1]},
                    self.dtype)
            return
        if isinstance(module, torch.nn.Conv2d):
            x = _shape(node.args[0])
            plain = (module.groups == 1 and tuple(module.dilation) == (1, 1) and
                     module.stride[0] == module.stride[1] and
                     isinstance(module.padding, tuple) and module.padding[0] == module.padding[1])
            if plain and len(x) == 4:
                add(name, "conv2d", {"N": x[0], "C": x[1], "H": x[2], "W": x[3],
                                     "K": module.out_channels, "R": module.kernel_size[0],
                                     "S": module.kernel_size[1], "stride": module.stride[0],
                                     "padding": module.padding[0]}, self.dtype)
                return
            self.unmapped(node, "Conv2d (groups, dilation or uneven stride/padding)",
                          2 * numel(out) * (module.in_channels // module.groups) *
                          module.kernel_size[0] * module.kernel_size[1])
            return
        dim = self.softmax_dim(node)
        if dim is not None and self.is_last_dim(node, dim):
            add(name, "softmax", {"rows": numel(out[:-1]), "cols": out[-1]}, self.dtype)
            return
        if isinstance(module, torch.nn.LayerNorm) or _is_call(node, {F.layer_norm}):
            shape = module.normalized_shape if module is not None else node.args[1]
            cols = numel(shape)
            add(name, "layernorm", {"rows": numel(out) // cols, "cols": cols}, self.dtype)
            return
        if isinstance(module, torch.nn.MultiheadAttention):
            self.map_mha(node, module)
            return
        if out is None:
            return  # not a tensor: nothing computed on the accelerator
        what = type(module).__name__ if module is not None else (
            node.target if isinstance(node.target, str) else getattr(node.target, "__name__",
                                                                        str(node.target)))
        op_flops = 0 if isinstance(module, torch.nn.Embedding) else numel(out)
        self.unmapped(node, what, op_flops)

    def map_mha(self, node, mha):
        q, k = _shape(node.args[0]), _shape(node.args[1])
        if mha.batch_first:
            batch, seq_q, seq_k = q[0], q[1], k[1]
        else:
            batch, seq_q, seq_k = q[1], q[0], k[0]
        e, heads = mha.embed_dim, mha.num_heads
        masked = node.kwargs.get("attn_mask") is not None or \
            (len(node.args) > 5 and node.args[5] is not None)
        add, name = self.model.add, node.target
        add(f"{name}.q_proj", "matmul", {"M": batch * seq_q, "N": e, "K": e}, self.dtype)
        for proj in ("k_proj", "v_proj"):
            add(f"{name}.{proj}", "matmul", {"M": batch * seq_k, "N": e, "K": mha.kdim}, self.dtype)
        add(f"{name}.attention", "attention",
            {"batch": batch, "heads": heads, "seq_q": seq_q, "seq_k": seq_k,
             "head_dim": e // heads, "causal": 1 if masked else 2}, self.dtype)
        add(f"{name}.out_proj", "matmul", {"M": batch * seq_q, "N": e, "K": e}, self.dtype)

    def unmapped(self, node, what, op_flops):
        name = node.target if node.op == "call_module" else node.name
        self.model.add_unmapped(name, str(what), op_flops)


def import_module(module, example, name, dtype="bf16", source=""):
    """The model description of `module` run on `example` (a tensor or a tuple of tensors)."""
    inputs = example if isinstance(example, tuple) else (example,)
    module.eval()
    gm = torch.fx.symbolic_trace(module)
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    return _Importer(gm, dtype, model_desc.Model(name, source or "torch.fx")).run()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m tessel.from_torch",
        description="Trace a PyTorch module with torch.fx and write tessel's model description "
                    "(docs/models.md). Unmapped ops are listed on stderr with their FLOP share.",
        epilog="example: python3 -m tessel.from_torch block.py --model block --example x "
               "--out block.json")
    parser.add_argument("file", help="a Python file defining the module instance and the input")
    parser.add_argument("--model", required=True, help="name of the module instance in FILE")
    parser.add_argument("--example", required=True,
                        help="name of the example input in FILE (a tensor or a tuple of them)")
    model_desc.add_output_args(parser, "--model")
    args = parser.parse_args(argv)
    try:
        namespace = runpy.run_path(args.file)
    except Exception as e:  # the user's file: say what failed in it
        print(f"from_torch: error: {args.file}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    for what in (args.model, args.example):
        if what not in namespace:
            print(f"from_torch: error: {args.file} defines no '{what}'", file=sys.stderr)
            return 1
    module, example = namespace[args.model], namespace[args.example]
    if not isinstance(module, torch.nn.Module):
        print(f"from_torch: error: {args.model} is a {type(module).__name__}, not a "
              "torch.nn.Module instance", file=sys.stderr)
        return 1
    try:
        model = import_module(module, example, args.name or args.model, args.dtype,
                              source=f"torch.fx:{os.path.basename(args.file)}")
    except Exception as e:
        print(f"from_torch: error: tracing {args.model}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    return model_desc.finish(model, args.out, "from_torch")


if __name__ == "__main__":
    sys.exit(main())
