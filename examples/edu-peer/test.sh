#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The example consumer's own test, run in the nvrs test VM by
# `make consumer M=examples/edu-peer SCRIPT=examples/edu-peer/test.sh`.
# nvrs is loaded (two emulated GPUs, a GPU model unless MODEL=none, edu as
# the DMA peer, an IOMMU); the consumer's module is in /lib/modules;
# nvrs-tool allocates GPU memory and writes the consumer's control file from
# the same process
# (nvidia_p2p_get_pages() looks the VA up in the calling process).
# NVRS_TOPOLOGY (switch or root), NVRS_IOMMU (on or off) and NVRS_GPUS say
# what the VM has. Exit status 0 is a pass.

set -e
C=/sys/kernel/debug/edu_peer/ctl

# tool ARGS...: nvrs-tool's commands, its output shown; a failure ends the test.
tool() {
	if nvrs-tool "$@" >/tmp/out 2>&1; then
		cat /tmp/out
	else
		cat /tmp/out
		echo "nvrs-tool $*: failed"
		exit 1
	fi
}

# expect REGEX: nvrs-tool's last output has a line matching REGEX.
expect() {
	grep -q "$1" /tmp/out || {
		echo "expected a line matching '$1'"
		exit 1
	}
}

# On every GPU: the emulated ones (a flat aperture) and the GPU model, if the
# VM has one (make consumer MODEL=...: its pins return BAR1 addresses, which
# nvrs maps through the GPU's page tables).
gpus=$(nvrs-tool count | sed -n 's/^gpus \([0-9]*\)$/\1/p')
[ "${gpus:-0}" -gt 0 ] || {
	echo "no GPU"
	exit 1
}
g=0
while [ $g -lt "$gpus" ]; do
	echo "GPU $g"
	# Loaded afresh for each GPU: its revocation count starts at 0.
	insmod /lib/modules/edu_peer.ko
	# The CPU writes a pattern into GPU memory; edu reads it by DMA through the pin.
	if [ "$NVRS_TOPOLOGY" = root ]; then
		# Across the host bridge nvrs allows a path only where the kernel's P2PDMA
		# check does, and QEMU's q35 host bridge is not on its list: the mapping
		# is refused with -ENOTSUPP (524), which a consumer must expect.
		if nvrs-tool alloc A $g 2M \; ctlf $C read @A 0x10000 0 >/tmp/out 2>&1; then
			cat /tmp/out
			echo "the mapping across the host bridge was not refused"
			exit 1
		fi
		cat /tmp/out
		expect "got -524"
	else
		tool alloc A $g 2M \; fill A 0x5eed0000 \; ctlf $C read @A 0x10000 0x5eed0000
		expect "^read words 512 match 512 first 0x5eed0000$"
	fi

	# A pin held while its memory is freed: nvrs revokes it (the free callback).
	tool alloc A $g 2M \; ctlf $C hold @A 0x200000 \; free A \; ctlf $C release
	expect "^hold entries 32 revoked 0$"
	expect "^release none revoked 1$"
	rmmod edu_peer
	g=$((g + 1))
done

echo "edu_peer: every check passed"
