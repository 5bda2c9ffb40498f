#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The example consumer under nvrs's fault controls: what a consumer author
# checks once the happy path of test.sh works. Run in the nvrs test VM by
#
#   make consumer M=examples/edu-peer \
#       SCRIPT="examples/edu-peer/test.sh examples/edu-peer/faults.sh"
#
# Each GPU has a control file, /sys/kernel/debug/nvrs/<PCI name>/faults
# (README, "Fault controls"): one command per write, read back to see what is
# set and what it did. Here each control is set, edu-peer meets it, and the
# test checks that edu-peer saw what NVIDIA's driver would give it: the
# errno, the free callback (once per pin), the GPU gone. Exit status 0 is a
# pass; nvrs's own checks afterwards (no pin left, every byte back, no oops,
# lockdep or kmemleak report) are the runner's.

set -e
# edu reads GPU memory by DMA only where the kernel allows the peer path: under
# one PCIe switch (the default topology).
[ "$NVRS_TOPOLOGY" = switch ] || {
	echo "faults.sh needs TOPOLOGY=switch"
	exit 1
}
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

# The checks run on GPU 0 (an emulated GPU) and on the GPU model if the VM has
# one (make consumer MODEL=..., the last GPU): there a pin's pages are in BAR1,
# a BAR1 budget meets real BAR1 mapping, and the GPU falling off the bus takes
# BAR1 with it.
gpus=$(nvrs-tool count | sed -n 's/^gpus \([0-9]*\)$/\1/p')
under=0
[ -n "$NVRS_MODEL_GPUS" ] && under="0 $((gpus - 1))"
for G in $under; do
	GPU=$(nvrs-tool info $G | sed -n 's/^gpu [0-9]* \([^ ]*\) .*/\1/p')
	F=/sys/kernel/debug/nvrs/$GPU/faults
	echo "GPU $G ($GPU)"
	# Loaded afresh for each GPU: its revocation count starts at 0.
	insmod /lib/modules/edu_peer.ko

	# fault COMMAND: one fault control on the GPU under test.
	fault() {
		echo "faults: $*"
		echo "$*" >"$F"
	}

	# get_pages fails once with EBUSY (nvrs-tool's "!EBUSY" expects that errno
	# from the control write that makes edu-peer pin); the next read works.
	fault fail get_pages EBUSY nth 1
	tool alloc A $G 2M \; fill A 0x0dd00001 \; !EBUSY ctlf $C read @A 0x10000 0x0dd00001 \; \
		ctlf $C read @A 0x10000 0x0dd00001
	expect "^read words 512 match 512 first 0x0dd00001$"

	# dma_map_pages fails once with ENOMEM: edu-peer must put the pin it got.
	fault fail dma_map ENOMEM nth 1
	tool alloc A $G 2M \; fill A 0x0dd00002 \; !ENOMEM ctlf $C read @A 0x10000 0x0dd00002 \; \
		ctlf $C read @A 0x10000 0x0dd00002
	expect "^read words 512 match 512 first 0x0dd00002$"

	# A BAR1 budget of 1 MiB: a 2 MiB pin does not fit (ENOMEM, as NVIDIA's driver
	# fails a pin it cannot map into BAR1); a 64 KiB one does.
	fault bar1 0x100000
	tool alloc A $G 2M \; !ENOMEM ctlf $C hold @A 0x200000 \; ctlf $C hold @A 0x10000 \; \
		ctlf $C release
	expect "^release put revoked 0$"
	fault bar1 0

	# revoke now: the held pin's free callback runs (in a worker); the later
	# release finds nothing to put.
	tool alloc A $G 2M \; ctlf $C hold @A 0x10000 \; sh "echo revoke now >$F" \; sh "sleep 1" \; \
		ctlf $C release
	expect "^release none revoked 1$"

	# Callbacks 200 ms late, from a worker: a FREE of held memory still waits
	# for the callback before it returns.
	fault callback delay 200000
	fault callback context workqueue
	tool alloc A $G 2M \; ctlf $C hold @A 0x10000 \; free A \; ctlf $C release
	expect "^release none revoked 2$"
	fault callback delay 0
	fault callback context thread

	# revoke every 200: whatever edu-peer holds is taken back within a period.
	fault revoke every 200
	tool alloc A $G 2M \; ctlf $C hold @A 0x10000 \; sh "sleep 1" \; ctlf $C release
	expect "^release none revoked 3$"
	fault revoke off

	# The GPU falls off the bus while edu-peer holds a pin: the callback runs
	# once, the GPU leaves the bus; a rescan brings it back and it works again.
	tool alloc A $G 2M \; ctlf $C hold @A 0x10000 \; sh "echo remove surprise >$F" \; \
		sh "for i in \$(seq 100); do test -e /sys/bus/pci/devices/$GPU || break; sleep 0.1; done" \; \
		ctlf $C release
	expect "^release none revoked 4$"
	if [ -e "/sys/bus/pci/devices/$GPU" ]; then
		echo "$GPU is still on the bus"
		exit 1
	fi
	echo 1 >/sys/bus/pci/rescan
	[ -e "/sys/bus/pci/drivers/nvrs/$GPU" ] || {
		echo "$GPU did not come back"
		exit 1
	}
	tool alloc A $G 2M \; fill A 0x0dd00003 \; ctlf $C read @A 0x10000 0x0dd00003
	expect "^read words 512 match 512 first 0x0dd00003$"

	rmmod edu_peer
done
echo "edu_peer under the fault controls: every check passed"
