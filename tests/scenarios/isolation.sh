# SPDX-License-Identifier: GPL-2.0
#
# Scenario "isolation": no process, peer or stale pointer ever reaches GPU
# memory it does not own. Each block is one defect of nvrs at ca8dffb and
# the test that failed there: mapping lifetime, scrubbing, VA reuse and stale
# pointers, GPU removal, owner exit, write-combining, and the smaller holes.
# The VA space is shrunk to 1 GiB (va_space_mib) so that reuse happens.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
SECRET=0x5ec12e75
SECRET2=0x5ec2e7e2

check "insmod nvrs (1 GiB VA space)" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 va_space_mib=1024
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU0=$(nvrs_bound | sed -n 1p)
GPU1=$(nvrs_bound | sed -n 2p)
announce_apertures
FB1=$(fb_total $GPU1)

# --- 1. A CPU mapping cannot outlive FREE, even when they race ------------
tool "mmap racing FREE, 2000 rounds: every mapping that was made faults, also after another process took and wrote all the memory" \
	mmaprace 1 2000

# --- 2. Memory is scrubbed before reuse -----------------------------------
tool "process A fills all of GPU1 with a secret and frees it" \
	alloc A 1 $FB1 \; fill A $SECRET \; free A
tool "process B allocates all of GPU1 and reads only zeros" \
	alloc B 1 $FB1 \; zero B \; free B
# Memory a removed GPU left behind is not known to be zero: the next
# allocation scrubs it, a contiguous run to the end of its last root.
tool "a process fills all of GPU1 with a secret, and GPU1 is unbound and bound again under it" \
	alloc A 1 $FB1 \; fill A $SECRET2 \; sh "echo $GPU1 > /sys/bus/pci/drivers/nvrs/unbind" \; \
	sh "echo $GPU1 > /sys/bus/pci/drivers/nvrs/bind"
tool "  a contiguous 2 MiB + 64 KiB allocation comes and goes" alloc B 1 0x210000 contig \; free B
tool "  then all of GPU1 reads zero" alloc C 1 $FB1 \; zero C \; free C
# After the VM, the runner finds the secrets nowhere in the GPUs' backing files.
echo "nvrs-hostcheck: absent $SECRET"
echo "nvrs-hostcheck: absent $SECRET2"

# --- 3. VAs are reused; stale table and mapping pointers name nothing -------
tool "ALLOC/FREE of all of GPU1, 300 times, in a VA space that holds 4" \
	valoop 1 $FB1 300
check "  the VA allocator wrapped around" grep -qE "^va_ranges: [0-9]+ wraps [1-9]" $D/p2p
tool "a double put after a re-pin of the same VA keeps the new pin" \
	alloc A 0 2M \; ctl pin 0 @A 0x10000 \; ctl keep 0 \; ctl put 0 \; \
	ctl pin 0 @A 0x10000 \; ctl putold 0 \; sh "grep -qx 'pins: 1' $D/p2p" \; ctl put 0 \; free A
tool "a stale mapping pointer after a callback never unmaps another pin's mapping" \
	alloc A 0 2M \; ctl pin 1 @A 0x10000 \; ctl map 1 \; ctl keep 1 \; free A \; ctl unmap 1 \; \
	alloc B 0 2M \; ctl pin 1 @B 0x10000 \; ctl map 1 \; ctl unmapold 1 \; \
	sh "grep -q 'mappings 1 ' $D/p2p" \; ctl dma 1 0 0x71170000 \; sh "$HOSTSYNC" \; \
	ctl put 1 \; free B
tool "8 threads pin while replaying stale table and mapping pointers for 10 s: no live pin is hit" \
	stalerace 0 10
check "  no pins left" grep -qx "pins: 0" $D/p2p

# --- 4. GPU removal --------------------------------------------------------
tool "removal waits for a free callback that is already running" \
	alloc A 1 2M \; ctl slowpin 7 @A 0x100000 1500 \; ctl map 7 \; bgfree A \; sleep 300 \; \
	sh "echo 1 > /sys/bus/pci/devices/$GPU1/remove" \; ctl incb 7 \; join \; ctl status 7
check "  the callback had returned when the removal finished" grep -q "incb 0" /tmp/tool.out
check "  and it fired once" grep -q "slot 7 pinned 0 mapped 1 persistent 0 callbacks 1" /tmp/tool.out
check "rescan brings GPU1 back" sh -c "echo 1 > /sys/bus/pci/rescan; test -e /sys/bus/pci/drivers/nvrs/$GPU1"
dmesg_mark
tool "a persistent pin and a CPU mapping of its physical address outlive GPU1's removal" \
	alloc A 1 2M \; ctl ppin 3 @A 0x200000 \; ctl cpumap 3 \; free A \; \
	sh "echo 1 > /sys/bus/pci/devices/$GPU1/remove" \; sh "echo 1 > /sys/bus/pci/rescan"
check "  GPU1 is back" test -e /sys/bus/pci/drivers/nvrs/$GPU1
check "  one dmesg line says its memory is refused until the pin is put" \
	sh -c "test \"\$(dmesg | grep -c 'still pinned from before its removal')\" = 1"
tool "another process cannot allocate on GPU1 while the old pin exists" !EBUSY alloc B 1 64K
tool "the old pin is put" ctl put 3
tool "then all of GPU1 can be allocated again" alloc B 1 $FB1 \; free B

# --- 4b. The owning process's exit ends its memory --------------------------
rm -f /tmp/forkhold.pid
tool "an owner that exits while a child still holds its file" \
	alloc A 0 2M \; ctl pin 2 @A 0x10000 \; forkhold 3000
# Without the child's pid the checks below would look at /proc//status (no
# such file: "exited") or kill nothing: they need a pid.
HOLDER=$(cat /tmp/forkhold.pid 2>/dev/null)
check "  the child's pid was written (/tmp/forkhold.pid: '$HOLDER')" \
	sh -c "test -n '$HOLDER' && test '$HOLDER' -gt 1"
tool "  revoked its pin at once" ctl status 2
check "  callbacks 1 while the child lives" sh -c \
	"grep -qE 'callbacks 1$' /tmp/tool.out && test -n '$HOLDER' && kill -0 '$HOLDER'"
# The child's exit closes the last reference to the file (an orphan stays a
# zombie here: nothing reaps it).
check "  the child exits" sh -c "test -n '$HOLDER' || exit 1; for i in \$(seq 100); do \
	grep -qs '^State:.*[RSD]' /proc/$HOLDER/status || exit 0; sleep 0.1; done; exit 1"

tool "a child cannot allocate through an inherited file" count \; !EPERM child alloc B 0 64K

# --- 4c. PID namespaces (fe5c205: PROCESSES gave global PIDs to all) -------
# A holder in a new PID namespace (a container) and one in the root namespace,
# 2 MiB each on GPU0. PROCESSES names each process as the reader's namespace
# does and leaves out the processes the reader cannot see there.
rm -f /tmp/nsh.go /tmp/nsh.out
unshare -p -f nvrs-tool alloc B 0 2M \; procs \; \
	sh "i=0; while [ ! -e /tmp/nsh.go ] && [ \$i -lt 1200 ]; do sleep 0.1; i=\$((i + 1)); done" \; \
	free B >/tmp/nsh.out 2>&1 &
NSH_JOB=$!
check "a holder in a new PID namespace allocated" sh -c \
	"for i in \$(seq 600); do grep -q '^procs ' /tmp/nsh.out && exit 0; sleep 0.1; done; exit 1"
while IFS= read -r l; do diag "  $l"; done </tmp/nsh.out
# Its global pid: the child unshare forked (unshare is $NSH_JOB).
NSH=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$NSH_JOB '$4 == p { print $1 }' | head -n 1)
check "  it is pid 1 in its namespace, pid $NSH in the root namespace" sh -c \
	"test -n '$NSH' && test '$NSH' -gt 1"
check "  it sees itself as pid 1" grep -qE '^procs self 1 count 1 1:0:2097152$' /tmp/nsh.out
tool "a root-namespace holder lists processes, and readers in PID namespaces do" \
	alloc A 0 2M \; procs \; \
	sh "nsenter -t $NSH -p nvrs-tool procs >/tmp/ns-reader.out 2>&1" \; \
	sh "unshare -p -f nvrs-tool procs >/tmp/ns-other.out 2>&1" \; free A
ROOTH=$(sed -n 's/^procs self \([0-9]*\) .*/\1/p' /tmp/tool.out)
diag "  holder's namespace: $(cat /tmp/ns-reader.out)"
diag "  another namespace: $(cat /tmp/ns-other.out)"
check "  the root reader sees both holders by their global pids ($ROOTH, $NSH)" sh -c \
	"test -n '$ROOTH' && test -n '$NSH' && grep -q '^procs self $ROOTH ' /tmp/tool.out && \
	 grep -q ' $ROOTH:0:2097152' /tmp/tool.out && grep -q ' $NSH:0:2097152' /tmp/tool.out"
check "  a reader in the holder's namespace sees it as pid 1, and not the root holder" \
	grep -qE '^procs self [0-9]+ count 1 1:0:2097152$' /tmp/ns-reader.out
check "  a reader in another namespace sees neither" \
	grep -qE '^procs self 1 count 0$' /tmp/ns-other.out
touch /tmp/nsh.go
wait $NSH_JOB
NSH_RC=$?
check "  the namespaced holder freed its memory and exited (status $NSH_RC)" sh -c \
	"test '$NSH_RC' = 0 && grep -q '^ok free' /tmp/nsh.out"

# --- 5. Write-combined CPU mappings ----------------------------------------
# covers_wc GPU: the PAT memtype list has a write-combining range covering
# the GPU's memory.
covers_wc() {
	_ap=$(sed -n 's/^aperture: BAR resource [0-9]* at \(0x[0-9a-f]*\),.*/\1/p' $D/$1/info)
	_off=$(sed -n 's/^fb: offset \(0x[0-9a-f]*\),.*/\1/p' $D/$1/info)
	_s=$((_ap + _off))
	_e=$((_s + $(fb_total $1)))
	sed -n 's/^PAT: \[mem \(0x[0-9a-f]*\)-\(0x[0-9a-f]*\)\] write-combining$/\1 \2/p' \
		/sys/kernel/debug/x86/pat_memtype_list | while read -r a b; do
		if [ $((a)) -le $_s ] && [ $((b)) -ge $_e ]; then echo yes; fi
	done | grep -q yes
}
tool "a 4 MiB mapping is made and touched" alloc A 0 4M \; mapall A \; wr A 0x3f0000 0x77c00c11 \; \
	rd A 0x3f0000 0x77c00c11 \; sh "grep write-combining /sys/kernel/debug/x86/pat_memtype_list" \; free A
check "  GPU0's memory is listed write-combining in pat_memtype_list" covers_wc $GPU0

# --- 6. Smaller holes --------------------------------------------------------
tool "read-only MAP_SHARED is allowed; PROT_EXEC and private mappings are not" \
	alloc A 0 2M \; mmap A r shared \; !EPERM mmap A rwx shared \; !EINVAL mmap A rw private \; free A
tool "ALLOC and FREE need a file opened for writing" rdonly \; !EBADF alloc A 0 64K \; !EBADF freeva 0x100000000
tool "dma_unmap_pages with another peer unmaps for the mapping's own peer, as NVIDIA's does" \
	alloc A 0 2M \; ctl pin 4 @A 0x10000 \; ctl map 4 \; ctl unmapwith 4 $GPU1 \; \
	sh "grep -q 'mappings 0 ' $D/p2p" \; ctl put 4 \; free A
tool "rsync: unregistering a driver that never registered keeps the registered one" ctl rsync
tool "bad-input matrix (put_pages_persistent of an unknown table: -EINVAL)" \
	alloc A 0 2M \; ctl pin 15 @A 0x100000 \; ctl badinput @A 0x100000 \; ctl put 15 \; free A

check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
diag "$(cat /proc/modules)"
check "rmmod nvrs" rmmod nvrs
done_testing
