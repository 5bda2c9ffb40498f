# SPDX-License-Identifier: GPL-2.0
#
# Scenario "console": every TAP line reaches the runner whole while the kernel
# prints at the same moment. Kernel messages are written to the serial console
# by the kernel itself, between the pieces the tty layer sends of a line a
# process wrote; a result line cut in two is a result lost (the runner fails a
# scenario whose "done N" does not match what it read). Sysrq's help, printed
# in a loop beside the results, is the kernel's noise. It fills the kernel's log
# buffer, so it runs last in its VM (scenarios read boot messages from dmesg).

. /scenarios/lib.sh

N=200
(
	i=0
	while [ $i -lt $((2 * N)) ]; do
		echo h >/proc/sysrq-trigger
		i=$((i + 1))
	done
) &
noise=$!
i=1
while [ $i -le $N ]; do
	ok "result $i of $N arrives whole beside kernel messages"
	i=$((i + 1))
done
wait $noise
check "the kernel printed beside the results" sh -c \
	"dmesg | grep -c 'sysrq: HELP' | awk '{ exit !(\$1 >= $N) }'"
done_testing
