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
#     bytes of each after the trace; the fragmentation lines (frag_*) give
#     the success of 2 MiB and 8 MiB contiguous requests with nvrs's
#     compaction on and off (src/bench/frag.rs);
#   - VM (one boot, TCG, IOMMU on, 2 GiB per emulated GPU): the same traces
#     against the kernel's gpu_buddy; get_pages + put_pages against
#     pin_user_pages + unpin of as many bytes of system memory (fields: the
#     cost per entry, 64 KiB against 4 KiB pages, and per MiB of each side),
#     64 KiB of the same VA and of 16384 VAs in turn, and 256 KiB to 1 GiB;
#     dma_map_pages against one dma_map_resource per physically contiguous
#     run (anchor) and per 64 KiB entry (anchor_per64k), 64 KiB to 1 GiB
#     (fields: entries, runs, ns per entry and per run). The p2p lines run
#     5 rounds alternating which side goes first, and give each side's median
#     and its min/max. A "phases:" line gives where a 64 KiB pin's time goes;
#     then dma-buf registration, compaction and scrubbing; in a second
#     scenario (tests/scenarios/bench_removal.sh), the unbind of a GPU holding
#     1000, 5000 and 10000 allocations of four processes (no anchor: nvrs's
#     own growth with N).
# Times under QEMU's TCG emulation are emulated times: compare ratios.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap bench
# The in-kernel benchmark is built into the module only for this.
NVRS_BENCH=1 nvrs_build
LINES=$OUT/bench.txt
: >"$LINES"
echo "== host (cargo --release, native; anchor: the kernel's gpu_buddy built for user space) =="
NVRS_KSRC="$KSRC" cargo run -q --release --manifest-path "$ROOT/tests/host/Cargo.toml" \
	--example pmm_bench |
	sed 's/^bench: /bench: host_/' | tee -a "$LINES"
echo "== VM (TCG, intel-iommu, kernel $(basename "$KDIR")) =="
# Guest RAM is backed before boot: otherwise the host's page faults on the
# guest's first touches land in whichever trace touches new memory (the fill
# trace measured 2.7x and 5.7x in consecutive boots of the same binary).
python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario bench --scenario bench_removal \
	--scenario bench_storage --nvme switch --mem 3072 --mem-prealloc \
	--gpu GH100:2048 --gpu GA100:2048 --timeout 900 --log "$OUT/bench-console.log" |
	grep -E '^bench:|^phases:|^RESULT|^FAIL' | tee -a "$LINES"

# The same lines as a table (ratio > 1: nvrs takes less time than the anchor).
# A p2p line's median is followed by its rounds' min-max, and a DMA-mapping
# line by a second row against its per-64 KiB anchor.
echo "== summary =="
awk '/^bench: / {
	name = $2; n = a = r = p = pr = "-"; nlo = nhi = alo = ahi = okn = fn = oka = fa = same = ""
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
	}
	printf "%-38s %16s %16s %9s", name, n, a, r
	if (nlo != "")
		printf "   (nvrs %s-%s, anchor %s-%s)", nlo, nhi, alo, ahi
	# Requests answered of those made, where they are what the line is about
	# (the fragmentation lines) or where the two sides did not do the same work.
	if (okn != "" && (name ~ /^(host_)?frag_/ || same == "no"))
		printf "   answered: nvrs %d/%d, anchor %d/%d", okn, okn + fn, oka, oka + fa
	printf "\n"
	if (p != "-")
		printf "%-38s %16s %16s %9s\n", "  (against anchor_per64k)", n, p, pr
}' "$LINES" | sed '1i\
measurement                                        nvrs           anchor     ratio'
