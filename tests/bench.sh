#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: benchmarks, not tests. Prints one line per trace:
#   bench: <trace> nvrs=<ns/op>ns anchor=<ns/op>ns ratio=<anchor/nvrs> largest_free_nvrs=<bytes> largest_free_anchor=<bytes>
# with the anchor measured in the same run:
#   - host: the memory manager's core against the kernel's own gpu_buddy
#     (drivers/gpu/buddy.c of the kernel source, built for user space by
#     tests/host/build.rs), natively, cargo --release;
#   - VM (one boot, TCG, IOMMU on, 2 GiB per emulated GPU): the memory manager
#     against the kernel's gpu_buddy; get_pages + put_pages against
#     pin_user_pages + unpin of as much system memory; dma_map_pages of 1 GiB
#     (coalesced) against one dma_map_resource per 64 KiB page; scrubbing
#     1 GiB on free against a memset of as much system memory.
# Times under QEMU's TCG emulation are emulated times: compare ratios.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap bench
nvrs_build
echo "== host (cargo --release, native; anchor: the kernel's gpu_buddy built for user space) =="
NVRS_KSRC="$KSRC" cargo run -q --release --manifest-path "$ROOT/tests/host/Cargo.toml" \
	--example pmm_bench |
	sed 's/^bench: /bench: host_/'
echo "== VM (TCG, intel-iommu, kernel $(basename "$KDIR")) =="
python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario bench --mem 3072 \
	--gpu GH100:2048 --gpu GA100:2048 --timeout 900 --log "$OUT/bench-console.log" |
	grep -E '^bench:|^phases:|^RESULT|^FAIL'
