#!/usr/bin/env python3
"""Fails if the files of one folder include each other in a cycle.

A module is a file stem in a folder: foo.h and foo.cc are module "foo", so a cycle means two
modules that need each other (a.cc calls into b, b.cc calls into a), not only headers that include
each other. foo_impl.{h,cc} (a pimpl's private half) belongs to module foo. Tests (foo_test.cc) are modules of their own: nothing depends on them. Module A depends
on module B of the same folder when a file of A includes B's header by its project path
("folder/b.h"). The dependencies must form a DAG; each cycle found is printed as a -> b -> a.

Usage: scripts/check_include_cycles.py [ROOT]   (ROOT defaults to the repository)
"""
import os
import re
import sys

FOLDERS = ["schema", "sim", "kernels", "search", "server", "worker", "client", "tests", "bench"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SKIP_DIRS = {"build", "gen", "node_modules", ".git"}


def module_of(path):
    stem = os.path.splitext(path)[0]
    # foo_impl.{h,cc} is foo's private implementation (a pimpl): the same module as foo.
    return stem[: -len("_impl")] if stem.endswith("_impl") else stem


def graph_for(root, folder):
    edges = {}
    base = os.path.join(root, folder)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            if not name.endswith((".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            src = module_of(rel)
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                dst = module_of(inc)
                # Same folder tree (sub-folders count as their own folder's files), other module.
                if os.path.dirname(inc) == os.path.dirname(rel) and dst != src:
                    edges.setdefault(src, set()).add(dst)
    return edges


def find_cycles(edges):
    cycles, state, stack = [], {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif state.get(nxt) is None:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node)
    return cycles


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    found = 0
    modules = 0
    for folder in FOLDERS:
        if not os.path.isdir(os.path.join(root, folder)):
            continue
        edges = graph_for(root, folder)
        modules += len(edges)
        for cycle in find_cycles(edges):
            found += 1
            print("include cycle: " + " -> ".join(cycle))
    print(f"check_include_cycles: {found} cycle(s) among {modules} modules with in-folder includes")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
