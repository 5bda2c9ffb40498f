# SPDX-License-Identifier: GPL-2.0
#
# Scenario "demo": show nvrs at work on the emulated GPUs. Lines prefixed
# with "nvrs-demo:" are what `make demo` prints.

. /scenarios/lib.sh

show() {
	while IFS= read -r l; do demo "  $l"; done
}

demo "== PCI functions (vendor:device class) =="
for d in /sys/bus/pci/devices/*; do
	echo "$(basename $d) $(cat $d/vendor | cut -c3-):$(cat $d/device | cut -c3-) class $(cat $d/class)"
done | grep -E '1af4:1110|1234:11e8' | show
demo "== IOMMU =="
dmesg | grep -E 'DMAR: IOMMU enabled' | sed 's/^\[[ 0-9.]*\] //' | show

dmesg_mark
demo "== insmod nvrs.ko emulated=1 =="
insmod /lib/modules/nvrs.ko emulated=1 peer_device=0x123411e8
dmesg_new | grep -E '^\[[ 0-9.]*\] nvrs' | sed 's/^\[[ 0-9.]*\] //' | show
n=$(nvrs_bound | wc -l)
demo "== $n GPUs bound; /sys/kernel/debug/nvrs/<device>/info =="
for bdf in $(nvrs_bound); do
	demo "-- $bdf --"
	show </sys/kernel/debug/nvrs/$bdf/info
done
check "demo: $n GPUs bound" test "$n" -ge 1
demo "== /sys/kernel/debug/nvrs/topology =="
show </sys/kernel/debug/nvrs/topology

demo "== GPUDirect RDMA: a process allocates 4 MiB on GPU0; the consumer module (an RDMA-driver"
demo "   stand-in on QEMU's edu) pins 2 MiB of it, DMA-maps it through the IOMMU, and edu writes"
demo "   2 KiB into GPU memory by DMA, checked by DMA readback and through the CPU =="
insmod /lib/modules/nvrs_consumer.ko
announce_apertures
nvrs-tool alloc A 0 4M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; ctl dma 0 0x1000 0xc0ffee00 \; \
	sh "$HOSTSYNC" \; sh "cat /sys/kernel/debug/nvrs/p2p" \; free A \; ctl status 0 2>&1 | show
check "demo: pin, map and DMA" nvrs-tool alloc A 0 2M \; ctl pin 1 @A 0x10000 \; ctl put 1
demo "== The upstream path (ibv_reg_dmabuf_mr): the process exports 2 MiB of GPU1 memory as a"
demo "   dma-buf; the consumer imports it through the kernel's RDMA core"
demo "   (ib_umem_dmabuf_get_pinned_with_dma_device, DMA device edu), edu writes into the"
demo "   addresses the RDMA core got, and the process reads it through the dma-buf's mmap =="
nvrs-tool alloc A 1 2M \; export A 0 2M \; ctl dbget 0 %A 0 0x200000 pinned \; \
	ctl dbdma 0 0x2000 0xd0abf000 \; sh "$HOSTSYNC" \; dbrd A 0x2000 0xd0abf000 \; \
	sh "grep dmabuf /sys/kernel/debug/nvrs/p2p" \; ctl dbput 0 \; close A \; free A \
	>/tmp/demo-dmabuf.out 2>&1
show </tmp/demo-dmabuf.out
check "demo: dma-buf round trip" grep -q "dbdma ok" /tmp/demo-dmabuf.out
demo "== Storage into GPU memory: a 64 MiB file on an NVMe disk (ext4) read with O_DIRECT"
demo "   straight into an NVRS_ALLOC_P2PDMA allocation of GPU0 (the NVMe controller DMAs into the"
demo "   GPU's BAR, no bounce through system memory), checked through the CPU mapping =="
if storage_setup; then
	nvrs-tool alloc A 0 64M contig p2pdma \; dio read A /mnt/s64m 0 64M \; dcmp A /mnt/s64m 0 64M \; \
		stats 0 \; free A 2>&1 | grep -E '^(dio|dcmp|stats p2pdma)' >/tmp/demo-storage.out
	show </tmp/demo-storage.out
	check "demo: O_DIRECT read into GPU memory" grep -q "^dcmp 67108864 bytes match" /tmp/demo-storage.out
	umount /mnt
else
	not_ok "demo: the NVMe disk"
fi
demo "== Isolation: a process writes a secret into GPU memory and frees it: its stale CPU"
demo "   mapping now faults (SIGBUS), and the next allocation of that memory reads zeros =="
nvrs-tool alloc A 1 2M \; wr A 0x100 0x5ec12e75 \; !EFAULT usefree A \; alloc B 1 2M \; \
	rd B 0x100 0 2>&1 | show
demo "== nvrs-smi, while a process holds memory: 8 MiB contiguous, 6 MiB in 2 MiB chunks,"
demo "   forty 64 KiB allocations (half of them freed again), 2 MiB pinned for edu =="
nvrs-tool alloc A 0 8M contig \; alloc B 0 6M \; frag 0 40 \; alloc C 0 2M \; \
	ctl pin 2 @C 0x200000 \; \
	sh "nvrs-smi >/tmp/smi.txt; nvrs-smi topo -m >/tmp/topo.txt" \; \
	sh "nvrs-smi pmm -i 0 --no-color --output /tmp/pmm.svg >/tmp/pmm.txt" \; \
	ctl put 2 >/tmp/demo-smi.out 2>&1
show </tmp/smi.txt
demo "== nvrs-smi topo -m =="
show </tmp/topo.txt
demo "== nvrs-smi pmm -i 0 (the memory manager's roots; written as SVG too) =="
show </tmp/pmm.txt
send_file /tmp/pmm.svg demo-pmm-map.svg
check "demo: nvrs-smi" grep -q "GH100" /tmp/smi.txt
first=$(nvrs_bound | head -n1)
demo "== /sys/kernel/debug/nvrs/$first/pmm/stats =="
show </sys/kernel/debug/nvrs/$first/pmm/stats
rmmod nvrs_consumer
demo "== rmmod nvrs =="
check "demo: rmmod nvrs" rmmod nvrs
demo "  nvrs unloaded; debugfs entries left: $(ls /sys/kernel/debug/nvrs 2>/dev/null | wc -l)"

# The GPU model (tests/model/): an NVIDIA function whose BAR1 is a window
# smaller than its memory, translated through page tables.
set -- $NVRS_MODEL_GPUS
if [ $# -gt 0 ]; then
	model_fields "$1"
	bdf=$(pci_functions 0x10de 0x$dev | head -n1)
	demo "== The GPU model: $bdf, 10de:$dev ($chip), $vram MiB of VRAM behind a $bar1 MiB BAR1 =="
	dmesg_mark
	insmod /lib/modules/nvrs.ko bind_nvidia=1
	dmesg_new | grep -E '^\[[ 0-9.]*\] nvrs' | sed 's/^\[[ 0-9.]*\] //' | show
	demo "-- what nvrs set up (debugfs info) --"
	grep -E '^(chip|backend|identified_by|aperture|vram|bar1_[a-z_]*|mmu_format):' \
		/sys/kernel/debug/nvrs/$bdf/info | show
	check "demo: nvrs set up the model's BAR1" \
		grep -qx "bar1_selftest: passed" /sys/kernel/debug/nvrs/$bdf/info
	demo "-- BAR1 with nothing mapped: a read faults (all-ones, counted by the model) --"
	if nvrs-model-test $bdf unmapped 0x0 2>&1; then
		demo "  BAR1 0x0 read 0xffffffff, one fault counted"
		ok "demo: an unmapped BAR1 read faults"
	else
		not_ok "demo: an unmapped BAR1 read faults"
	fi
	demo "-- a 4 MiB pin: get_pages maps it into BAR1; edu DMAs to its BAR1 addresses --"
	insmod /lib/modules/nvrs_consumer.ko
	# The runner finds each pattern in the VRAM file through BAR1's tables.
	base=$(printf '0x%x' $(($(sed -n 2p /sys/bus/pci/devices/$bdf/resource | cut -d' ' -f1))))
	echo "nvrs-hostcheck: bar1 0 $base $(sed -n 's/^bar1_instance_block: //p' /sys/kernel/debug/nvrs/$bdf/info)"
	echo "nvrs-hostcheck: bar1-patterns 0 4"
	tx() {
		nvrs-smi --json -i $bdf | sed -n "s/.*\"bar1_$1\": \([0-9]*\).*/\1/p" | head -n1
	}
	rx0=$(tx rx) tx0=$(tx tx)
	nvrs-tool alloc A 0 4M \; ctl pin 0 @A 0x400000 \; ctl map 0 \; \
		sh "nvrs-smi dmon -c 2 -d 1 -s tm -i $bdf >/tmp/dmon.txt 2>&1 &" \; \
		ctl dma 0 0 0x11110000 \; ctl dma 0 0x10000 0x22220000 \; \
		ctl dma 0 0x210000 0x33330000 \; ctl dma 0 0x3f0000 0x44440000 \; \
		sh "$HOSTSYNC" \; \
		sh "grep -E '^bar1_(mapped|exhausted)|^copy_engine' /sys/kernel/debug/nvrs/$bdf/info" \; \
		sh "sleep 3" \; ctl put 0 \; free A >/tmp/demo-pin.txt 2>&1
	pinned=$?
	grep -E '^pinned|^dma ok|^bar1_|^copy_engine' /tmp/demo-pin.txt | show
	demo "  BAR1 traffic the model counted: $(($(tx rx) - rx0)) bytes in, $(($(tx tx) - tx0)) out (edu's DMA: 2 KiB each way per pattern, and the CPU's readback)"
	demo "-- nvrs-smi dmon -s tm while pinned (fb and bar1 MiB in use) --"
	show </tmp/dmon.txt
	expect_eq "demo: a pin through BAR1, DMAed by edu" 0 $pinned
	demo "  after the put: $(sed -n 's/^bar1_mapped: /BAR1 mapped /p' /sys/kernel/debug/nvrs/$bdf/info)"
	rmmod nvrs_consumer
	check "demo: rmmod nvrs (model)" rmmod nvrs
fi
done_testing
