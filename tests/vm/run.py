#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the nvrs test VM, run scenario scripts in it, and judge the result.

The VM is QEMU q35 (TCG unless --kvm) with an emulated Intel IOMMU, emulated
GPUs (ivshmem-plain on memory-backend-file under /dev/shm, so the host sees
what the guest or a peer device wrote), and QEMU's edu device with a 64-bit DMA
mask as the DMA peer. By default they sit under an emulated PCIe switch
(x3130 upstream port, one xio3130 downstream port each); --topology root puts
them on the root bus instead, across the host bridge. --nvme adds QEMU's NVMe
controller with an ext4 disk of pattern files (tests/vm/storage.py), under the
switch or behind a root port of its own.

--model-gpu adds GPU models (tests/model/nvrs-gpu.c, in the QEMU that
tests/bootstrap.sh qemu builds; --qemu or $NVRS_QEMU): NVIDIA PCI functions with
BAR0 registers, VRAM on a memory-backend-file (also under /dev/shm) and a BAR1
window translated through GMMU page tables. Their page tables are checked after
the VM by an independent walker (tests/vm/gmmu.py).

Before boot, the runner writes an identity block (include/nvrs_emu_identity.h)
at offset 0 of each emulated GPU's memory. A busybox initramfs mounts the
usual filesystems and runs each scenario script (tests/scenarios/*.sh) in
turn; scenarios print TAP lines prefixed with "nvrs-tap:".

The VM has two serial lines. The first is the kernel's console; the second
carries what the initramfs and the scenarios print (TAP, the host-check
requests, files, benchmark lines), and nothing else. On one line the kernel
writes its messages between the pieces the tty layer sends of a line a process
wrote, so a TAP line could arrive cut in two (and its result lost). The runner
reads both, whole lines at a time, into one log in the order they arrive, and
answers host-check requests on the console line, where the guest waits.

The runner extracts the KTAP output of KUnit
suites and the scenario TAP, and fails (exit 1) on any failed or missing
expected test, on an oops, BUG, WARNING, KASAN report or panic, on a hang
(timeout), or when the expected suites did not run at all. It prints one
result line per suite and per scenario, and "RESULT: N passed, N failed, N skipped" (KUnit
cases that reported SKIP neither pass nor fail). On a kernel with kmemleak, a leak scan that
did not run at the end of the VM is a failure.

One exception to the first failure being the verdict: a kernel that oopses or panics before
the initramfs printed anything (no scenario, module or test of nvrs had started; seen under
TCG as an int3 of the kernel's own text patching at boot, in about 1 of 17 boots of the bench
kernel) is booted once more, with a line saying so and the first console kept in LOG.boot1.
A second such failure is the verdict.
"""

import argparse
import base64
import gzip
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

from gmmu import WalkError, walk_file
from storage import Storage

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)

KIB, MIB = 1 << 10, 1 << 20
ROOT_CHUNK = 2 * MIB

# struct nvrs_emu_identity (include/nvrs_emu_identity.h), little-endian.
EMU_FORMAT = "<IHHIIHBBIQQ16s8s"
EMU_MAGIC = 0x5352564E
EMU_VERSION = 1
assert struct.calcsize(EMU_FORMAT) == 64

# Chips the emulated GPUs can impersonate: chip id, NVIDIA device id, NVLinks.
CHIPS = {
    "GH100": (0x180, 0x2335, 18),  # H200
    "GA100": (0x170, 0x20B0, 12),  # A100 SXM4
    "AD102": (0x192, 0x26B5, 0),  # L40
    "GB100": (0x1A0, 0x2901, 18),  # B200
    "TU104": (0x164, 0x1EB8, 0),  # T4
    "GV100": (0x140, 0x1DB4, 6),  # V100 PCIe
}
# The page-table format of each chip's MMU (the `mmu` field of its hwref/ table): Ver2 for
# Pascal to Ada, Ver3 for Hopper and later.
MMU_VERSION = {"GH100": 3, "GB100": 3, "GA100": 2, "AD102": 2, "TU104": 2, "GV100": 2}


def boot_regs(chip_id, major=0xA, minor=1):
    """PMC_BOOT_0 and PMC_BOOT_42 of a chip (hwref/ident.rs documents the fields)."""
    arch, impl = chip_id >> 4, chip_id & 0xF
    boot0 = ((arch & 0x1F) << 24) | (impl << 20) | (((arch >> 5) & 1) << 8) | (major << 4) | minor
    boot42 = ((chip_id & 0x3FF) << 20) | (major << 16) | (minor << 12)
    return boot0, boot42


def identity_block(index, chip, size, peers=0, links=0, magic=EMU_MAGIC, boot42=None):
    chip_id, dev_id, _ = CHIPS.get(chip, (0, 0, 0))
    boot0, b42 = boot_regs(chip_id)
    if boot42 is not None:
        boot0, b42 = 0, boot42
    uid = uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"nvrs-emulated-gpu-{index}-{chip}").bytes
    return struct.pack(EMU_FORMAT, magic, EMU_VERSION, 64, boot0, b42, dev_id, index,
                       links, peers, ROOT_CHUNK, size - ROOT_CHUNK, uid, bytes(8))


class Gpu:
    """One emulated GPU: a backing file and the identity written into it."""

    def __init__(self, index, chip, size, path, peers=0, links=0, magic=EMU_MAGIC, boot42=None):
        self.index, self.chip, self.size, self.path = index, chip, size, path
        with open(path, "wb") as f:
            f.truncate(size)
            f.write(identity_block(index, chip, size, peers, links, magic, boot42))


def parse_gpu_spec(spec):
    """CHIP[:MiB], e.g. GH100:256."""
    chip, _, mib = spec.partition(":")
    return chip, int(mib or 256) * MIB


class ModelGpu:
    """One GPU model (tests/model/nvrs-gpu.c): its VRAM backing file and its registers."""

    def __init__(self, index, spec, path):
        chip, vram, bar1 = (spec.split(":") + ["", ""])[:3]
        if chip not in CHIPS:
            sys.exit(f"run.py: error: unknown chip {chip} (known: {', '.join(CHIPS)})")
        self.index, self.chip, self.path = index, chip, path
        self.size, self.bar1 = int(vram or 1024) * MIB, int(bar1 or 256) * MIB
        self.boot0, self.boot42 = boot_regs(CHIPS[chip][0])
        self.device_id, self.mmu = CHIPS[chip][1], MMU_VERSION[chip]
        with open(path, "wb") as f:
            f.truncate(self.size)

    def qemu_args(self):
        return (["-object", f"memory-backend-file,id=modelmem{self.index},size={self.size},"
                            f"mem-path={self.path},share=on"],
                f"nvrs-gpu,memdev=modelmem{self.index},boot0={self.boot0:#x},"
                f"boot42={self.boot42:#x},device-id={self.device_id:#x},mmu={self.mmu},"
                f"bar1-size={self.bar1 // MIB}M")

    def describe(self):
        """What the guest's scenarios are told: CHIP:BOOT0:BOOT42:DEVICE:VRAM_MIB:BAR1_MIB:MMU."""
        return (f"{self.chip}:{self.boot0:#x}:{self.boot42:#x}:{self.device_id:04x}:"
                f"{self.size // MIB}:{self.bar1 // MIB}:{self.mmu}")


def build_initramfs(workdir, modules, scenarios, cmdline_env, bins=(), scripts=()):
    root = os.path.join(workdir, "initramfs")
    for d in ("bin", "sbin", "dev", "proc", "sys", "tmp", "lib/modules", "scenarios", "etc",
              "consumer"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy(busybox, os.path.join(root, "bin/busybox"))
    for m in modules:
        shutil.copy(m, os.path.join(root, "lib/modules", os.path.basename(m)))
    for b in bins:
        shutil.copy(b, os.path.join(root, "bin", os.path.basename(b)))
    # A consumer author's scripts (--script), run by the "consumer" scenario.
    for sc in scripts:
        shutil.copy(sc, os.path.join(root, "consumer", os.path.basename(sc)))
    for helper in ("lib.sh", "benchlib.sh", "hostsync.sh"):
        shutil.copy(os.path.join(TESTS, "scenarios", helper), os.path.join(root, "scenarios", helper))
    for s in scenarios:
        shutil.copy(os.path.join(TESTS, "scenarios", s + ".sh"),
                    os.path.join(root, "scenarios", s + ".sh"))
    with open(os.path.join(root, "etc/scenarios"), "w") as f:
        f.write("\n".join(scenarios) + "\n")
    with open(os.path.join(root, "etc/env"), "w") as f:
        for k, v in cmdline_env.items():
            f.write(f"export {k}='{v}'\n")
    shutil.copy(os.path.join(HERE, "init"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    out = os.path.join(workdir, "initramfs.cpio.gz")
    files = subprocess.run(["find", "."], cwd=root, check=True, capture_output=True).stdout
    cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files,
                          check=True, capture_output=True).stdout
    with gzip.open(out, "wb", compresslevel=1) as f:
        f.write(cpio)
    return out


def qemu_command(args, kernel, initrd, gpus, storage=None, tests_out=None, models=()):
    iommu = args.iommu == "on"
    cmd = [args.qemu, "-machine", "q35" + (",kernel-irqchip=split" if args.kvm else ""),
           "-accel", "kvm" if args.kvm else "tcg", "-m", str(args.mem), "-smp", "2",
           "-nographic", "-no-reboot", "-nodefaults", "-serial", "mon:stdio",
           "-kernel", kernel, "-initrd", initrd,
           "-append", "console=ttyS0 panic=-1 oops=panic loglevel=7 "
                      + (f"intel_iommu=on iommu.strict={1 if args.iommu_mode == 'strict' else 0} "
                         if iommu else "intel_iommu=off ")
                      + args.append]
    if tests_out:
        # ttyS1: the scenarios' line (init sends its output there).
        cmd += ["-chardev", f"file,id=tests,path={tests_out}", "-serial", "chardev:tests"]
    if args.plugin:
        cmd += ["-plugin", args.plugin]
    if args.mem_prealloc:
        cmd += ["-mem-prealloc"]
    if iommu:
        cmd += ["-device", "intel-iommu,intremap=on,caching-mode=on"]
    endpoints = []
    for g in gpus:
        cmd += ["-object", f"memory-backend-file,id=gpumem{g.index},size={g.size},"
                           f"mem-path={g.path},share=on"]
        endpoints.append(f"ivshmem-plain,memdev=gpumem{g.index}")
    for m in models:
        backend, device = m.qemu_args()
        cmd += backend
        endpoints.append(device)
    endpoints.append("edu,dma_mask=0xffffffffffffffff")
    if args.topology == "switch":
        cmd += ["-device", "pcie-root-port,id=rp0,chassis=1,slot=1",
                "-device", "x3130-upstream,id=up0,bus=rp0"]
        for i, ep in enumerate(endpoints):
            cmd += ["-device", f"xio3130-downstream,id=dp{i},bus=up0,chassis={10 + i},slot=0",
                    "-device", f"{ep},bus=dp{i}"]
        if storage:
            n = len(endpoints)
            for i in (n, n + 1):
                cmd += ["-device", f"xio3130-downstream,id=dp{i},bus=up0,chassis={10 + i},slot=0"]
            cmd += storage.qemu_args((f"dp{n}", f"dp{n + 1}"))
    else:
        for ep in endpoints:
            cmd += ["-device", ep]
        if storage:
            cmd += storage.qemu_args(("pcie.0", "pcie.0"))
    return cmd


TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+) (?:- )?([^#]*?)\s*(#.*)?$")
SUBTEST = re.compile(r"^(\s*)# Subtest: (\S+)")
BAD = re.compile(r"(Oops|BUG:|WARNING:|KASAN|Kernel panic|general protection fault|"
                 r"Unable to handle|UBSAN:|kernel BUG|Call Trace:|refcount_t:|"
                 r"list_add corruption|possible circular locking|possible recursive locking|"
                 r"inconsistent lock state|lock held when returning|blocked for more than|"
                 r"ODEBUG:)")

# kmemleak records made in the context of the test's own processes are leaks of the code under
# test; those of kernel threads and early boot belong to the kernel.
OUR_COMMS = {"insmod", "rmmod", "nvrs-tool", "nvrs-fuzz", "sh", "cat", "echo", "grep", "sed",
             "kunit_try_catch"}


def parse_kmemleak(text):
    """Returns (ours, others): leak records (first line + comm) from the end-of-run scan."""
    ours, others, record = [], [], None
    for raw in text.splitlines():
        line = TS.sub("", raw.rstrip("\r"))
        if not line.startswith("kmemleak-report: "):
            continue
        body = line[len("kmemleak-report: "):]
        if body.startswith("unreferenced object"):
            record = [body, None]
        elif record is not None and body.strip().startswith("comm "):
            m = re.search(r'comm "([^"]*)"', body)
            record[1] = m.group(1) if m else "?"
            (ours if record[1] in OUR_COMMS else others).append(tuple(record))
            record = None
    return ours, others


def kernel_has_kmemleak(kernel, console):
    """Whether the kernel was built with kmemleak: its .config, where the image sits in its
    build tree (arch/x86/boot/bzImage) or beside it, or else kmemleak's own boot messages."""
    image_dir = os.path.dirname(os.path.abspath(kernel))
    for d in (os.path.normpath(os.path.join(image_dir, "../../..")), image_dir):
        config = os.path.join(d, ".config")
        if os.path.isfile(config):
            with open(config) as f:
                return "CONFIG_DEBUG_KMEMLEAK=y\n" in f.read()
    return re.search(r"^(\[[ 0-9.]*\] )?kmemleak: ", console, re.M) is not None


def parse_console(text):
    """Returns (suites, scenarios, problems).

    suites: {name: [passed, failed, suite_ok or None, skipped]} from KUnit KTAP. A suite runs
    each time its module is loaded; cases are counted from its first run, and a failure in any
    later run still counts as a failure. Cases that report "# SKIP" neither pass nor fail, but
    are counted (from the first run) so that the result lines show them.
    scenarios: {name: [passed, failed, finished, failed checks]} from "nvrs-tap:" lines.
    """
    suites, scenarios, problems = {}, {}, []
    subtest_at, rerun = {}, {}
    for raw in text.splitlines():
        line = TS.sub("", raw.rstrip("\r"))
        if BAD.search(line) and "nvrs-tap:" not in line and "kmemleak-report:" not in line:
            problems.append(line.strip())
        if line.startswith("nvrs-tap:"):
            body = line[len("nvrs-tap:"):].strip()
            m = re.match(r"^begin (\S+)", body)
            if m:
                scenarios[m.group(1)] = [0, 0, False, []]
                current = m.group(1)
                continue
            m = re.match(r"^done (\d+)$", body)
            if m and scenarios:
                # Every numbered result must have been read (none lost in interleaved output).
                p, f = scenarios[current][:2]
                scenarios[current][2] = p + f == int(m.group(1))
                continue
            if re.match(r"^end (\S+)", body):
                continue
            m = RESULT.match(body)
            if m and scenarios:
                cur = scenarios[current]
                cur[0 if m.group(2) == "ok" else 1] += 1
                if m.group(2) != "ok":
                    cur[3].append(f"not ok {m.group(3)} - {m.group(4)}")
            continue
        m = SUBTEST.match(line)
        if m:
            subtest_at[len(m.group(1))] = m.group(2)
            rerun[len(m.group(1))] = m.group(2) in suites and suites[m.group(2)][2] is not None
            suites.setdefault(m.group(2), [0, 0, None, 0])
            continue
        m = RESULT.match(line)
        if m:
            indent, status, name = len(m.group(1)), m.group(2), m.group(4)
            directive = m.group(5) or ""
            if indent in subtest_at and indent > 0:
                s = suites[subtest_at[indent]]
                if "SKIP" in directive:
                    if not rerun.get(indent):
                        s[3] += 1
                    continue
                if rerun.get(indent) and status == "ok":
                    continue
                s[0 if status == "ok" else 1] += 1
            elif name in suites:
                if suites[name][2] is None or status != "ok":
                    suites[name][2] = status == "ok"
    return suites, scenarios, problems


def died_before_init(console):
    """The first problem line, if the kernel oopsed or panicked before the VM's init printed
    anything (no scenario, module or test had run): else None."""
    for raw in console.splitlines():
        line = TS.sub("", raw.rstrip("\r"))
        if "nvrs-tap:" in line:
            return None
        if BAD.search(line) and "kmemleak-report:" not in line:
            return line.strip()
    return None


def save_files(console, where):
    """Writes the files scenarios sent out on the console (lib.sh send_file) to `where`."""
    files = {}
    for m in re.finditer(r"nvrs-file: ([\w.-]+) ([A-Za-z0-9+/=]+)\r?$", console, re.M):
        files.setdefault(m.group(1), []).append(m.group(2))
    if not where or not files:
        return
    os.makedirs(where, exist_ok=True)
    for name, lines in files.items():
        with open(os.path.join(where, name), "wb") as f:
            f.write(base64.b64decode("".join(lines)))


class BackingCheck:
    """Checks, in the emulated GPUs' backing files, the patterns the consumer's edu DMA wrote.

    Scenarios print each GPU's aperture address ("nvrs-hostcheck: gpu I PHYS"); the consumer
    logs every DMA ("wrote pattern P at phys X"). nvrs scrubs memory when it is freed, so the
    bytes are checked while the memory is still allocated: after its DMA commands a scenario
    prints "nvrs-hostcheck: sync" and waits for this runner's answer on the serial line. At each
    sync, the last write to each location since the previous sync must be in the file: 2 KiB of
    32-bit words P, P+1, ... A write no sync covered is a failure.

    "nvrs-hostcheck: absent P" asks, after the VM, that a secret a scenario wrote and freed be
    nowhere in GPU memory (it was scrubbed before reuse).

    "nvrs-hostcheck: present BASE COUNT STEP" asks, at the next sync, that each needle (the
    32-bit word BASE + k * STEP, four times over) start some 64 KiB-aligned block of a GPU's
    memory: data compaction moved must be somewhere in GPU memory, intact.
    """

    def __init__(self, gpus, storage=None, models=()):
        self.gpus, self.apertures, self.pending, self.absent, self.results = gpus, {}, {}, [], []
        self.present, self.storage = [], storage
        # GPU models: the address spaces to walk after the VM, and what each must map:
        # {(model, instance block): (MMU version, big-page tables an empty space has or None)}.
        self.models, self.spaces, self.maps, self.last_space = models, {}, {}, {}
        # Model BAR1s the scenario named (index: (guest physical address, instance block)),
        # and the page counts it asked the walker to check at the next sync.
        self.bar1s, self.bar1_counts, self.bar1_patterns = {}, [], {}
        # Per model, the kinds of address space walked (True: one the scenario mapped).
        self.walked_kinds = {}
        self.require_spaces = False

    def line(self, ln):
        """Feeds one console line; returns True if the guest waits for an answer."""
        if self.storage:
            self.storage.line(ln)
        m = re.search(r"nvrs-hostcheck: gpu (\d+) (0x[0-9a-f]+)", ln)
        if m:
            self.apertures[int(m.group(1))] = int(m.group(2), 16)
        m = re.search(r"wrote pattern (0x[0-9a-f]+) at phys (0x[0-9a-f]+)", ln)
        if m:
            self.pending[int(m.group(2), 16)] = int(m.group(1), 16)
        m = re.search(r"nvrs-hostcheck: absent (0x[0-9a-f]+)", ln)
        if m:
            self.absent.append(int(m.group(1), 16))
        m = re.search(r"nvrs-hostcheck: present (0x[0-9a-f]+) (\d+) (\d+)", ln)
        if m:
            self.present.append(tuple(int(x, 0) for x in m.groups()))
        m = re.search(r"nvrs-hostcheck: gmmu (\d+) (0x[0-9a-f]+) ([23])$", ln.strip())
        if m:
            key = (int(m.group(1)), int(m.group(2), 16))
            self.spaces[key] = (int(m.group(3)), None)
            self.maps[key] = []
            self.last_space[key[0]] = key
        m = re.search(r"nvrs-hostcheck: gmmu-empty (\d+) (0x[0-9a-f]+) ([23]) (\d+)$", ln.strip())
        if m:
            key = (int(m.group(1)), int(m.group(2), 16))
            self.spaces[key] = (int(m.group(3)), int(m.group(4)))
            self.maps[key] = []
        m = re.search(r"nvrs-hostcheck: gmmu-map (\d+) (0x[0-9a-f]+) (0x[0-9a-f]+) (0x[0-9a-f]+) "
                      r"(rw|ro)$", ln.strip())
        if m:
            key = self.last_space.get(int(m.group(1)))
            self.maps.setdefault(key, []).append(
                (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16),
                 m.group(5) == "ro"))
        m = re.search(r"nvrs-hostcheck: bar1 (\d+) (0x[0-9a-f]+) (0x[0-9a-f]+)$", ln.strip())
        if m:
            self.bar1s[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3), 16))
        m = re.search(r"nvrs-hostcheck: bar1-patterns (\d+) (\d+)$", ln.strip())
        if m:
            self.bar1_patterns[int(m.group(1))] = int(m.group(2))
        m = re.search(r"nvrs-hostcheck: bar1-pages (\d+) (\d+)(?: (\d+))?$", ln.strip())
        if m:
            n = int(m.group(2))
            self.bar1_counts.append((int(m.group(1)), n, int(m.group(3) or n)))
        if "nvrs-hostcheck: sync" in ln:
            self.sync()
            return True
        return False

    def sync(self):
        if self.storage:
            # The GPU models' VRAM too: P2PDMA reads land there through BAR1.
            self.storage.sync([*self.gpus, *self.models])
        if self.present:
            blocks = set()
            # The GPU models' VRAM too: compaction moves their memory as well.
            for g in [*self.gpus, *self.models]:
                with open(g.path, "rb") as f:
                    data = f.read()
                blocks.update(data[o:o + 16] for o in range(0, len(data), 65536))
            for base, count, step in self.present:
                missing = [base + k * step for k in range(count)
                           if struct.pack("<I", (base + k * step) & 0xFFFFFFFF) * 4 not in blocks]
                self.results.append((f"{count} needles from {base:#x} (step {step}) are in GPU "
                                     f"memory ({len(missing)} missing"
                                     + (f", first {missing[0]:#x})" if missing else ")"),
                                     not missing))
            self.present = []
        self.sync_bar1()
        self.walk_models()
        for phys, pattern in sorted(self.pending.items()):
            owner = [(i, base) for i, base in self.apertures.items()
                     if i < len(self.gpus) and base <= phys < base + self.gpus[i].size]
            if not owner:
                self.results.append((f"backing file: no GPU aperture holds phys {phys:#x}", False))
                continue
            i, base = owner[0]
            with open(self.gpus[i].path, "rb") as f:
                f.seek(phys - base)
                data = f.read(2048)
            want = struct.pack("<512I", *[(pattern + k) & 0xFFFFFFFF for k in range(512)])
            self.results.append((f"GPU{i} backing file holds pattern {pattern:#010x} at offset "
                                 f"{phys - base:#x}", data == want))
        self.pending = {}

    def bar1_walk(self, i):
        """The pages model i's BAR1 maps now, by the walker, or a failure's text."""
        if i not in self.bar1s or i >= len(self.models):
            return None, f"GPU model {i}: no BAR1 named for it"
        m, (_, inst) = self.models[i], self.bar1s[i]
        stats = {}
        try:
            pages = walk_file(m.path, inst, m.mmu, stats)
        except WalkError as e:
            return None, f"GPU model {i}: BAR1's tables at {inst:#x} walk: {e}"
        # A walk that did not reach a big-page table per 2 MiB of BAR1 walked something else
        # (an empty walk of the wrong tables would pass for an empty BAR1).
        want = m.bar1 // (2 * MIB)
        if stats["big_tables"] != want:
            return None, (f"GPU model {i}: BAR1's tables at {inst:#x} have "
                          f"{stats['big_tables']} big-page tables, not {want}")
        return pages, None

    def sync_bar1(self):
        """Checks what the scenario asked of the models' BAR1 since the last sync, with the
        walker reading the VRAM file: how many pages are mapped (each 64 KiB, each a page of its
        own unless the scenario said how many distinct VRAM pages there are), and that each
        pattern a peer DMAed to a BAR1 address is in VRAM where the tables
        translate that address. Patterns outside every BAR1 are left to the aperture check."""
        for i, n, d in self.bar1_counts:
            pages, err = self.bar1_walk(i)
            if err:
                self.results.append((err, False))
                continue
            sizes = {p[2] for p in pages}
            distinct = len({p[1] for p in pages})
            self.results.append((f"GPU model {i}: BAR1 maps {n} pages of 64 KiB, of {d} "
                                 f"distinct VRAM pages ({len(pages)} found, {distinct} distinct, "
                                 f"sizes {sorted(sizes)})",
                                 len(pages) == n and sizes <= {64 * KIB} and distinct == d))
        self.bar1_counts = []
        checked = {}
        for phys, pattern in sorted(self.pending.items()):
            hit = [(i, base) for i, (base, _) in self.bar1s.items()
                   if i < len(self.models) and base <= phys < base + self.models[i].bar1]
            if not hit:
                continue
            del self.pending[phys]
            i, base = hit[0]
            checked[i] = checked.get(i, 0) + 1
            pages, err = self.bar1_walk(i)
            if err:
                self.results.append((err, False))
                continue
            off = phys - base
            page = [p for p in pages if p[0] <= off < p[0] + p[2]]
            if not page:
                self.results.append((f"GPU model {i}: BAR1 offset {off:#x} (pattern "
                                     f"{pattern:#010x}) is mapped", False))
                continue
            va, pa, _, _ = page[0]
            with open(self.models[i].path, "rb") as f:
                f.seek(pa + off - va)
                data = f.read(2048)
            want = struct.pack("<512I", *[(pattern + k) & 0xFFFFFFFF for k in range(512)])
            self.results.append((f"GPU model {i}: pattern {pattern:#010x} DMAed to BAR1 offset "
                                 f"{off:#x} is in VRAM at {pa + off - va:#x}, where the tables "
                                 "translate it", data == want))
        # As many patterns as the scenario said it had DMAed (their log lines could be lost).
        for i, n in sorted(self.bar1_patterns.items()):
            self.results.append((f"GPU model {i}: {n} DMAed patterns checked through BAR1 "
                                 f"({checked.get(i, 0)} found)", checked.get(i, 0) == n))
        self.bar1_patterns = {}

    def walk_models(self):
        """Each address space a scenario named since the last walk maps exactly the pages it
        said, and nothing else, as an independent walker reads the tables in the model's VRAM
        file. Walked at each sync (later scenarios reuse the VRAM) and at the end."""
        for (i, inst), (version, big_tables) in sorted(self.spaces.items()):
            if i >= len(self.models):
                self.results.append((f"GPU model {i}: no such model for the walk", False))
                continue
            m = self.models[i]
            if version != m.mmu:
                self.results.append((f"GPU model {i}: the scenario walked MMU version "
                                     f"{version}, the chip has {m.mmu}", False))
                continue
            want = sorted(self.maps.get((i, inst), []))
            stats = {}
            try:
                got = walk_file(m.path, inst, version, stats)
            except WalkError as e:
                self.results.append((f"GPU model {i} ({m.chip}): page tables at {inst:#x} "
                                     f"walk: {e}", False))
                continue
            # Only a space that walked counts towards the kinds the model scenario must name.
            self.walked_kinds.setdefault(i, set()).add(big_tables is None)
            extra = [g for g in got if g not in want]
            missing = [w for w in want if w not in got]
            if big_tables is not None:
                # An empty space is a verdict only if the walk reached all its tables.
                self.results.append((
                    f"GPU model {i} ({m.chip}, MMU Ver{version}): the address space at "
                    f"{inst:#x} has its {big_tables} big-page tables and maps nothing "
                    f"({stats['big_tables']} tables, {len(got)} pages"
                    + (f"; {extra[0][0]:#x}->{extra[0][1]:#x}" if extra else "") + ")",
                    stats["big_tables"] == big_tables and big_tables > 0 and not got))
                continue
            self.results.append((
                f"GPU model {i} ({m.chip}, MMU Ver{version}): the page tables in VRAM map the "
                f"{len(want)} pages the scenario mapped and nothing else ({len(got)} found"
                + (f"; missing {missing[0][0]:#x}" if missing else "")
                + (f"; extra {extra[0][0]:#x}->{extra[0][1]:#x}" if extra else "") + ")",
                bool(want) and not extra and not missing))
        if None in self.maps:
            self.results.append(("GPU model: mappings listed before any address space",
                                 False))
        self.spaces, self.maps, self.last_space = {}, {}, {}

    def check_kinds(self):
        """With self.require_spaces (the model scenario ran), every model must have had both
        kinds of address space walked: one the scenario mapped, one nvrs left empty."""
        if self.require_spaces:
            for i, m in enumerate(self.models):
                kinds = self.walked_kinds.get(i, set())
                self.results.append((f"GPU model {i} ({m.chip}): the scenario named a mapped and "
                                     "an empty address space to walk", kinds == {True, False}))

    def finish(self):
        self.sync_bar1()
        self.walk_models()
        self.check_kinds()
        for base, count, _ in self.present:
            self.results.append((f"{count} needles from {base:#x} checked in the backing files "
                                 "(no sync followed the request)", False))
        for phys, pattern in sorted(self.pending.items()):
            self.results.append((f"DMA of pattern {pattern:#010x} at phys {phys:#x} checked "
                                 "in the backing file (no sync followed it)", False))
        for pattern in self.absent:
            needle = struct.pack("<I", pattern) * 4
            for i, g in enumerate(self.gpus):
                with open(g.path, "rb") as f:
                    data = f.read()
                at = data.find(needle)
                self.results.append((f"GPU{i} backing file holds no {pattern:#010x} (scrubbed)"
                                     + ("" if at < 0 else f": found at offset {at:#x}"), at < 0))
        if self.storage:
            # A GPU model's BAR1 (where the scenario announced it) is GPU memory too.
            bars = [(phys, phys + self.models[i].bar1) for i, (phys, _) in self.bar1s.items()
                    if i < len(self.models)]
            self.results += self.storage.finish(self.apertures, self.gpus, bars)
        return self.results


class Lines:
    """Whole lines from one of the VM's outputs (a non-blocking pipe or a growing file)."""

    def __init__(self, f):
        self.f, self.pending, self.got = f, "", False

    def poll(self):
        try:
            data = self.f.read()
        except BlockingIOError:
            data = None
        self.got = bool(data)
        if not data:
            return []
        *complete, self.pending = (self.pending + data.decode("utf-8", "replace")).split("\n")
        return complete

    def rest(self):
        """The last line, if it has no newline."""
        rest, self.pending = self.pending, ""
        return [rest] if rest else []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default=os.environ.get("BZIMAGE"), help="bzImage")
    ap.add_argument("--module", action="append", default=[], help="module to put in the initramfs")
    ap.add_argument("--scenario", action="append", default=[], help="tests/scenarios/NAME.sh to run")
    ap.add_argument("--bin", action="append", default=[], help="static program to put in /bin")
    ap.add_argument("--script", action="append", default=[],
                    help="a consumer author's script, run in the VM by the consumer scenario "
                         "(tests/scenarios/consumer.sh) after nvrs is loaded")
    ap.add_argument("--consumer-module", action="append", default=[],
                    help="a consumer author's module: put in /lib/modules like --module, and "
                         "unloaded by the consumer scenario if the scripts left it loaded")
    ap.add_argument("--nvrs-params", default="",
                    help="extra nvrs module parameters for the consumer scenario")
    ap.add_argument("--plugin", help="a QEMU TCG plugin and its arguments (\"lib.so,arg=...\")")
    ap.add_argument("--gpu", action="append", default=[], help="emulated GPU CHIP[:MiB] (default GH100, GA100)")
    ap.add_argument("--model-gpu", action="append", default=[],
                    help="GPU model CHIP[:VRAM_MiB[:BAR1_MiB]] (default 1024 and 256); without "
                         "--gpu, the VM has no ivshmem GPUs")
    ap.add_argument("--qemu", default=None,
                    help="the QEMU binary (default qemu-system-x86_64; with --model-gpu, "
                         "$NVRS_QEMU, the one tests/bootstrap.sh qemu built)")
    ap.add_argument("--nvlink", action="store_true", help="declare an NVLink pair between GPU 0 and 1")
    ap.add_argument("--bad-gpus", action="store_true",
                    help="add two ivshmem devices nvrs must refuse: bad magic, unknown chip")
    ap.add_argument("--topology", choices=["switch", "root"], default="switch")
    ap.add_argument("--nvme", choices=["none", "switch", "rootport"], default="none",
                    help="QEMU's NVMe controller with a disk of pattern files: under the GPUs' "
                         "switch, or behind a root port of its own")
    ap.add_argument("--nvme-trace", choices=["on", "off"], default="on",
                    help="QEMU's trace of the NVMe controller's DMA (pci_nvme_map_addr), which "
                         "the storage scenario's host check reads (off: benchmarks)")
    ap.add_argument("--iommu", choices=["on", "off"], default="on",
                    help="emulated Intel IOMMU (default on): DMA through IOVAs, or bus addresses")
    ap.add_argument("--stall", type=int, default=600,
                    help="seconds without console output after which the VM counts as hung "
                         "(0: only --timeout)")
    ap.add_argument("--iommu-mode", choices=["strict", "lazy"], default="strict",
                    help="the guest's IOMMU invalidation (default strict, iommu.strict=1: every "
                         "unmap invalidates at once; lazy, Debian's default: batched)")
    ap.add_argument("--expect-suite", action="append", default=[], help="KUnit suite that must run")
    ap.add_argument("--mem", type=int, default=1024, help="guest MiB")
    ap.add_argument("--mem-prealloc", action="store_true",
                    help="back all guest RAM before boot (benchmarks: no host page faults on first touch)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds before the VM counts as hung")
    ap.add_argument("--kvm", action="store_true", help="use KVM (hangs in nested VMs; real hosts only)")
    ap.add_argument("--append", default="", help="extra kernel command line")
    ap.add_argument("--log", help="write the console log here")
    ap.add_argument("--show", choices=["none", "tap", "all"], default="tap",
                    help="what of the console to echo")
    ap.add_argument("--host-check", help="python file with check(gpus) run after the VM")
    ap.add_argument("--files", default=None,
                    help="directory for files scenarios send out (\"nvrs-file: NAME BASE64\" lines)")
    args = ap.parse_args()

    if not args.kernel or not os.path.exists(args.kernel):
        sys.exit("run.py: error: no kernel image (--kernel or $BZIMAGE)")
    specs = args.gpu or ([] if args.model_gpu else ["GH100", "GA100"])
    if args.qemu is None:
        args.qemu = os.environ.get("NVRS_QEMU") if args.model_gpu else "qemu-system-x86_64"
        if not args.qemu:
            sys.exit("run.py: error: --model-gpu needs the QEMU with the model "
                     "(--qemu, or $NVRS_QEMU from tests/bootstrap.sh qemu)")
    if not shutil.which(args.qemu):
        sys.exit(f"run.py: error: no QEMU at {args.qemu}")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    workdir = tempfile.mkdtemp(prefix="nvrs-vm-")
    gpus, models = [], []
    try:
        for i, spec in enumerate(specs):
            chip, size = parse_gpu_spec(spec)
            if chip not in CHIPS:
                sys.exit(f"run.py: error: unknown chip {chip} (known: {', '.join(CHIPS)})")
            peers = links = 0
            if args.nvlink and i < 2 and len(specs) >= 2:
                peers, links = 1 << (1 - i), 4
            path = os.path.join(shm, f"nvrs-{os.getpid()}-gpu{i}")
            gpus.append(Gpu(i, chip, size, path, peers, links))
        models = [ModelGpu(i, spec, os.path.join(shm, f"nvrs-{os.getpid()}-model{i}"))
                  for i, spec in enumerate(args.model_gpu)]
        if args.bad_gpus:
            n = len(gpus)
            gpus.append(Gpu(n, "GH100", 4 * MIB, os.path.join(shm, f"nvrs-{os.getpid()}-badmagic"),
                            magic=0x12345678))
            # Kepler GK110 (architecture 0x0f): older than any hwref table.
            gpus.append(Gpu(n + 1, "GH100", 4 * MIB, os.path.join(shm, f"nvrs-{os.getpid()}-kepler"),
                            boot42=0x0F0A1000))
        env = {"NVRS_GPUS": str(len(specs)), "NVRS_BAD_GPUS": "1" if args.bad_gpus else "0",
               "NVRS_TOPOLOGY": args.topology, "NVRS_NVLINK": "1" if args.nvlink else "0",
               "NVRS_IOMMU": args.iommu, "NVRS_IOMMU_MODE": args.iommu_mode,
               "NVRS_NVME": args.nvme,
               "NVRS_CHIPS": " ".join(parse_gpu_spec(s)[0] for s in specs),
               "NVRS_MODEL_GPUS": " ".join(m.describe() for m in models)}
        # Knobs of the fuzz and soak scenarios pass through from the host.
        env.update({k: v for k, v in os.environ.items()
                    if k.startswith(("NVRS_FUZZ_", "NVRS_SOAK_"))})
        if args.script:
            env["NVRS_CONSUMER_SCRIPTS"] = " ".join(os.path.basename(x) for x in args.script)
            env["NVRS_CONSUMER_MODULES"] = " ".join(
                os.path.basename(m).removesuffix(".ko").replace("-", "_")
                for m in args.consumer_module)
            env["NVRS_CONSUMER_PARAMS"] = args.nvrs_params
            if "consumer" not in args.scenario:
                args.scenario.append("consumer")
        initrd = build_initramfs(workdir, args.module + args.consumer_module, args.scenario, env,
                                 args.bin, args.script)
        storage = (Storage(workdir, args.nvme, trace=args.nvme_trace == "on")
                   if args.nvme != "none" else None)
        tests_out = os.path.join(workdir, "tests.out")

        def boot():
            """Boots the VM once; returns its console, whether it hung, its time and the
            checks of the GPUs' backing files."""
            open(tests_out, "wb").close()
            cmd = qemu_command(args, args.kernel, initrd, gpus, storage, tests_out, models)
            start = time.time()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE, start_new_session=True)
            backing = BackingCheck(gpus, storage, models)
            backing.require_spaces = "model" in args.scenario
            chunks, hung = [], False
            os.set_blocking(proc.stdout.fileno(), False)
            streams = [Lines(proc.stdout), Lines(open(tests_out, "rb"))]

            def take(ln):
                chunks.append(ln + "\n")
                if args.show == "all":
                    print(ln, flush=True)
                if backing.line(ln):
                    # The guest waits on its console for the check to be done.
                    proc.stdin.write(b"ok\n")
                    proc.stdin.flush()
                if args.show == "tap" and ("nvrs-tap:" in ln or "nvrs-demo:" in ln
                                           or ln.startswith(("bench:", "phases:"))):
                    print(TS.sub("", ln.strip("\r")).replace("nvrs-demo: ", ""), flush=True)

            deadline = start + args.timeout
            last_output = start
            kill_at = 0.0
            while True:
                got = False
                for st in streams:
                    for ln in st.poll():
                        take(ln)
                    got = got or st.got
                if not got:
                    if proc.poll() is not None:
                        break
                    time.sleep(0.05)
                now = time.time()
                if got:
                    last_output = now
                if not hung and (now > deadline or (args.stall and now - last_output > args.stall)):
                    # Hung: before the VM is killed, the kernel lists its blocked tasks and the
                    # CPUs' stacks (a break on the serial line, then SysRq w and l).
                    hung = True
                    chunks.append(f"\nvm-runner: no progress ({'timeout' if now > deadline else 'no output for %d s' % args.stall}), asking for SysRq w and l\n")
                    for key in (b"w", b"l"):
                        proc.stdin.write(b"\x01b" + key)
                        proc.stdin.flush()
                        time.sleep(1)
                    kill_at = now + 15
                if hung and now > kill_at:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
            for st in streams:
                for ln in st.poll() + st.rest():
                    take(ln)
            streams[1].f.close()
            console = "".join(chunks)
            elapsed = time.time() - start
            if args.log:
                with open(args.log, "w") as f:
                    f.write(console)
            return console, hung, elapsed, backing

        console, hung, elapsed, backing = boot()
        early = died_before_init(console)
        if early:
            # Nothing of the run had started: not a verdict on nvrs but on the boot (seen
            # under TCG: an int3 of the kernel's own text patching, at boot, in 1 of about 17
            # boots of the bench kernel). Once more, and said so.
            note = (f"vm: the kernel failed before the first scenario started ({early}); "
                    "booting once more")
            print(note, flush=True)
            if args.log:
                with open(args.log + ".boot1", "w") as f:
                    f.write(console)
            console, hung, elapsed, backing = boot()
        suites, scenarios, problems = parse_console(console)
        save_files(console, args.files)
        host_results = backing.finish()
        if args.host_check:
            ns = {}
            exec(compile(open(args.host_check).read(), args.host_check, "exec"), ns)
            host_results = ns["check"](gpus, console)
    finally:
        for g in gpus + models:
            try:
                os.unlink(g.path)
            except OSError:
                pass
        shutil.rmtree(workdir, ignore_errors=True)

    passed = failed = skipped = 0
    lines = []
    for name, (p, f, ok, sk) in sorted(suites.items()):
        good = f == 0 and ok is not False and (p > 0)
        lines.append(f"{'PASS' if good else 'FAIL'} kunit {name}: {p} passed, {f} failed, "
                     f"{sk} skipped")
        passed, failed = passed + p, failed + f + (0 if good or f else 1)
        skipped += sk
    for name in args.expect_suite:
        if name not in suites:
            lines.append(f"FAIL kunit {name}: did not run")
            failed += 1
    for name in args.scenario:
        p, f, done, which = scenarios.get(name, [0, 0, False, []])
        good = f == 0 and done and p > 0
        why = "" if done else " (did not reach done_testing)"
        lines.append(f"{'PASS' if good else 'FAIL'} scenario {name}: {p} passed, {f} failed{why}")
        # The failed checks by name: CI keeps only the end of the output.
        lines.extend(f"  {name}: {w}" for w in which[:5])
        passed, failed = passed + p, failed + f + (0 if good or f else 1)
    if "p2p" in args.scenario and not host_results:
        host_results = [("backing files: the p2p scenario logged no DMA to check", False)]
    for desc, ok in host_results:
        lines.append(f"{'PASS' if ok else 'FAIL'} host {desc}")
        passed, failed = passed + (1 if ok else 0), failed + (0 if ok else 1)
    ours, others = parse_kmemleak(console)
    if "Kernel memory leak detector disabled" in console:
        lines.append("FAIL kmemleak: the detector disabled itself")
        failed += 1
    elif "kmemleak-report: end" in console:
        if ours:
            for obj, comm in ours[:10]:
                lines.append(f"FAIL kmemleak: {obj} (comm {comm})")
            failed += 1
        else:
            lines.append(f"PASS kmemleak: no leak from the test's processes"
                         f" ({len(others)} from the kernel itself)")
            passed += 1
    elif kernel_has_kmemleak(args.kernel, console):
        # A scan that did not run found nothing, which is no verdict.
        said = re.findall(r"kmemleak-report: (unavailable|scan failed)", console)
        lines.append("FAIL kmemleak: no leak scan ran at the end of the run on a kernel with "
                     f"kmemleak ({said[-1] if said else 'the VM never got to it'})")
        failed += 1
    if hung:
        lines.append(f"FAIL vm: hung (no power-off within {args.timeout} s, or no output for {args.stall} s); the blocked tasks are in the log")
        failed += 1
    for p in problems[:10]:
        lines.append(f"FAIL kernel: {p}")
    if problems:
        failed += 1
    if "reboot: Power down" not in console and not hung:
        lines.append("FAIL vm: did not power off cleanly")
        failed += 1
    print("\n".join(lines))
    print(f"vm: {args.topology} topology, {len(specs)} emulated GPUs, {elapsed:.1f} s"
          + (f", log {args.log}" if args.log else ""))
    print(f"RESULT: {passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
