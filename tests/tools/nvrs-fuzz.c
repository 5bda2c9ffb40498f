// SPDX-License-Identifier: GPL-2.0
/*
 * nvrs-fuzz: a bounded, seeded fuzzer of /dev/nvrs and, through the test
 * consumer, of the exported nvidia_p2p_* functions.
 *
 *   nvrs-fuzz SEED OPS [VA_MIB]
 *
 * Each operation is drawn from a xorshift generator seeded with SEED (the
 * seed is printed, so a run can be replayed): ioctls with random commands,
 * sizes, flags and argument pointers (valid, NULL, kernel addresses,
 * unmapped and misaligned ones); mmap with random offsets, lengths,
 * protections and sharing, and touches of what got mapped (a SIGBUS is
 * fine); and consumer commands that pin, map, unmap and put random ranges,
 * and replay random, foreign and stale table and mapping pointers. Now and
 * then a child process runs a burst of its own and exits with its memory
 * still pinned and mapped. The kernel must answer each with a documented
 * errno; the VM runner fails the run on any splat, and the scenario checks
 * that every pin and byte of GPU memory came back. One operation allocates,
 * maps and frees without unmapping: the mapping must fault from then on
 * (the mappings left behind are kept and touched again later), and they must
 * not keep the VA space from serving new allocations.
 *
 * Two cases of issue 20 run in every mix:
 *
 * - Stale tables after the quarantine wraps: now and then a pin (consumer
 *   slot 14, which no other operation uses) is revoked by FREE and its table
 *   goes to the consumer's stale pool (stalekeep), which keeps 64 such
 *   tables and puts the oldest late; other times the consumer pins and puts
 *   the fuzzer's own allocation a few times and checks the pool
 *   (stalecheck), about STALE_PINS pins a run, whatever OPS is: the pool's
 *   tables outlive more pin ends than the quarantine ring holds (8192).
 *   None may ever be a new pin's table, be mapped, or end a live pin when
 *   put.
 * - VA retention: with VA_MIB (the module's va_space_mib, when it is small),
 *   the run starts with 4 x VA_MIB MiB of ALLOC 64 KiB + mmap + FREE, the
 *   mappings kept: every ALLOC must succeed (a mapping of a freed allocation
 *   must not hold its VA), and at the end every kept mapping must fault.
 *
 * Exit status 0 unless the fuzzer itself could not run (1), a mapping of a
 * freed allocation read or wrote memory, a retention ALLOC failed, or the
 * stale pool counted a violation (1).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvrs.h"

#define CTL "/sys/kernel/debug/nvrs_consumer/ctl"
#define NVAS 32
#define NMAPS 16
#define SLOTS 14	/* consumer slots 0..13; 14 and 15 are left alone */
#define NDBUF 8		/* dma-buf descriptors kept, and consumer import slots */
#define STALE_SLOT 14	/* the consumer slot of op_stale's pins */
#define STALE_PINS (3 * 8192)	/* pins per run the stale pool is checked against */

static uint64_t rng;
static int fd = -1, ctl = -1, gpus = 1;
static uint64_t vas[NVAS], sizes[NVAS];
static void *maps[NMAPS];
static size_t map_len[NMAPS];
static long errs[160], ops;
static int dbufs[NDBUF] = { -1, -1, -1, -1, -1, -1, -1, -1 };
static uint64_t dbuf_len[NDBUF];
static uint8_t big[1 << 16];	/* PMM_MAP, PROCESSES and TOPOLOGY buffers */
static sigjmp_buf fault_jmp;
static long violations;
static int in_child;
static uint64_t stale_va;	/* the fuzzer's allocation that stale checks pin */
static long stale_churn;	/* its pins and puts per check: STALE_PINS a run */

/* The operation mix, counted as it runs and printed at the end. */
enum { OP_IOCTL, OP_MMAP, OP_TOUCH, OP_RETAIN, OP_DMABUF, OP_CTL, OP_COMPACT,
	OP_STALE_KEEP, OP_STALE_CHECK, OP_CHILD, OP_KINDS };
static const char *const op_names[OP_KINDS] = {
	"ioctl", "mmap", "touch", "retain", "dmabuf", "ctl", "compact",
	"stale-keep", "stale-check", "child-burst",
};
static long mix[OP_KINDS];

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t pick(uint64_t n)
{
	return n ? next() % n : 0;
}

static void count(int ret)
{
	int e = ret < 0 ? -ret : ret;

	errs[e < 160 ? e : 159]++;
}

static void on_fault(int sig)
{
	siglongjmp(fault_jmp, sig);
}

/* A size: mostly valid multiples of 64 KiB, sometimes anything. */
static uint64_t some_size(void)
{
	switch (pick(8)) {
	case 0:
		return next();
	case 1:
		return pick(1 << 20);
	case 2:
		return 0;
	case 3:
		return (1 + pick(64)) << 21;
	default:
		return (1 + pick(32)) << 16;
	}
}

/* A VA: a live one, one inside a live one, or anything. */
static uint64_t some_va(void)
{
	uint64_t v = vas[pick(NVAS)];

	switch (pick(6)) {
	case 0:
		return next();
	case 1:
		return v + (pick(64) << 16);
	case 2:
		return v + pick(1 << 20);
	default:
		return v;
	}
}

/* An ioctl argument pointer: valid, NULL, kernel, unmapped or misaligned. */
static void *some_arg(void *valid)
{
	switch (pick(10)) {
	case 0:
		return NULL;
	case 1:
		return (void *)0xffff888000000000ULL;
	case 2:
		return (void *)0x10;
	case 3:
		return (char *)valid + 1;
	default:
		return valid;
	}
}

static void op_ioctl(void)
{
	static const unsigned int cmds[] = {
		NVRS_IOCTL_GPU_COUNT, NVRS_IOCTL_GPU_INFO, NVRS_IOCTL_ALLOC,
		NVRS_IOCTL_FREE, _IOWR(NVRS_IOCTL_MAGIC, 2, uint32_t),
		_IOWR(NVRS_IOCTL_MAGIC, 9, struct nvrs_alloc), 0,
		NVRS_IOCTL_GPU_STATS, NVRS_IOCTL_EXPORT_DMABUF, NVRS_IOCTL_EXPORT_DMABUF,
		NVRS_IOCTL_PMM_MAP, NVRS_IOCTL_PROCESSES, NVRS_IOCTL_TOPOLOGY,
		NVRS_IOCTL_GPU_PCIE, NVRS_IOCTL_PROCESS_STATS, NVRS_IOCTL_GPU_COPY_ENGINE,
	};
	union {
		struct nvrs_alloc a;
		struct nvrs_free f;
		struct nvrs_gpu_info i;
		struct nvrs_gpu_stats st;
		struct nvrs_export_dmabuf e;
		struct nvrs_pmm_map pm;
		struct nvrs_processes pr;
		struct nvrs_gpu_pcie pc;
		struct nvrs_process_stats ps;
		struct nvrs_gpu_copy_engine ce;
		uint8_t raw[512];
	} u;
	void *arg = &u;
	unsigned int cmd = cmds[pick(sizeof(cmds) / sizeof(cmds[0]))];
	int ret, s = pick(NVAS);

	if (!cmd)
		cmd = next();
	memset(&u, 0, sizeof(u));
	if (cmd == NVRS_IOCTL_ALLOC) {
		u.a.gpu = pick(4) ? pick(gpus) : next();
		u.a.size = some_size();
		u.a.flags = pick(4) ? pick(4) : next();
		u.a.va = pick(8) ? 0 : next();
	} else if (cmd == NVRS_IOCTL_FREE) {
		u.f.va = some_va();
	} else if (cmd == NVRS_IOCTL_GPU_INFO) {
		u.i.index = pick(4) ? pick(gpus + 1) : next();
	} else if (cmd == NVRS_IOCTL_GPU_STATS) {
		u.st.index = pick(4) ? pick(gpus + 1) : next();
	} else if (cmd == NVRS_IOCTL_GPU_PCIE) {
		u.pc.index = pick(4) ? pick(gpus + 1) : next();
	} else if (cmd == NVRS_IOCTL_GPU_COPY_ENGINE) {
		u.ce.index = pick(4) ? pick(gpus + 1) : next();
	} else if (cmd == NVRS_IOCTL_EXPORT_DMABUF) {
		u.e.va = some_va();
		u.e.size = pick(2) ? (1 + pick(8)) << 16 : some_size();
		u.e.flags = pick(8) ? 0 : next();
		u.e.fd = pick(8) ? 0 : next();
	} else if (cmd == NVRS_IOCTL_PMM_MAP) {
		u.pm.gpu = pick(4) ? pick(gpus + 1) : next();
		u.pm.roots = pick(4) ? pick(sizeof(big) + 1) : next();
		/* A buffer that holds `roots` bytes, or any pointer with any count. */
		u.pm.map = u.pm.roots <= sizeof(big) && pick(4) ? (uintptr_t)big : next();
	} else if (cmd == NVRS_IOCTL_PROCESSES) {
		u.pr.count = pick(4) ? pick(sizeof(big) / 16 + 1) : next();
		u.pr.pad = pick(8) ? 0 : next();
		u.pr.entries = u.pr.count <= sizeof(big) / 16 && pick(4) ? (uintptr_t)big : next();
	} else if (cmd == NVRS_IOCTL_PROCESS_STATS) {
		/* Sizes around the valid ones (16..4096 by 8), counts that fit big or not. */
		u.ps.entry_size = pick(4) ? 8 * pick(8) + (pick(8) ? 0 : pick(8)) : next();
		u.ps.count = pick(4) ? pick(65) : next();
		u.ps.pad = pick(8) ? 0 : next();
		u.ps.entries = (uint64_t)u.ps.count * u.ps.entry_size <= sizeof(big) && pick(4) ?
			       (uintptr_t)big : next();
	} else if (cmd == NVRS_IOCTL_TOPOLOGY) {
		arg = big;
	} else {
		for (ret = 0; ret < (int)sizeof(u.raw); ret++)
			u.raw[ret] = next();
	}
	ret = ioctl(fd, cmd, some_arg(arg)) ? -errno : 0;
	count(ret);
	if (!ret && cmd == NVRS_IOCTL_EXPORT_DMABUF) {
		int d = pick(NDBUF);

		if (dbufs[d] >= 0)
			close(dbufs[d]);
		dbufs[d] = u.e.fd;
		dbuf_len[d] = u.e.size;
	}
	if (!ret && cmd == NVRS_IOCTL_ALLOC) {
		if (vas[s]) {
			struct nvrs_free f = { .va = vas[s] };

			count(ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0);
		}
		vas[s] = u.a.va;
		sizes[s] = u.a.size;
	}
	if (!ret && cmd == NVRS_IOCTL_FREE) {
		for (s = 0; s < NVAS; s++)
			if (vas[s] == u.f.va)
				vas[s] = 0;
	}
}

static void op_mmap(void)
{
	static const int prots[] = {
		PROT_READ | PROT_WRITE, PROT_READ, PROT_WRITE, PROT_NONE,
		PROT_READ | PROT_EXEC,
	};
	int s = pick(NMAPS), v = pick(NVAS);
	size_t len = pick(4) ? (1 + pick(sizes[v] ? sizes[v] >> 16 : 4)) << 16 : pick(1 << 22);
	off_t off = pick(4) ? (off_t)(vas[v] + (pick(4) << 16)) : (off_t)next();
	void *m;

	if (maps[s]) {
		munmap(maps[s], map_len[s]);
		maps[s] = NULL;
	}
	m = mmap(NULL, len, prots[pick(5)], pick(8) ? MAP_SHARED : MAP_PRIVATE, fd, off & ~0xfffLL);
	count(m == MAP_FAILED ? -errno : 0);
	if (m != MAP_FAILED) {
		maps[s] = m;
		map_len[s] = len;
	}
}

/* Touches a word of a live mapping; a SIGBUS or SIGSEGV is an answer too. */
static void op_touch(void)
{
	int s = pick(NMAPS);
	volatile uint32_t *volatile p;

	if (!maps[s])
		return;
	p = (volatile uint32_t *)((char *)maps[s] + (pick(map_len[s]) & ~3ULL));
	if (sigsetjmp(fault_jmp, 1)) {
		count(-EFAULT);
		return;
	}
	if (pick(2))
		*p = (uint32_t)next();
	else
		(void)*p;
	count(0);
}

/*
 * ALLOC, mmap, FREE without munmap: the mapping must fault at once. It stays
 * in a map slot, so later touches and munmaps run on it too, while other
 * allocations reuse its VAs.
 */
static void op_retain(void)
{
	struct nvrs_alloc a = { .gpu = pick(gpus), .size = (1 + pick(4)) << 16 };
	struct nvrs_free f;
	int s = pick(NMAPS);
	volatile uint32_t *volatile p;
	void *m;

	if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
		count(-errno);
		return;
	}
	m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
	f.va = a.va;
	count(ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0);
	if (m == MAP_FAILED) {
		count(-errno);
		return;
	}
	if (maps[s])
		munmap(maps[s], map_len[s]);
	maps[s] = m;
	map_len[s] = a.size;
	p = (volatile uint32_t *)((char *)m + (pick(a.size) & ~3ULL));
	if (sigsetjmp(fault_jmp, 1)) {
		count(-EFAULT);
		return;
	}
	(void)*p;
	printf("nvrs-fuzz: op %ld: a mapping of freed VA 0x%llx read data\n", ops,
	       (unsigned long long)a.va);
	violations++;
}

/* dma-buf descriptors: map and touch, import through the RDMA core, close. */
static void op_dmabuf(void)
{
	int d = pick(NDBUF), slot = pick(NDBUF);
	char text[160];
	ssize_t r;

	switch (pick(5)) {
	case 0: {
		size_t len = pick(4) ? dbuf_len[d] : pick(1 << 22);
		void *m = mmap(NULL, len ? len : 4096, pick(4) ? PROT_READ | PROT_WRITE : PROT_READ,
			       pick(8) ? MAP_SHARED : MAP_PRIVATE, dbufs[d], pick(4) ? 0 : next() & ~0xfffLL);

		count(m == MAP_FAILED ? -errno : 0);
		if (m == MAP_FAILED)
			return;
		if (!sigsetjmp(fault_jmp, 1))
			(void)*(volatile uint32_t *)((char *)m + (pick(len ? len : 4096) & ~3ULL));
		else
			count(-EFAULT);
		munmap(m, len ? len : 4096);
		return;
	}
	case 1:
	case 2: {
		static const char *const modes[] = { "pinned", "revocable", "dynamic", "bogus" };

		snprintf(text, sizeof(text), "dbget %d %d 0x%llx 0x%llx %s", slot,
			 pick(8) ? dbufs[d] : (int)next(),
			 (unsigned long long)(pick(2) ? 0 : pick(4) << 16),
			 (unsigned long long)(pick(4) ? dbuf_len[d] : some_size()), modes[pick(4)]);
		break;
	}
	case 3:
		snprintf(text, sizeof(text), "dbput %d", slot);
		break;
	default:
		if (dbufs[d] >= 0)
			count(close(dbufs[d]) ? -errno : 0);
		dbufs[d] = -1;
		return;
	}
	r = pwrite(ctl, text, strlen(text), 0);
	count(r < 0 ? -errno : 0);
}

/* Compacts a GPU through debugfs, for a random number of roots. */
static void op_compact(void)
{
	DIR *d = opendir("/sys/kernel/debug/nvrs");
	struct dirent *e;
	int skip = pick(gpus);

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[320], n[24];
		int w;

		if (strncmp(e->d_name, "0000:", 5) || skip--)
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/debug/nvrs/%s/compact", e->d_name);
		w = open(path, O_WRONLY | O_CLOEXEC);
		if (w < 0)
			break;
		snprintf(n, sizeof(n), "%llu", (unsigned long long)(pick(4) ? 1 + pick(8) : next()));
		count(write(w, n, strlen(n)) < 0 ? -errno : 0);
		close(w);
		break;
	}
	closedir(d);
}

static void op_ctl(void)
{
	char text[160];
	int slot = pick(SLOTS);
	uint64_t va = some_va();
	ssize_t r;

	switch (pick(11)) {
	case 0:
	case 1:
		snprintf(text, sizeof(text), "pin %d 0x%llx 0x%llx", slot,
			 (unsigned long long)va, (unsigned long long)some_size());
		break;
	case 2:
		snprintf(text, sizeof(text), "ppin %d 0x%llx 0x%llx %llu", slot,
			 (unsigned long long)va, (unsigned long long)some_size(),
			 (unsigned long long)(pick(4) ? 0 : next()));
		break;
	case 3:
		snprintf(text, sizeof(text), "map %d", slot);
		break;
	case 4:
		snprintf(text, sizeof(text), "unmap %d", slot);
		break;
	case 5:
		snprintf(text, sizeof(text), "put %d", slot);
		break;
	case 6:
		snprintf(text, sizeof(text), "keep %d", slot);
		break;
	case 7:
		snprintf(text, sizeof(text), pick(2) ? "putold %d" : "unmapold %d", slot);
		break;
	case 8:
		/* Stale, foreign or random table pointers. */
		snprintf(text, sizeof(text), "rawput 0x%llx 0x%llx %d", (unsigned long long)va,
			 (unsigned long long)(pick(2) ? pick(SLOTS) : next()), (int)pick(2));
		break;
	case 9:
		snprintf(text, sizeof(text), "rawmap 0x%llx",
			 (unsigned long long)(pick(2) ? pick(SLOTS) : next()));
		break;
	default:
		snprintf(text, sizeof(text), "rawunmap 0x%llx 0x%llx",
			 (unsigned long long)(pick(2) ? pick(SLOTS) : next()),
			 (unsigned long long)(pick(2) ? pick(SLOTS) : next()));
		break;
	}
	r = pwrite(ctl, text, strlen(text), 0);
	count(r < 0 ? -errno : 0);
}

/* Writes a consumer command; 0 or a negative errno, counted. */
static int ctl_cmd(const char *text)
{
	int ret = pwrite(ctl, text, strlen(text), 0) < 0 ? -errno : 0;

	count(ret);
	return ret;
}

/* A pin of slot STALE_SLOT revoked by FREE into the pool, or a check of it. */
static void op_stale(void)
{
	char text[96];

	if (pick(16)) {
		snprintf(text, sizeof(text), "stalecheck 0x%llx 0x10000 %ld",
			 (unsigned long long)stale_va, stale_churn);
		ctl_cmd(text);
		mix[OP_STALE_CHECK]++;
	} else {
		struct nvrs_alloc a = { .gpu = pick(gpus), .size = 1 << 16 };
		struct nvrs_free f;
		int ret;

		mix[OP_STALE_KEEP]++;
		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			count(-errno);
			return;
		}
		snprintf(text, sizeof(text), "pin %d 0x%llx 0x10000", STALE_SLOT,
			 (unsigned long long)a.va);
		ret = ctl_cmd(text);
		/* FREE revokes the pin: its callback fires, the table goes stale. */
		f.va = a.va;
		count(ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0);
		snprintf(text, sizeof(text), "stalekeep %d", STALE_SLOT);
		if (!ret)
			ctl_cmd(text);
	}
}

/* The pool's last check and late puts; its counts, and their violations. */
static void stale_report(void)
{
	long long kept, total, checks, pins, named, mapped, put_failed, ended;
	char reply[256];
	ssize_t r;

	if (ctl_cmd("stalecheck") || ctl_cmd("staledrop") || ctl_cmd("stalestat"))
		goto bad;
	r = pread(ctl, reply, sizeof(reply) - 1, 0);
	if (r <= 0)
		goto bad;
	reply[r] = 0;
	if (sscanf(reply, "stalestat kept %lld kept_total %lld checks %lld pins %lld named %lld mapped %lld put_failed %lld ended %lld",
		   &kept, &total, &checks, &pins, &named, &mapped, &put_failed, &ended) != 8)
		goto bad;
	printf("nvrs-fuzz: stale tables: %lld kept, %lld checks, %lld pins compared (the ring holds 8192; %ld pins a check); violations: named %lld mapped %lld put_failed %lld ended %lld\n",
	       total, checks, pins, stale_churn, named, mapped, put_failed, ended);
	violations += named + mapped + put_failed + ended;
	return;
bad:
	printf("nvrs-fuzz: stale tables: no counts from the consumer\n");
	violations++;
}

/*
 * VA retention: ALLOC 64 KiB + mmap + FREE, mapping kept, for 4 x the VA
 * space. A mapping of a freed allocation must not hold its VA: every ALLOC
 * must succeed (the VA space is empty otherwise: this runs first).
 */
static void **held;
static long nheld, held_enomem, held_faults;

static void retain_rounds(long va_mib)
{
	long rounds = 4 * va_mib * 16, i;

	held = calloc(rounds, sizeof(*held));
	if (!held) {
		violations++;
		return;
	}
	for (i = 0; i < rounds; i++) {
		struct nvrs_alloc a = { .gpu = 0, .size = 1 << 16 };
		struct nvrs_free f;
		void *m;

		if (ioctl(fd, NVRS_IOCTL_ALLOC, &a)) {
			if (!held_enomem++)
				printf("nvrs-fuzz: VA retention: ALLOC %ld of %ld: errno %d\n",
				       i + 1, rounds, errno);
			continue;
		}
		m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, a.va);
		if (m != MAP_FAILED)
			*(volatile uint32_t *)m = 1;
		f.va = a.va;
		count(ioctl(fd, NVRS_IOCTL_FREE, &f) ? -errno : 0);
		if (m != MAP_FAILED)
			held[nheld++] = m;
	}
	violations += held_enomem;
	mix[OP_RETAIN] += rounds;
	printf("nvrs-fuzz: VA retention: %ld rounds of 64 KiB in a %ld MiB VA space, %ld failed ALLOCs\n",
	       rounds, va_mib, held_enomem);
}

/* Whether reading the word at @p faults. */
static int read_faults(volatile uint32_t *p)
{
	if (sigsetjmp(fault_jmp, 1))
		return 1;
	(void)*p;
	return 0;
}

/* At the end: every kept mapping faults, however its VA was reused since. */
static void retain_check(void)
{
	long i;

	for (i = 0; i < nheld; i++) {
		if (read_faults(held[i])) {
			held_faults++;
			continue;
		}
		printf("nvrs-fuzz: a kept mapping of a freed allocation read data\n");
		violations++;
	}
	for (i = 0; i < nheld; i++)
		munmap(held[i], 1 << 16);
	printf("nvrs-fuzz: VA retention: %ld of %ld kept mappings fault\n", held_faults, nheld);
}

static void run(long n)
{
	long i;

	for (i = 0; i < n; i++, ops++) {
		if (!pick(500)) {
			op_compact();
			mix[OP_COMPACT]++;
			continue;
		}
		switch (pick(12)) {
		case 0:
		case 1:
		case 2:
			op_ioctl();
			mix[OP_IOCTL]++;
			break;
		case 3:
		case 4:
			op_mmap();
			mix[OP_MMAP]++;
			break;
		case 5:
		case 6:
			op_touch();
			mix[OP_TOUCH]++;
			break;
		case 9:
			/* A child leaves slot 14 and the pool to its parent. */
			if (!in_child && !pick(4)) {
				op_stale();
				break;
			}
			op_ctl();
			mix[OP_CTL]++;
			break;
		case 10:
			op_dmabuf();
			mix[OP_DMABUF]++;
			break;
		case 11:
			if (pick(2)) {
				op_retain();
				mix[OP_RETAIN]++;
				break;
			}
			op_ctl();
			mix[OP_CTL]++;
			break;
		default:
			op_ctl();
			mix[OP_CTL]++;
			break;
		}
	}
}

/* A child with its own VA space runs a burst and exits, pins and all. */
static void burst_in_child(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int i;

		close(fd);
		fd = open("/dev/nvrs", O_RDWR | O_CLOEXEC);
		for (i = 0; i < NVAS; i++)
			vas[i] = 0;
		for (i = 0; i < NMAPS; i++)
			maps[i] = NULL;
		for (i = 0; i < NDBUF; i++)
			dbufs[i] = -1;
		rng ^= 0x9e3779b97f4a7c15ULL;
		in_child = 1;
		run(200);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	ops += 200;
	mix[OP_CHILD]++;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_fault };
	uint64_t seed;
	struct nvrs_alloc churn = { .gpu = 0, .size = 1 << 16 };
	long n, done = 0, va_mib = 0;
	uint32_t g;
	int i;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: nvrs-fuzz SEED OPS [VA_MIB]\n");
		return 2;
	}
	seed = strtoull(argv[1], NULL, 0);
	n = atol(argv[2]);
	if (argc == 4)
		va_mib = atol(argv[3]);
	rng = seed ? seed : 1;
	printf("nvrs-fuzz: seed %llu, %ld operations", (unsigned long long)seed, n);
	if (va_mib)
		printf(", VA space %ld MiB", va_mib);
	printf("\n");
	fflush(stdout);
	fd = open("/dev/nvrs", O_RDWR | O_CLOEXEC);
	ctl = open(CTL, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ctl < 0) {
		perror("nvrs-fuzz: open");
		return 1;
	}
	if (!ioctl(fd, NVRS_IOCTL_GPU_COUNT, &g) && g)
		gpus = g;
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	if (va_mib > 0)
		retain_rounds(va_mib);
	if (ioctl(fd, NVRS_IOCTL_ALLOC, &churn)) {
		perror("nvrs-fuzz: the stale checks' allocation");
		return 1;
	}
	stale_va = churn.va;
	/* op_stale is 1 of 48 operations, and 15 of 16 of those are checks. */
	stale_churn = STALE_PINS * 48 * 16 / (15 * (n > 0 ? n : 1)) + 1;
	while (done < n) {
		run(1000);
		done += 1000;
		if (!pick(8))
			burst_in_child();
	}
	/* Put what is still pinned or imported, then let exit free the rest. */
	for (i = 0; i < SLOTS; i++) {
		char text[32];

		snprintf(text, sizeof(text), "put %d", i);
		if (pwrite(ctl, text, strlen(text), 0) < 0)
			count(-errno);
		snprintf(text, sizeof(text), "dbput %d", i % NDBUF);
		if (i < NDBUF && pwrite(ctl, text, strlen(text), 0) < 0)
			count(-errno);
	}
	stale_report();
	if (va_mib > 0)
		retain_check();
	printf("nvrs-fuzz: seed %llu: %ld operations; results:", (unsigned long long)seed, ops);
	for (i = 0; i < 160; i++)
		if (errs[i])
			printf(" %s%d:%ld", i ? "-" : "", i, errs[i]);
	printf("\n");
	printf("nvrs-fuzz: mix:");
	for (i = 0; i < OP_KINDS; i++)
		printf(" %s %ld", op_names[i], mix[i]);
	printf("\n");
	if (violations)
		printf("nvrs-fuzz: %ld violations\n", violations);
	return violations ? 1 : 0;
}
