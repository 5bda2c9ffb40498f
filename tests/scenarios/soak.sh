# SPDX-License-Identifier: GPL-2.0
#
# Scenario "soak" (make soak, not make check): a bounded race of 10 threads
# for NVRS_SOAK_SECONDS (default 60): pin / map / unmap / put through a
# gdrdrv-style consumer whose free callback takes its own region lock and
# frees the table, FREE racing them, mmap / touch / munmap, ALLOC / FREE, and
# processes exiting with memory pinned and mapped; and the two cases of issue
# 20: revoked pins' tables kept in the consumer's stale pool across more pin
# ends than the quarantine ring holds, and, in a 64 MiB VA space, allocations
# freed while mapped whose mappings are kept. Every callback nvrs fired must
# have reached the consumer, no kept table may reach a pin, the VA space must
# serve every ALLOC after the race, and nothing may be left or leak.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
SECONDS_=${NVRS_SOAK_SECONDS:-60}

VA_MIB=64

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 va_space_mib=$VA_MIB
check "insmod consumer" insmod $M/nvrs_consumer.ko
tool "10 threads race for $SECONDS_ s" soak 0 "$SECONDS_" "$VA_MIB"
set -- $(sed -n 's/^stalestat kept [0-9]* kept_total \([0-9]*\) checks \([0-9]*\) pins \([0-9]*\) named \([0-9]*\) mapped \([0-9]*\) put_failed \([0-9]*\) ended \([0-9]*\)$/\1 \2 \3 \4 \5 \6 \7/p' /tmp/tool.out)
check "  stale tables kept (${1:-none}) and checked (${2:-none})" \
	sh -c "test ${1:-0} -gt 0 && test ${2:-0} -gt 0"
check "  more pins compared with them than the ring holds (${3:-none} > 8192)" test "${3:-0}" -gt 8192
check "  no stale table was a new pin's, mapped, or ended a pin (${4:-?} ${5:-?} ${6:-?} ${7:-?})" \
	test "${4:-1}${5:-1}${6:-1}${7:-1}" = 0000
set -- $(sed -n 's/^soak: VA retention: \([0-9]*\) rounds in the race ([0-9]* failed ALLOCs), then \([0-9]*\) of \([0-9]*\) rounds in a [0-9]* MiB VA space failed$/\1 \2 \3/p' /tmp/tool.out)
check "  freed mappings kept in the race (${1:-none} rounds), then twice the VA space more: ${2:-?} of ${3:-?} ALLOCs failed" \
	sh -c "test ${1:-0} -gt 0 && test '${2:-1}' = 0 && test '${3:-0}' = $((2 * VA_MIB * 16))"
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
