#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: boot a VM with two emulated GPUs (GH100 and GA100), load nvrs,
# show both identities and their debugfs info, the nvidia_p2p and dma-buf
# round trips with edu, isolation, nvrs-smi (summary, topo -m, the memory map,
# also written to tests/out/files/demo-pmm-map.svg), unload; then the GPU
# model (tests/model/): nvrs binds it and sets up its BAR1 through page
# tables; power off.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvrs_bootstrap
nvrs_bootstrap qemu
nvrs_build
python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario demo --nvme switch \
	--gpu GH100:256 --gpu GA100:256 --model-gpu GH100:1024:256 \
	--log "$OUT/demo-console.log" --files "$OUT/files"
rc=$?
if [ -s "$OUT/files/demo-pmm-map.svg" ]; then
	echo "The memory map drawn by nvrs-smi pmm: $OUT/files/demo-pmm-map.svg"
fi
exit $rc
