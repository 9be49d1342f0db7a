#!/usr/bin/python3
"""Noise-aware promotion, measured (issue 15): tunes one workload with simulated run-to-run noise
over many seeds, with and without promotion, and counts the runs whose published config is,
noiselessly, within 2% of the noiselessly best config the run measured.

  bench/noise_promotion.py --tessel build/client/cli/tessel [--seeds 20] [--noise 0.05]

Each run is an embedded `tessel tune --noise N --seed S --promote-top K` on its own database;
the measured configs are read from that database and simulated without noise (`tessel simulate`,
each distinct config once). Prints one line per run and a summary per variant; with --check F
exits 1 when promotion's share of runs within 2% is below F.
"""
import argparse
import concurrent.futures
import json
import os
import sqlite3
import subprocess
import sys
import tempfile


def noiseless_ns(tessel, args, config, cache):
    if config not in cache:
        out = subprocess.run([tessel, "simulate", args.kernel, "--shape", args.shape,
                              "--target", args.target, "--config", config, "--json"],
                             check=True, capture_output=True, text=True).stdout
        result = json.loads(out)
        cache[config] = result["time_ns"] if result.get("valid") else None
    return cache[config]


def run(tessel, args, seed, promote_top, directory):
    db = os.path.join(directory, f"s{seed}-p{promote_top}.db")
    tuned = subprocess.run([tessel, "tune", args.kernel, "--shape", args.shape, "--target",
                            args.target, "--budget", str(args.budget), "--seed", str(seed),
                            "--noise", str(args.noise), "--promote-top", str(promote_top),
                            "--workers", str(args.workers), "--db", db, "-q", "--json"],
                           check=True, capture_output=True, text=True).stdout
    published = json.loads(tuned)["best"]["config"]
    with sqlite3.connect(db) as conn:
        measured = sorted({row[0] for row in conn.execute(
            "SELECT config FROM trials WHERE status = 'OK'")})
        # Simulator runs spent: the search's (charged) and the re-measures' (promotion, verify).
        runs = {False: 0, True: 0}
        for is_verify, samples in conn.execute("SELECT is_verify, samples_json FROM trials"):
            runs[bool(is_verify)] += len(json.loads(samples))
    return published, measured, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessel", required=True)
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--shape", default="M=1024,N=1024,K=1024")
    parser.add_argument("--target", default="snc2")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.05)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--promote-top", type=int, default=12)
    parser.add_argument("--seed-base", type=int, default=0,
                        help="seeds are seed-base+1 .. seed-base+seeds")
    parser.add_argument("--workers", type=int, default=2,
                        help="embedded worker threads (1: each seed's run is reproducible)")
    parser.add_argument("--promoted-only", action="store_true",
                        help="skip the runs without promotion")
    parser.add_argument("--check", type=float, default=None,
                        help="fail unless promotion is within 2%% in at least this share of runs")
    args = parser.parse_args()

    cache = {}
    summary = {}
    with tempfile.TemporaryDirectory(prefix="tessel-noise-") as directory:
        for promote_top in (args.promote_top,) if args.promoted_only else (args.promote_top, 0):
            variant = f"promote-top {promote_top}" if promote_top else "no promotion"
            within, ratios, extra = 0, [], []
            for seed in range(args.seed_base + 1, args.seed_base + args.seeds + 1):
                published, measured, runs = run(args.tessel, args, seed, promote_top, directory)
                extra.append(runs[True] / max(1, runs[False]))
                with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                    times = list(pool.map(
                        lambda c: noiseless_ns(args.tessel, args, c, cache), measured))
                best = min(t for t in times if t is not None)
                mine = noiseless_ns(args.tessel, args, published, cache)
                ratio = mine / best
                ratios.append(ratio)
                within += ratio <= 1.02
                print(f"{variant:>16} seed {seed:2d}: published {ratio:.4f}x the best of "
                      f"{len(measured)} measured configs (noiseless)", flush=True)
            ratios.sort()
            summary[variant] = (within, ratios)
            print(f"{variant}: {within}/{args.seeds} runs within 2%; median "
                  f"{ratios[len(ratios) // 2]:.4f}x, worst {ratios[-1]:.4f}x; re-measure runs "
                  f"{sorted(extra)[len(extra) // 2]:.2f}x the search's (median)", flush=True)
    if args.check is not None:
        within, _ = summary[f"promote-top {args.promote_top}"]
        if within < args.check * args.seeds:
            print(f"FAIL: {within}/{args.seeds} < {args.check:.0%}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
