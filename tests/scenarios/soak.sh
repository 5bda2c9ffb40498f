# SPDX-License-Identifier: GPL-2.0
#
# Scenario "soak" (make soak, not make check): a bounded race of 8 threads
# for NVRS_SOAK_SECONDS (default 60): pin / map / unmap / put through a
# gdrdrv-style consumer whose free callback takes its own region lock and
# frees the table, FREE racing them, mmap / touch / munmap, ALLOC / FREE, and
# processes exiting with memory pinned and mapped. Every callback nvrs fired
# must have reached the consumer, and nothing may be left or leak.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
SECONDS_=${NVRS_SOAK_SECONDS:-60}

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
tool "8 threads race for $SECONDS_ s" soak 0 "$SECONDS_"
tool "the consumer's count of callbacks" ctl callbacks
fired=$(sed -n 's/^callbacks \([0-9]*\)$/\1/p' /tmp/tool.out)
revoked=$(sed -n 's/^revoked: //p' $D/p2p)
# Two missing counts are equal too: both must be there.
check "callbacks fired by nvrs (${revoked:-none}) all reached the consumer (${fired:-none})" \
	sh -c "test -n '$revoked' && test '$revoked' = '$fired'"
check "some pins were revoked" test "${revoked:-0}" -gt 0
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
