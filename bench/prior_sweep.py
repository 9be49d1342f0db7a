#!/usr/bin/env python3
"""Two builds' analytic priors compared over many workloads (BENCHMARKS.md "The matmul estimate's
stores").

For each workload and target, runs `search_prior` of each build (auto with the kernel's estimate,
10 seeded runs of 300 evaluations) and prints Spearman's rho between estimate and simulated time,
and the score at 10 / 30 / 100 evaluations: mean (min) over the runs. Both builds' scores are
rescaled to the better of their two reference optima, so they compare.

    bench/prior_sweep.py --before OLD/bench/search_prior --after build/bench/search_prior \\
        --targets snc2,snc3 'matmul M=8,N=4096,K=4096' 'bmm B=8,M=2048,N=2048,K=1024' ...
"""
import argparse
import concurrent.futures
import json
import subprocess

BUDGETS = ("10", "30", "100")


def run(binary, kernel, shape, target, runs):
    proc = subprocess.run([binary, "--kernel", kernel, "--shape", shape, "--target", target,
                           "--runs", str(runs), "--budget", "300", "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{binary} {kernel} {shape} {target}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="search_prior of the old build")
    parser.add_argument("--after", required=True, help="search_prior of the new build")
    parser.add_argument("--targets", default="snc2,snc3")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("workloads", nargs="+", help="'KERNEL DIMS', e.g. 'matmul M=8,N=4096,K=4096'")
    args = parser.parse_args()
    builds = {"before": args.before, "after": args.after}
    cases = [(t, *w.split()) for t in args.targets.split(",") for w in args.workloads]
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = {(c, b): pool.submit(run, path, c[1], c[2], c[0], args.runs)
                   for c in cases for b, path in builds.items()}
        results = {key: f.result() for key, f in futures.items()}
    print("| target | workload | rho before | rho after | score at 10 / 30 / 100: mean (min), before "
          "| after |")
    print("|---|---|---|---|---|---|")
    means = {b: {n: [] for n in BUDGETS} for b in builds}
    for c in cases:
        ref = min(results[(c, b)]["reference"]["time_ns"] for b in builds)
        cells = []
        for b in builds:
            r = results[(c, b)]
            scale = ref / r["reference"]["time_ns"]
            at = r["variants"][0]["score_at"]  # the space with its estimate
            for n in BUDGETS:
                means[b][n].append((at[n]["mean"] * scale, f"{c[0]} {c[1]} {c[2]}"))
            cells.append(" / ".join(f'{at[n]["mean"] * scale:.3f} ({at[n]["min"] * scale:.3f})'
                                    for n in BUDGETS))
        rho = [f'{results[(c, b)]["estimate"]["spearman"]:.3f}' for b in builds]
        print(f"| {c[0]} | {c[1]} {c[2]} | {rho[0]} | {rho[1]} | {cells[0]} | {cells[1]} |")
    for b in builds:
        parts = []
        for n in BUDGETS:
            values = means[b][n]
            worst = min(values)
            parts.append(f"at {n}: mean {sum(v for v, _ in values) / len(values):.3f}, "
                         f"worst {worst[0]:.3f} ({worst[1]})")
        print(f"{b}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
