#!/usr/bin/env python3
"""Operations through a running server (issue 19), with the tuner role:

  - `tessel admin backup --server` during a running job: the copy opens, passes
    PRAGMA integrity_check, and holds every trial the server had acknowledged before it began;
  - `tessel admin restore --db` refuses while the server has the file open;
  - `tessel admin check|vacuum --server` answer; a reader token may not call them;
  - `tessel health --server` says SERVING (no token), and fails once the server is gone;
  - `tessel admin restore --server` stages the backup; after a kill -9 and a restart the server runs
    on the restored database and resumes the job to completion, with exactly its budget charged.

Usage: admin_backup_test.py BUILD_DIR
"""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

BUDGET = 300
KERNEL = ["attention", "--shape", "batch=1,heads=8,seq_q=2048,seq_k=2048,head_dim=128,causal=1",
          "--target", "snc3"]


def log(message):
    print(f"[admin] {message}", flush=True)


class Server:
    def __init__(self, build, work):
        self.build, self.work = build, work
        self.db = os.path.join(work, "server.db")
        self.tokens = os.path.join(work, "tokens")
        with open(self.tokens, "w") as f:
            f.write("tuner tuner-token-abcdef0123\nreader reader-token-abcdef0123\n"
                    "worker worker-token-abcdef0123\n")
        for role in ("tuner", "reader", "worker"):
            with open(os.path.join(work, role), "w") as f:
                f.write(f"{role}-token-abcdef0123\n")
        self.server = self.worker = None
        self.address = None

    def start(self):
        port_file = os.path.join(self.work, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.server = subprocess.Popen(
            [f"{self.build}/server/tessel-server", "--listen", "127.0.0.1:0", "--db", self.db,
             "--token-file", self.tokens, "--port-file", port_file, "--lease-ms", "5000",
             "--heartbeat-ms", "500"],
            stdout=open(os.path.join(self.work, "server.log"), "a"), stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            assert self.server.poll() is None, "the server exited; see server.log"
            assert time.time() < deadline, "the server did not listen in 30 s"
            time.sleep(0.05)
        self.address = f"127.0.0.1:{open(port_file).read().strip()}"
        self.worker = subprocess.Popen(
            [f"{self.build}/worker/tessel-worker", "--server", self.address, "--threads", "1",
             "--token-file", os.path.join(self.work, "worker")],
            stdout=open(os.path.join(self.work, "worker.log"), "a"), stderr=subprocess.STDOUT)

    def kill(self):
        for process in (self.worker, self.server):
            if process and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()

    def cli(self, *args, role="tuner", check=True, server=True):
        command = [f"{self.build}/client/cli/tessel", *args, "--json"]
        if server:
            command += ["--server", self.address, "--token-file", os.path.join(self.work, role)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: exit {result.returncode}: {result.stderr}")
        return result if not check else json.loads(result.stdout)

    def job(self, job_id):
        return next(j for j in self.cli("jobs")["jobs"] if j["id"] == job_id)


def charged(trials):
    return [t for t in trials if t["status"] not in ("WORKER_LOST", "CANCELLED")
            and t["arm"] not in ("verify", "promote")]


def main():
    build = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="tessel_admin_")
    server = Server(build, work)
    try:
        server.start()
        job_id = server.cli("tune", *KERNEL, "--strategy", "random", "--budget", str(BUDGET),
                            "--no-wait")["job_id"]
        deadline = time.time() + 120
        while server.job(job_id)["trials"] < 40:
            assert time.time() < deadline, "the job made no progress"
            time.sleep(0.2)
        acknowledged = {t["trial_id"] for t in server.cli("trials", str(job_id))["trials"]}
        backup = os.path.join(work, "backup.db")
        summary = server.cli("admin", "backup", "--out", backup)
        after = server.job(job_id)
        log(f"backup during job {job_id}: {summary['trials']} trials in the copy, "
            f"{len(acknowledged)} acknowledged before it began; job at {after['trials']}/"
            f"{BUDGET}, state {after['state']}")
        assert after["state"] == "running", "the job should still be running during the backup"

        copy = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        in_copy = {row[0] for row in copy.execute("SELECT id FROM trials")}
        copy.close()
        missing = acknowledged - in_copy
        assert not missing, f"the backup lacks acknowledged trials {sorted(missing)[:10]}"

        refused = server.cli("admin", "restore", "--from", backup, "--db", server.db,
                             check=False, server=False)
        assert refused.returncode != 0 and "in use" in refused.stderr, refused.stderr
        log("restore --db refused while the server has the file open")
        denied = server.cli("admin", "check", role="reader", check=False)
        assert denied.returncode != 0 and "may not call" in denied.stderr, denied.stderr
        assert server.cli("admin", "check")["ok"] is True
        health = subprocess.run([f"{build}/client/cli/tessel", "health", "--server",
                                 server.address, "--json"], capture_output=True, text=True)
        assert health.returncode == 0 and json.loads(health.stdout)["status"] == "SERVING", \
            health.stdout + health.stderr
        log("tessel health (grpc.health.v1, no token): SERVING")
        vacuum = server.cli("admin", "vacuum")
        log(f"check ok; vacuum {vacuum['bytes_before']} -> {vacuum['bytes_after']} bytes")

        staged = server.cli("admin", "restore", "--from", backup)
        log(f"restore staged at {staged['staged_path']}")
        time.sleep(1.0)  # the job goes on past the backup
        server.kill()
        down = subprocess.run([f"{build}/client/cli/tessel", "health", "--server",
                               server.address], capture_output=True, text=True)
        assert down.returncode != 0, "health of a killed server must fail"
        server.start()
        restored = sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)
        max_id = restored.execute("SELECT max(id) FROM trials").fetchone()[0]
        restored.close()
        log(f"restarted on the restored database (newest trial {max_id})")
        assert max_id == summary["max_trial_id"], (max_id, summary)

        deadline = time.time() + 600
        while server.job(job_id)["state"] in ("queued", "running"):
            assert time.time() < deadline, "the resumed job did not finish in 600 s"
            time.sleep(0.5)
        final = server.job(job_id)
        trials = server.cli("trials", str(job_id))["trials"]
        ids = [t["trial_id"] for t in trials]
        log(f"job {job_id} {final['state']}: {len(charged(trials))} charged trials "
            f"({len(trials)} rows)")
        assert final["state"] == "completed", final
        assert len(ids) == len(set(ids))
        assert len(charged(trials)) == BUDGET, len(charged(trials))
        print("PASS: online backup holds every acknowledged trial; restored server resumed the "
              "job to completion")
        return 0
    finally:
        server.kill()
        if os.environ.get("TESSEL_KEEP_TEST_DIRS"):
            log(f"files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
