#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A consumer script that must fail (make check runs it through `make consumer`
# and expects "consumer: FAIL"): the example's DMA read compared with a
# pattern that was never written.
set -e
insmod /lib/modules/edu_peer.ko
nvrs-tool alloc A 0 2M \; fill A 0x5eed0000 \; \
	ctlf /sys/kernel/debug/edu_peer/ctl read @A 0x10000 0x5eed0001 >/tmp/out
cat /tmp/out
grep -q "^read words 512 match 512 " /tmp/out
