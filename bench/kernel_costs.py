#!/usr/bin/env python3
"""Issue 20, "benchmarks per kernel": what one evaluation (Lower + Simulate) costs for each kernel.

For each kernel at its large example shape on snc3 (the shapes of sim_bench's BM_EvaluateKernel),
over the same seeded sample of random valid configs (bench/sim_configs.h):
  - the mean and median wall time of an evaluation, fast path, in rounds over the sample
    (`sim_count --each --repeat R`: each config's fastest of R);
  - the same with `--exact` (every iteration simulated; one round), and the fast path's speedup;
  - with --callgrind, the instructions per evaluation (callgrind, start-up subtracted);
  - with --growth, the cost of the kernel's default config as its large dimensions double twice.

    bench/kernel_costs.py --sim-count build/bench/sim_count [--count 16] [--callgrind] [--growth]
"""

import argparse
import json
import re
import statistics
import subprocess
import sys

# kernel, large example shape, the dims that double in --growth. The shapes are sim_bench.cc's
# kLargeShapes (BM_EvaluateKernel): a shape changed there is changed here too.
SHAPES = [
    ("matmul", "M=4096,N=4096,K=4096", ("M", "N", "K")),
    ("attention", "batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1",
     ("seq_q", "seq_k")),
    ("bmm", "B=8,M=2048,N=2048,K=1024", ("M", "N")),
    ("conv2d", "N=8,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1", ("H", "W")),
    ("softmax", "rows=8192,cols=8192", ("rows", "cols")),
    ("layernorm", "rows=8192,cols=8192", ("rows", "cols")),
    ("rmsnorm", "rows=8192,cols=8192", ("rows", "cols")),
]
TARGET = "snc3"


def sim_count(tool, kernel, shape, extra):
    cmd = [tool, "--kernel", kernel, "--shape", shape, "--target", TARGET] + extra
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def each_times(out):
    return [float(m.group(1)) for m in re.finditer(r"^\s*([\d.]+) us ", out, re.M)]


def instructions(tool, kernel, shape, count):
    def collected(n):
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", tool, "--kernel",
               kernel, "--shape", shape, "--target", TARGET, "--count", str(n)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or not m:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr[-500:]}")
        return int(m.group(1))
    return (collected(count) - collected(0)) / count


def scaled(shape, dims, factor):
    parts = []
    for item in shape.split(","):
        name, value = item.split("=")
        parts.append(f"{name}={int(value) * factor if name in dims else value}")
    return ",".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim-count", required=True)
    parser.add_argument("--count", type=int, default=16, help="random configs per kernel")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the fast path")
    parser.add_argument("--kernels", default=",".join(k for k, _, _ in SHAPES))
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--growth", action="store_true")
    args = parser.parse_args()
    wanted = args.kernels.split(",")
    rows = []
    print(f"{'kernel':<10} {'fast mean':>10} {'median':>10} {'exact mean':>11} {'speedup':>8} "
          f"{'evals/s':>8} {'instr/eval':>11}")
    for kernel, shape, dims in SHAPES:
        if kernel not in wanted:
            continue
        common = ["--count", str(args.count), "--each"]
        fast = each_times(sim_count(args.sim_count, kernel, shape,
                                    common + ["--repeat", str(args.repeat)]))
        exact = each_times(sim_count(args.sim_count, kernel, shape, common + ["--exact"]))
        row = {"kernel": kernel, "shape": shape, "target": TARGET, "configs": len(fast),
               "fast_mean_us": statistics.mean(fast), "fast_median_us": statistics.median(fast),
               "exact_mean_us": statistics.mean(exact)}
        row["speedup"] = row["exact_mean_us"] / row["fast_mean_us"]
        row["evals_per_s"] = 1e6 / row["fast_mean_us"]
        if args.callgrind:
            row["instructions_per_eval"] = instructions(args.sim_count, kernel, shape, args.count)
        if args.growth:
            growth = []
            for factor in (1, 2, 4):
                s = scaled(shape, dims, factor)
                times = each_times(sim_count(args.sim_count, kernel, s,
                                             ["--default", "--count", "3", "--each"]))
                growth.append({"shape": s, "default_us": min(times)})
            row["growth"] = growth
        rows.append(row)
        instr = f"{row['instructions_per_eval'] / 1e6:.2f} M" if "instructions_per_eval" in row else ""
        print(f"{kernel:<10} {row['fast_mean_us']:>8.1f}us {row['fast_median_us']:>8.1f}us "
              f"{row['exact_mean_us']:>9.1f}us {row['speedup']:>7.1f}x {row['evals_per_s']:>8.0f} "
              f"{instr:>11}", flush=True)
        if args.growth:
            base = row["growth"][0]["default_us"]
            print("           default config as " + ", ".join(dims) + " double twice: " +
                  " -> ".join(f"{g['default_us']:.0f} us ({g['default_us'] / base:.1f}x)"
                              for g in row["growth"]), flush=True)
    print(json.dumps({"target": TARGET, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
