#!/usr/bin/env python3
"""Does the dashboard slow tuning? (issue 18)

A tessel-server with --http (127.0.0.1, port 0) and two worker processes of one thread each run
the same random tune (matmul 4096^3, --budget N) again and again, alternately alone and while ten
clients poll the dashboard every second, as open pages do (/api/overview, then the running job's
/api/jobs/ID; /metrics every fifth time). Reports trials/s of each run, the medians and the ratio.

Usage: dashboard_load.py --server S --worker W --cli C [--runs 3] [--budget 600] [--clients 10]
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def wait_for(path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return int(open(path).read())
        time.sleep(0.05)
    raise RuntimeError(f"{path} never appeared")


def poller(port, stop, counts):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    i = 0
    while not stop.is_set():
        try:
            conn.request("GET", "/api/overview")
            overview = json.loads(conn.getresponse().read())
            running = [j["id"] for j in overview["jobs"] if j["state"] == "running"]
            if running:
                conn.request("GET", f"/api/jobs/{running[0]}")
                conn.getresponse().read()
            if i % 5 == 0:
                conn.request("GET", "/metrics")
                conn.getresponse().read()
            counts.append(1)
        except (OSError, http.client.HTTPException, ValueError):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        i += 1
        stop.wait(1.0)
    conn.close()


def tune(cli, address, budget, seed):
    start = time.monotonic()
    r = subprocess.run([cli, "tune", "matmul", "--shape", "M=4096,N=4096,K=4096", "--strategy",
                        "random", "--budget", str(budget), "--seed", str(seed), "--retune",
                        "--cold-start", "--server", address, "--json"],
                       capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - start
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout)["trials"]["total"] / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=int, default=600)
    parser.add_argument("--clients", type=int, default=10)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tessel_dash_")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [args.server, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--db",
             os.path.join(work, "t.db"), "--port-file", os.path.join(work, "port"),
             "--http-port-file", os.path.join(work, "http_port")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        address = f"127.0.0.1:{wait_for(os.path.join(work, 'port'))}"
        port = wait_for(os.path.join(work, "http_port"))
        for w in range(2):
            procs.append(subprocess.Popen([args.worker, "--server", address, "--threads", "1",
                                           "--name", f"dash-{w}"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        tune(args.cli, address, 50, 999)  # warm up: workers registered, caches filled
        alone, polled, requests = [], [], []
        for run in range(args.runs):
            alone.append(tune(args.cli, address, args.budget, 2 * run + 1))
            stop = threading.Event()
            counts = []
            threads = [threading.Thread(target=poller, args=(port, stop, counts))
                       for _ in range(args.clients)]
            for t in threads:
                t.start()
            polled.append(tune(args.cli, address, args.budget, 2 * run + 2))
            stop.set()
            for t in threads:
                t.join()
            requests.append(len(counts))
            print(f"run {run + 1}: alone {alone[-1]:.1f} trials/s, with {args.clients} pollers "
                  f"{polled[-1]:.1f} trials/s ({len(counts)} polls)", flush=True)
        a, p = statistics.median(alone), statistics.median(polled)
        print(json.dumps({"alone_trials_per_s": alone, "polled_trials_per_s": polled,
                          "polls": requests, "median_alone": a, "median_polled": p,
                          "ratio": p / a, "worst_ratio": min(polled) / max(alone)}))
        return 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
