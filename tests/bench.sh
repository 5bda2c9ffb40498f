#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: benchmarks, not tests (nothing here can fail on a time). Prints
#   bench: <name> nvrs=<ns/op>ns anchor=<ns/op>ns ratio=<anchor/nvrs> <fields>...
# with the anchor measured in the same run:
#   - host: the memory manager's core against the kernel's own gpu_buddy
#     (drivers/gpu/buddy.c of the kernel source, built for user space by
#     tests/host/build.rs at -O2), natively, Rust at the kernel's opt-level 2
#     with overflow checks (tests/host/Cargo.toml); each trace 5 rounds on
#     fresh allocators, alternating which side goes first, the median and
#     min/max of each side, the allocations each side answered and refused
#     (same_work=no if they differ), the largest free block and the metadata
#     bytes of each after the trace (the buffers trace also the bytes held
#     for block lists and wasted by rounding); the fragmentation lines
#     (frag_*) give the success of 2 MiB and 8 MiB contiguous requests with
#     nvrs's compaction on and off against gpu_buddy, and with compaction
#     against gpu_buddy under TTM-style LRU eviction (src/bench/frag.rs);
#   - VM (one boot, TCG, IOMMU on, 2 GiB per emulated GPU): the same traces
#     against the kernel's gpu_buddy; get_pages + put_pages against
#     pin_user_pages + unpin of as many bytes of system memory (fields: the
#     cost per entry, 64 KiB against 4 KiB pages, and per MiB of each side),
#     64 KiB of the same VA and of 16384 VAs in turn, and 256 KiB to 1 GiB;
#     dma_map_pages against one dma_map_resource per physically contiguous
#     run (anchor) and per 64 KiB entry (anchor_per64k), 64 KiB to 1 GiB
#     (fields: entries, runs, ns per entry and per run). The p2p lines run
#     5 rounds alternating which side goes first, and give each side's median
#     and its min/max, and the median, min and max of the rounds' paired
#     ratios (ratio_paired: round i's anchor over round i's nvrs). A
#     "phases:" line gives where a 64 KiB pin's time goes; then dma-buf
#     registration, compaction and scrubbing; in a second scenario
#     (tests/scenarios/bench_removal.sh), the unbind of a GPU holding N = 0
#     to 20000 mapped allocations of four processes against the same N
#     released by the processes' exit, 3 shuffled rounds, and the slope of
#     each side in ns per allocation; and in a third (bench_storage.sh),
#     64 MiB O_DIRECT reads and writes straight into GPU memory against the
#     bounce through system memory, the bounce pipelined, and the transfer
#     to or from system memory alone.
# Times under QEMU's TCG emulation are emulated times: compare ratios.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap qemu
nvrs_bootstrap bench
# The in-kernel benchmark is built into the module only for this.
NVRS_BENCH=1 nvrs_build
LINES=$OUT/bench.txt
: >"$LINES"
echo "== host (cargo --release, native; anchor: the kernel's gpu_buddy built for user space) =="
NVRS_KSRC="$KSRC" cargo run -q --release --manifest-path "$ROOT/tests/host/Cargo.toml" \
	--example pmm_bench |
	sed 's/^bench: /bench: host_/' | tee -a "$LINES"
# Guest RAM is backed before boot: otherwise the host's page faults on the
# guest's first touches land in whichever trace touches new memory (the fill
# trace measured 2.7x and 5.7x in consecutive boots of the same binary).
# Two boots (NVRS_BENCH_BOOTS), each reported: a figure that moves between
# boots of the same binary is not a result.
BOOTS=${NVRS_BENCH_BOOTS:-2}
status=0
# Each boot is two VMs: everything with the IOMMU strict (iommu.strict=1,
# every unmap invalidated at once), then the DMA-mapping lines again with it
# lazy (Debian's default, IOMMU_DEFAULT_DMA_LAZY: invalidations batched).
# vm_bench NAME TABLE ARGS...: one VM, its output in $OUT/NAME.out, its lines
# added to TABLE.
vm_bench() {
	local out=$OUT/$1 table=$2
	shift 2
	python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --nvme switch --nvme-trace off --mem 3072 --mem-prealloc \
		--gpu GH100:2048 --gpu GA100:2048 --timeout 1800 --log "$out-console.log" "$@" \
		>"$out.out" || status=1
	grep -E '^bench:|^phases:|^RESULT|^FAIL' "$out.out" | tee -a "$table" || status=1
}
for boot in $(seq 1 "$BOOTS"); do
	echo "== VM boot $boot of $BOOTS (TCG, intel-iommu, kernel $(basename "$KDIR")) =="
	: >"$OUT/bench-vm-$boot.txt"
	vm_bench "bench-vm-$boot" "$OUT/bench-vm-$boot.txt" --scenario bench --scenario bench_dma \
		--scenario bench_removal --scenario bench_storage
	echo "== VM boot $boot of $BOOTS, IOMMU lazy =="
	vm_bench "bench-vm-$boot-lazy" "$OUT/bench-vm-$boot.txt" --iommu-mode lazy \
		--scenario bench_dma
	echo "== VM boot $boot of $BOOTS, with the GPU model =="
	vm_bench "bench-vm-$boot-model" "$OUT/bench-vm-$boot.txt" --model-gpu GH100:1024:256 \
		--scenario bench_model
done

# The same lines as a table (ratio > 1: nvrs takes less time than the anchor).
# A p2p line's median is followed by its rounds' min-max, and a DMA-mapping
# line by a second row against its per-64 KiB anchor.
table() {
	awk '/^bench: / {
	name = $2; n = a = r = p = pr = "-"; nlo = nhi = alo = ahi = okn = fn = oka = fa = same = ""
	pp = plo = phi = ""
	for (i = 3; i <= NF; i++) {
		split($i, kv, "=")
		if (kv[1] == "nvrs") n = kv[2]
		else if (kv[1] == "anchor") a = kv[2]
		else if (kv[1] == "ratio") r = kv[2]
		else if (kv[1] == "anchor_per64k") p = kv[2]
		else if (kv[1] == "ratio_per64k") pr = kv[2]
		else if (kv[1] == "nvrs_min") nlo = kv[2]
		else if (kv[1] == "nvrs_max") nhi = kv[2]
		else if (kv[1] == "anchor_min") alo = kv[2]
		else if (kv[1] == "anchor_max") ahi = kv[2]
		else if (kv[1] == "ok_nvrs") okn = kv[2]
		else if (kv[1] == "failed_nvrs") fn = kv[2]
		else if (kv[1] == "ok_anchor") oka = kv[2]
		else if (kv[1] == "failed_anchor") fa = kv[2]
		else if (kv[1] == "same_work") same = kv[2]
		else if (kv[1] == "ratio_paired") pp = kv[2]
		else if (kv[1] == "ratio_paired_min") plo = kv[2]
		else if (kv[1] == "ratio_paired_max") phi = kv[2]
	}
	printf "%-38s %16s %16s %9s", name, n, a, r
	# The median of the per-round ratios, and their smallest and largest.
	if (pp != "")
		printf "   paired %s (%s-%s)", pp, plo, phi
	if (nlo != "")
		printf "   (nvrs %s-%s, anchor %s-%s)", nlo, nhi, alo, ahi
	# Requests answered of those made, where they are what the line is about
	# (the fragmentation lines) or where the two sides did not do the same work.
	if (okn != "" && (name ~ /^(host_)?frag_/ || same == "no"))
		printf "   answered: nvrs %d/%d, anchor %d/%d", okn, okn + fn, oka, oka + fa
	printf "\n"
	if (p != "-")
		printf "%-38s %16s %16s %9s\n", "  (against anchor_per64k)", n, p, pr
}' "$@" | sed '1i\
measurement                                        nvrs           anchor     ratio'
}
echo "== summary: host =="
table "$LINES"
for boot in $(seq 1 "$BOOTS"); do
	echo "== summary: VM boot $boot =="
	table "$OUT/bench-vm-$boot.txt"
done
# A boot whose runner failed (a check of the scenarios, a hang) fails make bench.
[ "$status" -eq 0 ] && echo "make bench: done, $BOOTS boots" || echo "make bench: FAILED (a VM boot failed; see $OUT/bench-vm-*.out)"
exit "$status"
