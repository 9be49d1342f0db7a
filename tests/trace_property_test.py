#!/usr/bin/env python3
"""Property test of `tessel simulate --trace` (issue 18).

For random (kernel, shape, config) triples, including matmul 4096^3 and the large causal attention
shape, on both NeuronCore targets, it runs `tessel simulate --json --trace` and checks that:
  - the trace parses and has one complete event per traced instruction;
  - every slice sits on its engine's track (the track's name is its engine, or the DMA queue of the
    transfer), and its op runs on that engine;
  - per engine, the slices' engine time sums to engines.*.busy_frac of `simulate --json` (times the
    run time, the cores and, for DMA, the DMA engines); on compute engines that is their durations;
  - no two slices of one track overlap;
  - deps are absolute indices of earlier instructions, and a slice starts after its deps end.
A truncated trace (--trace-limit) keeps exactly the first N instructions of each core and says so.

Usage: trace_property_test.py TESSEL [--triples N] [--seed S]
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile

# Shapes per kernel: small, ragged and large ones. The first two are always among the triples.
SHAPES = {
    "matmul": ["M=4096,N=4096,K=4096", "M=1024,N=1024,K=1024", "M=2048,N=512,K=1024",
               "M=1000,N=760,K=520", "M=128,N=4096,K=256", "M=3072,N=3072,K=3072"],
    "attention": ["batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1",
                  "batch=1,heads=4,seq_q=1024,seq_k=1024,head_dim=128,causal=2",
                  "batch=2,heads=2,seq_q=512,seq_k=768,head_dim=64,causal=1",
                  "batch=1,heads=1,seq_q=200,seq_k=300,head_dim=64,causal=2"],
    "bmm": ["B=8,M=512,N=512,K=256", "B=4,M=1000,N=300,K=200", "B=2,M=2048,N=2048,K=1024"],
    "conv2d": ["N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,padding=1",
               "N=2,C=128,H=28,W=28,K=256,R=1,S=1,stride=1,padding=0",
               "N=1,C=3,H=224,W=224,K=64,R=7,S=7,stride=2,padding=3"],
    "softmax": ["rows=4096,cols=4096", "rows=1000,cols=3000", "rows=128,cols=65536"],
    "layernorm": ["rows=4096,cols=4096", "rows=1000,cols=1536", "rows=8192,cols=1024"],
    "rmsnorm": ["rows=4096,cols=4096", "rows=300,cols=5000", "rows=8192,cols=1024"],
}
TARGETS = ["snc2", "snc3"]
COMPUTE = ["tensor", "vector", "scalar", "gpsimd"]
DMA_OPS = {"dma_load", "dma_store", "dma_copy"}
EPS_US = 2e-6  # two rounding steps of the file's 1 ps resolution


def run(tessel, args):
    return subprocess.run([tessel] + args, capture_output=True, text=True, timeout=600)


def space(tessel, kernel, shape, target, cache):
    key = (kernel, shape, target)
    if key not in cache:
        r = run(tessel, ["space", kernel, "--shape", shape, "--target", target, "--json",
                         "--enumerate-limit", "1", "--samples", "1"])
        if r.returncode != 0:
            raise AssertionError(f"space {kernel} {shape} {target}: {r.stderr}")
        cache[key] = json.loads(r.stdout)
    return cache[key]


def simulate(tessel, kernel, shape, target, config, trace, limit):
    args = ["simulate", kernel, "--shape", shape, "--target", target, "--json",
            "--trace", trace, "--trace-limit", str(limit)]
    if config:
        args += ["--config", config]
    return run(tessel, args)


def check_trace(label, result, trace, limit):
    """Returns the number of slices checked; raises AssertionError naming `label` otherwise."""
    other = trace["otherData"]
    names = {}  # (pid, tid) -> track name
    slices = collections.defaultdict(list)  # (pid, tid) -> [(ts, end, index)]
    by_index = {}  # (pid, index) -> event
    engine_ns = collections.defaultdict(float)
    dur_us = collections.defaultdict(float)
    per_core = collections.Counter()
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e["ph"] != "X":
            continue
        per_core[e["pid"]] += 1
        slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["args"]["index"]))
        by_index[(e["pid"], e["args"]["index"])] = e
        engine_ns[e["cat"]] += e["args"]["engine_ns"]
        dur_us[e["cat"]] += e["dur"]
    checked = 0
    for (pid, tid), spans in slices.items():
        track = names.get((pid, tid))
        assert track is not None, f"{label}: track {pid}/{tid} has no name"
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            assert b[0] >= a[1] - EPS_US, (
                f"{label}: on core {pid} track '{track}', instruction {b[2]} starts at {b[0]} us "
                f"before instruction {a[2]} ends at {a[1]} us")
    for (pid, index), e in by_index.items():
        track = names[(pid, e["tid"])]
        if e["cat"] == "dma":
            assert e["name"] in DMA_OPS, f"{label}: {e['name']} on a DMA track"
            assert track.startswith(f"dma queue {e['args']['queue']} lane "), (
                f"{label}: a transfer of queue {e['args']['queue']} on track '{track}'")
        else:
            assert e["cat"] in COMPUTE and track == e["cat"] and e["tid"] == COMPUTE.index(
                e["cat"]), f"{label}: {e['name']} ({e['cat']}) on track '{track}'"
            assert e["name"] not in DMA_OPS, f"{label}: {e['name']} on the {track} track"
        for d in e["args"].get("deps", []):
            assert 0 <= d < index, f"{label}: instruction {index} depends on {d}"
            dep = by_index.get((pid, d))
            assert dep is not None, f"{label}: instruction {index}'s dep {d} is not traced"
            assert e["ts"] >= dep["ts"] + dep["dur"] - EPS_US, (
                f"{label}: instruction {index} starts before its dep {d} ends")
        checked += 1
    cores = other["cores"]
    truncated = any(n > limit for n in other["instructions"])
    assert other["truncated"] == truncated, f"{label}: otherData.truncated is wrong"
    for c in range(cores):
        want = min(limit, other["instructions"][c])
        assert per_core[c] == want, f"{label}: core {c} has {per_core[c]} slices, want {want}"
    if not truncated:
        time_ns = result["time_ns"]
        for engine, stats in result["engines"].items():
            capacity = time_ns * cores * (other["dma_engines"] if engine == "dma" else 1)
            want = stats["busy_frac"] * capacity
            got = engine_ns.get(engine, 0.0)
            assert abs(got - want) <= 1e-4 * max(want, 1.0) + 1.0, (
                f"{label}: {engine} busy {got:.1f} ns in the trace, {want:.1f} ns in --json")
            if engine in COMPUTE:
                assert abs(dur_us.get(engine, 0.0) * 1e3 - got) <= 1e-4 * max(got, 1.0) + 1.0
    return checked


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tessel")
    parser.add_argument("--triples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kernels = sorted(SHAPES)
    triples = [("matmul", SHAPES["matmul"][0], "snc2"),
               ("attention", SHAPES["attention"][0], "snc3")]
    while len(triples) < args.triples:
        kernel = rng.choice(kernels)
        triples.append((kernel, rng.choice(SHAPES[kernel]), rng.choice(TARGETS)))
    spaces = {}
    slices = invalid = truncated = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        for i, (kernel, shape, target) in enumerate(triples):
            sp = space(args.tessel, kernel, shape, target, spaces)
            # A random config (every parameter drawn); a few tries, else the default.
            config = ""
            for _ in range(8):
                draw = ",".join(f"{p['name']}={rng.choice(p['values'])}" for p in sp["params"])
                r = run(args.tessel, ["simulate", kernel, "--shape", shape, "--target", target,
                                      "--config", draw, "--json"])
                if r.returncode == 0:
                    config = draw
                    break
                invalid += 1
                assert r.returncode == 1 and json.loads(r.stdout)["valid"] is False, r.stderr
            limit = 2000 if i % 10 == 9 else 0  # every tenth truncated
            r = simulate(args.tessel, kernel, shape, target, config, path, limit)
            label = f"#{i} {kernel} {shape} {target} {config or '(default)'}"
            assert r.returncode == 0, f"{label}: rc {r.returncode}: {r.stderr}"
            result = json.loads(r.stdout)
            with open(path) as f:
                trace = json.load(f)
            slices += check_trace(label, result, trace, limit if limit > 0 else 1 << 62)
            truncated += trace["otherData"]["truncated"]
    print(f"{len(triples)} triples, {slices} slices checked, {truncated} truncated traces, "
          f"{invalid} invalid random configs redrawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
