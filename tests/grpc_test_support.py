"""What the Python gRPC tests share: Debian's grpc module or a skip, tessel_pb2 generated from
schema/tessel.proto by protoc, reading files that may not exist yet, and a unittest main that
takes the test's flags first. Imported by tests/*_test.py (their directory is on sys.path)."""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import grpc  # noqa: F401  (re-exported for the tests)
except ImportError:  # the skip is reported by ctest (SKIP_RETURN_CODE 77)
    print("SKIP: no grpc module in", sys.executable, "(apt-get install python3-grpcio)")
    sys.exit(77)


def read(path):
    """The text of `path`; empty when it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def generate_messages(protoc, proto, directory):
    """tessel_pb2, generated from `proto` by `protoc` into `directory` and imported."""
    proto_dir, proto_name = os.path.split(os.path.abspath(proto))
    subprocess.run([protoc, "-I", proto_dir, "--python_out", directory, proto_name], check=True)
    sys.path.insert(0, directory)
    import tessel_pb2
    return tessel_pb2


def main(module, flags, prefix):
    """Parses the required `flags` into module.ARGS, generates module.pb, runs the tests and
    exits 0 when they passed, 1 otherwise."""
    parser = argparse.ArgumentParser(description=module.__doc__.split("\n\n")[0])
    for flag in flags:
        parser.add_argument(flag, required=True)
    module.ARGS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix=prefix) as generated:
        module.pb = generate_messages(module.ARGS.protoc, module.ARGS.proto, generated)
        program = unittest.main(module=module, argv=[sys.argv[0], *rest], exit=False,
                                verbosity=2)
    sys.exit(0 if program.result.wasSuccessful() else 1)
