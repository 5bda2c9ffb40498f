# SPDX-License-Identifier: GPL-2.0
"""The NVMe disk of the storage scenario (run.py --nvme), and the host's checks of it.

Before boot, pattern files of random bytes (one seed each) are written into an ext4 image
(mkfs.ext4 -d, no mount needed), which QEMU's `nvme` device serves (serial `nvrs0`). A second
controller (serial `nvrs-slow`) serves the 64 MiB pattern as a raw disk, throttled to
SLOW_BPS, so that a read of it is still in flight seconds later: the races of the scenario
(a FREE or an unbind during a read) use it. `--nvme switch` puts the
controller on a downstream port of the emulated PCIe switch the GPUs sit under; `--nvme
rootport` behind a root port of its own, where the kernel's P2PDMA refuses the path to the
GPUs (q35's host bridge is not on its list).

QEMU traces the addresses the controller DMAs to and from (`pci_nvme_map_addr`). The kernel
gives it bus addresses for GPU memory under the same switch (P2PDMA's BUS_ADDR path), so those
are physical addresses in a GPU's BAR; pages there are counted, and that is the proof that a
read went to GPU memory and not through system RAM.

QEMU sends every DMA of a device behind its IOMMU through the IOMMU, even between two ports of
one switch, where real hardware routes a peer-to-peer request in the switch (which is why the
kernel uses bus addresses there). With the IOMMU on, the scenario therefore puts the controller
in an identity IOMMU domain, as GPUDirect Storage deployments run NVMe; the GPUs and edu stay
translated. Without it, QEMU faults the DMA and its NVMe still completes the read as a success,
so the bytes would be silently missing: the host's checks of the bytes catch that.

The scenario asks for checks on its console:

* `nvrs-hostcheck: storage-in NAME`: at the next sync, the bytes of pattern file NAME are in a
  GPU's backing file, contiguous (the memory is still allocated then);
* `nvrs-hostcheck: storage-out NAME SRC`: after the VM, file NAME of the image holds the bytes
  of pattern file SRC (a write from GPU memory landed on the disk);
* `nvrs-hostcheck: storage-direct BYTES`: after the VM, the controller's DMA reached at least
  BYTES of distinct GPU memory (in 4 KiB pages).
"""

import os
import random
import re
import subprocess

MIB = 1 << 20
PAGE = 4096

# Pattern files: name -> size. Random bytes, seeded by the name, so they never repeat.
FILES = {"s4k": 4096, "s64k": 64 << 10, "s1m": MIB, "s8m": 8 * MIB, "s64m": 64 * MIB}
IMAGE_SIZE = 192 * MIB
# The slow disk's read rate: 64 MiB take 4 s.
SLOW_BPS = 16 * MIB
TRACE_EVENTS = ("pci_nvme_map_addr",)


def pattern(name):
    return random.Random(f"nvrs-storage-{name}").randbytes(FILES[name])


class Storage:
    def __init__(self, workdir, where, trace=True):
        self.where, self.traced = where, trace
        self.image = os.path.join(workdir, "nvme.img")
        self.trace = os.path.join(workdir, "nvme-trace.log")
        src = os.path.join(workdir, "nvme-src")
        os.makedirs(src)
        for name in FILES:
            with open(os.path.join(src, name), "wb") as f:
                f.write(pattern(name))
        with open(self.image, "wb") as f:
            f.truncate(IMAGE_SIZE)
        self.slow = os.path.join(workdir, "nvme-slow.img")
        with open(self.slow, "wb") as f:
            f.write(pattern("s64m"))
        subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-O", "^has_journal",
                        "-E", "lazy_itable_init=0", "-d", src, self.image],
                       check=True, capture_output=True)
        self.want_in, self.want_out, self.direct = [], [], 0
        self.results = []

    def qemu_args(self, switch_bus):
        """QEMU options: the drives, the controllers (on the two ports `switch_bus` names, or on
        root ports of their own) and the trace of their DMA."""
        args = ["-drive", f"file={self.image},if=none,id=nvm0,format=raw",
                "-drive", f"file={self.slow},if=none,id=nvm1,format=raw,readonly=on,"
                          f"throttling.bps-read={SLOW_BPS}"]
        if self.traced:
            args += ["-D", self.trace]
            for e in TRACE_EVENTS:
                args += ["-trace", e]
        if self.where == "switch":
            args += ["-device", f"nvme,serial=nvrs0,drive=nvm0,bus={switch_bus[0]}",
                     "-device", f"nvme,serial=nvrs-slow,drive=nvm1,bus={switch_bus[1]}"]
        else:
            args += ["-device", "pcie-root-port,id=rpnvme,chassis=40,slot=4",
                     "-device", "nvme,serial=nvrs0,drive=nvm0,bus=rpnvme",
                     "-device", "pcie-root-port,id=rpnvme1,chassis=41,slot=5",
                     "-device", "nvme,serial=nvrs-slow,drive=nvm1,bus=rpnvme1"]
        return args

    def line(self, ln):
        m = re.search(r"nvrs-hostcheck: storage-in (\w+)", ln)
        if m:
            self.want_in.append(m.group(1))
        m = re.search(r"nvrs-hostcheck: storage-out (\w+) (\w+)", ln)
        if m:
            self.want_out.append((m.group(1), m.group(2)))
        m = re.search(r"nvrs-hostcheck: storage-direct (\d+)", ln)
        if m:
            self.direct = max(self.direct, int(m.group(1)))

    def sync(self, gpus):
        """At a sync: each file asked for is in some GPU's backing file."""
        if not self.want_in:
            return
        backing = []
        for g in gpus:
            with open(g.path, "rb") as f:
                backing.append(f.read())
        for name in self.want_in:
            want = pattern(name)
            found = [i for i, data in enumerate(backing) if data.find(want) >= 0]
            self.results.append((f"storage: the bytes of {name} ({len(want)} bytes) are in "
                                 f"GPU memory" + (f" (GPU{found[0]})" if found else
                                                  ": in no backing file"), bool(found)))
        self.want_in = []

    def _dma_pages(self):
        """Physical pages the controller's DMA reached, from QEMU's trace."""
        pages = set()
        try:
            text = open(self.trace, errors="replace").read()
        except OSError:
            return None
        for m in re.finditer(r"pci_nvme_map_addr addr 0x([0-9a-f]+) len (\d+)", text):
            addr, length = int(m.group(1), 16), int(m.group(2))
            pages.update(range(addr & ~(PAGE - 1), addr + length, PAGE))
        return pages

    def finish(self, apertures, gpus, more_bars=()):
        """The checks asked for; `more_bars`: other (start, end) bus ranges that are GPU
        memory (the GPU models' BAR1)."""
        results = self.results
        keep = os.environ.get("NVRS_STORAGE_KEEP")
        if keep:
            subprocess.run(["cp", self.trace, self.image, keep], check=False)
        for name in self.want_in:
            results.append((f"storage: {name} checked in GPU memory (no sync followed)", False))
        for name, src in self.want_out:
            out = self.image + "." + name
            r = subprocess.run(["debugfs", "-R", f"dump /{name} {out}", self.image],
                               capture_output=True)
            try:
                got = open(out, "rb").read()
            except OSError:
                got = b""
            results.append((f"storage: {name} on the disk holds the bytes of {src} "
                            f"(written from GPU memory)", r.returncode == 0 and got == pattern(src)))
        if self.direct:
            pages = self._dma_pages()
            if pages is None:
                results.append(("storage: QEMU traced the controller's DMA", False))
            else:
                bars = [(apertures[i], apertures[i] + g.size) for i, g in enumerate(gpus)
                        if i in apertures] + list(more_bars)
                in_gpu = sum(1 for p in pages if any(a <= p < b for a, b in bars)) * PAGE
                results.append((f"storage: the controller's DMA reached {in_gpu} bytes of GPU "
                                f"memory directly, at least {self.direct} asked", in_gpu >= self.direct))
        return results
