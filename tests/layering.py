#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Draws the import graph of nvrs's top-level modules and checks its layering.

Every `crate::X` a file of src/ (or hwref/) names is an edge from the file's top-level module
to X. The per-GPU data (the device layer: gpu, fb, pmm, hwref, aperture, emu_identity,
kstorage, helpers) must not reach up into the layers built on it (vaspace, p2p, chardev,
driver, topology, bench, kunit): the driver's unbind orchestrates teardown, lower layers never
call up. Writes the graph as Graphviz DOT (argv[1]) and prints a verdict per rule.
Exit status 0 if every rule holds.
"""
import os
import re
import sys

ROOT = os.environ.get("NVRS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOWER = {"gpu", "fb", "copy", "pmm", "hwref", "aperture", "binding", "emu_identity", "kstorage", "helpers"}
UPPER = {"vaspace", "p2p", "dmabuf", "chardev", "driver", "topology", "bench", "kunit", "exports"}
PURE = {"topology": ("link",), "p2p": ("abi", "coalesce"), "vaspace": ("range", "layout")}


def module_of(path):
    rel = os.path.relpath(path, ROOT)
    if rel.startswith("hwref/"):
        return "hwref"
    rel = rel[len("src/"):]
    return rel.split("/")[0].removesuffix(".rs")


def target(path):
    """The module a `crate::` path names: its top-level module, or the pure leaf module
    (`topology::link`, `p2p::abi`, ...) when it names one: those hold data and algorithms only
    and belong to no layer."""
    parts = [x for x in path.split("::") if x]
    if len(parts) > 1 and parts[1] in PURE.get(parts[0], ()):
        return parts[0] + "::" + parts[1]
    return parts[0] if parts else ""


def strip_nested(body):
    """Removes brace groups nested in a use-list body."""
    out, depth = [], 0
    for c in body:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def uses(text):
    """Modules a file reaches through `crate::`."""
    names = set()
    for m in re.finditer(r"crate::([\w:]+)", text):
        names.add(target(m.group(1)))
    for m in re.finditer(r"crate::\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        for item in strip_nested(text[m.end():i - 1]).split(","):
            item = item.strip()
            if item:
                names.add(target(item))
    return {n for n in names if n.split("::")[0] in MODULES}


MODULES = {f.removesuffix(".rs") for f in os.listdir(os.path.join(ROOT, "src"))
           if f.endswith(".rs") or os.path.isdir(os.path.join(ROOT, "src", f))} | {"hwref"}


def main():
    edges = {}
    for base in ("src", "hwref"):
        for d, _, files in os.walk(os.path.join(ROOT, base)):
            for f in files:
                if f.endswith(".rs"):
                    p = os.path.join(d, f)
                    src = module_of(p)
                    with open(p) as fh:
                        text = re.sub(r"//[^\n]*", "", fh.read())
                    for dst in uses(text):
                        if dst.split("::")[0] != src:
                            edges.setdefault(src, set()).add(dst)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as out:
            out.write("digraph nvrs {\n")
            for s in sorted(edges):
                for t in sorted(edges[s]):
                    out.write(f'  "{s}" -> "{t}";\n')
            out.write("}\n")
    bad = [(s, t) for s, ts in edges.items() if s in LOWER for t in ts if t in UPPER]
    for s, t in sorted(bad):
        print(f"not ok - {s} (device layer) imports {t}")
    if not bad:
        print("ok - the device layer (" + ", ".join(sorted(LOWER)) + ") imports no upper layer")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
