# SPDX-License-Identifier: GPL-2.0
#
# Scenario "tcgprofile_pin" (tests/tcg-profile.sh pin, not make check): 100000
# 64 KiB nvidia_p2p_get_pages + put_pages under the counting plugin, after
# filling the quarantine ring as make bench does.

. /scenarios/lib.sh
M=/lib/modules

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
for m in nvrs nvrs_consumer; do
	echo "tcg-profile: module $m $(cat /sys/module/$m/sections/.text)"
done
check "quarantine filled" nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 8200
nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 100000 >/tmp/b.txt 2>&1
check "pins measured" grep -q "^benchpin len 65536" /tmp/b.txt
cat /tmp/b.txt
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
