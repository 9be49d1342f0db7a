#!/usr/bin/env python3
"""Issue 21, scheduler: the gradient task scheduler against round robin at equal total budgets.

For each budget and seed, `tessel tune-model` runs the model once with each scheduler (a fresh
database each time, so no run warm-starts from another), and the model's tuned end-to-end time is
compared. Prints a table per budget (means, wins, the worst seed's ratio) and one JSON line.

    bench/model_scheduler.py --tessel build/client/cli/tessel \\
        --model examples/models/llama3_8b_prefill.json --target snc3 \\
        --budgets 500,1000,2000 --seeds 10 --parallel 2
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(tessel, model, target, budget, seed, rule, workers, tmp):
    db = os.path.join(tmp, f"{rule}-{budget}-{seed}.db")
    done = subprocess.run(
        [tessel, "tune-model", model, "--target", target, "--budget", str(budget), "--seed",
         str(seed), "--scheduler", rule, "--workers", str(workers), "--db", db, "--json", "-q"],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{rule} budget {budget} seed {seed}: {done.stderr.strip()}")
    out = json.loads(done.stdout)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    return out["tuned_time_ns"], out["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tessel", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--target", default="snc3")
    parser.add_argument("--budgets", default="500,1000,2000")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="worker threads per run")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    parser.add_argument("--rules", default="gradient,round-robin",
                        help="schedulers to run (the table needs both)")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rules = tuple(args.rules.split(","))
    results = {}
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = {(b, s, r): pool.submit(run, args.tessel, args.model, args.target, b, s, r,
                                          args.workers, tmp)
                   for b in budgets for s in seeds for r in rules}
        for key, future in futures.items():
            results[key] = future.result()
            print(f"budget {key[0]} seed {key[1]} {key[2]}: {results[key][0] / 1e3:.1f} us "
                  f"({results[key][1]:.0f} s)", file=sys.stderr, flush=True)
    if set(rules) != {"gradient", "round-robin"}:
        return  # the per-run lines above are the result
    summary = []
    print(f"{os.path.basename(args.model)} on {args.target}, seeds {seeds.start}-{seeds.stop - 1}")
    print(f"{'budget':>7} {'gradient us':>12} {'round-robin us':>15} {'ratio':>6} "
          f"{'wins':>5} {'worst seed':>11}")
    for b in budgets:
        g = [results[(b, s, "gradient")][0] for s in seeds]
        r = [results[(b, s, "round-robin")][0] for s in seeds]
        ratios = [gi / ri for gi, ri in zip(g, r)]
        row = {"budget": b, "gradient_mean_ns": statistics.mean(g),
               "round_robin_mean_ns": statistics.mean(r),
               "ratio": statistics.mean(g) / statistics.mean(r),
               "gradient_wins": sum(x < 1 for x in ratios), "seeds": len(ratios),
               "worst_ratio": max(ratios)}
        summary.append(row)
        print(f"{b:>7} {row['gradient_mean_ns'] / 1e3:>12.1f} {row['round_robin_mean_ns'] / 1e3:>15.1f} "
              f"{row['ratio']:>6.3f} {row['gradient_wins']:>2}/{row['seeds']:<2} "
              f"{row['worst_ratio']:>11.3f}")
    print(json.dumps({"model": args.model, "target": args.target, "rows": summary}))


if __name__ == "__main__":
    main()
