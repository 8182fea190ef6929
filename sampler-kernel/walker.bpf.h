/* The user stack walker, shared by the BPF programs that take user stacks: the sampler
 * (profile.bpf.c, on every perf event overflow) and the context-switch tracer
 * (sched.bpf.c, at every switch-out), so that on-CPU and off-CPU stacks are walked by
 * the same code with the same tables (docs/stacks.md). Include it after vmlinux.h, the
 * libbpf headers and profile.h.
 *
 * The tables are maps that recorder/unwinder.c fills: each object that includes this
 * header declares them, and every object but the sampler's reuses the sampler's maps
 * (bpf_map__reuse_fd) before it loads, so there is one copy of each table. The walk's
 * scratch (struct walk, one per CPU) is each object's own; an object that includes this
 * header may define WALK_MAX, WALK_MAXJ and STK_BYTES first to walk less deep (and keep
 * a smaller scratch) than the sampler's VPB_MAX_WALK. */
#ifndef VIPROF_SAMPLER_WALKER_BPF_H
#define VIPROF_SAMPLER_WALKER_BPF_H

/* The walker's tables, written by user space (recorder/unwinder.c): the big arrays are
 * mmapable so that user space copies a table in without a syscall per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPB_MAX_PROCS);
	__type(key, __u32);              /* tgid */
	__type(value, __u32);            /* slot in unwind_procs */
} proc_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);       /* resized by user space before load */
	__type(key, __u32);
	__type(value, struct vpb_proc);
} unwind_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, VPB_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct vpb_table);
} unwind_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, VPB_MAX_RULES);
	__type(key, __u32);
	__type(value, struct vpb_rule);
} unwind_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, VPB_MAX_PAGES);
	__type(key, __u32);
	__type(value, __u64);
} unwind_pages SEC(".maps");

/* The walk's state and the sample it builds, per CPU: the sample is too large for the
 * BPF stack, and the bpf_loop callback reaches both through here. The walked frames
 * and interpreted frames have room for WALK_MAX and WALK_MAXJ; only what was walked is
 * sent on. */
#ifndef WALK_MAX
#define WALK_MAX VPB_MAX_WALK
#endif
#ifndef WALK_MAXJ
#define WALK_MAXJ VPB_MAX_JFRAMES
#endif
#ifndef STK_BYTES
#define STK_BYTES 65536       /* at most this much of the stack is copied per walk (a power of 2) */
#endif
#define STK_CHUNK 1024        /* in pieces of this size, as the walk reaches them */
/* How the walk reads the walked process's memory: the current task's, by default. An
 * object that walks another task's stack from a sleepable program (sched_open.bpf.c)
 * defines WALK_READ(w, dst, size, src) first, reading the memory of task w->s.tid. */
#ifndef WALK_READ
#define WALK_READ(w, dst, size, src) bpf_probe_read_user(dst, size, src)
#endif

struct walk {
	__u64 pc, sp, fp, r13;
	__u64 stk_base, stk_len;  /* stk holds [stk_base, stk_base + stk_len) */
	__u64 stk_stop;           /* the next chunk was unreadable: do not grow */
	__u32 slot;
	__u32 n;                 /* frames stored */
	__u32 end;               /* VPB_WALK_* once the walk stops */
	__u32 nj;
	__u32 sig_leaf;          /* the next frame is one a signal interrupted: walk it as a leaf */
	__u32 bs_mid;            /* mapping_index's probe, passed through memory (see there) */
	__u32 is_leaf;           /* this step's frame is a leaf: read through memory (leaf_of) */
	/* The last caller frame walked through a table or a code blob's frame size (one
	 * entry, this walk only): a recursion's frames return to one pc over and over, and
	 * this skips its mapping, rule or code-blob lookup (its memory reads). */
	__u64 c_pc;              /* 0: none */
	__u32 c_kind;            /* C_NATIVE, C_JIT */
	__s32 c_fsize;           /* C_JIT: the blob's frame size in words */
	struct vpb_rule c_rule;  /* C_NATIVE: the rule */
	struct vpb_rule rule;    /* the rule this step applies (WALK_APPLY) */
	__u64 c_method, c_cm;    /* the last interpreted frame's Method* and its ConstMethod* */
#ifdef WALK_LOG
	/* Every word read_u64 read, in order, so that a later switch-out can tell that all
	 * the memory this walk depended on is unchanged (sched.bpf.c reuses the walk then). */
	__u32 nlog;              /* words read; more than WALK_LOG: not reusable */
	__s32 log_bad;           /* a read failed: not reusable */
	__u32 keep;              /* sched.bpf.c: this walk is to be kept for reuse */
	__u32 fp_pend;           /* fp was read from the stack copy at fp_addr and not yet used */
	__u64 fp_addr;
	__u64 log_addr[WALK_LOG];
	__u64 log_val[WALK_LOG];
#endif
	struct vpb_sample s;     /* the header, and the kernel stack */
	__u64 ustack[WALK_MAX];
	struct vpb_jframe jframes[WALK_MAXJ];
	__u8 stk[STK_BYTES];
};

/* An array indexed by CPU, not a per-CPU array: a per-CPU value is limited to 32 KB,
 * and a walk 2048 frames deep needs about 115. User space sets max_entries to the
 * number of possible CPUs before load. A program runs to its end on its CPU (no other
 * perf_event program nests in it there; the switch tracer has its own scratch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} scratch SEC(".maps");

static __always_inline struct walk *walk_scratch(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&scratch, &cpu);
}

#ifdef WALK_RCACHE
/* A per-CPU cache of the unwind rules of recent native caller pcs, across walks: a
 * caller frame (a return address) of a process's native code is found through a binary
 * search of its mappings and one of its table's rules (a dozen dependent loads from maps
 * that the samples in between have evicted); a profile's samples return to the same few
 * thousand pcs over and over. Direct-mapped, WALK_RCACHE entries (a power of 2). An entry
 * holds for the process's unwind_procs entry it was made with (slot and gen: every
 * write of an entry takes a new gen, recorder/unwinder.c) and rules never change once
 * uploaded (tables are append-only), so it can never outlive what it was derived from.
 * Only for programs that do not nest on their CPU (on_sample: perf_event programs never
 * interrupt each other), so no entry is read half-written: the object that defines
 * WALK_RCACHE has its own copy (it is not shared with the switch tracer's objects). */
struct rc_entry {
	__u64 pc;
	__u32 slot;
	__u32 gen;               /* 0: empty (unwinder.c never writes gen 0) */
	struct vpb_rule r;
};

/* A plain array, CPU c's cache at [c * WALK_RCACHE, (c + 1) * WALK_RCACHE): user space
 * sets max_entries to WALK_RCACHE times the number of possible CPUs before load
 * (bpf_backend.c; left as it is, only CPU 0 has a cache and the others never find an
 * entry). A per-CPU array of as many entries was one per-CPU allocation per entry: 4096
 * of them, 3 ms of every start (and as many frees at every stop); this is one
 * allocation, and its inlined lookup costs no more. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WALK_RCACHE);
	__type(key, __u32);
	__type(value, struct rc_entry);
} walk_rcache SEC(".maps");

/* VIPROF_DEBUG_RCACHE (bpf_backend.c): 0 the cache serves walks; 1 it never serves one,
 * and every caller pc walked through the searches is compared with what the cache holds
 * for it (test-walk-rcache: the cache must agree with the slow path); 2 as 1, and every
 * entry is stored with a wrong rule (the test proves the comparison sees a bad entry). */
const volatile __u32 walk_rcache_mode = 0;

/* The cache's counts (VPB_RC_*), read by bpf_backend.c at stop in modes 1 and 2. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPB_RC_NR);
	__type(key, __u32);
	__type(value, __u64);
} walk_rcache_stats SEC(".maps");

static __always_inline struct rc_entry *rcache_entry(__u64 pc)
{
	__u32 k = (__u32)((pc * 0x9e3779b97f4a7c15ull) >> 40) & (WALK_RCACHE - 1);

	k |= bpf_get_smp_processor_id() * WALK_RCACHE;
	return bpf_map_lookup_elem(&walk_rcache, &k);
}

/* Global functions, not inlined: the verifier checks each once, on its own, instead of
 * at every state of the walk that reaches them (inlined, the two cost on_sample 40-50%
 * more verified instructions). gen 0: no cache (entries are never made with it). */
__noinline int walk_rcache_get(__u64 pc, __u32 slot, __u32 gen, struct vpb_rule *out)
{
	struct rc_entry *e = rcache_entry(pc);

	if (walk_rcache_mode || !out || !e || !gen || e->pc != pc || e->slot != slot || e->gen != gen)
		return 0;
	*out = e->r;
	return 1;
}

static __always_inline void rcache_count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&walk_rcache_stats, &k);

	if (v)
		*v += 1;
}

/* Stores r, the searches' rule for caller pc; in modes 1 and 2 first compares it with
 * the entry the cache holds for pc, if any. */
__noinline int walk_rcache_put(__u64 pc, __u32 slot, __u32 gen, const struct vpb_rule *r)
{
	struct rc_entry *e = rcache_entry(pc);

	if (!r || !e || !gen)
		return 0;
	if (walk_rcache_mode) {
		if (e->pc == pc && e->slot == slot && e->gen == gen) {
			rcache_count(VPB_RC_HIT);
			if (e->r.pc != r->pc || e->r.cfa_off != r->cfa_off || e->r.fp_off != r->fp_off ||
			    e->r.kind != r->kind)
				rcache_count(VPB_RC_WRONG);
		} else {
			rcache_count(VPB_RC_FILL);
		}
	}
	e->pc = pc;
	e->slot = slot;
	e->gen = gen;
	e->r = *r;
	if (walk_rcache_mode == 2)
		e->r.cfa_off += 1;       /* planted: a wrong rule */
	return 0;
}
#endif

/* ---- The user stack walker.
 *
 * One frame per bpf_loop iteration. A frame's pc is classified: HotSpot's interpreter
 * (frame pointer always kept; Method* and bytecode pointer at fixed slots), HotSpot's code
 * heaps (compiled methods and stubs with a fixed frame size found through the code
 * heap's segment map), or a native mapping unwound with the rules derived from its
 * .eh_frame. Each step checks that the stack grows towards the caller, so a wrong rule
 * cannot loop. */

/* The frame walkers below (interp_frame, jit_frame, native_frame, mapping_index) are
 * inlined into the step by default. An object that defines WALK_SUBPROG as __noinline
 * first makes each a global BPF function, which the verifier checks once, on its own,
 * with arguments it knows nothing of, instead of once per state of the step that
 * reaches it; their pointer arguments may then be NULL to the verifier, so each checks.
 * on_sample measured 14,218 instructions so against 20,349 inlined, but at one or two
 * BPF calls more per frame, so the sampler keeps them inlined (docs/record.md). */
#ifndef WALK_SUBPROG
#define WALK_SUBPROG static __always_inline
#endif
/* The same for the steps a walk takes at most once (a leaf compiled frame's prologue or
 * epilogue) or only for a frame without a rule (a signal frame): global, they cost a
 * walk one call at most, and the sampler (profile.bpf.c) makes them so. */
#ifndef WALK_RARE
#define WALK_RARE static __always_inline
#endif
#define MAX_SEG_HOPS 16
_Static_assert(MAX_SEG_HOPS == VPB_MAX_SEG_HOPS, "recorder/hotspot.c's reference lookup steps as far");
#define C_NATIVE 1               /* struct walk's cache kinds */
#define C_JIT 2
#define BLOB_HDR 64              /* bytes of a CodeBlob header read at once */
_Static_assert(BLOB_HDR == VPB_BLOB_HDR, "recorder/hotspot.c checks the blob fields lie within as many");
#define MAX_STACK_SPAN (64u << 20)

/* Stack words come from a copy of the stack's top that grows a chunk at a time as the
 * walk goes up (a copy costs about as much per kilobyte as a frame does, so copying a
 * fixed large window would cost shallow stacks); anything else, and stack beyond the
 * window, is read from the process word by word. */
static __always_inline int read_u64_raw(struct walk *w, __u64 addr, __u64 *v)
{
	__u64 off = addr - w->stk_base, len = w->stk_len;

	if (addr >= w->stk_base && off + 8 > len && off + 8 <= len + STK_CHUNK && len <= STK_BYTES - STK_CHUNK &&
	    !w->stk_stop) {
		if (WALK_READ(w, &w->stk[len & (STK_BYTES - 1)], STK_CHUNK, (const void *)(w->stk_base + len)))
			w->stk_stop = 1;     /* the stack ends within the chunk: read words */
		else
			w->stk_len = len + STK_CHUNK;
		/* Read back through memory: the verifier then sees one len, not one per way
		 * here (none, grown, stopped), and the paths join at once instead of running
		 * through the rest of the read, and the step, apart. */
		len = *(volatile __u64 *)&w->stk_len;
	}
	if (addr >= w->stk_base && off + 8 <= len && off <= STK_BYTES - 8) {
		/* One 8-byte load: a memcpy from the byte array compiles to eight byte loads
		 * and fourteen shifts and ors (the BPF target assumes no unaligned access; the
		 * verifier allows it on x86-64, and stack words are aligned anyway). */
		*v = *(__u64 *)&w->stk[off & (STK_BYTES - 1)];
		return 0;
	}
	return WALK_READ(w, v, sizeof(*v), (const void *)addr);
}

static __always_inline int read_u64(struct walk *w, __u64 addr, __u64 *v)
{
	int rc = read_u64_raw(w, addr, v);
#ifdef WALK_LOG
	/* Without a branch: each one here multiplies the verifier's work at every read.
	 * An index past the log wraps (the log is then not kept: nlog > WALK_LOG); a
	 * check's reads (replay) are logged too, into the scratch, where nothing uses
	 * them. */
	__u32 n = w->nlog;

	w->log_addr[n & (WALK_LOG - 1)] = addr;
	w->log_val[n & (WALK_LOG - 1)] = *v;
	w->nlog = n + 1;
	w->log_bad |= rc;
#endif
	return rc;
}

/* A frame's saved rbp, read into w->fp for the frames above. The log (WALK_LOG) takes
 * the word only once w->fp is used (fp_use): compiled Java code keeps data in rbp, not a
 * frame pointer, so the rbp a native frame (the park path) saved from its Java caller is
 * a Java local that changes from one switch-out to the next, while the compiled frames
 * above step by their frame size and restore rbp without reading it. A word that no step
 * used cannot change the walk, and a walk reused only because such words were the same
 * was reused in vain (a thread parking in a loop on ParkDeep: 29% of blocks walked
 * again). Only a word served from the stack copy is left out: the check copies the same
 * span again, which proves it still readable; any other is logged at once. */
static __always_inline int read_fp(struct walk *w, __u64 addr)
{
	__u64 v = 0;
	int rc = read_u64_raw(w, addr, &v);
#ifdef WALK_LOG
	__u32 n = w->nlog, in = addr >= w->stk_base && addr - w->stk_base + 8 <= w->stk_len;

	w->log_addr[n & (WALK_LOG - 1)] = addr;
	w->log_val[n & (WALK_LOG - 1)] = v;
	w->nlog = n + !in;       /* left pending (not counted) when in the copy */
	w->fp_pend = in;
	w->fp_addr = addr;
	w->log_bad |= rc;
#endif
	w->fp = v;
	return rc;
}

/* w->fp is about to decide a step: its word, if pending, joins the log. Without a branch
 * (see read_u64): a log of exactly WALK_LOG words is never kept (sched.bpf.c), so the
 * slot written when nothing is pending is never one that counts. */
static __always_inline void fp_use(struct walk *w)
{
#ifdef WALK_LOG
	__u32 n = w->nlog;

	w->log_addr[n & (WALK_LOG - 1)] = w->fp_addr;
	w->log_val[n & (WALK_LOG - 1)] = w->fp;
	w->nlog = n + w->fp_pend;
	w->fp_pend = 0;
#endif
}

/* Whether this step's frame is a leaf, read back from memory at each use: a value the
 * verifier learnt from one branch on it would split every state of the step that
 * follows into a leaf and a caller copy until its last use; read back, each use splits
 * only its own branch. The frame walkers keep their leaf argument (their prototypes as
 * global functions, WALK_SUBPROG) but decide by this. */
static __always_inline bool leaf_of(struct walk *w)
{
	return *(volatile __u32 *)&w->is_leaf != 0;
}

static __always_inline long stop(struct walk *w, __u32 why)
{
	w->end = why;
	return 1;
}

/* Binary search of the process's mappings (sorted by start) for pc: its index, or -1.
 * An index, not a pointer, so that it may be a global function (WALK_SUBPROG). Each
 * probe passes through w->bs_mid: read back from memory, it is a value the verifier
 * bounds by its own check, not one it derives from lo and hi; otherwise it tracks lo
 * and hi exactly through the ten unrolled halvings and cannot merge their states
 * (on_sample: 21,494 of the 37,753 instructions it verified). One store and one load. */
WALK_SUBPROG long mapping_index(struct walk *w, struct vpb_proc *p, __u64 pc)
{
	__u32 lo = 0, hi;

	if (!w || !p)
		return -1;
	hi = p->nr_maps;
	if (hi > VPB_MAX_MAPS)
		hi = VPB_MAX_MAPS;
	for (int i = 0; i < 10 && lo < hi; i++) {
		__u32 mid;

		w->bs_mid = (lo + hi) / 2;
		mid = *(volatile __u32 *)&w->bs_mid;
		if (mid >= VPB_MAX_MAPS)
			return -1;
		if (pc < p->maps[mid].start)
			hi = mid;
		else if (pc >= p->maps[mid].end)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

static __always_inline struct vpb_mapping *find_mapping(struct walk *w, struct vpb_proc *p, __u64 pc)
{
	/* 64 bits, compared unsigned: the verifier bounds the index by the one compare. */
	__u64 i = (__u64)mapping_index(w, p, pc);

	barrier_var(i);
	return i < VPB_MAX_MAPS ? &p->maps[i] : NULL;
}

/* The last rule of table t whose pc is <= off, narrowed by the page index. */
static __always_inline struct vpb_rule *find_rule(__u32 t, __u64 off)
{
	struct vpb_table *tab = bpf_map_lookup_elem(&unwind_tables, &t);
	__u32 page, k, lo, hi;
	__u64 *plo, *phi;

	if (!tab || off >= ((__u64)tab->nr_pages << VPB_PAGE_SHIFT))
		return NULL;
	page = tab->page_first + (__u32)(off >> VPB_PAGE_SHIFT);
	plo = bpf_map_lookup_elem(&unwind_pages, &page);
	k = page + 1;
	phi = bpf_map_lookup_elem(&unwind_pages, &k);
	if (!plo || !phi)
		return NULL;
	/* pages[p] is the index of the rule in force at the page's first byte. */
	lo = (__u32)*plo;
	hi = (__u32)*phi + 1;
	if (hi > tab->nr_rules)
		hi = tab->nr_rules;
	/* Invariant: rule lo applies at or before off; find the last such. */
	for (int i = 0; i < 14 && lo + 1 < hi; i++) {
		__u32 mid = (lo + hi) / 2, idx = tab->rule_first + mid;
		struct vpb_rule *r = bpf_map_lookup_elem(&unwind_rules, &idx);

		if (!r)
			return NULL;
		if (r->pc <= off)
			lo = mid;
		else
			hi = mid;
	}
	k = tab->rule_first + lo;
	return bpf_map_lookup_elem(&unwind_rules, &k);
}

WALK_SUBPROG long interp_frame(struct walk *w, struct vpb_hotspot *hs, bool leaf)
{
	__u64 method = 0, bcp = 0, cm = 0, ra, sender_sp;
	__s64 bci = -1;
	__u64 fp;

	if (!w || !hs)
		return 1;
	fp = w->fp;

	fp_use(w);
	if (fp <= w->sp || fp - w->sp > MAX_STACK_SPAN)
		return stop(w, VPB_WALK_BAD_FRAME);
	if (read_u64(w, fp + (__s64)hs->slot_method * 8, &method) == 0 && method) {
		if (leaf_of(w))
			bcp = w->r13;
		else
			read_u64(w, fp + (__s64)hs->slot_bcp * 8, &bcp);
		/* A method's ConstMethod does not change within a walk. */
		if (method == w->c_method) {
			cm = w->c_cm;
		} else if (read_u64(w, method + hs->method_const, &cm) == 0) {
			w->c_method = method;
			w->c_cm = cm;
		}
		if (cm && bcp > cm)
			bci = (__s64)(bcp - cm - hs->constmethod_size);
		if (bci < 0 || bci > 65535)
			bci = -1;
		if (w->nj < WALK_MAXJ) {
			__u32 j = w->nj;

			if (j < WALK_MAXJ) {
				w->jframes[j].method = method;
				w->jframes[j].frame = (__u16)(w->n - 1);
				w->jframes[j].bci = (__s32)bci;
			}
			w->nj = j + 1;
		}
	}
	if (read_u64(w, fp + 8, &ra) || read_fp(w, fp) ||
	    read_u64(w, fp + (__s64)hs->slot_sender_sp * 8, &sender_sp))
		return stop(w, VPB_WALK_UNREADABLE);
	/* A compiled caller's frame is found from its unextended SP, which the interpreter
	 * saved in its sender_sp slot; everything else uses the frame pointer chain. */
	if (sender_sp <= w->sp || sender_sp > fp + MAX_STACK_SPAN)
		sender_sp = fp + 16;
	w->pc = ra;
	w->sp = sender_sp;
	return 0;
}

/* Before a compiled method's frame is complete. C2 without a stack bang allocates it
 * first ("sub rsp, F-8; mov [rsp+F-16], rbp"), C1 and C2 with one push rbp first
 * ("push rbp; sub rsp, F-16"). At the mov the frame is all there but rbp is still the
 * caller's; right after the push (pc at the sub, the byte before it the push) only rbp
 * and the return address are; before either, only the return address (the stack
 * bang, the sub of the first form). Small methods are sampled here often: taking the
 * whole prologue for "nothing pushed" made their callers [unknown]. */
WALK_RARE __u64 prologue_cfa(struct walk *w, __u64 cfa, bool *rbp_saved)
{
	__u8 c[8], prev = 0;

	if (!w || !rbp_saved)
		return cfa;
	*rbp_saved = false;
	if (WALK_READ(w, c, sizeof(c), (const void *)w->pc))
		return w->sp + 8;
	if (c[0] == 0x48 && c[1] == 0x89 && (c[2] == 0x6c || c[2] == 0xac) && c[3] == 0x24)
		return cfa;                                            /* mov [rsp+d], rbp */
	/* The nmethod entry barrier (JDK 21+: "cmp dword [r15+d], imm; jne"), within the
	 * prologue as the frame-complete offset counts it, comes after the frame is built. */
	if ((c[0] == 0x41 && c[1] == 0x81 && c[2] == 0x7f) || (c[0] == 0x0f && c[1] == 0x85)) {
		*rbp_saved = true;
		return cfa;
	}
	if (c[0] == 0x48 && (c[1] == 0x83 || c[1] == 0x81) && c[2] == 0xec &&
	    WALK_READ(w, &prev, 1, (const void *)(w->pc - 1)) == 0 && prev == 0x55) {
		*rbp_saved = true;                                     /* push rbp; at sub rsp */
		return w->sp + 16;
	}
	return w->sp + 8;
}

/* A compiled method's epilogue pops its frame before it returns: "add rsp, N; pop
 * rbp; cmp rsp, [r15+poll word]; ja <poll stub>; ret" (C1 and C2 on x86-64, JDK 17 and
 * later). A leaf pc at the pop leaves rbp's slot and the return address above SP; past
 * it, the return address is at SP. Small methods spend a good part of their time there;
 * walked by their frame size, their callers came out as [unknown]. Returns the CFA. */
WALK_RARE __u64 epilogue_cfa(struct walk *w, __u64 cfa)
{
	__u8 c[16];

	if (!w)
		return cfa;
	if (WALK_READ(w, c, sizeof(c), (const void *)w->pc))
		return cfa;
	if (c[0] == 0xc3)                                              /* ret */
		return w->sp + 8;
	if (c[0] == 0x49 && c[1] == 0x3b && (c[2] == 0x67 || c[2] == 0xa7)) /* cmp rsp, [r15+d] */
		return w->sp + 8;
	if ((c[0] == 0x0f && c[1] == 0x87 && c[6] == 0xc3) || (c[0] == 0x77 && c[2] == 0xc3)) /* ja; ret */
		return w->sp + 8;
	if (c[0] == 0x5d && (c[1] == 0xc3 || (c[1] == 0x49 && c[2] == 0x3b && (c[3] == 0x67 || c[3] == 0xa7))))
		return w->sp + 16;                                     /* pop rbp */
	return cfa;
}

/* Is v in one of the JVM's code heaps (compiled methods, the interpreter, stubs)? */
static __always_inline bool in_java_code(struct vpb_hotspot *hs, __u64 v)
{
	for (int k = 0; k < VPB_MAX_HEAPS; k++)
		if (k < hs->nr_heaps && v >= hs->heaps[k].lo && v < hs->heaps[k].hi)
			return true;
	return false;
}

#ifdef WALK_SEG_FN
/* The segment where the blob holding segment seg starts, through the code heap's segment
 * map at segmap; -1 unreadable, -2 no blob (free, or more hops than MAX_SEG_HOPS), -3
 * a hop past the heap's start. The WALK_SEG_FN bytes of the map up to seg's are read at
 * once: a blob that starts among them (a compiled method of up to WALK_SEG_FN segments)
 * costs one read, not one per hop and one for its first segment. A global function:
 * the verifier checks it once, on its own (inlined in on_sample's walk, the window
 * cost 50% more verified instructions). Only where WALK_READ reads the current task. */
__noinline __s64 walk_seg_start(__u64 segmap, __u64 seg)
{
	__u8 win[WALK_SEG_FN], b = 0xff;
	__u64 wlo = seg >= WALK_SEG_FN - 1 ? seg - (WALK_SEG_FN - 1) : 0;

	int i = 0;

	if (bpf_probe_read_user(win, sizeof(win), (const void *)(segmap + wlo)))
		wlo = seg + 1;       /* nothing in the window */
	/* The hops within the window, then those past it (seg only goes down): two loops,
	 * not one with both ways in each hop, so that the verifier does not follow every
	 * mix of the two (one loop: 4,200 of on_sample's 21,000 instructions). */
	for (; i < MAX_SEG_HOPS && seg >= wlo; i++) {
		b = win[(seg - wlo) & (WALK_SEG_FN - 1)];
		if (b == 0xff)
			return -2;
		if (b == 0)
			return (__s64)seg;
		if (seg < b)
			return -3;
		seg -= b;
	}
	for (; i < MAX_SEG_HOPS; i++) {
		if (bpf_probe_read_user(&b, 1, (const void *)(segmap + seg)))
			return -1;
		if (b == 0xff)
			return -2;
		if (b == 0)
			return (__s64)seg;
		if (seg < b)
			return -3;
		seg -= b;
	}
	return -2;
}

#ifdef WALK_RCACHE
/* VIPROF_DEBUG_RCACHE=check|plant: the window's answer r for segment seg against the
 * byte-per-hop search it replaced (counted in walk_rcache_stats). */
__noinline int walk_seg_check(__u64 segmap, __u64 seg, __s64 r)
{
	__s64 slow = -2;
	__u8 b = 0xff;

	for (int i = 0; i < MAX_SEG_HOPS; i++) {
		if (bpf_probe_read_user(&b, 1, (const void *)(segmap + seg))) {
			slow = -1;
			break;
		}
		if (b == 0xff)
			break;
		if (b == 0) {
			slow = (__s64)seg;
			break;
		}
		if (seg < b) {
			slow = -3;
			break;
		}
		seg -= b;
	}
	rcache_count(VPB_RC_SEG);
	if (slow != r)
		rcache_count(VPB_RC_SEG_WRONG);
	return 0;
}
#endif
#endif

/* Finds the code blob holding pc through heap i's segment map. 0 or a stop. */
WALK_SUBPROG long jit_frame(struct walk *w, struct vpb_hotspot *hs, struct vpb_codeheap *h, bool leaf)
{
	__u64 seg, blob, cfa, ra, code;
	__u8 hdr[BLOB_HDR], b;
	__s32 fsize = 0, fc = -1;
	__u32 off;
	bool rbp_saved = true;

	if (!w || !hs || !h)
		return 1;
	seg = (w->pc - h->lo) >> (h->log2_seg & 63);
#ifdef WALK_SEG_WIN
	/* The segment map's bytes up to pc's, read at once: a small blob's first segment
	 * lies among them, so its hops cost one read, not one each (a walk of 67 frames,
	 * 50 of them compiled: 16 -> 12 us). Only where the walk is verified once (the
	 * switch tracer's global walked_ustack): each test here multiplies the verifier's
	 * work on the walk, and on_sample verifies it per state. */
	__u8 win[WALK_SEG_WIN];
	__u64 wlo = seg >= WALK_SEG_WIN - 1 ? seg - (WALK_SEG_WIN - 1) : 0;

	if (WALK_READ(w, win, sizeof(win), (const void *)(h->segmap + wlo)))
		wlo = seg + 1;       /* nothing in the window */
#endif
#ifdef WALK_SEG_FN
	{
		__s64 r = walk_seg_start(h->segmap, seg);
#ifdef WALK_RCACHE
		if (walk_rcache_mode)
			walk_seg_check(h->segmap, seg, r);
#endif

		if (r == -1)
			return stop(w, VPB_WALK_UNREADABLE);
		if (r == -3)
			return stop(w, VPB_WALK_BAD_FRAME);
		if (r < 0)
			return stop(w, VPB_WALK_NO_RULE);
		seg = (__u64)r;
		b = 0;
	}
#else
	for (int i = 0; i < MAX_SEG_HOPS; i++) {
#ifdef WALK_SEG_WIN
		if (seg >= wlo)
			b = win[(seg - wlo) & (WALK_SEG_WIN - 1)];
		else
#endif
		if (WALK_READ(w, &b, 1, (const void *)(h->segmap + seg)))
			return stop(w, VPB_WALK_UNREADABLE);
		if (b == 0xff)
			return stop(w, VPB_WALK_NO_RULE);
		if (b == 0)
			break;
		if (seg < b)
			return stop(w, VPB_WALK_BAD_FRAME);
		seg -= b;
	}
#endif
	if (b != 0)
		return stop(w, VPB_WALK_NO_RULE);
	blob = h->lo + (seg << (h->log2_seg & 63)) + hs->heapblock_size;
	if (WALK_READ(w, hdr, sizeof(hdr), (const void *)blob))
		return stop(w, VPB_WALK_UNREADABLE);
	off = hs->blob_frame_size;
	if (off <= BLOB_HDR - 4)
		__builtin_memcpy(&fsize, hdr + (off & (BLOB_HDR - 1)), 4);
	if (fsize <= 0 || fsize > 65536) {
		/* Blobs without a fixed frame: the call stub keeps a frame pointer, but
		 * itable/vtable stubs push nothing (they jump to the method) and the
		 * StubRoutines (arraycopy, ...) and adapters have none in their first and last
		 * instructions, while rbp holds the compiled caller's data. In a leaf, a
		 * return address into Java code at SP (or, after a push of rbp, right above it)
		 * says the stub has no frame yet: step over it by that; otherwise walk its
		 * frame pointer, and if that makes no sense, try SP once more. */
		if (leaf_of(w) && read_u64(w, w->sp, &ra) == 0 && in_java_code(hs, ra)) {
			w->pc = ra;
			w->sp += 8;
			return 0;
		}
		fp_use(w);
		bool fp_ok = w->fp > w->sp && w->fp - w->sp <= MAX_STACK_SPAN;
		if (fp_ok && (read_u64(w, w->fp + 8, &ra) || !ra))
			fp_ok = false;
		if (!fp_ok && leaf_of(w) && read_u64(w, w->sp + 8, &ra) == 0 && in_java_code(hs, ra) &&
		    read_fp(w, w->sp) == 0) {
			w->pc = ra;
			w->sp += 16;
			return 0;
		}
		if (!fp_ok)
			return stop(w, VPB_WALK_BAD_FRAME);
		code = w->fp;
		if (read_u64(w, code + 8, &ra) || read_fp(w, code))
			return stop(w, VPB_WALK_UNREADABLE);
		w->pc = ra;
		w->sp = code + 16;
		return 0;
	}
	cfa = w->sp + (__u64)fsize * 8;
	if (!leaf_of(w)) {
		w->c_pc = w->pc;
		w->c_kind = C_JIT;
		w->c_fsize = fsize;
	}
	if (leaf_of(w)) {
		/* Before the frame is complete (the prologue) only the return address has
		 * been pushed. */
		off = hs->blob_frame_complete;
		if (hs->frame_complete_16) {
			__s16 f16 = 0;

			if (off <= BLOB_HDR - 2)
				__builtin_memcpy(&f16, hdr + (off & (BLOB_HDR - 1)), 2);
			fc = f16;
		} else if (off <= BLOB_HDR - 4) {
			__builtin_memcpy(&fc, hdr + (off & (BLOB_HDR - 1)), 4);
		}
		off = hs->blob_code;
		code = 0;
		if (hs->blob_code_is_offset) {
			__s32 co = 0;

			if (off <= BLOB_HDR - 4)
				__builtin_memcpy(&co, hdr + (off & (BLOB_HDR - 1)), 4);
			code = blob + co;
		} else if (off <= BLOB_HDR - 8) {
			__builtin_memcpy(&code, hdr + (off & (BLOB_HDR - 1)), 8);
		}
		if (fc > 0 && code && w->pc < code + (__u64)fc)
			cfa = prologue_cfa(w, cfa, &rbp_saved);
		else
			cfa = epilogue_cfa(w, cfa);
	}
	if (read_u64(w, cfa - 8, &ra))
		return stop(w, VPB_WALK_UNREADABLE);
	if (rbp_saved && cfa != w->sp + 8 && read_fp(w, cfa - 16))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = ra;
	w->sp = cfa;
	return 0;
}

/* A frame step's result: apply w->rule (walk_step does, in one place). */
#define WALK_APPLY 2

/* Steps over a frame by its unwind rule. */
static __always_inline long apply_rule(struct walk *w, struct vpb_rule *r)
{
	__u64 cfa, ra;

	switch (r->kind) {
	case VPB_RULE_SP:
		cfa = w->sp + (__s64)r->cfa_off * 8;
		break;
	case VPB_RULE_FP:
		fp_use(w);
		cfa = w->fp + (__s64)r->cfa_off * 8;
		break;
	case VPB_RULE_PLT:
		cfa = w->sp + 8 + ((__s64)(w->pc & 15) >= (__s64)r->cfa_off ? 8 : 0);
		break;
	case VPB_RULE_END:
		return stop(w, VPB_WALK_ROOT);
	default:
		return stop(w, VPB_WALK_NO_RULE);
	}
	if (read_u64(w, cfa - 8, &ra))
		return stop(w, VPB_WALK_UNREADABLE);
	if (r->fp_off != VPB_FP_SAME && read_fp(w, cfa + (__s64)r->fp_off * 8))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = ra;
	w->sp = cfa;
	return 0;
}

/* Where the interrupted registers lie in the ucontext of an x86-64 signal frame (struct
 * rt_sigframe: the return address into the restorer, popped by the handler's return, then
 * struct ucontext: uc_flags, uc_link, uc_stack (24 bytes), then uc_mcontext, whose
 * general registers are r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip). */
#define UC_MCONTEXT 40
#define UC_R13 (UC_MCONTEXT + 5 * 8)
#define UC_RBP (UC_MCONTEXT + 10 * 8)
#define UC_RSP (UC_MCONTEXT + 15 * 8)
#define UC_RIP (UC_MCONTEXT + 16 * 8)

/* A frame without an unwind rule may be the signal restorer (libc's __restore_rt, whose
 * FDE is a signal frame the tables leave without a rule): "mov $15 (rt_sigreturn), %rax;
 * syscall", SP at the ucontext. The walk goes on at the interrupted pc with the
 * interrupted registers, and walks that frame as a leaf (the pc is not a return
 * address). Another agent's signal handler (a profiler's SIGPROF) then keeps the
 * interrupted code's callers under it. */
WALK_RARE long sigframe(struct walk *w)
{
	__u8 c[9];
	__u64 uc, rip, rsp, r13;

	if (!w)
		return 1;
	uc = w->sp;
	if (WALK_READ(w, c, sizeof(c), (const void *)w->pc) || c[0] != 0x48 || c[1] != 0xc7 || c[2] != 0xc0 ||
	    c[3] != 0x0f || c[4] || c[5] || c[6] || c[7] != 0x0f || c[8] != 0x05)
		return stop(w, VPB_WALK_NO_RULE);
	if (read_u64(w, uc + UC_RIP, &rip) || read_u64(w, uc + UC_RSP, &rsp) || read_fp(w, uc + UC_RBP) ||
	    read_u64(w, uc + UC_R13, &r13))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = rip;
	w->sp = rsp;
	w->r13 = r13;
	w->sig_leaf = 1;
	return 0;
}

WALK_SUBPROG long native_frame(struct walk *w, struct vpb_mapping *m, bool leaf, __u32 gen)
{
	__u64 lookup, ra, fp;
	struct vpb_rule *r;

	if (!w || !m)
		return 1;
	lookup = w->pc - (leaf_of(w) ? 0 : 1);
	fp = w->fp;

	if (m->table == VPB_NO_TABLE) {
		/* No unwind information at all: frame pointers are all there is. */
		fp_use(w);
		if (fp <= w->sp || fp - w->sp > MAX_STACK_SPAN)
			return stop(w, VPB_WALK_NO_RULE);
		if (read_u64(w, fp + 8, &ra) || read_fp(w, fp))
			return stop(w, VPB_WALK_UNREADABLE);
		w->pc = ra;
		w->sp = fp + 16;
		return 0;
	}
	r = find_rule(m->table, lookup - m->bias);
	if (!r || r->kind == VPB_RULE_NONE)
		return sigframe(w);
	if (!leaf_of(w)) {
		w->c_pc = w->pc;
		w->c_kind = C_NATIVE;
		w->c_rule = *r;
#ifdef WALK_RCACHE
		walk_rcache_put(w->pc, w->slot, gen, r);
#endif
	}
	w->rule = *r;
	return WALK_APPLY;
}

/* A caller frame at the pc of the cached one: the same rule or frame size. */
static __always_inline long cached_frame(struct walk *w)
{
	__u64 cfa, ra;

	if (w->c_kind == C_NATIVE) {
		w->rule = w->c_rule;
		return WALK_APPLY;
	}
	cfa = w->sp + (__u64)w->c_fsize * 8;
	if (read_u64(w, cfa - 8, &ra))
		return stop(w, VPB_WALK_UNREADABLE);
	if (cfa != w->sp + 8 && read_fp(w, cfa - 16))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = ra;
	w->sp = cfa;
	return 0;
}

static long walk_step(__u32 i, void *ctx)
{
	struct walk *w = *(struct walk **)ctx;
	struct vpb_proc *p;
	struct vpb_mapping *m;
	__u64 old_sp, pc;
	bool leaf = i == 0;
	__u32 gen;
	long rc;

	if (!w)
		return 1;
	if (w->sig_leaf) {
		leaf = true;
		w->sig_leaf = 0;
	}
	w->is_leaf = leaf;
	p = bpf_map_lookup_elem(&unwind_procs, &w->slot);
	if (!p)
		return stop(w, VPB_WALK_NO_PROC);
	/* Read before the mappings: a cache entry is filled under the gen read before what it
	 * was derived from (unwinder.c writes an entry twice, each time with a new gen). */
	gen = *(volatile __u32 *)&p->gen;
	pc = w->pc;
	if (pc == 0)
		return stop(w, VPB_WALK_ROOT);
	if (w->n >= WALK_MAX)
		return stop(w, VPB_WALK_DEPTH);
	{
		__u32 n = w->n;

		if (n < WALK_MAX)
			w->ustack[n] = pc;
		w->n = n + 1;
	}
	old_sp = w->sp;
	if (!leaf_of(w) && pc == w->c_pc) {
		rc = cached_frame(w);
	} else if (p->hs.nr_heaps && pc >= p->hs.interp_lo && pc < p->hs.interp_hi) {
		rc = interp_frame(w, &p->hs, leaf);
	} else {
		struct vpb_codeheap *h = NULL;

		for (int k = 0; k < VPB_MAX_HEAPS; k++)
			if (k < p->hs.nr_heaps && pc >= p->hs.heaps[k].lo && pc < p->hs.heaps[k].hi)
				h = &p->hs.heaps[k];
		if (h) {
			rc = jit_frame(w, &p->hs, h, leaf);
		} else {
#ifdef WALK_RCACHE
			/* A native caller pc this process's entry (gen) saw before: its rule, as
			 * the mapping and table searches found it then. Asked only here, for pcs
			 * outside the JVM's code: each ask is a cache line the samples in between
			 * have evicted. */
			if (!leaf_of(w) && walk_rcache_get(pc, w->slot, gen, &w->c_rule)) {
				w->c_pc = pc;
				w->c_kind = C_NATIVE;
				w->rule = w->c_rule;
				rc = WALK_APPLY;
			} else
#endif
			{
				m = find_mapping(w, p, pc);
				if (!m)
					return stop(w, VPB_WALK_NO_RULE);
				rc = native_frame(w, m, leaf, gen);
			}
		}
	}
	/* One place applies a rule, whichever way it was found (the cached frame, the rule
	 * cache, the searches): inlined at each, the rule's step was verified once per path
	 * that reached it. */
	if (rc == WALK_APPLY)
		rc = apply_rule(w, &w->rule);
	if (rc)
		return 1;    /* a bpf_loop callback returns 0 or 1 (rc is unknown from a global function) */
	if (w->pc == 0)
		return stop(w, VPB_WALK_ROOT);
	/* Past a signal frame the interrupted SP may lie anywhere (a handler on an
	 * alternate stack): only that it moved is checked. */
	if (w->sig_leaf ? w->sp == old_sp : w->sp <= old_sp)
		return stop(w, VPB_WALK_BAD_FRAME);
	return 0;
}

/* Walks the user stack of process tgid from the given user registers (r13 is the
 * interpreter's bytecode pointer in a leaf interpreted frame) into w->ustack and
 * w->jframes, at most WALK_MAX frames (the walk then ends with VPB_WALK_DEPTH) and
 * WALK_MAXJ interpreted frames; sets w->s.ustack_bytes, walk_end and nr_jframes. One
 * frame per bpf_loop iteration, so the verifier sees one step whatever the depth.
 * Returns false when the process has no tables yet (the caller falls back to frame
 * pointers). */
static __always_inline bool walk_regs(struct walk *w, __u32 tgid, __u64 pc, __u64 sp, __u64 fp, __u64 r13)
{
	__u32 *slot = bpf_map_lookup_elem(&proc_slots, &tgid);

	if (!slot)
		return false;
	w->pc = pc;
	w->sp = sp;
	w->fp = fp;
	w->r13 = r13;
	w->slot = *slot;
	/* The stack is copied in chunks as the walk reaches them (read_u64). */
	w->stk_base = w->sp;
	w->stk_len = 0;
	w->stk_stop = 0;
	w->n = 0;
	w->nj = 0;
	w->c_pc = 0;
	w->c_method = 0;
	w->sig_leaf = 0;
#ifdef WALK_LOG
	w->nlog = 0;
	w->log_bad = 0;
	w->fp_pend = 0;
#endif
	w->end = VPB_WALK_DEPTH;
	/* One more iteration than frames, so that a stack of exactly WALK_MAX frames
	 * ends at its root, not at the depth limit. */
	bpf_loop(WALK_MAX + 1, walk_step, &w, 0);
	w->s.ustack_bytes = (__s32)(w->n * 8);
	w->s.walk_end = (__u16)w->end;
	w->s.nr_jframes = (__u16)w->nj;
	return true;
}

#endif
