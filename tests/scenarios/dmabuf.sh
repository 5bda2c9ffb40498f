# SPDX-License-Identifier: GPL-2.0
#
# Scenario "dmabuf": GPU memory exported as a dma-buf and imported the way
# RDMA drivers import it for ibv_reg_dmabuf_mr(): by the kernel's own RDMA
# core (ib_umem_dmabuf_get*() in the test consumer), with edu as the DMA
# device. edu DMAs patterns into the addresses the RDMA core got; they are
# checked by DMA readback, through the CPU at the address the IOMMU
# translates them to, through CPU mappings of the allocation and of the
# dma-buf, and after the VM in the GPU's backing file. Then the lifetime
# rules (the dma-buf holds its memory past FREE and exit, SCM_RIGHTS), bad
# input, GPU hot-unplug with every kind of importer, and the P2P gate.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU0=$(nvrs_bound | sed -n 1p)
GPU1=$(nvrs_bound | sed -n 2p)
announce_apertures
if [ "$NVRS_IOMMU" = on ]; then TRANSLATED=1; else TRANSLATED=0; fi

# --- 1. The round trip, with each kind of RDMA importer ----------------------
tool "pinned import (efa, bnxt_re, mana_ib): edu DMA through the RDMA core's addresses" \
	alloc A 0 4M \; export A 0 4M \; ctl dbget 0 %A 0 0x400000 pinned \; \
	ctl dbdma 0 0 0x51510000 \; ctl dbdma 0 0x210000 0x52520000 \; sh "$HOSTSYNC" \; \
	rd A 0 0x51510000 \; dbrd A 0x210004 0x52520001 \; stats 0 \; ctl dbstatus 0 \; \
	ctl dbput 0 \; close A \; free A
check "  the DMA addresses are IOVAs exactly when the IOMMU is on" \
	sh -c "test \$(grep -c 'dbdma ok .* translated $TRANSLATED\$' /tmp/tool.out) = 2"
check "  one sg entry per 64 KiB segment (edu's maximum): 64 for 4 MiB" \
	grep -q "^dbget pinned entries 64 " /tmp/tool.out
check "  NVRS_IOCTL_GPU_STATS counts the dma-buf and its mapping" \
	grep -qE "^stats gpu 0 version 4 .* dmabufs 1 dmabuf_mappings 1 " /tmp/tool.out
tool "revocable import (irdma) on GPU1, offset into the dma-buf" \
	alloc A 1 2M \; export A 0x100000 1M \; ctl dbget 1 %A 0x10000 0x80000 revocable \; \
	ctl dbdma 1 0x800 0x53530000 \; sh "$HOSTSYNC" \; rd A 0x110800 0x53530000 \; \
	ctl dbput 1 \; ctl dbstatus 1 \; close A \; free A
check "  releasing it ran its revoke callback once" \
	grep -q "import 1 live 0 invalidations 1 " /tmp/tool.out
tool "dynamic import (mlx5 on-demand paging) of a contiguous allocation" \
	alloc A 0 8M contig \; export A 0 8M \; ctl dbget 2 %A 0 0x800000 dynamic \; \
	ctl dbdma 2 0x7ff000 0x54540000 \; sh "$HOSTSYNC" \; dbrd A 0x7ff000 0x54540000 \; \
	ctl dbput 2 \; close A \; free A
check "  a contiguous run split at edu's 64 KiB maximum segment" \
	grep -q "^dbget dynamic entries 128 " /tmp/tool.out
tool "CPU writes through the dma-buf's mapping are what the importer's DMA reads" \
	alloc A 1 2M \; export A 0 2M \; dbwr A 0x30000 0x5a5a0001 \; rd A 0x30000 0x5a5a0001 \; \
	ctl dbget 0 %A 0 0x200000 pinned \; ctl dbdma 0 0x30000 0x55550000 \; sh "$HOSTSYNC" \; \
	dbrd A 0x30000 0x55550000 \; ctl dbput 0 \; close A \; free A

# The same pages DMA-mapped nine times for one peer: nine attachments of edu,
# each mapping the whole export. DMA-API debug counts overlapping mappings per
# cacheline and warns past seven, unless the mapping says its cachelines may
# overlap (the aperture is MMIO: no CPU cache holds it).
dmesg_mark
tool "one export mapped nine times at once for edu" \
	alloc A 0 2M \; export A 0 2M \; ctl dbmulti %A 9 \; close A \; free A
check "  all nine imports were mapped" grep -q "^dbmulti 9 imports first " /tmp/tool.out
if [ -e /sys/kernel/debug/dma-api/disabled ]; then
	check "  DMA-API debug is on (so it would have complained)" \
		grep -qx N /sys/kernel/debug/dma-api/disabled
	expect_eq "  and it did not complain about overlapping mappings" 0 \
		"$(dmesg_new | grep -c 'DMA-API\|overlapping mappings')"
fi

# --- 2. Lifetime ---------------------------------------------------------------
tool "the dma-buf holds its memory past FREE of the VA; closing it frees the memory" \
	alloc A 0 2M \; wr A 0x1000 0xabcd0001 \; export A 0 2M \; free A \; \
	!ENOENT mmap A rw shared \; dbrd A 0x1000 0xabcd0001 \; stats 0 \; close A \; stats 0
check "  2 MiB still used after FREE, while the dma-buf is open" \
	grep -qE "^stats gpu 0 version 4 fb_total [0-9]+ fb_used 2097152 .* dmabufs 1 " /tmp/tool.out
check "  nothing used once it is closed" \
	grep -qE "^stats gpu 0 version 4 fb_total [0-9]+ fb_used 0 .* dmabufs 0 " /tmp/tool.out
tool "an importer keeps the memory past its owner's exit" \
	alloc A 0 2M \; export A 0 2M \; ctl dbget 3 %A 0 0x200000 pinned
# Read the free bytes and compare: "not all free" must not pass on a missing file.
free0=$(sed -n 's/^free_bytes: \([0-9]*\).*/\1/p' $D/$GPU0/pmm/stats)
check "  the memory is still allocated after the exit (2 MiB of GPU0 not free)" \
	test "$((${free0:-0} + 2097152))" = "$(fb_total $GPU0)"
tool "  edu still DMAs into it from another process" ctl dbdma 3 0x10000 0x56560000 \; sh "$HOSTSYNC" \; \
	ctl dbput 3
check "  the release of the import returned it" \
	grep -q "^free_bytes: $(fb_total $GPU0)\$" $D/$GPU0/pmm/stats
tool "a dma-buf passed to another process (SCM_RIGHTS) maps and imports there" \
	alloc A 1 2M \; wr A 0x2000 0x5c5c0001 \; export A 0 2M \; \
	sendfd A dbrd A 0x2000 0x5c5c0001 \; sendfd A ctl dbget 4 %A 0 0x200000 pinned \; close A \; \
	free A \; ctl dbdma 4 0 0x57570000 \; sh "$HOSTSYNC" \; ctl dbput 4
check "  the child got the descriptor over the socket" grep -q "child got dma-buf descriptor" /tmp/tool.out
tool "a dma-buf of freed and re-allocated memory is never someone else's" \
	alloc A 0 2M \; export A 0 2M \; dbwr A 0 0x77770001 \; free A \; alloc B 0 2M \; \
	rd B 0 0 \; dbrd A 0 0x77770001 \; close A \; free B

# --- 3. Bad input ----------------------------------------------------------------
tool "export: zero, unaligned, overflowing or out-of-allocation ranges, flags, fd" \
	alloc A 0 2M \; !EINVAL export A 0 0 \; !EINVAL export A 0x1000 64K \; \
	!EINVAL export A 0 0x11000 \; !ENOENT export A 0 4M \; !ENOENT export A 0x1f0000 128K \; \
	!EINVAL export A 0 64K 1 \; !EINVAL exportva 0x200000000 64K 0 7 \; \
	!EINVAL exportva 0xffffffffffff0000 128K 0 0 \; !ENOENT exportva 0x10000 64K 0 0 \; \
	!ENOENT foreign A 64K \; !EPERM child export A 0 64K \; !ENOTTY raw 0xc018e5ff 0 \; \
	!EFAULT raw 0xc018e505 0x10 \; free A \; !ENOENT export A 0 64K
tool "export needs a file opened for writing" alloc A 0 64K \; rdonly \; !EBADF export A 0 64K
tool "dma-buf mmap: private and executable mappings refused, read-only allowed" \
	alloc A 0 2M \; export A 0 2M \; dbmmap A r shared \; !EINVAL dbmmap A rw private \; \
	!EPERM dbmmap A rwx shared \; close A \; free A
tool "importers that cannot do peer-to-peer DMA are refused (-EOPNOTSUPP)" \
	alloc A 0 2M \; export A 0 2M \; ctl dbbad %A \; close A \; free A
# Four lines, all ok: no FAIL in an empty reply is no result.
check "  every line of the matrix" sh -c \
	"test \$(grep -cE '^ok (static importer|dynamic importer|importer that|range past)' /tmp/tool.out) = 4 && \
	 ! grep -q FAIL /tmp/tool.out"

# --- 4. GPU hot-unplug with importers of every kind -------------------------------
dmesg_mark
tool "GPU1 removed under a revocable, a dynamic and a pinned importer and a CPU mapping" \
	alloc A 1 2M \; export A 0 2M \; ctl dbget 5 %A 0 0x200000 revocable \; \
	ctl dbget 6 %A 0 0x200000 dynamic \; ctl dbget 7 %A 0 0x100000 pinned \; dbkeep A \; \
	ctl dbdma 6 0 0x58580000 \; sh "$HOSTSYNC" \; ctl dbstatus 5 \; \
	sh "echo 1 > /sys/bus/pci/devices/$GPU1/remove" \; \
	ctl dbstatus 5 \; ctl dbstatus 6 \; ctl dbstatus 7 \; !ENODEV ctl dbdma 5 0 0x59590000 \; \
	!ENODEV ctl dbdma 6 0 0x59590000 \; !EFAULT dbfault A 0x1000 \; \
	sh "cat $D/p2p" \; sh "echo 1 > /sys/bus/pci/rescan" \; !EBUSY alloc B 1 64K \; \
	ctl dbput 5 \; ctl dbput 6 \; ctl dbput 7 \; alloc B 1 2M \; free B \; close A
check "  before: the revocable import is mapped" grep -qE "^import 5 live 1 invalidations 0 mapped 1 " /tmp/tool.out
check "  revocable: revoked once, unmapped" \
	grep -qE "^import 5 live 1 invalidations 1 mapped 0 " /tmp/tool.out
check "  dynamic: invalidated once, unmapped, and mapping again fails" \
	grep -qE "^import 6 live 1 invalidations 1 mapped 0 " /tmp/tool.out
if [ "$NVRS_IOMMU" = on ]; then
	check "  their IOVAs are gone from edu's IOMMU domain (no DMA to stale IOVAs)" sh -c \
		"grep -qE '^import 5 .* iova_translated 0$' /tmp/tool.out && \
		 grep -qE '^import 6 .* iova_translated 0$' /tmp/tool.out"
fi
check "  pinned: keeps its mapping" grep -qE "^import 7 live 1 invalidations 0 mapped 1 " /tmp/tool.out
expect_eq "  one dmesg line names the pinned importer that holds the memory" 1 \
	"$(dmesg_new | grep -c '1 dma-buf mappings of pinned importers cannot be revoked')"
check "  GPU1 is back" test -e /sys/bus/pci/drivers/nvrs/$GPU1
check "  the pinned importer's release returned the memory (the dma-buf was still open)" \
	grep -q "^alloc B va .* size 2097152" /tmp/tool.out

# --- 5. The P2P gate ------------------------------------------------------------
check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
check "no dma-buf left" grep -qx "dmabufs: 0" $D/p2p
check "rmmod nvrs" rmmod nvrs
check "insmod nvrs p2p_topology=2 (deny every path)" \
	insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 p2p_topology=2
check "insmod consumer" insmod $M/nvrs_consumer.ko
tool "an importer on a path the gate refuses is refused (-EOPNOTSUPP)" \
	alloc A 0 2M \; export A 0 2M \; !EOPNOTSUPP ctl dbget 0 %A 0 0x200000 pinned \; \
	!EOPNOTSUPP ctl dbget 1 %A 0 0x200000 dynamic \; close A \; free A
check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
check "rmmod nvrs" rmmod nvrs

# --- 6. dmabuf_revocable_only: vfio-pci's policy, for administrators who want it ----
check "insmod nvrs dmabuf_revocable_only=1" \
	insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 dmabuf_revocable_only=1
check "insmod consumer" insmod $M/nvrs_consumer.ko
tool "only importers that can be revoked may attach" \
	alloc A 0 2M \; export A 0 2M \; !EOPNOTSUPP ctl dbget 0 %A 0 0x200000 pinned \; \
	ctl dbget 1 %A 0 0x200000 revocable \; ctl dbget 2 %A 0 0x200000 dynamic \; \
	ctl dbput 1 \; ctl dbput 2 \; close A \; free A
check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
check "rmmod nvrs" rmmod nvrs
done_testing
