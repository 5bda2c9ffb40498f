# SPDX-License-Identifier: GPL-2.0
#
# Scenario "storage": NVMe O_DIRECT reads and writes straight into and out of
# GPU memory (an allocation made with NVRS_ALLOC_P2PDMA: src/mem/p2pdma.rs),
# with QEMU's nvme (run.py --nvme; tests/vm/storage.py makes its ext4 disk of
# pattern files and checks on the host what landed where).
#
# Under the GPUs' PCIe switch (--nvme switch): read() and io_uring reads of
# 4 KiB to 64 MiB, checked in the guest and in the GPU's backing file on the
# host; writes from GPU memory, checked in the disk image after the VM;
# QEMU's trace of the controller's DMA must reach the GPU's BAR (no bounce
# through system memory). Misaligned requests get EINVAL, a mapping without
# struct pages EFAULT. Then the isolation rules: a FREE racing an in-flight
# read waits for it (the memory handed out next reads zero once the read is
# over), compaction never moves a P2PDMA allocation, an unbind during a read
# waits for it, another process never sees the bytes, and p2pdma=0 refuses
# the flag with EOPNOTSUPP.
#
# Behind a root port of its own (--nvme rootport): the kernel's P2PDMA
# refuses the path (q35's host bridge is not on its list), and the reader
# gets EINVAL; the bounce path still works.

. /scenarios/lib.sh
M=/lib/modules
T=/sys/kernel/debug/nvrs

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
GPU0=$(nvrs_bound | sed -n 1p)
GPU1=$(nvrs_bound | sed -n 2p)
for g in $GPU0 $GPU1; do
	check "$g is a P2PDMA provider" grep -q "^p2pdma: provider, 0 B in allocations" $T/$g/info
done
check "the P2PDMA resource was added (dmesg)" sh -c "dmesg | grep -q '$GPU0: added peer-to-peer DMA memory'"
# The kernel's P2PDMA pool of the GPU is nvrs's alone: its sysfs file that
# maps pages of the pool (root, 0660) is gone, and nothing of it is available.
check "the pool's sysfs 'allocate' file is gone, nothing is available in the pool" sh -c \
	"test -e /sys/bus/pci/devices/$GPU0/p2pmem/size && ! test -e /sys/bus/pci/devices/$GPU0/p2pmem/allocate &&
	 [ \$(cat /sys/bus/pci/devices/$GPU0/p2pmem/available) = 0 ]"
check "insmod consumer" insmod $M/nvrs_consumer.ko

# took PREFIX: milliseconds between the uptimes in PREFIX.start and PREFIX.end
# (-1 if either is missing, which no check accepts).
took() {
	awk 'NR == FNR { s = $1; next } { printf "%d\n", ($1 - s) * 1000 }' $1.start $1.end 2>/dev/null ||
		echo -1
}

check "two NVMe controllers: the ext4 disk and the throttled raw one; the disk mounted" storage_setup
diag "disk $DISK, throttled disk $SLOW"

if [ "$NVRS_NVME" = rootport ]; then
	tool "across root ports the kernel refuses the path: read() and io_uring get EINVAL; the bounce path works" \
		alloc A 0 1M contig p2pdma \; !EINVAL dio read A /mnt/s1m 0 1M \; \
		!EINVAL uring read A /mnt/s1m 0 1M \; !EINVAL dio write A /mnt/out1 0 1M \; \
		bounce read A /mnt/s1m 0 1M \; dcmp A /mnt/s1m 0 1M \; free A
	check "  no IOMMU fault: nothing was sent" sh -c "! dmesg | grep -q 'DMAR: \[DMA'"
	check "umount" umount /mnt
	check_all_returned
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
	done_testing
	exit 0
fi

announce_apertures

# Reads of every size, with read() and io_uring: in the guest through the CPU
# mapping, and on the host in the GPU's backing file, while still allocated.
for f in s4k:4K s64k:64K s1m:1M s8m:8M s64m:64M; do
	name=${f%:*}
	size=${f#*:}
	tool "O_DIRECT read() of $name ($size) into GPU memory" \
		alloc A 0 64M contig p2pdma \; dio read A /mnt/$name 0 $size \; \
		dcmp A /mnt/$name 0 $size \; sh "echo nvrs-hostcheck: storage-in $name >$NVRS_OUT" \; \
		sh "$HOSTSYNC" \; free A
done
tool "io_uring reads of s1m and s64m into GPU memory" \
	alloc A 0 64M contig p2pdma \; uring read A /mnt/s1m 0 1M \; dcmp A /mnt/s1m 0 1M \; \
	uring read A /mnt/s64m 0 64M \; dcmp A /mnt/s64m 0 64M \; free A
check "  the info file counted the allocation and let go of it" grep -q "^p2pdma: provider, 0 B in allocations, 0 B stuck" $T/$GPU0/info
tool "GPU_STATS and nvrs-smi -q show the provider and the bytes in use" \
	alloc A 0 64M contig p2pdma \; alloc B 0 2M \; stats 0 \; sh "nvrs-smi -q -i 0" \; free A \; free B
check "  GPU_STATS: provider, 64 MiB" grep -qx "stats p2pdma state 1 bytes 67108864" /tmp/tool.out
check "  nvrs-smi -q: provider, 64 MiB in use" sh -c \
	"grep -qE '^ +Provider +: Yes$' /tmp/tool.out && grep -qE '^ +In Use +: 64 MiB$' /tmp/tool.out"

# Writes out of GPU memory: what was read in goes back out to new files,
# checked in the disk image on the host after the VM.
tool "O_DIRECT write() and io_uring write out of GPU memory" \
	alloc A 0 64M contig p2pdma \; dio read A /mnt/s64m 0 64M \; dio write A /mnt/w64m 0 64M \; \
	dio read A /mnt/s1m 0 1M \; uring write A /mnt/u1m 0 1M \; free A
check "  the files are on the disk" sh -c "sync && cmp -s /mnt/w64m /mnt/s64m && cmp -s /mnt/u1m /mnt/s1m"
echo "nvrs-hostcheck: storage-out w64m s64m"
echo "nvrs-hostcheck: storage-out u1m s1m"
# QEMU's trace of the controller's DMA must reach 64 MiB of GPU memory.
echo "nvrs-hostcheck: storage-direct 67108864"

# Bad requests: the block layer's alignment rules, a mapping without struct
# pages, a GPU without them.
tool "misaligned O_DIRECT requests get EINVAL; a plain allocation's mapping EFAULT" \
	alloc A 0 1M contig p2pdma \; !EINVAL dio read A /mnt/s1m 0 64K 1 \; \
	!EINVAL dio read A /mnt/s1m 1 64K \; !EINVAL dio read A /mnt/s1m 0 1000 \; \
	!EINVAL uring read A /mnt/s1m 0 64K 2 \; dio read A /mnt/s1m 0 64K 512 \; \
	dcmp A /mnt/s1m 0 64K 512 \; alloc B 0 1M \; !EFAULT dio read B /mnt/s1m 0 1M \; \
	bounce read B /mnt/s1m 0 1M \; dcmp B /mnt/s1m 0 1M \; free A \; free B

# Isolation 1: a FREE racing an in-flight read (of the throttled disk: 4 s).
# The FREE waits until the block layer let go of every page; the memory
# handed out right after (the same chunks) stays zero once the read is over.
FB1=$(fb_total $GPU1)
tool "a FREE during a 64 MiB read waits for it; the next owner's memory stays zero" \
	alloc A 1 64M contig p2pdma \; bgdio read A $SLOW 0 64M \; sleep 300 \; \
	sh "cut -d' ' -f1 /proc/uptime >/tmp/free.start" \; free A \; sh "cut -d' ' -f1 /proc/uptime >/tmp/free.end" \; \
	join \; alloc B 1 64M contig \; sleep 5000 \; zero B \; free B
FREE_MS=$(took /tmp/free)
diag "the FREE took $FREE_MS ms"
check "  the FREE waited for the read (at least a second)" test "$FREE_MS" -ge 1000
check "  no page was left behind" grep -q "^p2pdma: provider, 0 B in allocations, 0 B stuck" $T/$GPU1/info
# The same with a persistent pin on the memory, put by another process while
# the FREE still waits for the read: the memory goes back once, after the
# read, and all of it.
tool "a persistent pin put while a FREE waits for a read: the memory goes back after the read" \
	alloc A 1 64M contig p2pdma \; ctl ppin 0 @A 0x10000 \; bgdio read A $SLOW 0 64M \; sleep 300 \; \
	sh "(sleep 1; nvrs-tool ctl put 0 >/tmp/put.out 2>&1) &" \; free A \; join \; sh "sleep 1" \; \
	alloc B 1 64M contig \; sleep 5000 \; zero B \; free B
check "  the other process's put worked" grep -q "^ok ctl" /tmp/put.out
check "  no chunk was freed with a pin on it" sh -c "! dmesg | grep -q 'freed with .* P2P pins'"
check "  all of GPU1's memory is free again" sh -c \
	"grep -q \"^free_bytes: $FB1\$\" $T/$GPU1/pmm/stats"

# Isolation 2: another process never sees the bytes.
tool "process 1 reads s64m into GPU1" alloc A 1 64M contig p2pdma \; dio read A /mnt/s64m 0 64M \; free A
tool "  process 2 allocates all of GPU1 and reads only zeros" alloc B 1 $FB1 \; zero B \; free B

# Isolation 3: compaction never moves P2PDMA memory. A 2 MiB allocation after
# 64 MiB that are freed again sits between free roots; making every free root
# contiguous has to move it. A plain one moves; a P2PDMA one does not, and the
# compaction finds no plan (ENOMEM).
ROOTS=$((FB1 / 2097152 - 1))
tool "compaction moves a plain allocation to make $ROOTS roots contiguous" \
	alloc A 1 64M \; alloc B 1 2M \; free A \; benchwrite $T/$GPU1/compact $ROOTS \; free B
tool "  but not a P2PDMA one: no plan (ENOMEM)" \
	alloc A 1 64M \; alloc B 1 2M p2pdma \; free A \; !ENOMEM benchwrite $T/$GPU1/compact $ROOTS \; \
	dio read B /mnt/s1m 0 1M \; dcmp B /mnt/s1m 0 1M \; free B

# Isolation 4: an unbind during a read waits until the block layer let go.
tool "GPU1 unbound during a 64 MiB read: the unbind waits for it" \
	alloc A 1 64M contig p2pdma \; bgdio read A $SLOW 0 64M \; sleep 300 \; \
	sh "cut -d' ' -f1 /proc/uptime >/tmp/unbind.start" \; \
	sh "timeout 120 sh -c 'echo $GPU1 > /sys/bus/pci/drivers/nvrs/unbind'; echo unbind \$?" \; \
	sh "cut -d' ' -f1 /proc/uptime >/tmp/unbind.end" \; join
check "  the unbind returned" grep -qx "unbind 0" /tmp/tool.out
UNBIND_MS=$(took /tmp/unbind)
diag "the unbind took $UNBIND_MS ms"
check "  the unbind waited for the read (at least a second)" test "$UNBIND_MS" -ge 1000
check "  nothing was stuck" sh -c "! dmesg | grep -q 'still held by I/O'"
echo "$GPU1" >/sys/bus/pci/drivers/nvrs/bind
check "  GPU1 bound again" test -e /sys/bus/pci/drivers/nvrs/$GPU1
tool "  all of GPU1 reads zero for the next owner" alloc B 1 $FB1 \; zero B \; free B

check "umount" umount /mnt
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# p2pdma=0: no struct pages; the flag is refused and nothing else changes.
check "insmod nvrs p2pdma=0" insmod $M/nvrs.ko emulated=1 p2pdma=0
check "  no provider" grep -qx "p2pdma: none" $T/$(nvrs_bound | sed -n 1p)/info
tool "  GPU_STATS and nvrs-smi say so" stats 0 \; sh "nvrs-smi -q -i 0"
check "    GPU_STATS: none" grep -qx "stats p2pdma state 0 bytes 0" /tmp/tool.out
check "    nvrs-smi -q: no provider" grep -qE '^ +Provider +: No$' /tmp/tool.out
tool "  NVRS_ALLOC_P2PDMA gets EOPNOTSUPP; a plain allocation works" \
	!EOPNOTSUPP alloc A 0 1M p2pdma \; alloc A 0 1M \; free A
check_all_returned
check "rmmod nvrs" rmmod nvrs
check "no splat" sh -c "! dmesg | grep -qE 'WARNING:|BUG:|Oops'"
done_testing
