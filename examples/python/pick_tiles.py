#!/usr/bin/python3
"""Picks matmul tile sizes for a few shapes from a tessel snapshot (or server).

Usage: pick_tiles.py --snapshot FILE [--server HOST:PORT]

The tessel module comes from the build (client/python) or an installed tessel; set PYTHONPATH to
the directory that holds tessel*.so.
"""
import argparse
import json
import sys

import tessel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", default="", help="snapshot file (tessel export)")
    parser.add_argument("--server", default="", help="tessel-server address")
    parser.add_argument("--target", default="snc2")
    args = parser.parse_args()
    try:
        lookup = tessel.Lookup(snapshot=args.snapshot, server=args.server)
    except (ValueError, KeyError, RuntimeError) as error:
        print(f"pick_tiles: {error}", file=sys.stderr)
        return 1
    answers = []
    for shape in ({"M": 512, "N": 512, "K": 512}, "M=640,N=512,K=512"):
        found = lookup.find("matmul", shape, dtype="bf16", target=args.target)
        params = found["params"]
        answers.append({"shape": shape, "match": found["match"], "tile_m": params["tile_m"],
                        "tile_n": params["tile_n"], "config": found["config"]})
    print(json.dumps({"answers": answers}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
