"""Imports an ONNX model into a tessel model description (docs/models.md).

    python3 -m tessel.from_onnx MODEL.onnx --out model.json

Runs ONNX shape inference, then maps MatMul (matmul, or bmm when both operands carry batch
dims), Gemm (matmul), Conv (conv2d: 2-D, one group, no dilation, even padding and stride),
Softmax and LayerNormalization over the last axis. Every other node that computes is listed as
unmapped with its share of the FLOPs; shape and layout nodes compute nothing and are not listed.
ONNX is also the path from TensorFlow (tf2onnx) and from other frameworks' exporters.
"""

import argparse
import os
import sys

import onnx
from onnx import shape_inference

from tessel import model_desc
from tessel.model_desc import numel

_LAYOUT = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Gather",
           "Concat", "Split", "Slice", "Identity", "Cast", "Constant", "Expand", "Dropout",
           "ConstantOfShape", "Range"}


def _shapes(model):
    """Every tensor's static shape (a tuple of ints) where shape inference knows it."""
    shapes = {}
    graph = model.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class Error(Exception):
    pass


def import_model(model, name, dtype="bf16", source="onnx"):
    """The model description of an onnx.ModelProto."""
    model = shape_inference.infer_shapes(model)
    shapes = _shapes(model)
    desc = model_desc.Model(name, source)
    for index, node in enumerate(model.graph.node):
        op_name = node.name or f"{node.op_type.lower()}_{index}"
        if node.op_type in _LAYOUT:
            continue
        ins = [shapes.get(i) for i in node.input]
        out = shapes.get(node.output[0]) if node.output else None
        attrs = _attrs(node)
        if any(s is None for s in ins[:2]) or out is None:
            desc.add_unmapped(op_name, f"{node.op_type} (shape unknown)", 0)
            continue
        if node.op_type == "MatMul":
            a, b = ins[0], ins[1]
            if len(b) == 2:
                desc.add(op_name, "matmul", {"M": numel(a[:-1]), "N": b[-1], "K": a[-1]}, dtype)
            else:
                desc.add(op_name, "bmm", {"B": numel(out[:-2]), "M": a[-2], "N": b[-1],
                                          "K": a[-1]}, dtype)
        elif node.op_type == "Gemm":
            a, b = ins[0], ins[1]
            m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
            n = b[0] if attrs.get("transB", 0) else b[1]
            desc.add(op_name, "matmul", {"M": m, "N": n, "K": k}, dtype)
        elif node.op_type == "Conv":
            x, w = ins[0], ins[1]
            strides = attrs.get("strides", [1, 1])
            pads = attrs.get("pads", [0, 0, 0, 0])
            plain = (len(x) == 4 and attrs.get("group", 1) == 1 and
                     list(attrs.get("dilations", [1, 1])) == [1, 1] and
                     strides[0] == strides[1] and len(set(pads)) == 1 and
                     attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET"))
            if plain:
                desc.add(op_name, "conv2d", {"N": x[0], "C": x[1], "H": x[2], "W": x[3],
                                             "K": w[0], "R": w[2], "S": w[3],
                                             "stride": strides[0], "padding": pads[0]}, dtype)
            else:
                desc.add_unmapped(op_name, "Conv (groups, dilation, auto_pad or uneven "
                                  "stride/padding)", 2 * numel(out) * numel(w[1:]))
        elif node.op_type == "Softmax" and attrs.get("axis", -1) in (-1, len(out) - 1):
            desc.add(op_name, "softmax", {"rows": numel(out[:-1]), "cols": out[-1]}, dtype)
        elif node.op_type == "LayerNormalization" and attrs.get("axis", -1) in (-1, len(out) - 1):
            desc.add(op_name, "layernorm", {"rows": numel(out[:-1]), "cols": out[-1]}, dtype)
        else:
            desc.add_unmapped(op_name, node.op_type, numel(out))
    return desc


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m tessel.from_onnx",
        description="Run ONNX shape inference on a model and write tessel's model description "
                    "(docs/models.md). Unmapped ops are listed on stderr with their FLOP share.",
        epilog="example: python3 -m tessel.from_onnx bert.onnx --out bert.json")
    parser.add_argument("file", help="an .onnx model")
    model_desc.add_output_args(parser, "the graph's name")
    args = parser.parse_args(argv)
    try:
        model = onnx.load(args.file)
    except Exception as e:
        print(f"from_onnx: error: {args.file}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        desc = import_model(model, args.name or model.graph.name or "model", args.dtype,
                            source=f"onnx:{os.path.basename(args.file)}")
    except (ValueError, onnx.shape_inference.InferenceError) as e:
        print(f"from_onnx: error: {args.file}: {e}", file=sys.stderr)
        return 1
    return model_desc.finish(desc, args.out, "from_onnx")


if __name__ == "__main__":
    sys.exit(main())
