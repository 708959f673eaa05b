/* A minimal x86-64 kernel that runs one static Linux program (test_kernels
 * or test_ops, linked with musl) on Bochs, so that the AVX-512 kernels can be tested on a
 * CPU without AVX-512 (tests/emu/test_avx512_bochs.sh). It reads the ELF from
 * the first ATA disk, runs it in ring 3 and serves the Linux system calls it
 * makes: anonymous memory, threads (clone, futex) on one CPU with a
 * cooperative scheduler that switches at every blocking call, yield and clock
 * read, the clock (the TSC as nanoseconds), and output to Bochs's port 0xE9.
 * Any other call returns ENOSYS and is reported once. It ends with a line
 * "== emu: exit N" (N: the program's status, or 124-255 for a failure of its
 * own: a CPU exception, a deadlock, a signal) and a triple fault, which makes
 * Bochs exit. Built with -mgeneral-regs-only: it leaves the program's vector
 * registers alone except to switch threads (XSAVE/XRSTOR of every state
 * component XCR0 enables). */
#include <stddef.h>
#include <stdint.h>

#define PAYLOAD 0x10000000ull /* the ELF, read here from the first ATA disk */
/* The environment: lines of NAME=VALUE ending in a NUL, which Bochs loads
 * here (optramimage2; this kernel is optramimage1). The program comes from
 * the disk instead: Bochs 2.7 places only the first 128 KiB of a RAM image
 * where it belongs. */
#define ENVIRON 0x0f000000ull
#define HEAP_LO 0x20000000ull
#define HEAP_HI 0x80000000ull

typedef struct ctx {
    uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax, rip, cs, rflags, rsp, ss;
} ctx;

enum { T_FREE, T_RUN, T_WAIT, T_DEAD };
typedef struct thread {
    uint8_t xs[4096] __attribute__((aligned(64)));
    ctx c;
    uint64_t fs;
    int tid, state, timed;
    uint64_t futex;
    uint64_t clear_tid;
} thread;

#define MAXT 32
static thread th[MAXT];
static int cur, next_tid = 1;
static uint64_t heap_top = HEAP_LO, heap_hwm = HEAP_LO, brk_lo, brk_cur;
static struct { uint64_t a, n; } freel[8192];
static int nfree;
static uint8_t warned[512];

/* string instructions: what Bochs emulates fastest */
void *memset(void *d, int c, size_t n) {
    void *p = d;
    __asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(c) : "memory");
    return d;
}
void *memcpy(void *d, const void *s, size_t n) {
    void *p = d;
    __asm__ volatile("rep movsb" : "+D"(p), "+S"(s), "+c"(n) : : "memory");
    return d;
}

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port) {
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}
static inline void wrmsr(uint32_t m, uint64_t v) {
    __asm__ volatile("wrmsr" ::"c"(m), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)));
}
static inline uint64_t rdtsc(void) {
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static void putc_(char ch) { outb(0xe9, (uint8_t)ch); }
static void puts_(const char *s) {
    while (*s) putc_(*s++);
}
static void putn(uint64_t v, int base, int neg) {
    char b[24];
    int i = 0;
    if (neg) putc_('-');
    do {
        b[i++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (i) putc_(b[--i]);
}
/* %s %d %x with an optional l; enough for this file */
static void kprintf(const char *f, ...) {
    __builtin_va_list ap;
    __builtin_va_start(ap, f);
    for (; *f; f++) {
        if (*f != '%') {
            putc_(*f);
            continue;
        }
        int l = 0;
        if (f[1] == 'l') l = 1, f++;
        f++;
        if (*f == 's') puts_(__builtin_va_arg(ap, const char *));
        else if (*f == 'd') {
            int64_t v = l ? __builtin_va_arg(ap, int64_t) : __builtin_va_arg(ap, int);
            putn(v < 0 ? (uint64_t)-v : (uint64_t)v, 10, v < 0);
        } else if (*f == 'x') putn(l ? __builtin_va_arg(ap, uint64_t) : __builtin_va_arg(ap, uint32_t), 16, 0);
        else putc_(*f);
    }
    __builtin_va_end(ap);
}

/* the end: a line the host script reads, then a triple fault (Bochs is run
 * with reset_on_triple_fault=0 and panic: action=fatal, so it exits) */
__attribute__((noreturn)) static void shutdown(int code) {
    kprintf("\n== emu: exit %d\n", code);
    struct __attribute__((packed)) {
        uint16_t lim;
        uint64_t base;
    } z = {0, 0};
    __asm__ volatile("lidt %0; int3" ::"m"(z));
    for (;;) __asm__ volatile("hlt");
}

void exc_entry(uint64_t *f) {
    uint64_t cr2;
    __asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
    kprintf("\n== emu: CPU exception %d (error %lx) at rip %lx, rsp %lx, cr2 %lx, thread %d\n", (int)f[0], f[1], f[2],
            f[5], cr2, th[cur].tid);
    const uint64_t *st = (const uint64_t *)f[5]; /* the stack's top, for addr2line */
    if (f[5] > 0x400000 && f[5] < HEAP_HI)
        for (int i = 0; i < 24; i++) kprintf("  [rsp+%d] %lx\n", 8 * i, st[i]);
    shutdown(128 + (int)f[0]);
}

/* ------------------------------------------------------------ disk */

/* n sectors from LBA lba of the primary ATA master into dst (PIO, LBA28) */
static void ata_read(uint32_t lba, uint32_t n, uint8_t *dst) {
    while (n) {
        const uint32_t k = n > 128 ? 128 : n;
        while (inb(0x1f7) & 0x80) {
        }
        outb(0x1f6, (uint8_t)(0xe0 | ((lba >> 24) & 15)));
        outb(0x1f2, (uint8_t)k);
        outb(0x1f3, (uint8_t)lba);
        outb(0x1f4, (uint8_t)(lba >> 8));
        outb(0x1f5, (uint8_t)(lba >> 16));
        outb(0x1f7, 0x20);
        for (uint32_t s = 0; s < k; s++) {
            uint8_t st;
            while (((st = inb(0x1f7)) & 0x80) || !(st & 0x09)) {
            }
            if (st & 1) {
                kprintf("== emu: disk read error at sector %d\n", (int)(lba + s));
                shutdown(124);
            }
            __asm__ volatile("rep insw" : "+D"(dst), "+c"((uint64_t){256}) : "d"(0x1f0) : "memory");
        }
        lba += k;
        n -= k;
    }
}

/* ------------------------------------------------------------ memory */

static uint64_t page_up(uint64_t n) { return (n + 4095) & ~4095ull; }

static int64_t do_mmap(uint64_t addr, uint64_t len, uint64_t flags, int64_t fd) {
    if (!(flags & 0x20) || fd != -1) return -19; /* ENODEV: anonymous memory only */
    len = page_up(len);
    if (len == 0) return -22;
    if (flags & 0x10) { /* MAP_FIXED: over memory it already has */
        memset((void *)addr, 0, len);
        return (int64_t)addr;
    }
    for (int i = 0; i < nfree; i++)
        if (freel[i].n >= len) {
            uint64_t a = freel[i].a;
            freel[i].a += len;
            freel[i].n -= len;
            if (!freel[i].n) freel[i] = freel[--nfree];
            memset((void *)a, 0, len);
            return (int64_t)a;
        }
    if (heap_top + len > HEAP_HI) return -12;
    uint64_t a = heap_top;
    heap_top += len;
    /* Bochs starts with zeroed memory: only what was handed out before needs zeroing */
    if (a < heap_hwm) memset((void *)a, 0, (heap_hwm < heap_top ? heap_hwm : heap_top) - a);
    if (heap_top > heap_hwm) heap_hwm = heap_top;
    return (int64_t)a;
}

static int64_t do_munmap(uint64_t a, uint64_t len) {
    len = page_up(len);
    if (a < HEAP_LO || a + len > heap_top) return 0; /* not ours (a thread stack's guard, ...) */
    if (a + len == heap_top) {
        heap_top = a;
        return 0;
    }
    if (nfree < (int)(sizeof freel / sizeof freel[0])) {
        freel[nfree].a = a;
        freel[nfree].n = len;
        nfree++;
    }
    return 0;
}

/* ------------------------------------------------------------ threads */

static void xsave(thread *t) { __asm__ volatile("xsave64 %0" : "+m"(t->xs) : "a"(-1), "d"(-1) : "memory"); }
static void xrstor(thread *t) { __asm__ volatile("xrstor64 %0" ::"m"(t->xs), "a"(-1), "d"(-1) : "memory"); }

static int futex_wake(uint64_t addr, int n) {
    int woke = 0;
    for (int i = 0; i < MAXT && woke < n; i++)
        if (th[i].state == T_WAIT && th[i].futex == addr) {
            th[i].state = T_RUN;
            th[i].c.rax = 0;
            woke++;
        }
    return woke;
}

static int pick(void) {
    for (int k = 1; k <= MAXT; k++) {
        int i = (cur + k) % MAXT;
        if (th[i].state == T_RUN) return i;
    }
    for (int k = 1; k <= MAXT; k++) {
        int i = (cur + k) % MAXT;
        if (th[i].state == T_WAIT && th[i].timed) {
            th[i].state = T_RUN;
            th[i].c.rax = (uint64_t)-110; /* ETIMEDOUT */
            return i;
        }
    }
    kprintf("\n== emu: every thread waits on a futex (deadlock)\n");
    shutdown(125);
}

static int64_t do_clone(thread *t, uint64_t flags, uint64_t sp, uint64_t ptid, uint64_t ctid, uint64_t tls) {
    int i;
    for (i = 0; i < MAXT; i++)
        if (th[i].state == T_FREE || th[i].state == T_DEAD) break;
    if (i == MAXT) return -11; /* EAGAIN */
    thread *n = &th[i];
    xsave(n); /* the caller's vector state, live here */
    n->c = t->c;
    n->c.rax = 0;
    n->c.rsp = sp;
    n->fs = (flags & 0x80000) ? tls : t->fs; /* CLONE_SETTLS */
    n->tid = ++next_tid;
    n->state = T_RUN;
    n->timed = 0;
    n->futex = 0;
    n->clear_tid = (flags & 0x200000) ? ctid : 0; /* CLONE_CHILD_CLEARTID */
    if (flags & 0x100000) *(int *)ptid = n->tid;  /* CLONE_PARENT_SETTID */
    if (flags & 0x1000000) *(int *)ctid = n->tid; /* CLONE_CHILD_SETTID */
    return n->tid;
}

static void thread_exit(thread *t) {
    if (t->clear_tid) {
        *(int *)t->clear_tid = 0;
        futex_wake(t->clear_tid, 1);
    }
    t->state = T_DEAD;
    for (int i = 0; i < MAXT; i++)
        if (th[i].state == T_RUN || th[i].state == T_WAIT) return;
    shutdown(0);
}

/* ------------------------------------------------------------ system calls */

static int64_t do_write(int64_t fd, const char *b, uint64_t n) {
    if (fd != 1 && fd != 2) return -9;
    for (uint64_t i = 0; i < n; i++) putc_(b[i]);
    return (int64_t)n;
}

/* returns the value for rax; *resched: switch threads after it */
static int64_t syscall_(thread *t, int *resched) {
    const ctx *c = &t->c;
    const uint64_t a0 = c->rdi, a1 = c->rsi, a2 = c->rdx, a3 = c->r10, a4 = c->r8;
    switch (c->rax) {
    case 0: return -9; /* read */
    case 1: return do_write((int64_t)a0, (const char *)a1, a2);
    case 20: { /* writev */
        int64_t tot = 0;
        const uint64_t *iov = (const uint64_t *)a1;
        for (uint64_t i = 0; i < a2; i++) {
            int64_t r = do_write((int64_t)a0, (const char *)iov[2 * i], iov[2 * i + 1]);
            if (r < 0) return r;
            tot += r;
        }
        return tot;
    }
    case 2: case 257: case 21: case 4: case 6: case 262: case 89: case 267:
        return -2; /* open, openat, access, stat, lstat, newfstatat, readlink(at): no files */
    case 3: return 0;   /* close */
    case 5: return -9;  /* fstat */
    case 8: return -29; /* lseek */
    case 16: return -25; /* ioctl: not a terminal */
    case 9: return do_mmap(a0, a1, a3, (int64_t)a4);
    case 11: return do_munmap(a0, a1);
    case 10: case 28: return 0; /* mprotect, madvise */
    case 25: return -12;        /* mremap: musl copies instead */
    case 12:                    /* brk */
        if (a0 >= brk_lo && a0 < brk_lo + (64ull << 20)) brk_cur = a0;
        return (int64_t)brk_cur;
    case 13: case 14: case 131: return 0; /* signals: nothing is delivered */
    case 39: return 1;                    /* getpid */
    case 186: return t->tid;              /* gettid */
    case 102: case 104: case 107: case 108: return 0; /* uids */
    case 204: { /* sched_getaffinity: two CPUs */
        memset((void *)a2, 0, a1);
        if (a1) *(uint8_t *)a2 = 3;
        return a1 < 8 ? (int64_t)a1 : 8;
    }
    case 24: case 35: case 230: *resched = 1; return 0; /* sched_yield, nanosleep, clock_nanosleep */
    case 228: { /* clock_gettime: the TSC as nanoseconds; a point to switch threads */
        uint64_t ns = rdtsc();
        uint64_t *ts = (uint64_t *)a1;
        ts[0] = ns / 1000000000ull;
        ts[1] = ns % 1000000000ull;
        *resched = 1;
        return 0;
    }
    case 96: { /* gettimeofday */
        uint64_t us = rdtsc() / 1000;
        if (a0) ((uint64_t *)a0)[0] = us / 1000000, ((uint64_t *)a0)[1] = us % 1000000;
        *resched = 1;
        return 0;
    }
    case 201: return (int64_t)(rdtsc() / 1000000000ull);
    case 218: t->clear_tid = a0; return t->tid; /* set_tid_address */
    case 158:                                   /* arch_prctl */
        if (a0 == 0x1002) {
            t->fs = a1;
            wrmsr(0xc0000100, a1);
            return 0;
        }
        if (a0 == 0x1003) {
            *(uint64_t *)a1 = t->fs;
            return 0;
        }
        return -22;
    case 56: return do_clone(t, a0, a1, a2, a3, a4);
    case 202: { /* futex */
        const int op = (int)(a1 & 127);
        if (op == 0 || op == 9) { /* WAIT, WAIT_BITSET */
            if (*(volatile uint32_t *)a0 != (uint32_t)a2) return -11;
            t->state = T_WAIT;
            t->futex = a0;
            t->timed = a3 != 0;
            *resched = 1;
            return 0;
        }
        if (op == 1 || op == 10) return futex_wake(a0, (int)a2); /* WAKE, WAKE_BITSET */
        if (op == 3 || op == 4) {                                 /* REQUEUE, CMP_REQUEUE */
            if (op == 4 && *(volatile uint32_t *)a0 != (uint32_t)c->r9) return -11;
            int woke = futex_wake(a0, (int)a2), moved = 0;
            for (int i = 0; i < MAXT && moved < (int)a3; i++)
                if (th[i].state == T_WAIT && th[i].futex == a0) th[i].futex = a4, moved++;
            return woke + moved;
        }
        return -38;
    }
    case 60: thread_exit(t); *resched = 1; return 0;
    case 231: shutdown((int)a0);
    case 62: case 200: case 234: /* kill, tkill, tgkill */
        kprintf("\n== emu: signal %d raised\n", (int)(c->rax == 234 ? a2 : a1));
        shutdown(128 + (int)(c->rax == 234 ? a2 : a1));
    default:
        if (c->rax < sizeof warned && !warned[c->rax]) {
            warned[c->rax] = 1;
            kprintf("== emu: system call %d not implemented (ENOSYS)\n", (int)c->rax);
        }
        return -38;
    }
}

ctx *sys_entry(ctx *f) {
    thread *t = &th[cur];
    t->c = *f;
    int resched = 0;
    int64_t r = syscall_(t, &resched);
    if (t->state == T_RUN) t->c.rax = (uint64_t)r; /* a waiter gets its 0 or ETIMEDOUT when it resumes */
    if (resched || t->state != T_RUN) {
        int n = pick();
        if (n != cur) {
            if (t->state != T_DEAD) xsave(t);
            cur = n;
            xrstor(&th[cur]);
            wrmsr(0xc0000100, th[cur].fs);
        }
    }
    return &th[cur].c;
}

/* ------------------------------------------------------------ start */

extern char syscall_entry[], exc0[], exc1[], exc2[], exc3[], exc4[], exc5[], exc6[], exc7[], exc8[], exc9[], exc10[],
    exc11[], exc12[], exc13[], exc14[], exc15[], exc16[], exc17[], exc18[], exc19[], exc20[];
extern void start_thread(ctx *c) __attribute__((noreturn));

static uint64_t idt[2 * 21] __attribute__((aligned(16)));

static void setup_idt(void) {
    char *h[21] = {exc0,  exc1,  exc2,  exc3,  exc4,  exc5,  exc6,  exc7,  exc8,  exc9, exc10,
                   exc11, exc12, exc13, exc14, exc15, exc16, exc17, exc18, exc19, exc20};
    for (int i = 0; i < 21; i++) {
        uint64_t a = (uint64_t)h[i];
        idt[2 * i] = (a & 0xffff) | (0x08ull << 16) | (0x8eull << 40) | ((a >> 16) & 0xffff) << 48;
        idt[2 * i + 1] = a >> 32;
    }
    struct __attribute__((packed)) {
        uint16_t lim;
        uint64_t base;
    } r = {sizeof idt - 1, (uint64_t)idt};
    __asm__ volatile("lidt %0" ::"m"(r));
}

typedef struct {
    uint8_t ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} ehdr;
typedef struct {
    uint32_t type, flags;
    uint64_t offset, vaddr, paddr, filesz, memsz, align;
} phdr;

void kmain(void) {
    uint32_t r[4];
    cpuid(0xd, 0, r);
    const uint64_t xcr0 = r[0] & 0xe7;
    __asm__ volatile("xsetbv" ::"c"(0), "a"((uint32_t)xcr0), "d"(0));
    cpuid(7, 0, r);
    const uint32_t b7 = r[1], c7 = r[2];
    cpuid(7, 1, r);
    kprintf("== emu: XCR0 %x; avx2 %d avx512f %d dq %d bw %d vl %d vnni %d bf16 %d\n", (uint32_t)xcr0, (b7 >> 5) & 1,
            (b7 >> 16) & 1, (b7 >> 17) & 1, (b7 >> 30) & 1, (b7 >> 31) & 1, (c7 >> 11) & 1, (r[0] >> 5) & 1);
    setup_idt();
    wrmsr(0xc0000081, 0x08ull << 32);
    wrmsr(0xc0000082, (uint64_t)syscall_entry);
    wrmsr(0xc0000084, 0x700);

    const ehdr *e = (const ehdr *)PAYLOAD;
    ata_read(0, 8, (uint8_t *)PAYLOAD);
    if (e->ident[0] != 0x7f || e->ident[1] != 'E' || e->ident[2] != 'L' || e->ident[3] != 'F' || e->machine != 62 ||
        e->type != 2) {
        kprintf("== emu: no static x86-64 executable at %lx\n", PAYLOAD);
        shutdown(126);
    }
    const phdr *ph = (const phdr *)(PAYLOAD + e->phoff);
    uint64_t fend = 0;
    for (int i = 0; i < e->phnum; i++)
        if (ph[i].type == 1 && ph[i].offset + ph[i].filesz > fend) fend = ph[i].offset + ph[i].filesz;
    if (fend > 4096) ata_read(8, (uint32_t)((fend - 4096 + 511) / 512), (uint8_t *)PAYLOAD + 4096);
    uint64_t at_phdr = 0, end = 0;
    for (int i = 0; i < e->phnum; i++) {
        if (ph[i].type == 6) at_phdr = ph[i].vaddr;
        if (ph[i].type != 1) continue;
        memcpy((void *)ph[i].vaddr, (const void *)(PAYLOAD + ph[i].offset), ph[i].filesz);
        memset((void *)(ph[i].vaddr + ph[i].filesz), 0, ph[i].memsz - ph[i].filesz);
        if (ph[i].offset == 0) at_phdr = at_phdr ? at_phdr : ph[i].vaddr + e->phoff;
        if (ph[i].vaddr + ph[i].memsz > end) end = ph[i].vaddr + ph[i].memsz;
    }
    brk_lo = brk_cur = page_up(end);

    /* the stack: argv[0], the environment lines, 16 bytes for AT_RANDOM */
    const uint64_t ssz = 8ull << 20;
    uint64_t top = (uint64_t)do_mmap(0, ssz, 0x22, -1) + ssz;
    char *sp = (char *)top;
    const char *argv0 = "test";
    uint64_t envs[64];
    int nenv = 0;
    for (char *p = (char *)ENVIRON; *p && nenv < 63;) {
        char *q = p;
        while (*q && *q != '\n') q++;
        const uint64_t n = (uint64_t)(q - p);
        sp -= n + 1;
        memcpy(sp, p, n);
        sp[n] = 0;
        if (n) envs[nenv++] = (uint64_t)sp;
        p = *q ? q + 1 : q;
    }
    sp -= 8;
    memcpy(sp, argv0, 5);
    const uint64_t a0 = (uint64_t)sp;
    sp -= 16;
    const uint64_t rnd = (uint64_t)sp;
    for (int i = 0; i < 16; i++) sp[i] = (char)(0x5a + i * 7);
    uint64_t *s = (uint64_t *)((uint64_t)sp & ~15ull);
    const int nwords = 1 + 2 + nenv + 1 + 2 * 7;
    s -= nwords + (nwords & 1);
    uint64_t *w = s;
    *w++ = 1;
    *w++ = a0;
    *w++ = 0;
    for (int i = 0; i < nenv; i++) *w++ = envs[i];
    *w++ = 0;
    const uint64_t aux[] = {3, at_phdr, 4, e->phentsize, 5, e->phnum, 6, 4096, 9, e->entry, 25, rnd, 0, 0};
    for (int i = 0; i < 14; i++) *w++ = aux[i];

    thread *t = &th[0];
    t->tid = 1;
    t->state = T_RUN;
    t->c.rip = e->entry;
    t->c.cs = 0x23; /* ring 3: a privileged instruction (musl's a_crash is hlt) faults */
    t->c.rflags = 0x2;
    t->c.rsp = (uint64_t)s;
    t->c.ss = 0x1b;
    cur = 0;
    kprintf("== emu: starting %lx, %d environment lines\n", e->entry, nenv);
    start_thread(&t->c);
}
