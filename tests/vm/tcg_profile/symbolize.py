#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turns tb_count.c's counts into a table: instructions and memory accesses per function.

The kernel's functions are named from its System.map, a module's from its .ko and the address
its .text was loaded at (printed by the profiling scenario). Counts are divided by --per (the
number of operations the scenario ran), so a line reads "per operation".

With --base (the counts of a second boot that ran the same scenario with fewer operations), the
base boot's counts are subtracted function by function first, and --per is the difference in
operations: what remains is the operations' own cost, boot and setup cancelled out, and the
table ends with its total.
"""

import argparse
import bisect
import collections
import subprocess

# x86-64 kernel addresses start here; anything below is user space.
KERNEL_START = 0xFFFF800000000000


def module_symbols(ko, base):
    """(address, name) of the .text functions of module `ko` loaded at `base`."""
    out = subprocess.run(["objdump", "-t", ko], capture_output=True, text=True,
                         check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        # "<value> <flags...> .text <size> <name>"
        if len(f) >= 5 and f[-3] == ".text":
            syms.append((base + int(f[0], 16), f[-1]))
    return syms


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("counts", help="tb_count.c's output")
    ap.add_argument("--system-map", required=True)
    ap.add_argument("--module", action="append", default=[], metavar="KO@ADDR",
                    help="a module and the address of its .text")
    ap.add_argument("--per", type=float, default=1.0, help="operations the counts cover")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--base", metavar="COUNTS",
                    help="counts of a boot with fewer operations, subtracted first")
    ap.add_argument("--base-module", action="append", default=[], metavar="KO@ADDR",
                    help="--module for the --base boot")
    args = ap.parse_args()

    insns, accesses = tally(args.counts, args.system_map, args.module)
    if args.base:
        base_insns, base_accesses = tally(args.base, args.system_map, args.base_module)
        insns.subtract(base_insns)
        accesses.subtract(base_accesses)
        # A function the operations do not run differs only by noise of the boots (a timer
        # interrupt more or less): kept only where it ran more.
        insns = collections.Counter({k: v for k, v in insns.items() if v > 0})
    total = sum(insns.values())
    print(f"{'insns/op':>10} {'mem/op':>8} {'share':>6}  function")
    for name, n in insns.most_common(args.top):
        print(f"{n / args.per:10.1f} {accesses[name] / args.per:8.1f} "
              f"{100 * n / max(total, 1):5.1f}%  {name}")
    if args.base:
        mem = sum(accesses[k] for k in insns)
        print(f"{total / args.per:10.1f} {mem / args.per:8.1f} {100:5.1f}%  "
              "total of the functions that ran more")


def tally(counts, system_map, modules):
    """Instructions and memory accesses per function of one boot's counts."""
    syms = []
    with open(system_map) as f:
        for line in f:
            a, t, n = line.split()[:3]
            if t in "tTwW":
                syms.append((int(a, 16), n))
    for m in modules:
        ko, _, addr = m.rpartition("@")
        syms += module_symbols(ko, int(addr, 16))
    syms.sort()
    addrs = [a for a, _ in syms]

    insns = collections.Counter()
    accesses = collections.Counter()
    with open(counts) as f:
        for line in f:
            va, n, execs, mem = (int(x, 16) if i == 0 else int(x)
                                 for i, x in enumerate(line.split()))
            i = bisect.bisect_right(addrs, va) - 1
            if va < KERNEL_START:
                name = "(below the kernel: firmware, boot, user space)"
            else:
                name = syms[i][1] if i >= 0 else "?"
            insns[name] += n * execs
            accesses[name] += mem
    return insns, accesses


if __name__ == "__main__":
    main()
