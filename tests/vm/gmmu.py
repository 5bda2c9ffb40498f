# SPDX-License-Identifier: GPL-2.0
"""An independent reading of NVIDIA's GMMU page tables, for the runner's host-side checks.

Walks the page tables of an address space in a GPU model's VRAM backing file and lists every
page they map. Written from the field layouts of NVIDIA's published dev_mmu.h / dev_ram.h
(open-gpu-kernel-modules, src/common/inc/swref/published/pascal/gp100 for Ver2 and
hopper/gh100 for Ver3), not from nvrs's encoder or the model's walker, so that the three can
disagree.

Ver2 (Pascal to Ada): directory levels at VA bits 48:47, 46:38, 37:29, then the dual PDE0 at
28:21 (16 bytes: big-page table in the low word, small-page table in the high word), and the
page tables: 4 KiB pages at 20:12, big pages (64 KiB or 128 KiB, the instance block's
BIG_PAGE_SIZE) below 21. Ver3 (Hopper and later) adds a level at bit 56 above them.

Entries: bit 0 is VALID in a PTE and IS_PTE in a PDE (a PDE1 or PDE0 that is a 512 MiB or
2 MiB page); bits 2:1 the aperture (PDE: 0 invalid, 1 video memory, 2/3 system memory; PTE:
0 video memory, 1 peer, 2/3 system memory). Addresses: Ver2 video memory 32:8 in 4 KiB units
(the big half of a dual PDE 32:4 in 256-byte units); Ver3 51:12 (big half 51:8 in 256-byte
units). Read-only: Ver2 PTE bit 6; Ver3 the PCF field (7:3) with bit 2 set (the _RO_ encodings).
"""

import struct

KIB, MIB = 1 << 10, 1 << 20


class WalkError(Exception):
    pass


def _field(e, lo, bits):
    return (e >> lo) & ((1 << bits) - 1)


class Gmmu:
    def __init__(self, vram, version):
        if version not in (2, 3):
            raise WalkError(f"unknown MMU version {version}")
        self.vram, self.v3 = vram, version == 3
        # Big-page tables the walk reached (an empty space still has them).
        self.big_tables = 0

    def q(self, addr):
        if addr % 8 or addr + 8 > len(self.vram):
            raise WalkError(f"entry address {addr:#x} outside VRAM or misaligned")
        return struct.unpack_from("<Q", self.vram, addr)[0]

    def table_addr(self, e, big=False):
        if self.v3:
            return _field(e, 8, 44) << 8 if big else _field(e, 12, 40) << 12
        return _field(e, 4, 29) << 8 if big else _field(e, 8, 25) << 12

    def page(self, va, e, size):
        """(va, pa, size, read_only) of a valid PTE; raises for pages outside VRAM."""
        aperture = _field(e, 1, 2)
        if aperture != 0:
            raise WalkError(f"VA {va:#x}: PTE aperture {aperture} (not video memory)")
        pa = _field(e, 12, 40) << 12 if self.v3 else _field(e, 8, 25) << 12
        if pa % size:
            raise WalkError(f"VA {va:#x}: a {size:#x}-byte page at {pa:#x}, not aligned")
        ro = bool(_field(e, 3, 5) & 4) if self.v3 else bool(e & (1 << 6))
        if pa + size > len(self.vram):
            raise WalkError(f"VA {va:#x}: page {pa:#x} past VRAM")
        return (va, pa, size, ro)

    def directory(self, table, level, va, shifts, widths, out):
        shift, width = shifts[level], widths[level]
        for i in range(1 << width):
            e = self.q(table + 8 * i)
            sub = va | (i << shift)
            if e & 1:
                if shift != 29:
                    raise WalkError(f"VA {sub:#x}: IS_PTE at the level of bit {shift}")
                out.append(self.page(sub, e, 1 << 29))
                continue
            aperture = _field(e, 1, 2)
            if aperture == 0:
                continue
            if aperture != 1:
                raise WalkError(f"VA {sub:#x}: directory in system memory (aperture {aperture})")
            nxt = self.table_addr(e)
            if level + 1 < len(shifts):
                self.directory(nxt, level + 1, sub, shifts, widths, out)
            else:
                self.dual(nxt, sub, out)

    def dual(self, table, va, out):
        for i in range(256):
            lo, hi = self.q(table + 16 * i), self.q(table + 16 * i + 8)
            sub = va | (i << 21)
            if lo & 1:
                out.append(self.page(sub, lo, 2 * MIB))
                continue
            for e, big in ((hi, False), (lo, True)):
                aperture = _field(e, 1, 2)
                if aperture == 0:
                    continue
                if aperture != 1:
                    raise WalkError(f"VA {sub:#x}: page table in system memory")
                pt = self.table_addr(e, big)
                self.big_tables += big
                size = self.big if big else 4 * KIB
                for j in range((2 * MIB) // size):
                    pte = self.q(pt + 8 * j)
                    if pte & 1:
                        out.append(self.page(sub + j * size, pte, size))

    def walk(self, inst):
        """Every page mapped by the address space of the instance block at inst."""
        if inst + 0x208 > len(self.vram):
            raise WalkError(f"instance block {inst:#x} outside VRAM")
        lo, hi = struct.unpack_from("<II", self.vram, inst + 0x200)
        if lo & 3:
            raise WalkError(f"page directory target {lo & 3} (not video memory)")
        self.big = 64 * KIB if lo & (1 << 11) else 128 * KIB
        pdb = (hi << 32) | (lo & 0xFFFFF000)
        if self.v3:
            shifts, widths = (56, 47, 38, 29), (1, 9, 9, 9)
        else:
            shifts, widths = (47, 38, 29), (2, 9, 9)
        out = []
        self.directory(pdb, 0, 0, shifts, widths, out)
        return sorted(out)


def walk_file(path, inst, version, stats=None):
    """The pages mapped by the address space at inst; stats, a dict, gets "big_tables"."""
    import mmap
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as vram:
        g = Gmmu(vram, version)
        pages = g.walk(inst)
    if stats is not None:
        stats["big_tables"] = g.big_tables
    return pages


if __name__ == "__main__":
    # gmmu.py FILE INSTANCE_BLOCK VERSION: prints every mapped page as "VA PA SIZE rw|ro";
    # exit status 1 on a table the walk cannot read.
    import sys
    try:
        for va, pa, size, ro in walk_file(sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3])):
            print(f"{va:#x} {pa:#x} {size:#x} {'ro' if ro else 'rw'}")
    except WalkError as e:
        sys.exit(f"gmmu.py: {e}")
