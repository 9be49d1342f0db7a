#!/usr/bin/env python3
"""deploy/compose.yaml: a server with its database on a named volume, three workers, the tokens as
secrets, images from deploy/Dockerfile. No compose engine runs on the CI machine, so this checks
the file's structure and cross-references (every secret and volume a service names is defined).
Usage: compose_check.py SOURCE_DIR"""
import os
import sys

try:
    import yaml
except ImportError:
    print("SKIPPED: PyYAML is not installed (apt-get install python3-yaml)")
    sys.exit(77)


def main():
    path = os.path.join(sys.argv[1], "deploy", "compose.yaml")
    with open(path) as f:
        compose = yaml.safe_load(f)
    problems = []
    services = compose.get("services", {})
    server, worker = services.get("server"), services.get("worker")
    if not server or not worker:
        problems.append("services 'server' and 'worker' are required")
    else:
        build = server.get("build", {})
        if build.get("dockerfile") != "deploy/Dockerfile":
            problems.append("the server is not built from deploy/Dockerfile")
        mounts = [v.split(":") for v in server.get("volumes", [])]
        db_args = [a for a in server["command"] if a.startswith("--db=")]
        if not db_args or not any(len(m) == 2 and m[0] in compose.get("volumes", {})
                                  and db_args[0][5:].startswith(m[1]) for m in mounts):
            problems.append("the server's --db is not on a named volume")
        if worker.get("deploy", {}).get("replicas") != 3:
            problems.append("there are not three workers")
        for name, service in services.items():
            for secret in service.get("secrets", []):
                if secret not in compose.get("secrets", {}):
                    problems.append(f"{name}: secret {secret} is not defined")
                token_args = [a for a in service["command"] if a.startswith("--token-file=")]
                if token_args != [f"--token-file=/run/secrets/{secret}"]:
                    problems.append(f"{name}: --token-file does not read secret {secret}")
            if not service.get("secrets"):
                problems.append(f"{name}: no token secret")
            if service.get("read_only") is not True:
                problems.append(f"{name}: the root filesystem is writable")
        if worker.get("depends_on", {}).get("server", {}).get("condition") != "service_healthy":
            problems.append("workers do not wait for a healthy server")
    for problem in problems:
        print(f"FAIL: {problem}")
    if not problems:
        print(f"PASS: {path}: server on a volume, 3 workers, token secrets")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
