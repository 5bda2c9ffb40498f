#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Draws the import graph of nvrs's top-level modules and checks its layering.

Every `crate::X` a file of src/ (or hwref/) names is an edge from the file's top-level module
to X. The per-GPU data (the device layer: gpu, fb, pmm, hwref, aperture, emu_identity,
kstorage, helpers) must not reach up into the layers built on it (vaspace, p2p, chardev,
driver, topology, bench, kunit): the driver's unbind orchestrates teardown, lower layers never
call up. Writes the graph as Graphviz DOT (the optional file argument) and prints a verdict
per rule. Exit status 0 if every rule holds.

With --strict, it checks the ordered layers of LAYERS instead: every top-level module is in
exactly one layer (or is pure, in no layer), no module imports one of a higher layer, pure
modules use no `kernel::` and import only pure modules and the core layer, and the import
graph of top-level modules has no cycle (each cycle is printed). make check runs --strict.
"""
import os
import re
import sys

ROOT = os.environ.get("NVRS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOWER = {"bar1", "gpu", "mem", "pmm", "hwref", "aperture", "binding", "emu_identity", "gmmu", "kstorage",
         "helpers"}
UPPER = {"vaspace", "p2p", "dmabuf", "chardev", "driver", "topology", "bench", "kunit", "exports"}
PURE = {"topology": ("link",), "p2p": ("abi", "coalesce"), "vaspace": ("range", "layout")}

# --strict: the layers, lowest first. A module may import modules of its own layer and of the
# layers below it, never of one above. The crate root (`nvrs`: module parameters, read by all)
# sits on top. The memory layer sits below the GPU record: `mem` knows GPU memory (a
# framebuffer range behind an aperture, its allocations and what holds them) and nothing of the
# PCI device, while a bound GPU (`gpu::GpuInfo`) owns its memory, as nova-core's `Gpu` owns
# its memory manager. The pins and dma-bufs above look the GPU up where they need its
# topology. BAR1's page tables (`bar1`, the GPU model's) sit below the memory, which reaches
# the model's VRAM through them, as nova-core's memory manager uses its BAR1 VMM.
LAYERS = [
    ("core", {"pmm", "hwref"}),
    ("helpers", {"helpers", "kstorage", "room", "testhook", "text"}),
    ("bar1", {"bar1", "ce"}),
    ("mem", {"mem"}),
    ("gpu", {"gpu", "topology"}),
    ("p2p/dmabuf", {"p2p", "dmabuf"}),
    ("vaspace", {"vaspace"}),
    ("chardev/driver", {"chardev", "driver", "exports", "bench", "kunit", "nvrs"}),
]
# --strict: pure modules (no `kernel::`; the host tests compile them) belong to no layer: every
# layer may use them, and they use only each other and the core layer. `locking` is
# documentation only. The pure leaves of PURE are pure nodes of their own.
PURE_MODULES = {"aperture", "binding", "emu_identity", "fault_op", "faults", "gmmu", "uapi",
                "locking"} | {
    f"{m}::{leaf}" for m, leaves in PURE.items() for leaf in leaves}


def module_of(path):
    """The node a file belongs to: its top-level module, or the pure leaf it is."""
    rel = os.path.relpath(path, ROOT)
    if rel.startswith("hwref/"):
        return "hwref"
    parts = rel[len("src/"):].removesuffix(".rs").split("/")
    if len(parts) == 2 and parts[1] in PURE.get(parts[0], ()):
        return parts[0] + "::" + parts[1]
    return parts[0]


def top(node):
    return node.split("::")[0]


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


def graph():
    """The import edges between nodes, and the text (comments stripped) of each node."""
    edges, texts = {}, {}
    for base in ("src", "hwref"):
        for d, _, files in os.walk(os.path.join(ROOT, base)):
            for f in files:
                if f.endswith(".rs"):
                    p = os.path.join(d, f)
                    src = module_of(p)
                    with open(p) as fh:
                        text = re.sub(r"//[^\n]*", "", fh.read())
                    texts[src] = texts.get(src, "") + text
                    for dst in uses(text):
                        if top(dst) != top(src):
                            edges.setdefault(src, set()).add(dst)
    return edges, texts


def cycles(edges):
    """The strongly connected components of more than one node (Tarjan), each as one cycle
    through all of its nodes' first found path: a list of nodes, the first repeated last."""
    index, low, stack, on, sccs = {}, {}, [], set(), []
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    for v in nodes:
        if v not in index:
            visit(v)
    out = []
    for scc in sccs:
        # A shortest cycle back to the smallest node, by breadth-first search inside the SCC.
        start = min(scc)
        prev, queue, found = {start: None}, [start], None
        while queue and found is None:
            v = queue.pop(0)
            for w in sorted(edges.get(v, ())):
                if w == start:
                    found = v
                    break
                if w in scc and w not in prev:
                    prev[w] = v
                    queue.append(w)
        path, v = [start], found
        while v is not None and v != start:
            path.insert(1, v)
            v = prev[v]
        out.append((sorted(scc), path + [start]))
    return out


def strict(edges, texts):
    """The ordered-layer and cycle rules; returns the number of failures."""
    layer = {}
    for i, (_, mods) in enumerate(LAYERS):
        for m in mods:
            layer[m] = i
    fails = 0

    def verdict(ok, text):
        nonlocal fails
        print(("ok - " if ok else "not ok - ") + text)
        fails += not ok

    nodes = set(texts) | {t for ts in edges.values() for t in ts}
    verdict(len(nodes) >= 10 and sum(map(len, edges.values())) >= 10,
            f"the import graph has {len(nodes)} nodes and "
            f"{sum(map(len, edges.values()))} edges (at least 10 each)")
    unplaced = sorted(m for m in nodes if m not in layer and m not in PURE_MODULES)
    for m in unplaced:
        verdict(False, f"{m} is in no layer and not pure")
    if not unplaced:
        verdict(True, "every top-level module is in a layer or pure")
    impure = sorted(m for m in nodes & PURE_MODULES
                    if re.search(r"\b(kernel|bindings)::", texts.get(m, "")))
    for m in impure:
        verdict(False, f"{m} is listed as pure but uses kernel::")
    up, pure_up = [], []
    for s, ts in edges.items():
        for t in ts:
            if s in PURE_MODULES and t not in PURE_MODULES and layer.get(t) != 0:
                pure_up.append((s, t))
            elif s in layer and t in layer and layer[t] > layer[s]:
                up.append((s, t))
    for s, t in sorted(pure_up):
        verdict(False, f"{s} (pure) imports {t} (layer {LAYERS[layer[t]][0]})")
    if not impure and not pure_up:
        verdict(True, "pure modules (" + ", ".join(sorted(nodes & PURE_MODULES)) +
                ") use no kernel:: and import only pure modules and the core layer")
    for s, t in sorted(up):
        verdict(False, f"{s} (layer {LAYERS[layer[s]][0]}) imports {t} "
                f"(layer {LAYERS[layer[t]][0]}, above it)")
    if not up:
        verdict(True, "no module imports one of a higher layer (" +
                " < ".join(name for name, _ in LAYERS) + ")")
    found = cycles(edges)
    for scc, path in found:
        verdict(False, "import cycle: " + " -> ".join(path) +
                (f" (component: {', '.join(scc)})" if len(scc) > len(path) - 1 else ""))
    if not found:
        verdict(True, "the import graph of top-level modules has no cycle")
    return fails


def main():
    args = sys.argv[1:]
    strict_mode = "--strict" in args
    args = [a for a in args if a != "--strict"]
    edges, texts = graph()
    if args:
        with open(args[0], "w") as out:
            out.write("digraph nvrs {\n")
            for s in sorted(edges):
                for t in sorted(edges[s]):
                    out.write(f'  "{s}" -> "{t}";\n')
            out.write("}\n")
    if strict_mode:
        return 1 if strict(edges, texts) else 0
    if not edges:
        print(f"not ok - no imports found under {ROOT}")
        return 1
    bad = [(s, t) for s, ts in edges.items() if s in LOWER for t in ts if t in UPPER]
    for s, t in sorted(bad):
        print(f"not ok - {s} (device layer) imports {t}")
    if not bad:
        print("ok - the device layer (" + ", ".join(sorted(LOWER)) + ") imports no upper layer")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
