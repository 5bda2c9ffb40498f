# SPDX-License-Identifier: GPL-2.0
#
# Scenario "tcgprofile_pin" (tests/tcg-profile.sh pin, not make check): N
# pins and unpins of LEN bytes (default 64 KiB) under the counting plugin, of
# the side, count and length nvrs_profile=SIDE:N[:LEN] on the kernel command
# line names (tcg-profile.sh boots each side twice, with two counts, and
# subtracts):
#   nvrs: nvidia_p2p_get_pages + put_pages of the LEN pieces of a 1 GiB
#         allocation in turn, after filling the quarantine ring as make bench
#         does;
#   gup:  pin_user_pages_fast(FOLL_LONGTERM) + unpin_user_pages of the LEN
#         pieces of 1 GiB of anonymous memory in turn, in huge pages (the
#         anchor of make bench's p2p_get_put_pages_64K_16384_vas).

. /scenarios/lib.sh
M=/lib/modules
spec=$(sed -n 's/.*nvrs_profile=\([^ ]*\).*/\1/p' /proc/cmdline)
side=${spec%%:*}
n=${spec#*:}
len=0x10000
case $n in *:*) len=${n#*:}; n=${n%%:*} ;; esac

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
for m in nvrs nvrs_consumer; do
	echo "tcg-profile: module $m $(cat /sys/module/$m/sections/.text)"
done
check "quarantine filled" nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 8200
case $side in
nvrs) nvrs-tool alloc A 0 1G \; ctl benchpin @A "$len" "$n" 0x40000000 >/tmp/b.txt 2>&1
	check "$n pins of $len measured" grep -q "^benchpin len $((len)) " /tmp/b.txt ;;
gup) nvrs-tool anon U 1G \; ctl benchgup @U "$len" "$n" 0x40000000 >/tmp/b.txt 2>&1
	check "$n anchor pins of $len measured" grep -q "^benchgup len $((len)) " /tmp/b.txt ;;
*) check "side nvrs or gup named (nvrs_profile=$spec)" false ;;
esac
cat /tmp/b.txt
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
