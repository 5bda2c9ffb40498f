// SPDX-License-Identifier: GPL-2.0
/*
 * nvrs-tool: drive /dev/nvrs (include/uapi/nvrs.h) and the test consumer's
 * debugfs control file from one process, for the VM scenarios.
 *
 * nvidia_p2p_get_pages() looks VAs up in the calling process, so allocating
 * memory and asking the consumer to pin it must happen in the same process:
 * this tool runs a list of commands in order and keeps allocations in named
 * slots (A-Z). "@A" in a ctl text is replaced by slot A's VA, "@A+OFF" by that plus OFF.
 *
 *   count                      print the number of GPUs
 *   info GPU                   print a GPU's info
 *   stats GPU                  print a GPU's NVRS_IOCTL_GPU_STATS
 *   procs                      print NVRS_IOCTL_PROCESSES: "procs self PID
 *                              count N" and one " PID:GPU:BYTES" per entry
 *                              (PID as this process's PID namespace sees it)
 *   pstats [SIZE]              print NVRS_IOCTL_PROCESS_STATS with entries of
 *                              SIZE bytes (default: this header's): "pstats
 *                              self PID version V count N size S" and one
 *                              " PID:GPU:BYTES:ALLOCS:PINS:DMABUFS" per entry
 *                              (fields that end past S printed as "-"); then
 *                              checks the bytes of each entry past S are zero
 *   alloc SLOT GPU SIZE [contig] [zero]
 *   free SLOT                  free the allocation in SLOT
 *   many GPU N [map]           N allocations of 64 KiB on GPU, kept (no slot);
 *                              with map, each mapped and its first page read
 *   holes GPU SIZE             SIZE allocations until GPU's memory runs out,
 *                              every other one freed (kept until exit)
 *   exitbench GPU N PROCS [map]
 *                              PROCS children hold N allocations of 64 KiB
 *                              in all (as many), then exit: "exitbench ns T",
 *                              the time from letting them go to the last
 *                              reaped (the release by process exit)
 *   freeva VA                  NVRS_IOCTL_FREE of a raw VA
 *   raw CMD HEX_ARG            an ioctl with an arbitrary number and pointer
 *   ctl TEXT                   write TEXT to the consumer, print its reply
 *   ctlf FILE TEXT             the same with another module's control file
 *                              (a consumer of `make consumer`)
 *   anon SLOT SIZE             map and touch anonymous memory into SLOT
 *   wr SLOT OFFSET VALUE       write a u32 through a CPU mapping of SLOT
 *   rd SLOT OFFSET VALUE       read a u32 through a CPU mapping, compare
 *   usefree SLOT               map SLOT, free it, then read through the
 *                              mapping: -EFAULT if that faults (it must)
 *   child CMD...               run the rest of the line in a forked child
 *   sh COMMAND                 run a shell command (e.g. a sysfs write)
 *   race GPU SECONDS           8 threads racing pin/put/free/callback
 *   bgfree SLOT [MS]           free SLOT in a background thread (join waits),
 *                              after sleeping MS ms if given
 *   join                       wait for the background thread (and
 *                              bgclose's child)
 *   bgalloc SLOT GPU SIZE [FLAGS...]
 *                              alloc (as the alloc command) in a background
 *                              thread; join waits and returns its result
 *   bgclose                    close /dev/nvrs for the last time in a
 *                              child process (the last close releases every
 *                              allocation; join waits for the child), going
 *                              on once our descriptor is closed; later
 *                              commands open it again
 *   tombflood GPU SIZE N S     N x (allocate SIZE, the consumer pins its first
 *                              64 KiB into slot S with NVIDIA's protocol
 *                              (nvpin: the free callback frees the table, no
 *                              put follows), free it: the pin is revoked)
 *   forkread SLOT              map all of SLOT, write a word, ask for the
 *                              mapping to be inherited (MADV_DOFORK), fork;
 *                              the child reads the word: "forkread dofork R
 *                              child signal N" or "... child read 0xVALUE"
 *   forkhold MS                fork a child that keeps the inherited file
 *                              for MS ms, then exits; do not wait for it
 *                              (its pid goes to /tmp/forkhold.pid)
 *   mapall SLOT                map all of SLOT and touch every page (kept
 *                              mapped until the process exits)
 *   keptfault SLOT OFF         read through mapall's mapping of SLOT at OFF:
 *                              -EFAULT if that faults (SIGBUS)
 *   fill SLOT PATTERN          write PATTERN to every word of SLOT
 *   zero SLOT                  check that every byte of SLOT reads zero
 *   valoop GPU SIZE N          N x (alloc SIZE, free)
 *   mapleak GPU SIZE N         N x (alloc SIZE, map its first 64 KiB, free
 *                              without munmap, check the mapping faults);
 *                              then allocate SIZE at a VA an old mapping
 *                              names, fill it, and check that every old
 *                              mapping still faults
 *   mmaprace GPU N             N x: one thread allocates 64 KiB and maps it
 *                              while another frees it; then every mapping
 *                              that survived must fault (SIGBUS), also after
 *                              another process took and wrote all the memory
 *   stalerace GPU SECONDS      8 threads replay stale table and mapping
 *                              pointers while pinning (consumer stalereplay)
 *   benchscrub GPU SIZE N      N x: allocate SIZE, map and touch it, time the
 *                              FREE (which scrubs it) against a memset of as
 *                              much pre-faulted system memory; best of N
 *   benchwrite FILE TEXT       write TEXT to FILE, print the time it took
 *   mmap SLOT PROT SHARE       mmap all of SLOT with PROT (letters r, w, x)
 *                              and SHARE (shared or private), then unmap
 *   rdonly                     reopen /dev/nvrs read-only
 *   fail N CMD...              run CMD with the N-th allocation of its core
 *                              system call (or fault) failing (fault
 *                              injection, /proc/thread-self/fail-nth), and
 *                              print "fail N injected I result R"; CMD is one
 *                              of alloc, free, ctl, mapall, write, export,
 *                              close.
 *                              Without a usable fail-nth (no fault injection
 *                              in the kernel) it prints "fail N unavailable:
 *                              ..." instead and fails
 *   write FILE TEXT            write TEXT to FILE (e.g. a driver's bind file)
 *   soak GPU SECONDS [VA_MIB]  8 threads for SECONDS: pin / map / unmap / put
 *                              with a gdrdrv-style consumer whose callback
 *                              takes its own lock, FREE racing them, mmap /
 *                              touch / munmap, ALLOC / FREE, and processes
 *                              exiting with memory pinned and mapped; a
 *                              ninth keeps revoked pins' tables in the
 *                              consumer's stale pool and checks them, and
 *                              with VA_MIB (the module's va_space_mib) a
 *                              tenth frees mapped allocations without
 *                              unmapping them, then a final check (see
 *                              soak_retain_check)
 *   sleep MS
 *
 * dma-bufs (NVRS_IOCTL_EXPORT_DMABUF); "%A" in a ctl text is replaced by
 * slot A's dma-buf descriptor:
 *   export SLOT OFF LEN [FLAGS] export [VA + OFF, + LEN) of SLOT's allocation
 *                              into SLOT's dma-buf descriptor
 *   exportva VA LEN FLAGS FD   the ioctl with raw values (bad input)
 *   dbwr SLOT OFF VALUE        write a u32 through a CPU mapping of the
 *                              dma-buf (mapped and unmapped around it)
 *   dbrd SLOT OFF VALUE        read a u32 through one, compare
 *   dbmmap SLOT PROT SHARE     mmap the whole dma-buf as the mmap command does
 *   dbkeep SLOT                map the whole dma-buf and keep the mapping
 *   dbfault SLOT OFF           read through the kept mapping: -EFAULT if that
 *                              faults (SIGBUS)
 *   close SLOT                 close SLOT's dma-buf descriptor (and unmap
 *                              what dbkeep mapped)
 *   sendfd SLOT CMD...         fork a child that drops every descriptor it
 *                              inherited for SLOT, receives SLOT's dma-buf
 *                              over a socket (SCM_RIGHTS) and runs CMD
 *   benchexport SLOT LEN N     N x (export LEN bytes of SLOT + close): the
 *                              user-space half of a dma-buf registration

 * Compaction (a fragmented GPU, kept in this process):
 *   frag GPU [N]               allocate all of GPU's memory (or N allocations) in 64 KiB allocations, map
 *                              each (the mappings are kept), write a 16-byte
 *                              needle 0xc0de0000 + k at the start of allocation k
 *                              and its complement at the end, then free every odd k
 *   fragpin S K                the consumer pins allocation K into its slot S
 *   fragexport K               export allocation K as a dma-buf (kept open)
 *   fragcheck                  every kept allocation still reads its needle and
 *                              complement through its first mapping (moved or
 *                              not), and the VM runner is asked to find every
 *                              needle in the GPUs' backing files at the next sync
 *   benchcompact FILE ROOTS GPU
 *                              time writing ROOTS to the GPU's debugfs compact
 *                              FILE, and a memcpy of as many bytes as it moved
 *                              between two pre-faulted buffers (the anchor)
 *   foreign SLOT LEN           a child with its own /dev/nvrs file (so its
 *                              own VA space) exports SLOT's VA: its errno
 * * Storage into GPU memory (an allocation made with "p2pdma"):
 *   dio read|write SLOT FILE FOFF LEN [AOFF]
 *                              O_DIRECT pread/pwrite of LEN bytes between
 *                              FILE at FOFF and SLOT's CPU mapping at AOFF
 *                              (the NVMe controller DMAs to or from GPU
 *                              memory); prints the time it took
 *   uring read|write SLOT FILE FOFF LEN [AOFF]
 *                              the same through io_uring (IORING_OP_READ or
 *                              IORING_OP_WRITE on an O_DIRECT file)
 *   bounce read|write SLOT FILE FOFF LEN [AOFF]
 *                              the path without P2PDMA: O_DIRECT into an
 *                              aligned buffer of system memory, then memcpy
 *                              into the mapping (or the reverse); prints the
 *                              transfer's and the copy's time too
 *   bounce2 read|write SLOT FILE FOFF LEN CHUNK
 *                              the bounce path pipelined: two staging buffers
 *                              of CHUNK bytes, a second thread copying one
 *                              while the other is transferred (from SLOT's
 *                              offset 0)
 *   ramdio read|write FILE FOFF LEN
 *                              the bounce path's transfer alone: O_DIRECT
 *                              to or from system memory, no copy
 *   dcmp SLOT FILE FOFF LEN [AOFF]
 *                              SLOT's bytes at AOFF equal FILE's at FOFF
 *                              (read through the page cache)
 *   bgdio read SLOT FILE FOFF LEN
 *                              dio read in a background thread; join waits
 *                              for it and prints its result, which does not
 *                              count (a FREE or an unbind meanwhile may cut
 *                              the read short)

 * Prefix a command with "!ERRNO " (a name such as EINVAL, or a number) to
 * expect it to fail with that errno. Sizes take K, M and G suffixes.
 * Every command prints one line; the exit status is 0 if every command did
 * what was expected.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvrs.h"

_Static_assert(sizeof(struct nvrs_gpu_stats) == 312, "struct nvrs_gpu_stats layout");

#define CTL "/sys/kernel/debug/nvrs_consumer/ctl"

static int fd = -1;
static uint64_t slot_va[26], slot_size[26];
/* dma-bufs: descriptor, size and a kept CPU mapping per slot */
static int slot_fd[26];
static uint64_t slot_dbsize[26];
static volatile uint32_t *slot_dbmap[26];
static int failures;

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EIO", EIO },
	{ "E2BIG", E2BIG }, { "EBADF", EBADF }, { "ENOMEM", ENOMEM },
	{ "EACCES", EACCES }, { "EFAULT", EFAULT }, { "EBUSY", EBUSY },
	{ "EEXIST", EEXIST }, { "ENODEV", ENODEV }, { "EINVAL", EINVAL },
	{ "ENOSPC", ENOSPC }, { "ENOTTY", ENOTTY }, { "ERANGE", ERANGE },
	{ "ENOTSUPP", 524 }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EREMOTEIO", EREMOTEIO },
};

static int parse_errno(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (!strcmp(s, errnames[i].name))
			return errnames[i].err;
	return atoi(s);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'K': return v << 10;
	case 'M': return v << 20;
	case 'G': return v << 30;
	default: return v;
	}
}

static int slot(const char *s)
{
	if (!s || s[0] < 'A' || s[0] > 'Z' || s[1]) {
		fprintf(stderr, "nvrs-tool: bad slot '%s'\n", s ? s : "");
		exit(2);
	}
	return s[0] - 'A';
}

static int open_dev(void)
{
	if (fd < 0)
		fd = open("/dev/nvrs", O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : 0;
}

/*
 * Fault injection: the N-th allocation of the armed region fails. fail_errno
 * is the first error of fail-nth itself (cannot be opened, written or read
 * back): then nothing was armed or what was injected is unknown, and the
 * fail command says so instead of reporting "injected 0", which would read
 * as "CMD needs fewer than N allocations".
 */
static int fail_n, fail_fd = -1, fail_injected, fail_errno;

static void fail_nth_error(const char *what)
{
	if (!fail_errno)
		fail_errno = errno ? errno : EIO;
	perror(what);
}

static void arm(void)
{
	char b[16];

	if (!fail_n)
		return;
	if (fail_fd < 0)
		fail_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (fail_fd < 0)
		fail_nth_error("open /proc/thread-self/fail-nth");
	else if (pwrite(fail_fd, b, snprintf(b, sizeof(b), "%d", fail_n), 0) < 0)
		fail_nth_error("write fail-nth");
}

static void disarm(void)
{
	char b[16] = "";

	if (!fail_n || fail_fd < 0)
		return;
	if (pread(fail_fd, b, sizeof(b) - 1, 0) > 0)
		fail_injected = atoi(b) == 0;
	else
		fail_nth_error("read fail-nth");
	/* Writing 0 disables what was not injected. */
	if (pwrite(fail_fd, "0", 1, 0) < 0)
		fail_nth_error("write fail-nth");
}

/*
 * Writes the words of @argv (with "@A", "@A+OFF" and "%A" replaced) to the control file
 * @path as one text and prints the file's reply.
 */
static int do_ctl_at(const char *path, char *const *argv, int argc)
{
	char text[512] = "", reply[4096];
	int i, c, n;
	ssize_t r;

	for (i = 0; i < argc; i++) {
		char word[64];
		const char *w = argv[i];

		if (w[0] == '@') {
			/* "@A" or "@A+OFF": the slot's VA, plus an offset. */
			char name[2] = { w[1], 0 };
			unsigned long long off = 0;

			if (w[1] && w[2] == '+')
				off = strtoull(w + 3, NULL, 0);
			else if (w[1] && w[2])
				slot(w + 1);
			snprintf(word, sizeof(word), "0x%llx",
				 (unsigned long long)slot_va[slot(name)] + off);
			w = word;
		} else if (w[0] == '%') {
			snprintf(word, sizeof(word), "%d", slot_fd[slot(w + 1)]);
			w = word;
		}
		strncat(text, w, sizeof(text) - strlen(text) - 2);
		strncat(text, i + 1 < argc ? " " : "", 2);
	}
	c = open(path, O_RDWR);
	if (c < 0)
		return -errno;
	arm();
	r = write(c, text, strlen(text));
	disarm();
	if (r < 0) {
		n = -errno;
		close(c);
		return n;
	}
	n = pread(c, reply, sizeof(reply) - 1, 0);
	close(c);
	if (n > 0) {
		reply[n] = 0;
		printf("%s", reply);
	}
	return 0;
}

static int do_ctl(char *const *argv, int argc)
{
	return do_ctl_at(CTL, argv, argc);
}

/*
 * Writes (or reads and compares) the u32 at @off of a mapping of file @f that
 * starts at file offset @base: the 64 KiB holding it is mapped for the access
 * and unmapped again.
 */
static int map_word(int f, uint64_t base, uint64_t off, uint32_t val, int write)
{
	uint64_t page = off & ~0xffffULL;
	volatile uint32_t *p;
	void *m;
	int ret = 0;

	m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, f, base + page);
	if (m == MAP_FAILED)
		return -errno;
	p = (volatile uint32_t *)((char *)m + (off - page));
	if (write) {
		*p = val;
	} else if (*p != val) {
		printf("read 0x%08x, expected 0x%08x\n", *p, val);
		ret = -EIO;
	}
	munmap(m, 1 << 16);
	return ret;
}

/*
 * Maps @len bytes of file @f at @off with protection @prot (letters r, w, x)
 * and @share ("shared" or "private"), reads the first word if readable, and
 * unmaps: the mmap's errno, or 0.
 */
static int map_try(int f, uint64_t off, uint64_t len, const char *prot_s, const char *share)
{
	int prot = 0;
	void *m;

	prot |= strchr(prot_s, 'r') ? PROT_READ : 0;
	prot |= strchr(prot_s, 'w') ? PROT_WRITE : 0;
	prot |= strchr(prot_s, 'x') ? PROT_EXEC : 0;
	m = mmap(NULL, len, prot, strcmp(share, "private") ? MAP_SHARED : MAP_PRIVATE, f, off);
	if (m == MAP_FAILED)
		return -errno;
	if (prot & PROT_READ)
		(void)*(volatile uint32_t *)m;
	munmap(m, len);
	return 0;
}

static int ctl_line(const char *text)
{
	int c = open(CTL, O_RDWR), ret = 0;

	if (c < 0)
		return -errno;
	if (write(c, text, strlen(text)) < 0)
		ret = -errno;
	close(c);
	return ret;
}

/*
 * The race: 4 pairs of threads. In each pair, one thread allocates GPU
 * memory, has the consumer pin it (a non-persistent pin, slot 8 + pair),
 * then frees it, which revokes the pin through its callback unless the
 * other thread's put_pages got there first; the other thread puts the pin
 * at a random moment. Every step runs concurrently with the other pairs.
 */
#define RACE_PAIRS 4

struct race_pair {
	int index, gpu;
	_Atomic int published;		/* 1: pinned, waiting for the put */
	_Atomic long ops, errors;
	int last_error, last_step;	/* for the report */
	time_t deadline;
};

static void race_error(struct race_pair *p, int step, int err)
{
	p->errors++;
	p->last_step = step;
	p->last_error = err;
}

static unsigned int rnd(unsigned int *seed, unsigned int n)
{
	*seed = *seed * 1103515245 + 12345;
	return (*seed >> 16) % n;
}

static void *race_owner(void *arg)
{
	struct race_pair *p = arg;
	unsigned int seed = 1 + p->index;
	char text[128];

	while (time(NULL) < p->deadline) {
		struct nvrs_alloc a = {
			.gpu = p->gpu, .size = (1 + rnd(&seed, 32)) << 16,
		};
		struct nvrs_free f;
		int ret;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			race_error(p, 1, errno);
			continue;
		}
		snprintf(text, sizeof(text), "pin %d 0x%llx 0x%llx", 8 + p->index,
			 (unsigned long long)a.va, (unsigned long long)a.size);
		ret = ctl_line(text);
		if (!ret) {
			if (rnd(&seed, 2)) {
				snprintf(text, sizeof(text), "map %d", 8 + p->index);
				ret = ctl_line(text);
				if (ret)
					race_error(p, 3, -ret);
				ret = 0;
			}
			atomic_store(&p->published, 1);
		} else {
			race_error(p, 2, -ret);
		}
		usleep(rnd(&seed, 300));
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			race_error(p, 4, errno);
		while (!ret && atomic_load(&p->published))
			usleep(50);
		p->ops++;
	}
	atomic_store(&p->published, -1);
	return NULL;
}

static void *race_putter(void *arg)
{
	struct race_pair *p = arg;
	unsigned int seed = 100 + p->index;
	char text[64];
	int st;

	while ((st = atomic_load(&p->published)) != -1) {
		if (st != 1) {
			usleep(20);
			continue;
		}
		usleep(rnd(&seed, 300));
		snprintf(text, sizeof(text), "put %d", 8 + p->index);
		/* 0 whether the pin was live or already revoked. */
		st = ctl_line(text);
		if (st)
			race_error(p, 5, -st);
		p->ops++;
		atomic_store(&p->published, 0);
	}
	return NULL;
}

static int race(int gpu, int seconds)
{
	struct race_pair pairs[RACE_PAIRS];
	pthread_t th[2 * RACE_PAIRS];
	long ops = 0, errors = 0;
	int i;

	for (i = 0; i < RACE_PAIRS; i++) {
		pairs[i] = (struct race_pair){ .index = i, .gpu = gpu,
			.deadline = time(NULL) + seconds };
		pthread_create(&th[2 * i], NULL, race_owner, &pairs[i]);
		pthread_create(&th[2 * i + 1], NULL, race_putter, &pairs[i]);
	}
	for (i = 0; i < 2 * RACE_PAIRS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < RACE_PAIRS; i++) {
		ops += pairs[i].ops;
		errors += pairs[i].errors;
		if (pairs[i].errors)
			printf("pair %d: %ld errors, last at step %d (1 alloc, 2 pin, 3 map, 4 free, 5 put): errno %d\n",
			       i, (long)pairs[i].errors, pairs[i].last_step, pairs[i].last_error);
	}
	printf("race: %ld operations, %ld errors\n", ops, errors);
	return errors ? -EIO : 0;
}

static sigjmp_buf fault_jmp;

static void on_fault(int sig)
{
	siglongjmp(fault_jmp, sig);
}

/* Maps SLOT, frees it, then reads through the stale mapping. */
static int use_after_free(int s)
{
	struct nvrs_free f = { .va = slot_va[s] };
	struct sigaction sa = { .sa_handler = on_fault }, old_bus, old_segv;
	volatile uint32_t *p;
	int ret;

	p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, slot_va[s]);
	if (p == MAP_FAILED)
		return -errno;
	p[0] = 0x600dcafe;
	if (ioctl(fd, NVRS_IOCTL_FREE, &f))
		return -errno;
	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
	if (sigsetjmp(fault_jmp, 1)) {
		ret = -EFAULT;
	} else {
		printf("read 0x%08x through a freed allocation\n", p[0]);
		ret = 0;
	}
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
	munmap((void *)p, 1 << 16);
	return ret;
}

static pthread_t bg_thread;
static int bg_running, bg_result, bg_delay_ms;

static struct nvrs_alloc bg_alloc_req;
static int bg_alloc_slot;

static void *bg_alloc(void *arg)
{
	(void)arg;
	if (ioctl(fd, NVRS_IOCTL_ALLOC, &bg_alloc_req)) {
		bg_result = -errno;
		return NULL;
	}
	slot_va[bg_alloc_slot] = bg_alloc_req.va;
	slot_size[bg_alloc_slot] = bg_alloc_req.size;
	printf("bgalloc %c va 0x%llx size %llu\n", 'A' + bg_alloc_slot,
	       (unsigned long long)bg_alloc_req.va,
	       (unsigned long long)bg_alloc_req.size);
	bg_result = 0;
	return NULL;
}

static pid_t bg_closer;

/*
 * bgclose: the last close of /dev/nvrs, in a child process, so that no
 * other task of this one can end up doing it. A thread's close() is the last
 * only if nothing else holds the file at that instant; a fork of ours (the
 * next "sh") or any system call on the descriptor in another thread (its
 * fdget takes a reference, as the table is shared) would make that task the
 * last, and it would block in the release. The child takes its own reference
 * at fork; we close ours; then it closes, last. Returns once our descriptor
 * is closed; "join" waits for the child.
 */
static int bg_close_start(int f)
{
	int go[2], i;
	char c;

	if (pipe(go))
		return -errno;
	bg_closer = fork();
	if (bg_closer < 0) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	if (bg_closer == 0) {
		/* Nothing but the file and the pipe: no other last close here. */
		for (i = 3; i < 1024; i++)
			if (i != f && i != go[0])
				close(i);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		_exit(close(f) ? 1 : 0);
	}
	close(go[0]);
	close(f);
	if (write(go[1], "g", 1) != 1) {
		close(go[1]);
		return -EIO;
	}
	close(go[1]);
	return 0;
}

static int bg_close_join(void)
{
	int status;

	if (!bg_closer)
		return 0;
	if (waitpid(bg_closer, &status, 0) < 0)
		return -errno;
	bg_closer = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/*
 * tombflood: N pins revoked as NVIDIA's driver revokes them, on consumers
 * that follow its protocol: the free callback frees the table and nothing
 * puts it later.
 */
static int tomb_flood(int gpu, uint64_t size, int n, int s)
{
	char va[32], sl[8], *words[] = { "nvpin", sl, va, "0x10000" };
	int i, ret;

	snprintf(sl, sizeof(sl), "%d", s);
	for (i = 0; i < n; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = size };
		struct nvrs_free f;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
			return -errno;
		snprintf(va, sizeof(va), "0x%llx", (unsigned long long)a.va);
		ret = do_ctl_at(CTL, words, 4);
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
		if (ret)
			return ret;
	}
	printf("tombflood %d revoked\n", n);
	return 0;
}

/*
 * forkread: a mapping the owner asked to be inherited must not give a child
 * the memory (the child gets no VA space of its own, and the allocation is
 * not its): the child's read must fault, never return data.
 */
static int fork_read(int s)
{
	volatile uint32_t *p;
	int dofork, status;
	pid_t pid;

	p = mmap(NULL, slot_size[s], PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 slot_va[s]);
	if (p == MAP_FAILED)
		return -errno;
	p[0] = 0x5eed1234;
	dofork = madvise((void *)p, slot_size[s], MADV_DOFORK) ? -errno : 0;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(p[0] == 0x5eed1234 ? 3 : 4);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (WIFSIGNALED(status))
		printf("forkread dofork %d child signal %d\n", dofork,
		       WTERMSIG(status));
	else
		printf("forkread dofork %d child read %s\n", dofork,
		       WEXITSTATUS(status) == 3 ? "data" : "other");
	munmap((void *)p, slot_size[s]);
	return 0;
}

static void *bg_free(void *arg)
{
	struct nvrs_free f = { .va = *(uint64_t *)arg };

	if (bg_delay_ms)
		usleep(bg_delay_ms * 1000);
	bg_result = ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0;
	return NULL;
}

/* Reads one u32 at @p; returns 1 if it faulted, 0 if it read data. */
static int faults(volatile uint32_t *p)
{
	struct sigaction sa = { .sa_handler = on_fault }, old_bus, old_segv;
	int ret;

	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
	if (sigsetjmp(fault_jmp, 1)) {
		ret = 1;
	} else {
		(void)*p;
		ret = 0;
	}
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
	return ret;
}

static void *slot_map[26];

static int map_all(int s)
{
	volatile uint8_t *m;
	uint64_t off;

	if (slot_map[s])
		return 0;
	arm();
	m = mmap(NULL, slot_size[s], PROT_READ | PROT_WRITE, MAP_SHARED, fd, slot_va[s]);
	if (m == MAP_FAILED) {
		disarm();
		return -errno;
	}
	/* A fault that cannot be served kills the process (SIGBUS): that is no errno. */
	for (off = 0; off < slot_size[s]; off += 4096)
		(void)m[off];
	disarm();
	slot_map[s] = (void *)m;
	return 0;
}

static uint64_t now_ns(void);

/*
 * many: n allocations of 64 KiB on gpu, kept until the process exits; with
 * map, each is mapped for the CPU and its first page touched.
 */
static int many(int gpu, int n, int map)
{
	int k;

	for (k = 0; k < n; k++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = 1 << 16 };
		volatile uint8_t *m;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
			return -errno;
		if (!map)
			continue;
		m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (m == MAP_FAILED)
			return -errno;
		(void)m[0];
	}
	return 0;
}

/*
 * exit_bench: procs children each make n / procs allocations as "many" does
 * (mapped with map) and wait; the time from letting them go to the last one
 * reaped is their memory's release by process exit, printed as
 * "exitbench ns T". Every child must have allocated, and every one must exit
 * with status 0.
 */
static int exit_bench(int gpu, int n, int procs, int map)
{
	int ready[2], go[2], i, bad = 0;
	pid_t pid[16];
	uint64_t t0;
	char c;

	if (procs < 1 || procs > 16 || n < 0 || pipe(ready) || pipe(go))
		return -EINVAL;
	fflush(stdout);
	for (i = 0; i < procs; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			return -errno;
		if (!pid[i]) {
			int ret;

			close(ready[0]);
			close(go[1]);
			/* A VA space of its own: the parent's file is not the child's. */
			if (fd >= 0)
				close(fd);
			fd = -1;
			ret = open_dev();
			if (!ret)
				ret = many(gpu, n / procs, map);
			c = ret ? 'f' : 'r';
			if (write(ready[1], &c, 1) != 1 || ret)
				_exit(1);
			/* EOF when the parent lets go. */
			while (read(go[0], &c, 1) > 0)
				;
			_exit(0);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (i = 0; i < procs; i++)
		if (read(ready[0], &c, 1) != 1 || c != 'r')
			bad = 1;
	t0 = now_ns();
	close(go[1]);
	for (i = 0; i < procs; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	printf("exitbench ns %llu\n", (unsigned long long)(now_ns() - t0));
	close(ready[0]);
	return bad ? -EIO : 0;
}

/*
 * holes: allocations of size bytes on gpu until the memory runs out, then
 * every other one freed (a checkerboard of size-byte holes); the rest kept
 * until the process exits. "holes gpu G kept K".
 */
static int holes(int gpu, uint64_t size)
{
	uint64_t *va = NULL;
	size_t n = 0, cap = 0, i;
	int err = 0;

	for (;;) {
		struct nvrs_alloc a = { .gpu = gpu, .size = size };

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			err = errno;
			break;
		}
		if (n == cap) {
			uint64_t *more = realloc(va, (cap = cap ? 2 * cap : 1024) * sizeof(*va));

			if (!more) {
				free(va);
				return -ENOMEM;
			}
			va = more;
		}
		va[n++] = a.va;
	}
	/* Running out of memory is how the fill ends. */
	if (err != ENOMEM) {
		free(va);
		return -err;
	}
	for (i = 1; i < n; i += 2) {
		struct nvrs_free f = { .va = va[i] };

		if (ioctl(fd, NVRS_IOCTL_FREE, &f)) {
			free(va);
			return -errno;
		}
	}
	printf("holes gpu %d kept %zu\n", gpu, (n + 1) / 2);
	free(va);
	return 0;
}

static int fill(int s, uint32_t pattern)
{
	volatile uint32_t *p;
	uint64_t i;
	int ret = map_all(s);

	if (ret)
		return ret;
	p = slot_map[s];
	for (i = 0; i < slot_size[s] / 4; i++)
		p[i] = pattern;
	return 0;
}

static int check_zero(int s)
{
	volatile uint64_t *p;
	uint64_t i, bad = 0;
	int ret = map_all(s);

	if (ret)
		return ret;
	p = slot_map[s];
	for (i = 0; i < slot_size[s] / 8; i++)
		if (p[i] && !bad++)
			printf("non-zero 0x%016llx at offset 0x%llx\n",
			       (unsigned long long)p[i], (unsigned long long)i * 8);
	printf("zero: %llu bytes checked, %llu non-zero words\n",
	       (unsigned long long)slot_size[s], (unsigned long long)bad);
	return bad ? -EIO : 0;
}

/* The storage commands: O_DIRECT between a file and a slot's CPU mapping. */

static int dio_open(const char *file, int write)
{
	int f = open(file, (write ? O_WRONLY | O_CREAT : O_RDONLY) | O_DIRECT, 0644);

	return f < 0 ? -errno : f;
}

/* A whole transfer or an errno: a short one (end of file) is -EIO. */
static int dio_result(ssize_t n, uint64_t len)
{
	if (n < 0)
		return -errno;
	return (uint64_t)n == len ? 0 : -EIO;
}

static int dio(int write, int s, const char *file, uint64_t foff, uint64_t len, uint64_t aoff)
{
	uint64_t t0;
	ssize_t n;
	int f, ret = map_all(s);

	if (ret)
		return ret;
	if (aoff > slot_size[s] || len > slot_size[s] - aoff)
		return -ERANGE;
	f = dio_open(file, write);
	if (f < 0)
		return f;
	t0 = now_ns();
	n = write ? pwrite(f, (char *)slot_map[s] + aoff, len, foff) :
		    pread(f, (char *)slot_map[s] + aoff, len, foff);
	ret = dio_result(n, len);
	if (!ret)
		printf("dio %s %llu bytes ns %llu\n", write ? "write" : "read",
		       (unsigned long long)len, (unsigned long long)(now_ns() - t0));
	close(f);
	return ret;
}

/* One IORING_OP_READ or _WRITE through a ring of one entry, raw syscalls. */
static int uring(int write, int s, const char *file, uint64_t foff, uint64_t len,
		 uint64_t aoff)
{
	struct io_uring_params p = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	unsigned int *sq_tail, *sq_array, *cq_head;
	void *sq, *cq;
	size_t sq_len, cq_len;
	uint64_t t0;
	int ring, f, ret = map_all(s);

	if (ret)
		return ret;
	if (aoff > slot_size[s] || len > slot_size[s] - aoff || len > UINT32_MAX)
		return -ERANGE;
	f = dio_open(file, write);
	if (f < 0)
		return f;
	ring = syscall(__NR_io_uring_setup, 1, &p);
	if (ring < 0) {
		ret = -errno;
		close(f);
		return ret;
	}
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQ_RING);
	cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_CQ_RING);
	sqe = mmap(NULL, sizeof(*sqe), PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqe == MAP_FAILED) {
		ret = -ENOMEM;
		goto out;
	}
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = write ? IORING_OP_WRITE : IORING_OP_READ;
	sqe->fd = f;
	sqe->off = foff;
	sqe->addr = (uintptr_t)slot_map[s] + aoff;
	sqe->len = len;
	sq_tail = (unsigned int *)((char *)sq + p.sq_off.tail);
	sq_array = (unsigned int *)((char *)sq + p.sq_off.array);
	cq_head = (unsigned int *)((char *)cq + p.cq_off.head);
	sq_array[0] = 0;
	atomic_store_explicit((_Atomic unsigned int *)sq_tail, *sq_tail + 1, memory_order_release);
	t0 = now_ns();
	if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
		ret = -errno;
		goto out;
	}
	cqe = (struct io_uring_cqe *)((char *)cq + p.cq_off.cqes);
	ret = cqe->res < 0 ? cqe->res : (uint64_t)cqe->res == len ? 0 : -EIO;
	atomic_store_explicit((_Atomic unsigned int *)cq_head, *cq_head + 1, memory_order_release);
	if (!ret)
		printf("uring %s %llu bytes ns %llu\n", write ? "write" : "read",
		       (unsigned long long)len, (unsigned long long)(now_ns() - t0));
out:
	if (sqe != MAP_FAILED)
		munmap(sqe, sizeof(*sqe));
	if (cq != MAP_FAILED)
		munmap(cq, cq_len);
	if (sq != MAP_FAILED)
		munmap(sq, sq_len);
	close(ring);
	close(f);
	return ret;
}

/*
 * A staging buffer of system memory for the storage anchors: page-aligned,
 * pre-faulted (as a reused one would be), and in 4 KiB pages, as the P2PDMA
 * pages of the direct path are.
 */
static void *staging(uint64_t len)
{
	void *buf;

	if (posix_memalign(&buf, 4096, len))
		return NULL;
	madvise(buf, len, MADV_NOHUGEPAGE);
	memset(buf, 0, len);
	return buf;
}

/*
 * The path a user has without P2PDMA: O_DIRECT through system memory, and a
 * copy. Prints the transfer's and the copy's time as well as the whole.
 */
static int bounce(int write, int s, const char *file, uint64_t foff, uint64_t len,
		  uint64_t aoff)
{
	uint64_t t0, t1, t2;
	ssize_t n;
	void *buf;
	int f, ret = map_all(s);

	if (ret)
		return ret;
	if (aoff > slot_size[s] || len > slot_size[s] - aoff)
		return -ERANGE;
	buf = staging(len);
	if (!buf)
		return -ENOMEM;
	f = dio_open(file, write);
	if (f < 0) {
		free(buf);
		return f;
	}
	t0 = now_ns();
	if (write) {
		memcpy(buf, (char *)slot_map[s] + aoff, len);
		t1 = now_ns();
		n = pwrite(f, buf, len, foff);
		t2 = now_ns();
	} else {
		n = pread(f, buf, len, foff);
		t1 = now_ns();
		if (n == (ssize_t)len)
			memcpy((char *)slot_map[s] + aoff, buf, len);
		t2 = now_ns();
	}
	ret = dio_result(n, len);
	if (!ret)
		printf("bounce %s %llu bytes ns %llu io_ns %llu copy_ns %llu\n",
		       write ? "write" : "read", (unsigned long long)len,
		       (unsigned long long)(t2 - t0),
		       (unsigned long long)(write ? t2 - t1 : t1 - t0),
		       (unsigned long long)(write ? t1 - t0 : t2 - t1));
	close(f);
	free(buf);
	return ret;
}

/* The transfer of the bounce path alone: O_DIRECT to or from system memory. */
static int ramdio(int write, const char *file, uint64_t foff, uint64_t len)
{
	uint64_t t0;
	ssize_t n;
	void *buf = staging(len);
	int f, ret;

	if (!buf)
		return -ENOMEM;
	f = dio_open(file, write);
	if (f < 0) {
		free(buf);
		return f;
	}
	t0 = now_ns();
	n = write ? pwrite(f, buf, len, foff) : pread(f, buf, len, foff);
	ret = dio_result(n, len);
	if (!ret)
		printf("ramdio %s %llu bytes ns %llu\n", write ? "write" : "read",
		       (unsigned long long)len, (unsigned long long)(now_ns() - t0));
	close(f);
	free(buf);
	return ret;
}

/*
 * The bounce path as a careful user pipelines it: two staging buffers of
 * CHUNK bytes; while one is read from (or written to) the file, a second
 * thread copies the other to (or from) GPU memory.
 */
struct pipeline {
	sem_t full[2], empty[2];
	char *buf[2], *map;
	uint64_t len, chunk;
	int write;
};

static void *pipeline_copier(void *arg)
{
	struct pipeline *p = arg;
	uint64_t off, i;

	for (off = 0, i = 0; off < p->len; off += p->chunk, i++) {
		uint64_t n = p->len - off < p->chunk ? p->len - off : p->chunk;
		int k = i & 1;

		if (p->write) {
			sem_wait(&p->empty[k]);
			memcpy(p->buf[k], p->map + off, n);
			sem_post(&p->full[k]);
		} else {
			sem_wait(&p->full[k]);
			memcpy(p->map + off, p->buf[k], n);
			sem_post(&p->empty[k]);
		}
	}
	return NULL;
}

static int bounce2(int write, int s, const char *file, uint64_t foff, uint64_t len,
		   uint64_t chunk)
{
	struct pipeline p = { .len = len, .chunk = chunk, .write = write };
	uint64_t t0, off, i;
	pthread_t th;
	int k, f, ret = map_all(s);

	if (ret)
		return ret;
	if (len > slot_size[s] || !chunk || chunk % 4096)
		return -ERANGE;
	p.map = slot_map[s];
	p.buf[0] = staging(chunk);
	p.buf[1] = staging(chunk);
	f = dio_open(file, write);
	if (!p.buf[0] || !p.buf[1] || f < 0) {
		ret = f < 0 ? f : -ENOMEM;
		goto out;
	}
	for (k = 0; k < 2; k++) {
		sem_init(&p.full[k], 0, 0);
		sem_init(&p.empty[k], 0, 1);
	}
	t0 = now_ns();
	pthread_create(&th, NULL, pipeline_copier, &p);
	for (off = 0, i = 0; off < len; off += chunk, i++) {
		uint64_t n = len - off < chunk ? len - off : chunk;
		int r;

		k = i & 1;
		/* A failed transfer still hands the buffer on, so the copier ends. */
		if (write) {
			sem_wait(&p.full[k]);
			r = dio_result(pwrite(f, p.buf[k], n, foff + off), n);
			sem_post(&p.empty[k]);
		} else {
			sem_wait(&p.empty[k]);
			r = dio_result(pread(f, p.buf[k], n, foff + off), n);
			sem_post(&p.full[k]);
		}
		if (r && !ret)
			ret = r;
	}
	pthread_join(th, NULL);
	if (!ret)
		printf("bounce2 %s %llu bytes ns %llu chunk %llu\n", write ? "write" : "read",
		       (unsigned long long)len, (unsigned long long)(now_ns() - t0),
		       (unsigned long long)chunk);
	for (k = 0; k < 2; k++) {
		sem_destroy(&p.full[k]);
		sem_destroy(&p.empty[k]);
	}
out:
	if (f >= 0)
		close(f);
	free(p.buf[0]);
	free(p.buf[1]);
	return ret;
}

static int dcmp(int s, const char *file, uint64_t foff, uint64_t len, uint64_t aoff)
{
	const uint8_t *m;
	uint8_t buf[65536];
	uint64_t done = 0;
	int f, ret = map_all(s);

	if (ret)
		return ret;
	if (aoff > slot_size[s] || len > slot_size[s] - aoff)
		return -ERANGE;
	f = open(file, O_RDONLY);
	if (f < 0)
		return -errno;
	m = (const uint8_t *)slot_map[s] + aoff;
	while (done < len) {
		size_t want = len - done < sizeof(buf) ? len - done : sizeof(buf), i;
		ssize_t n = pread(f, buf, want, foff + done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		for (i = 0; i < (size_t)n; i++)
			if (m[done + i] != buf[i]) {
				printf("dcmp: first difference at offset %llu\n",
				       (unsigned long long)(done + i));
				close(f);
				return -EIO;
			}
		done += n;
	}
	close(f);
	if (!ret)
		printf("dcmp %llu bytes match\n", (unsigned long long)len);
	return ret;
}

static struct {
	int s;
	const char *file;
	uint64_t foff, len;
} bg_dio_args;

static void *bg_dio(void *arg)
{
	int ret = dio(0, bg_dio_args.s, bg_dio_args.file, bg_dio_args.foff, bg_dio_args.len, 0);

	(void)arg;
	printf("bgdio read: result %d\n", ret);
	bg_result = 0;
	return NULL;
}

static int va_loop(int gpu, uint64_t size, long n)
{
	uint64_t lo = ~0ULL, hi = 0;
	long i;

	for (i = 0; i < n; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = size };
		struct nvrs_free f;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			printf("iteration %ld: alloc failed: errno %d\n", i, errno);
			return -errno;
		}
		lo = a.va < lo ? a.va : lo;
		hi = a.va > hi ? a.va : hi;
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
	}
	printf("valoop: %ld iterations, VAs 0x%llx..0x%llx\n", n,
	       (unsigned long long)lo, (unsigned long long)hi);
	return 0;
}

/*
 * mapleak: mappings left behind after FREE must neither keep their VAs
 * reserved (every ALLOC succeeds, more times than the VA space holds SIZE)
 * nor ever reach the memory of an allocation that reuses their VAs.
 */
static int map_leak(int gpu, uint64_t size, long n)
{
	volatile uint32_t **maps = calloc(n, sizeof(*maps));
	uint64_t *vas = calloc(n, sizeof(*vas));
	struct nvrs_alloc b = { .gpu = gpu, .size = size };
	volatile uint32_t *q;
	long i, reused = -1, leaks = 0;

	if (!maps || !vas || n < 1)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = size };
		struct nvrs_free f;
		void *p;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			printf("iteration %ld: alloc failed: errno %d\n", i, errno);
			return -errno;
		}
		p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (p == MAP_FAILED) {
			printf("iteration %ld: mmap failed: errno %d\n", i, errno);
			return -errno;
		}
		maps[i] = p;
		vas[i] = a.va;
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
		if (!faults(maps[i])) {
			printf("iteration %ld: a freed allocation's mapping read data\n", i);
			leaks++;
		}
	}
	/* A new allocation at the VAs of an old mapping, written through its own. */
	if (ioctl(fd, NVRS_IOCTL_ALLOC, &b)) {
		printf("final alloc failed: errno %d\n", errno);
		return -errno;
	}
	for (i = 0; i < n; i++)
		if (vas[i] == b.va)
			reused = i;
	q = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, b.va);
	if (q == MAP_FAILED)
		return -errno;
	q[0] = 0x5ec0a11c;
	for (i = 0; i < n; i++)
		if (!faults(maps[i])) {
			printf("old mapping %ld (VA 0x%llx) read 0x%08x\n", i,
			       (unsigned long long)vas[i], maps[i][0]);
			leaks++;
		}
	printf("mapleak: %ld x (alloc 0x%llx, mmap, free); new VA 0x%llx is old mapping %ld's; %ld leaks\n",
	       n, (unsigned long long)size, (unsigned long long)b.va, reused, leaks);
	/* Without reuse the second half proves nothing. */
	if (reused < 0 || leaks)
		return -EIO;
	return 0;
}

/* mmaprace: the mapper publishes each VA; the freer frees it at once. */
struct mmap_race {
	int gpu;
	long n;
	_Atomic uint64_t va;		/* published, 0 once freed */
	_Atomic int done;
	void **maps;
	long mapped;
};

static void *race_freer(void *arg)
{
	struct mmap_race *r = arg;

	while (!atomic_load(&r->done)) {
		struct nvrs_free f = { .va = atomic_load(&r->va) };

		if (!f.va)
			continue;
		ioctl(fd, NVRS_IOCTL_FREE, &f);
		atomic_store(&r->va, 0);
	}
	return NULL;
}

/* Allocates (and writes) all it can of @gpu in a child process; waits on @go. */
static pid_t hog(int gpu, int ready[2], int go[2])
{
	pid_t pid = fork();

	if (pid == 0) {
		int f = open("/dev/nvrs", O_RDWR | O_CLOEXEC);
		uint64_t size = 256ULL << 20, total = 0;
		char c = 0;

		while (f >= 0 && size >= (1 << 16)) {
			struct nvrs_alloc a = { .gpu = gpu, .size = size };
			uint32_t *m;
			uint64_t i;

			if (ioctl(f, NVRS_IOCTL_ALLOC, &a)) {
				size /= 2;
				continue;
			}
			m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, a.va);
			if (m != MAP_FAILED)
				for (i = 0; i < size / 4; i += 1024)
					m[i] = 0x0dd0c0de;
			total += size;
		}
		printf("hog: %llu bytes allocated and written by pid %d\n",
		       (unsigned long long)total, getpid());
		fflush(stdout);
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	return pid;
}

static int mmap_race(int gpu, long n)
{
	struct mmap_race r = { .gpu = gpu, .n = n };
	long i, data = 0, survivors = 0;
	int ready[2], go[2], status;
	pthread_t th;
	pid_t pid;
	char c = 0;

	r.maps = calloc(n, sizeof(*r.maps));
	if (!r.maps)
		return -ENOMEM;
	pthread_create(&th, NULL, race_freer, &r);
	for (i = 0; i < n; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = 1 << 16 };
		void *m;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
			continue;
		atomic_store(&r.va, a.va);
		m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		/* Make sure it is freed before the checks below. */
		while (atomic_load(&r.va))
			;
		if (m != MAP_FAILED)
			r.maps[r.mapped++] = m;
	}
	atomic_store(&r.done, 1);
	pthread_join(th, NULL);
	for (i = 0; i < r.mapped; i++)
		if (!faults(r.maps[i]))
			data++;
	survivors = r.mapped;
	printf("mmaprace: %ld iterations, %ld mappings survived the free, %ld read data\n",
	       n, survivors, data);
	/* Another process takes and writes all the memory; old mappings still fault. */
	if (pipe(ready) || pipe(go))
		return -errno;
	pid = hog(gpu, ready, go);
	if (pid < 0 || read(ready[0], &c, 1) != 1)
		return -EIO;
	for (i = 0; i < r.mapped; i++)
		if (!faults(r.maps[i]))
			data++;
	if (write(go[1], &c, 1) != 1)
		return -EIO;
	waitpid(pid, &status, 0);
	printf("mmaprace: after another process wrote the memory, %ld reads of data in all\n", data);
	for (i = 0; i < r.mapped; i++)
		munmap(r.maps[i], 1 << 16);
	free(r.maps);
	return data ? -EIO : 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int bench_scrub(int gpu, uint64_t size, int n)
{
	uint64_t best_free = ~0ULL, best_memset = ~0ULL;
	char *anon;
	int i;

	anon = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (anon == MAP_FAILED)
		return -errno;
	for (i = 0; i < n; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = size };
		struct nvrs_free f;
		volatile uint8_t *m;
		uint64_t off, t;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
			return -errno;
		m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (m == MAP_FAILED)
			return -errno;
		for (off = 0; off < size; off += 1 << 16)
			m[off] = 1;
		munmap((void *)m, size);
		f.va = a.va;
		t = now_ns();
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
		t = now_ns() - t;
		best_free = t < best_free ? t : best_free;
		t = now_ns();
		memset(anon, 0, size);
		__asm__ volatile("" : : "r"(anon) : "memory");
		t = now_ns() - t;
		best_memset = t < best_memset ? t : best_memset;
	}
	munmap(anon, size);
	printf("benchscrub size %llu free_ns %llu memset_ns %llu\n", (unsigned long long)size,
	       (unsigned long long)best_free, (unsigned long long)best_memset);
	return 0;
}

/* stalerace: 8 threads, each with its own allocation, replaying stale pointers. */
struct stale_arg {
	uint64_t va;
	time_t deadline;
	long rounds;
	int err;
};

static void *stale_thread(void *arg)
{
	struct stale_arg *a = arg;
	char text[128];

	snprintf(text, sizeof(text), "stalereplay 0x%llx 0x10000 20", (unsigned long long)a->va);
	while (time(NULL) < a->deadline) {
		int ret = ctl_line(text);

		if (ret) {
			a->err = ret;
			break;
		}
		a->rounds += 20;
	}
	return NULL;
}

static int stale_race(int gpu, int seconds)
{
	struct stale_arg args[8];
	pthread_t th[8];
	long rounds = 0;
	int i, err = 0;

	for (i = 0; i < 8; i++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = 1 << 16 };

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
			return -errno;
		args[i] = (struct stale_arg){ .va = a.va, .deadline = time(NULL) + seconds };
		pthread_create(&th[i], NULL, stale_thread, &args[i]);
	}
	for (i = 0; i < 8; i++) {
		struct nvrs_free f = { .va = args[i].va };

		pthread_join(th[i], NULL);
		rounds += args[i].rounds;
		if (args[i].err) {
			printf("thread %d: errno %d (EIO: a stale pointer hit a live pin)\n", i, -args[i].err);
			err = args[i].err;
		}
		ioctl(fd, NVRS_IOCTL_FREE, &f);
	}
	printf("stalerace: %ld pin rounds, each replaying up to 64 stale pointer pairs\n", rounds);
	return err;
}

/* soak: see the command list. */
struct soak {
	int gpu, index;
	time_t deadline;
	_Atomic long ops, errors;
};

static void soak_error(struct soak *k, int err)
{
	/* Expected under the race: a revoked pin, a freed VA, no memory. */
	if (err != -ENOENT && err != -EINVAL && err != -EBUSY && err != -ENOMEM) {
		if (!k->errors++)
			printf("soak thread %d: errno %d\n", k->index, -err);
	}
}

static void soak_ctl(struct soak *k, const char *fmt, int s, uint64_t a, uint64_t b)
{
	char text[128];
	int ret;

	snprintf(text, sizeof(text), fmt, s, (unsigned long long)a, (unsigned long long)b);
	ret = ctl_line(text);
	if (ret)
		soak_error(k, ret);
	k->ops++;
}

static void *soak_owner(void *arg)
{
	struct soak *k = arg;
	unsigned int seed = 7 + k->index;
	int s = 8 + k->index;

	while (time(NULL) < k->deadline) {
		struct nvrs_alloc a = { .gpu = k->gpu, .size = (1 + rnd(&seed, 32)) << 16 };
		struct nvrs_free f;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			soak_error(k, -errno);
			continue;
		}
		soak_ctl(k, "soakpin %d 0x%llx 0x%llx", s, a.va, a.size);
		if (rnd(&seed, 2))
			soak_ctl(k, "soakmap %d", s, 0, 0);
		usleep(rnd(&seed, 500));
		if (rnd(&seed, 2))
			soak_ctl(k, "soakput %d", s, 0, 0);
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			soak_error(k, -errno);
		k->ops++;
	}
	return NULL;
}

static void *soak_putter(void *arg)
{
	struct soak *k = arg;
	unsigned int seed = 99;
	static const char *const cmds[] = { "soakput %d", "soakunmap %d", "soakmap %d" };

	while (time(NULL) < k->deadline) {
		soak_ctl(k, cmds[rnd(&seed, 3)], 8 + rnd(&seed, 4), 0, 0);
		usleep(rnd(&seed, 300));
	}
	return NULL;
}

static void *soak_mapper(void *arg)
{
	struct soak *k = arg;
	unsigned int seed = 1234 + k->index;

	while (time(NULL) < k->deadline) {
		struct nvrs_alloc a = { .gpu = k->gpu, .size = (1 + rnd(&seed, 16)) << 16 };
		struct nvrs_free f;
		volatile uint32_t *m;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			soak_error(k, -errno);
			continue;
		}
		m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (m != MAP_FAILED) {
			m[rnd(&seed, a.size / 4)] = 0x50a50a50;
			munmap((void *)m, a.size);
		} else {
			soak_error(k, -errno);
		}
		f.va = a.va;
		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			soak_error(k, -errno);
		k->ops++;
	}
	return NULL;
}

static void *soak_exiter(void *arg)
{
	struct soak *k = arg;

	while (time(NULL) < k->deadline) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			/* A process of its own: allocates, maps, pins, exits holding it all. */
			int f = open("/dev/nvrs", O_RDWR | O_CLOEXEC);
			struct nvrs_alloc a = { .gpu = k->gpu, .size = 1 << 20 };
			char text[96];
			volatile uint32_t *m;

			if (f < 0 || ioctl(f, NVRS_IOCTL_ALLOC, &a))
				_exit(1);
			m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, f, a.va);
			if (m != MAP_FAILED)
				m[0] = 1;
			snprintf(text, sizeof(text), "soakpin 12 0x%llx 0x%llx",
				 (unsigned long long)a.va, (unsigned long long)a.size);
			ctl_line(text);
			ctl_line("soakmap 12");
			_exit(0);
		}
		if (pid > 0)
			waitpid(pid, &status, 0);
		k->ops++;
	}
	return NULL;
}

/*
 * Stale tables after the quarantine wraps (issue 20): every fourth round a
 * pin of ctl slot 13 revoked by FREE goes to the consumer's stale pool; every
 * round the consumer pins and puts the thread's own allocation SOAK_CHURN
 * times and checks the pool, while the other threads pin (soakpin compares
 * every new table with the pool too). The pool's counts are judged after the
 * race (stalestat).
 */
#define SOAK_STALE_SLOT 13
#define SOAK_CHURN 64

static void *soak_stale(void *arg)
{
	struct soak *k = arg;
	struct nvrs_alloc own = { .gpu = k->gpu, .size = 1 << 16 };
	char text[96];
	long i;

	if (ioctl(fd, NVRS_IOCTL_ALLOC, &own)) {
		printf("soak thread %d: its allocation: errno %d\n", k->index, errno);
		k->errors++;
		return NULL;
	}
	for (i = 0; time(NULL) < k->deadline; i++) {
		struct nvrs_alloc a = { .gpu = k->gpu, .size = 1 << 16 };
		struct nvrs_free f;
		int ret;

		/* A pool of 64 kept every 4 rounds: a table stays 16384 pins or more. */
		if (i % 4 == 0 && !ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			soak_ctl(k, "pin %d 0x%llx 0x10000", SOAK_STALE_SLOT, a.va, 0);
			/* FREE revokes the pin (if it was made): its table goes stale. */
			f.va = a.va;
			if (ioctl(fd, NVRS_IOCTL_FREE, &f))
				soak_error(k, -errno);
			soak_ctl(k, "stalekeep %d", SOAK_STALE_SLOT, 0, 0);
		} else if (i % 4 == 0) {
			soak_error(k, -errno);
		}
		snprintf(text, sizeof(text), "stalecheck 0x%llx 0x10000 %d",
			 (unsigned long long)own.va, SOAK_CHURN);
		ret = ctl_line(text);
		if (ret)
			soak_error(k, ret);
		k->ops++;
	}
	return NULL;
}

/*
 * VA retention (issue 20): ALLOC 64 KiB, mmap, touch, FREE, the mapping
 * kept (the last soak_held_max of them: twice the VA space), racing the
 * others' ALLOCs. A mapping of a freed allocation must not hold its VA; the
 * others hold at most about 16 MiB, so failed ALLOCs here are counted and
 * printed, and soak_retain_check() judges after the race.
 */
static void **soak_held;
static long soak_held_max, soak_held_next, soak_retain_rounds, soak_retain_enomem;

static int soak_retain_round(int gpu)
{
	struct nvrs_alloc a = { .gpu = gpu, .size = 1 << 16 };
	struct nvrs_free f;
	void *m;

	if (ioctl(fd, NVRS_IOCTL_ALLOC, &a))
		return -errno;
	m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
	if (m != MAP_FAILED)
		*(volatile uint32_t *)m = 0x50a50a50;
	f.va = a.va;
	if (ioctl(fd, NVRS_IOCTL_FREE, &f))
		return -errno;
	if (m == MAP_FAILED)
		return -EFAULT;
	if (soak_held[soak_held_next])
		munmap(soak_held[soak_held_next], 1 << 16);
	soak_held[soak_held_next] = m;
	soak_held_next = (soak_held_next + 1) % soak_held_max;
	return 0;
}

static void *soak_retain(void *arg)
{
	struct soak *k = arg;

	while (time(NULL) < k->deadline) {
		int ret = soak_retain_round(k->gpu);

		if (ret == -ENOMEM)
			soak_retain_enomem++;
		else if (ret)
			soak_error(k, ret);
		soak_retain_rounds++;
		k->ops++;
	}
	return NULL;
}

/*
 * After the race, nothing else allocating: with the race's freed mappings
 * still kept, as many more rounds as the VA space holds twice over (the
 * ring of kept mappings then covers it twice): every ALLOC must succeed.
 */
static long soak_retain_check(int gpu, int va_mib)
{
	long i, failed = 0, rounds = soak_held_max;

	for (i = 0; i < rounds; i++) {
		int ret = soak_retain_round(gpu);

		if (ret && !failed++)
			printf("soak: VA retention: final ALLOC %ld of %ld: errno %d\n", i + 1,
			       rounds, -ret);
	}
	printf("soak: VA retention: %ld rounds in the race (%ld failed ALLOCs), then %ld of %ld rounds in a %d MiB VA space failed\n",
	       soak_retain_rounds, soak_retain_enomem, failed, rounds, va_mib);
	for (i = 0; i < soak_held_max; i++)
		if (soak_held[i])
			munmap(soak_held[i], 1 << 16);
	free(soak_held);
	return failed;
}

static int soak(int gpu, int seconds, int va_mib)
{
	void *(*fns[10])(void *) = { soak_owner, soak_owner, soak_owner, soak_owner,
				    soak_putter, soak_mapper, soak_exiter, soak_mapper,
				    soak_stale, soak_retain };
	int i, n = va_mib > 0 ? 10 : 9;
	struct soak k[10];
	pthread_t th[10];
	long ops = 0, errors = 0;
	char *stale[] = { "stalecheck" }, *drop[] = { "staledrop" }, *stat[] = { "stalestat" };

	if (va_mib > 0) {
		soak_held_max = 2L * va_mib * 16;
		soak_held = calloc(soak_held_max, sizeof(*soak_held));
		if (!soak_held)
			return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		k[i] = (struct soak){ .gpu = gpu, .index = i, .deadline = time(NULL) + seconds };
		pthread_create(&th[i], NULL, fns[i], &k[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		ops += k[i].ops;
		errors += k[i].errors;
	}
	for (i = 8; i <= 12; i++) {
		char text[32];

		snprintf(text, sizeof(text), "soakput %d", i);
		ctl_line(text);
	}
	/* The pool's last check and late puts; the scenario judges its counts. */
	if (do_ctl(stale, 1) || do_ctl(drop, 1) || do_ctl(stat, 1))
		errors++;
	if (va_mib > 0)
		errors += soak_retain_check(gpu, va_mib);
	printf("soak: %ld operations in %d s by %d threads, %ld unexpected errors\n", ops, seconds,
	       n, errors);
	return errors ? -EIO : 0;
}

/* Runs one command; returns 0 or a negative errno. */
static int run(int argc, char **argv);

/* One field of a "pstats" entry: ":VALUE" if it ends within SIZE filled bytes, ":-" if not. */
static void field(unsigned int size, size_t end, unsigned int value)
{
	if (size >= end)
		printf(":%u", value);
	else
		printf(":-");
}

/* The fragmented GPU of "frag": allocation k at frag_va[k], mapped at frag_map[k]. */
#define FRAG_MAX 65536
#define FRAG_NEEDLE 0xc0de0000u
static uint64_t frag_va[FRAG_MAX];
static volatile uint32_t *frag_map[FRAG_MAX];
static int frag_n;

static int frag(int gpu, int max)
{
	int k, kept = 0, err = 0;

	for (frag_n = 0; frag_n < max; frag_n++) {
		struct nvrs_alloc a = { .gpu = gpu, .size = 1 << 16 };
		volatile uint32_t *m;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			err = errno;
			break;
		}
		m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (m == MAP_FAILED)
			return -errno;
		frag_va[frag_n] = a.va;
		frag_map[frag_n] = m;
		for (k = 0; k < 4; k++)
			m[k] = FRAG_NEEDLE + frag_n;
		m[(1 << 14) - 1] = ~(FRAG_NEEDLE + frag_n);
	}
	/* Running out of memory is how an unbounded fill ends. */
	if (err && err != ENOMEM)
		return -err;
	for (k = 1; k < frag_n; k += 2) {
		struct nvrs_free f = { .va = frag_va[k] };

		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
		munmap((void *)frag_map[k], 1 << 16);
		frag_map[k] = NULL;
	}
	for (k = 0; k < frag_n; k += 2)
		kept++;
	printf("frag allocated %d kept %d\n", frag_n, kept);
	return 0;
}

static int frag_check(void)
{
	int k, bad = 0, kept = 0;
	FILE *con;

	for (k = 0; k < frag_n; k++) {
		volatile uint32_t *m = frag_map[k];

		if (!m)
			continue;
		kept++;
		if (m[0] != FRAG_NEEDLE + k || m[3] != FRAG_NEEDLE + k ||
		    m[(1 << 14) - 1] != (uint32_t)~(FRAG_NEEDLE + k)) {
			if (bad++ < 5)
				printf("allocation %d reads 0x%08x\n", k, m[0]);
		}
	}
	printf("fragcheck %d kept, %d wrong\n", kept, bad);
	/* The runner checks every kept needle in the backing files at the next sync. */
	con = fopen("/dev/console", "w");
	if (con) {
		fprintf(con, "nvrs-hostcheck: present 0x%x %d 2\n", FRAG_NEEDLE, (frag_n + 1) / 2);
		fclose(con);
	}
	return bad ? -EIO : 0;
}

static int export_dmabuf(uint64_t va, uint64_t size, uint32_t flags, int32_t want_fd)
{
	struct nvrs_export_dmabuf e = {
		.va = va, .size = size, .flags = flags, .fd = want_fd,
	};
	int ret;

	arm();
	ret = ioctl(fd, NVRS_IOCTL_EXPORT_DMABUF, &e) ? -errno : e.fd;
	disarm();
	if (ret >= 0 && !(fcntl(ret, F_GETFD) & FD_CLOEXEC)) {
		printf("dma-buf descriptor %d without O_CLOEXEC\n", ret);
		return -EINVAL;
	}
	return ret;
}

/* Runs @argv in a child that gets SLOT's dma-buf only over a socket. */
static int send_fd(int s, int argc, char **argv)
{
	char data = 'd', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int sv[2], status;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -errno;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(sv[0]);
		close(slot_fd[s]);
		slot_fd[s] = -1;
		if (recvmsg(sv[1], &msg, 0) != 1)
			_exit(EIO);
		c = CMSG_FIRSTHDR(&msg);
		if (!c || c->cmsg_type != SCM_RIGHTS)
			_exit(EIO);
		memcpy(&slot_fd[s], CMSG_DATA(c), sizeof(int));
		printf("child got dma-buf descriptor %d\n", slot_fd[s]);
		status = -run(argc, argv);
		fflush(stdout);
		_exit(status);
	}
	close(sv[1]);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &slot_fd[s], sizeof(int));
	if (sendmsg(sv[0], &msg, 0) != 1)
		return -errno;
	close(sv[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
}

static int run(int argc, char **argv)
{
	const char *cmd = argv[0];
	int ret;

	if (!strcmp(cmd, "sleep")) {
		usleep(atoi(argv[1]) * 1000);
		return 0;
	}
	if (!strcmp(cmd, "ctl"))
		return do_ctl(argv + 1, argc - 1);
	if (!strcmp(cmd, "ctlf") && argc >= 3)
		return do_ctl_at(argv[1], argv + 2, argc - 2);
	if (!strcmp(cmd, "fail") && argc >= 3) {
		fail_n = atoi(argv[1]);
		fail_injected = 0;
		fail_errno = 0;
		ret = run(argc - 2, argv + 2);
		if (fail_errno) {
			/* No "injected" line: a sweep must not take this for a result. */
			printf("fail %d unavailable: fail-nth: %s (result %d)\n", fail_n,
			       strerror(fail_errno), ret);
			ret = -fail_errno;
		} else {
			printf("fail %d injected %d result %d\n", fail_n, fail_injected, ret);
		}
		fail_n = 0;
		return ret;
	}
	if (!strcmp(cmd, "write") && argc == 3) {
		int w = open(argv[1], O_WRONLY | O_CLOEXEC);

		if (w < 0)
			return -errno;
		arm();
		ret = write(w, argv[2], strlen(argv[2])) < 0 ? -errno : 0;
		disarm();
		close(w);
		return ret;
	}
	if (!strcmp(cmd, "benchwrite") && argc == 3) {
		int w = open(argv[1], O_WRONLY | O_CLOEXEC);
		uint64_t t0;

		if (w < 0)
			return -errno;
		t0 = now_ns();
		ret = write(w, argv[2], strlen(argv[2])) < 0 ? -errno : 0;
		printf("benchwrite ns %llu\n", (unsigned long long)(now_ns() - t0));
		close(w);
		return ret;
	}
	if (!strcmp(cmd, "anon") && argc == 3) {
		int s = slot(argv[1]);
		uint64_t size = parse_size(argv[2]);
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (m == MAP_FAILED)
			return -errno;
		slot_va[s] = (uintptr_t)m;
		slot_size[s] = size;
		return 0;
	}
	if (!strcmp(cmd, "sh") && argc == 2) {
		fflush(stdout);
		ret = system(argv[1]);
		return ret ? -EIO : 0;
	}
	if (!strcmp(cmd, "sendfd") && argc >= 3)
		return send_fd(slot(argv[1]), argc - 2, argv + 2);
	if (!strcmp(cmd, "close") && argc == 2) {
		int s = slot(argv[1]);

		if (slot_dbmap[s])
			munmap((void *)slot_dbmap[s], slot_dbsize[s]);
		slot_dbmap[s] = NULL;

		/*
		 * The last close releases the dma-buf, and with it the memory
		 * of a freed allocation (fput's work runs before close returns
		 * to user space, in this thread: fault injection covers it).
		 */
		arm();
		ret = close(slot_fd[s]) ? -errno : 0;
		disarm();
		slot_fd[s] = -1;
		return ret;
	}
	if ((!strcmp(cmd, "dbwr") || !strcmp(cmd, "dbrd")) && argc == 4)
		return map_word(slot_fd[slot(argv[1])], 0, parse_size(argv[2]),
				strtoul(argv[3], NULL, 0), cmd[2] == 'w');
	if (!strcmp(cmd, "dbkeep") && argc == 2) {
		int s = slot(argv[1]);
		void *m = mmap(NULL, slot_dbsize[s], PROT_READ | PROT_WRITE,
			       MAP_SHARED, slot_fd[s], 0);

		if (m == MAP_FAILED)
			return -errno;
		slot_dbmap[s] = m;
		return 0;
	}
	if (!strcmp(cmd, "dbfault") && argc == 3) {
		int s = slot(argv[1]);

		if (!slot_dbmap[s])
			return -EINVAL;
		return faults(slot_dbmap[s] + parse_size(argv[2]) / 4) ? -EFAULT : 0;
	}
	if (!strcmp(cmd, "dbmmap") && argc == 4) {
		int s = slot(argv[1]);

		return map_try(slot_fd[s], 0, slot_dbsize[s], argv[2], argv[3]);
	}
	if (!strcmp(cmd, "benchexport") && argc == 4) {
		int s = slot(argv[1]), n = atoi(argv[3]), i;
		uint64_t len = parse_size(argv[2]), t0;

		ret = open_dev();
		if (ret || n <= 0)
			return ret ? ret : -EINVAL;
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			ret = export_dmabuf(slot_va[s], len, 0, 0);
			if (ret < 0)
				return ret;
			close(ret);
		}
		printf("benchexport len %llu ns_per_op %llu\n", (unsigned long long)len,
		       (unsigned long long)((now_ns() - t0) / n));
		return 0;
	}
	if (!strcmp(cmd, "benchcompact") && argc == 4) {
		struct nvrs_gpu_stats a = { .index = atoi(argv[3]) }, b = a;
		uint64_t t0, compact_ns, memcpy_ns, bytes;
		char *x, *y;
		int w;

		ret = open_dev();
		if (ret || ioctl(fd, NVRS_IOCTL_GPU_STATS, &a))
			return ret ? ret : -errno;
		w = open(argv[1], O_WRONLY | O_CLOEXEC);
		if (w < 0)
			return -errno;
		t0 = now_ns();
		ret = write(w, argv[2], strlen(argv[2])) < 0 ? -errno : 0;
		compact_ns = now_ns() - t0;
		close(w);
		if (ret || ioctl(fd, NVRS_IOCTL_GPU_STATS, &b))
			return ret ? ret : -errno;
		bytes = b.compacted_bytes - a.compacted_bytes;
		x = malloc(bytes + 1);
		y = malloc(bytes + 1);
		if (!x || !y)
			return -ENOMEM;
		memset(x, 1, bytes + 1);
		memset(y, 2, bytes + 1);
		t0 = now_ns();
		memcpy(y, x, bytes);
		memcpy_ns = now_ns() - t0;
		printf("benchcompact bytes %llu ns %llu memcpy_ns %llu check %d\n",
		       (unsigned long long)bytes, (unsigned long long)compact_ns,
		       (unsigned long long)memcpy_ns, y[bytes / 2]);
		free(x);
		free(y);
		return 0;
	}
	if (!strcmp(cmd, "frag") && (argc == 2 || argc == 3)) {
		int max = argc == 3 ? atoi(argv[2]) : FRAG_MAX;

		ret = open_dev();
		if (max < 1 || max > FRAG_MAX)
			return -EINVAL;
		return ret ? ret : frag(atoi(argv[1]), max);
	}
	if (!strcmp(cmd, "fragcheck") && argc == 1)
		return frag_check();
	if (!strcmp(cmd, "fragpin") && argc == 3) {
		int k = atoi(argv[2]);
		char va[32], len[] = "0x10000";
		char *words[] = { "pin", argv[1], va, len };

		if (k < 0 || k >= frag_n || !frag_map[k])
			return -EINVAL;
		snprintf(va, sizeof(va), "0x%llx", (unsigned long long)frag_va[k]);
		return do_ctl(words, 4);
	}
	if (!strcmp(cmd, "fragexport") && argc == 2) {
		int k = atoi(argv[1]);

		if (k < 0 || k >= frag_n || !frag_map[k])
			return -EINVAL;
		ret = export_dmabuf(frag_va[k], 1 << 16, 0, 0);
		return ret < 0 ? ret : 0;
	}
	if (!strcmp(cmd, "foreign") && argc == 3) {
		int s = slot(argv[1]), status;
		pid_t pid = fork();

		if (pid == 0) {
			close(fd);
			fd = -1;
			ret = open_dev();
			if (!ret)
				ret = export_dmabuf(slot_va[s], parse_size(argv[2]), 0, 0);
			_exit(ret < 0 ? -ret : 0);
		}
		if (pid < 0)
			return -errno;
		waitpid(pid, &status, 0);
		return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
	}
	if (!strcmp(cmd, "child")) {
		pid_t pid = fork();
		int status;

		if (pid == 0)
			_exit(-run(argc - 1, argv + 1));
		waitpid(pid, &status, 0);
		return WIFEXITED(status) ? -WEXITSTATUS(status) : -EINTR;
	}
	ret = open_dev();
	if (ret)
		return ret;
	if (!strcmp(cmd, "count")) {
		uint32_t n;

		if (ioctl(fd, NVRS_IOCTL_GPU_COUNT, &n))
			return -errno;
		printf("gpus %u\n", n);
	} else if (!strcmp(cmd, "info") && argc == 2) {
		struct nvrs_gpu_info info = { .index = atoi(argv[1]) };

		if (ioctl(fd, NVRS_IOCTL_GPU_INFO, &info))
			return -errno;
		printf("gpu %u %s %s chipset 0x%x fb %llu free %llu\n",
		       info.index, info.name, info.chip, info.chipset,
		       (unsigned long long)info.fb_size,
		       (unsigned long long)info.fb_free);
	} else if (!strcmp(cmd, "stats") && argc == 2) {
		struct nvrs_gpu_stats st = { .index = atoi(argv[1]) };
		int i;

		if (ioctl(fd, NVRS_IOCTL_GPU_STATS, &st))
			return -errno;
		printf("stats gpu %u version %u fb_total %llu fb_used %llu fb_free %llu largest_free %llu bar1_total %llu bar1_pinned %llu pins %u dma_mappings %u fragmentation %u levels %u dmabufs %u dmabuf_mappings %u compactions %llu compacted_bytes %llu\n",
		       st.index, st.version, (unsigned long long)st.fb_total,
		       (unsigned long long)st.fb_used, (unsigned long long)st.fb_free,
		       (unsigned long long)st.largest_free, (unsigned long long)st.bar1_total,
		       (unsigned long long)st.bar1_pinned, st.pins, st.dma_mappings,
		       st.fragmentation_permille, st.chunk_levels, st.dmabufs,
		       st.dmabuf_mappings, (unsigned long long)st.compactions,
		       (unsigned long long)st.compacted_bytes);
		printf("stats faults injected %llu revoked %llu bar1_budget %llu\n",
		       (unsigned long long)st.faults_injected,
		       (unsigned long long)st.faults_revoked,
		       (unsigned long long)st.bar1_budget);
		printf("stats p2pdma state %u bytes %llu\n", st.p2pdma_state,
		       (unsigned long long)st.p2pdma_bytes);
		for (i = 0; i < (int)st.chunk_levels && i < NVRS_CHUNK_SIZES; i++)
			printf("stats size %llu free %llu allocated %llu split %llu temp_pinned %llu\n",
			       (unsigned long long)st.chunk_size[i],
			       (unsigned long long)st.chunks[NVRS_CHUNK_FREE][i],
			       (unsigned long long)st.chunks[NVRS_CHUNK_ALLOCATED][i],
			       (unsigned long long)st.chunks[NVRS_CHUNK_IS_SPLIT][i],
			       (unsigned long long)st.chunks[NVRS_CHUNK_TEMP_PINNED][i]);
	} else if (!strcmp(cmd, "procs") && argc == 1) {
		static struct nvrs_process_usage u[64];
		struct nvrs_processes pr = {
			.count = 64, .entries = (uintptr_t)u,
		};
		unsigned int i;

		if (ioctl(fd, NVRS_IOCTL_PROCESSES, &pr))
			return -errno;
		printf("procs self %d count %u", (int)getpid(), pr.count);
		for (i = 0; i < pr.count && i < 64; i++)
			printf(" %d:%u:%llu", u[i].pid, u[i].gpu,
			       (unsigned long long)u[i].bytes);
		printf("\n");
	} else if (!strcmp(cmd, "pstats") && argc <= 2) {
		/* Room for 64 entries of a size just past the kernel's largest. */
		static uint64_t buf[64 * 520];
		unsigned int stride = argc == 2 ? (unsigned int)atoi(argv[1]) :
				      sizeof(struct nvrs_process_entry);
		struct nvrs_process_stats ps = {
			.count = 64, .entry_size = stride, .entries = (uintptr_t)buf,
		};
		unsigned int i, j;

		if (stride > 4160) {
			fprintf(stderr, "pstats: SIZE at most 4160\n");
			return -EINVAL;
		}
		memset(buf, 0xa5, sizeof(buf));
		if (ioctl(fd, NVRS_IOCTL_PROCESS_STATS, &ps))
			return -errno;
		printf("pstats self %d version %u count %u size %u", (int)getpid(),
		       ps.version, ps.count, ps.entry_size);
		for (i = 0; i < ps.count && i < 64; i++) {
			unsigned char *b = (unsigned char *)buf + (size_t)i * stride;
			struct nvrs_process_entry e = { 0 };

			memcpy(&e, b, ps.entry_size < sizeof(e) ? ps.entry_size : sizeof(e));
			printf(" %d:%u:%llu", e.pid, e.gpu, (unsigned long long)e.bytes);
			field(ps.entry_size, offsetof(struct nvrs_process_entry, pins), e.allocations);
			field(ps.entry_size, offsetof(struct nvrs_process_entry, dmabufs), e.pins);
			field(ps.entry_size, offsetof(struct nvrs_process_entry, reserved), e.dmabufs);
			for (j = ps.entry_size; j < stride; j++) {
				if (b[j]) {
					printf("\n");
					fprintf(stderr, "pstats: entry %u byte %u is %#x, not zero\n",
						i, j, b[j]);
					return -EIO;
				}
			}
		}
		printf("\n");
	} else if (!strcmp(cmd, "many") && (argc == 3 ||
					    (argc == 4 && !strcmp(argv[3], "map")))) {
		int ret = many(atoi(argv[1]), atoi(argv[2]), argc == 4);

		if (ret)
			return ret;
		printf("many gpu %s allocated %d%s\n", argv[1], atoi(argv[2]),
		       argc == 4 ? " mapped" : "");
	} else if (!strcmp(cmd, "alloc") && argc >= 4) {
		struct nvrs_alloc a = {
			.gpu = atoi(argv[2]), .size = parse_size(argv[3]),
		};
		int i, s = slot(argv[1]);

		for (i = 4; i < argc; i++) {
			if (!strcmp(argv[i], "contig"))
				a.flags |= NVRS_ALLOC_CONTIGUOUS;
			else if (!strcmp(argv[i], "zero"))
				a.flags |= NVRS_ALLOC_ZERO;
			else if (!strcmp(argv[i], "p2pdma"))
				a.flags |= NVRS_ALLOC_P2PDMA;
			else
				a.flags |= strtoul(argv[i], NULL, 0);
		}
		arm();
		ret = ioctl(fd, NVRS_IOCTL_ALLOC, &a) ? -errno : 0;
		disarm();
		if (ret)
			return ret;
		slot_va[s] = a.va;
		slot_size[s] = a.size;
		printf("alloc %c va 0x%llx size %llu\n", 'A' + s,
		       (unsigned long long)a.va, (unsigned long long)a.size);
	} else if (!strcmp(cmd, "export") && argc >= 4) {
		int s = slot(argv[1]);
		uint64_t len = parse_size(argv[3]);

		ret = export_dmabuf(slot_va[s] + parse_size(argv[2]), len,
				    argc > 4 ? strtoul(argv[4], NULL, 0) : 0, 0);
		if (ret < 0)
			return ret;
		slot_fd[s] = ret;
		slot_dbsize[s] = len;
		printf("export %c fd %d size %llu\n", 'A' + s, ret,
		       (unsigned long long)len);
	} else if (!strcmp(cmd, "exportva") && argc == 5) {
		ret = export_dmabuf(strtoull(argv[1], NULL, 0), parse_size(argv[2]),
				    strtoul(argv[3], NULL, 0), atoi(argv[4]));
		if (ret < 0)
			return ret;
		close(ret);
	} else if ((!strcmp(cmd, "dio") || !strcmp(cmd, "uring") || !strcmp(cmd, "bounce")) &&
		   (argc == 6 || argc == 7) &&
		   (!strcmp(argv[1], "read") || !strcmp(argv[1], "write"))) {
		int (*op)(int, int, const char *, uint64_t, uint64_t, uint64_t) =
			cmd[0] == 'd' ? dio : cmd[0] == 'u' ? uring : bounce;

		return op(argv[1][0] == 'w', slot(argv[2]), argv[3], parse_size(argv[4]),
			  parse_size(argv[5]), argc == 7 ? parse_size(argv[6]) : 0);
	} else if (!strcmp(cmd, "ramdio") && argc == 5 &&
		   (!strcmp(argv[1], "read") || !strcmp(argv[1], "write"))) {
		return ramdio(argv[1][0] == 'w', argv[2], parse_size(argv[3]), parse_size(argv[4]));
	} else if (!strcmp(cmd, "bounce2") && argc == 7 &&
		   (!strcmp(argv[1], "read") || !strcmp(argv[1], "write"))) {
		return bounce2(argv[1][0] == 'w', slot(argv[2]), argv[3], parse_size(argv[4]),
			       parse_size(argv[5]), parse_size(argv[6]));
	} else if (!strcmp(cmd, "dcmp") && (argc == 5 || argc == 6)) {
		return dcmp(slot(argv[1]), argv[2], parse_size(argv[3]), parse_size(argv[4]),
			    argc == 6 ? parse_size(argv[5]) : 0);
	} else if (!strcmp(cmd, "bgdio") && argc == 6 && !strcmp(argv[1], "read")) {
		bg_dio_args.s = slot(argv[2]);
		bg_dio_args.file = argv[3];
		bg_dio_args.foff = parse_size(argv[4]);
		bg_dio_args.len = parse_size(argv[5]);
		/* Mapped (and faulted) here, so the thread only reads. */
		ret = map_all(bg_dio_args.s);
		if (ret)
			return ret;
		bg_running = 1;
		pthread_create(&bg_thread, NULL, bg_dio, NULL);
	} else if (!strcmp(cmd, "race") && argc == 3) {
		return race(atoi(argv[1]), atoi(argv[2]));
	} else if (!strcmp(cmd, "bgfree") && (argc == 2 || argc == 3)) {
		static uint64_t va;

		va = slot_va[slot(argv[1])];
		bg_delay_ms = argc == 3 ? atoi(argv[2]) : 0;
		bg_running = 1;
		pthread_create(&bg_thread, NULL, bg_free, &va);
	} else if (!strcmp(cmd, "bgalloc") && argc >= 4) {
		int i;

		bg_alloc_slot = slot(argv[1]);
		bg_alloc_req = (struct nvrs_alloc){
			.gpu = atoi(argv[2]), .size = parse_size(argv[3]),
		};
		for (i = 4; i < argc; i++)
			bg_alloc_req.flags |= !strcmp(argv[i], "p2pdma") ?
				NVRS_ALLOC_P2PDMA : strtoul(argv[i], NULL, 0);
		bg_running = 1;
		pthread_create(&bg_thread, NULL, bg_alloc, NULL);
	} else if (!strcmp(cmd, "bgclose") && argc == 1) {
		int f = fd;

		if (bg_closer)
			return -EBUSY;
		fd = -1;
		bg_result = 0;
		return bg_close_start(f);
	} else if (!strcmp(cmd, "tombflood") && argc == 5) {
		return tomb_flood(atoi(argv[1]), parse_size(argv[2]), atoi(argv[3]),
				  atoi(argv[4]));
	} else if (!strcmp(cmd, "forkread") && argc == 2) {
		return fork_read(slot(argv[1]));
	} else if (!strcmp(cmd, "join") && argc == 1) {
		int ret = bg_close_join();

		if (bg_running)
			pthread_join(bg_thread, NULL);
		bg_running = 0;
		return ret ? ret : bg_result;
	} else if (!strcmp(cmd, "forkhold") && argc == 2) {
		pid_t pid = fork();

		FILE *f;

		if (pid == 0) {
			usleep(atoi(argv[1]) * 1000);
			_exit(0);
		}
		if (pid < 0)
			return -errno;
		f = fopen("/tmp/forkhold.pid", "w");
		if (!f)
			return -errno;
		fprintf(f, "%d\n", pid);
		fclose(f);
	} else if (!strcmp(cmd, "benchscrub") && argc == 4) {
		return bench_scrub(atoi(argv[1]), parse_size(argv[2]), atoi(argv[3]));
	} else if (!strcmp(cmd, "mmap") && argc == 4) {
		int s = slot(argv[1]);

		return map_try(fd, slot_va[s], slot_size[s], argv[2], argv[3]);
	} else if (!strcmp(cmd, "rdonly") && argc == 1) {
		close(fd);
		fd = open("/dev/nvrs", O_RDONLY | O_CLOEXEC);
		return fd < 0 ? -errno : 0;
	} else if (!strcmp(cmd, "holes") && argc == 3) {
		return holes(atoi(argv[1]), parse_size(argv[2]));
	} else if (!strcmp(cmd, "exitbench") && (argc == 4 ||
						 (argc == 5 && !strcmp(argv[4], "map")))) {
		return exit_bench(atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), argc == 5);
	} else if (!strcmp(cmd, "mapall") && argc == 2) {
		return map_all(slot(argv[1]));
	} else if (!strcmp(cmd, "keptfault") && argc == 3) {
		int s = slot(argv[1]);
		uint64_t off = parse_size(argv[2]);

		if (!slot_map[s] || off >= slot_size[s])
			return -EINVAL;
		return faults((volatile uint32_t *)((char *)slot_map[s] + off)) ? -EFAULT : 0;
	} else if (!strcmp(cmd, "fill") && argc == 3) {
		return fill(slot(argv[1]), strtoul(argv[2], NULL, 0));
	} else if (!strcmp(cmd, "zero") && argc == 2) {
		return check_zero(slot(argv[1]));
	} else if (!strcmp(cmd, "valoop") && argc == 4) {
		return va_loop(atoi(argv[1]), parse_size(argv[2]), atol(argv[3]));
	} else if (!strcmp(cmd, "mapleak") && argc == 4) {
		return map_leak(atoi(argv[1]), parse_size(argv[2]), atol(argv[3]));
	} else if (!strcmp(cmd, "mmaprace") && argc == 3) {
		return mmap_race(atoi(argv[1]), atol(argv[2]));
	} else if (!strcmp(cmd, "soak") && (argc == 3 || argc == 4)) {
		return soak(atoi(argv[1]), atoi(argv[2]), argc == 4 ? atoi(argv[3]) : 0);
	} else if (!strcmp(cmd, "stalerace") && argc == 3) {
		return stale_race(atoi(argv[1]), atoi(argv[2]));
	} else if (!strcmp(cmd, "free") && argc == 2) {
		struct nvrs_free f = { .va = slot_va[slot(argv[1])] };

		arm();
		ret = ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0;
		disarm();
		return ret;
	} else if (!strcmp(cmd, "freeva") && argc == 2) {
		struct nvrs_free f = { .va = strtoull(argv[1], NULL, 0) };

		if (ioctl(fd, NVRS_IOCTL_FREE, &f))
			return -errno;
	} else if (!strcmp(cmd, "raw") && argc == 3) {
		if (ioctl(fd, strtoul(argv[1], NULL, 0),
			  (void *)(uintptr_t)strtoull(argv[2], NULL, 0)))
			return -errno;
	} else if (!strcmp(cmd, "usefree") && argc == 2) {
		return use_after_free(slot(argv[1]));
	} else if ((!strcmp(cmd, "wr") || !strcmp(cmd, "rd")) && argc == 4) {
		return map_word(fd, slot_va[slot(argv[1])], parse_size(argv[2]),
				strtoul(argv[3], NULL, 0), cmd[0] == 'w');
	} else {
		fprintf(stderr, "nvrs-tool: bad command '%s'\n", cmd);
		exit(2);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;

	for (int s = 0; s < 26; s++)
		slot_fd[s] = -1;
	/* Commands are separated by ";" arguments. */
	while (i < argc) {
		int start = i, expect = 0, ret;

		while (i < argc && strcmp(argv[i], ";"))
			i++;
		argv[i < argc ? i : argc] = NULL;
		if (argv[start][0] == '!') {
			expect = parse_errno(argv[start] + 1);
			start++;
		}
		ret = run(i - start, argv + start);
		if (ret != -expect) {
			printf("FAIL %s: got %d, expected %d\n", argv[start], ret, -expect);
			failures++;
		} else {
			printf("ok %s%s\n", argv[start], expect ? " (failed as expected)" : "");
		}
		i++;
	}
	return failures ? 1 : 0;
}
