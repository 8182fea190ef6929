// SPDX-License-Identifier: GPL-2.0
/* The eBPF sampler: runs on every overflow of the perf events the bpf backend opens
 * (one per CPU per event) and stores one struct vpb_sample per overflow in a ring
 * buffer that user space drains on a timer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "profile.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load; the verifier prunes the dead branches. */
const volatile __u32 target_mode = VPB_TARGET_ALL;
const volatile bool callchain = false;
const volatile __u32 event_index = 0;
/* Walk user stacks with the unwind tables below instead of bpf_get_stack's frame
 * pointers (the bpf backend sets it with -g). */
const volatile bool unwind = false;
/* Weigh each sample by the count its event read (below) instead of the kernel's period
 * (set for frequency-driven counting events). */
const volatile bool exact_period = false;
/* The service records for one user (sampler_config.only_uid): samples and switches of
 * tasks whose real, effective and saved uid are not all this one are dropped or made
 * anonymous, whatever the pid set says (a set-uid child is no longer the user's). */
const volatile __u32 filter_uid = (__u32)-1;

#define PF_KTHREAD 0x00200000

static __always_inline bool owned(struct task_struct *t)
{
	if (filter_uid == (__u32)-1)
		return true;
	return BPF_CORE_READ(t, cred, uid.val) == filter_uid && BPF_CORE_READ(t, cred, euid.val) == filter_uid &&
	       BPF_CORE_READ(t, cred, suid.val) == filter_uid;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by user space before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPB_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPB_LOST_NR);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Per perf event instance (the kernel's struct perf_event, one per thread and event
 * with inherit), its count at its previous sample. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);      /* 1 when exact_period is off */
	__type(key, __u64);
	__type(value, __u64);
} last_count SEC(".maps");

/* Per thread and exactly weighed event, the perf_event its samples came from, so that
 * its count after the last sample can be read when the thread exits (on_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);      /* 1 when no event is weighed exactly */
	__type(key, struct vpb_thread_key);
	__type(value, __u64);
} thread_ev SEC(".maps");

/* The events user space opened (the parents of the inherited copies), each with its
 * event index, as samples reveal them: on_exit finds a thread that was never sampled
 * by its copy of one of these. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);       /* 1 when no event is weighed exactly */
	__type(key, __u64);
	__type(value, __u32);
} families SEC(".maps");

/* The walker's tables, written by user space (daemon/unwinder.c): the big arrays are
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
 * BPF stack, and the bpf_loop callback reaches both through here. */
#define STK_BYTES 8192        /* at most this much of the stack is copied per walk */
#define STK_CHUNK 1024        /* in pieces of this size, as the walk reaches them */

struct walk {
	__u64 pc, sp, fp, r13;
	__u64 stk_base, stk_len;  /* stk holds [stk_base, stk_base + stk_len) */
	__u64 stk_stop;           /* the next chunk was unreadable: do not grow */
	__u32 slot;
	__u32 n;                 /* frames stored */
	__u32 end;               /* VPB_WALK_* once the walk stops */
	__u32 nj;
	struct vpb_sample s;
	__u8 stk[STK_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} scratch SEC(".maps");

static __always_inline void count_lost(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &idx);

	if (v)
		*v += 1;
}

static __always_inline bool is_kernel_ip(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* The privilege level of the interrupted context lives in the low bits of CS.
	 * The verifier only allows 8-byte loads of the regs in the context, and CS is a
	 * 16-bit field in the low bytes of its 8-byte slot (little-endian). */
	__u64 cs = *(volatile __u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));

	return (cs & 3) == 0;
#else
	return (long)PT_REGS_IP(&ctx->regs) < 0;
#endif
}

/* The events since this event instance's previous sample. In frequency mode the
 * kernel's period (ctx->sample_period) is the one it meant to arm when it last retuned
 * the rate, not the one it armed (it even resets it at every sched-in of a software
 * event): a burst of page faults came out 10-30% high. The event's own count is the
 * truth; bpf_perf_prog_read_value would give it but refuses inherited events, so it
 * is read from the perf_event behind the context. First sample: the count so far. */
static __always_inline __u64 true_period(struct bpf_perf_event_data *ctx)
{
	struct bpf_perf_event_data_kern *k = (void *)ctx;
	struct perf_event *ev = NULL;
	__u64 count = 0, key, *last, d;

	if (bpf_probe_read_kernel(&ev, sizeof(ev), __builtin_preserve_access_index(&k->event)) || !ev)
		return ctx->sample_period;
	if (bpf_probe_read_kernel(&count, sizeof(count), __builtin_preserve_access_index(&ev->count)))
		return ctx->sample_period;
	key = (__u64)ev;
	last = bpf_map_lookup_elem(&last_count, &key);
	d = last ? (count >= *last ? count - *last : count) : count;
	bpf_map_update_elem(&last_count, &key, &count, BPF_ANY);
	{
		struct vpb_thread_key tk = { .tid = (__u32)bpf_get_current_pid_tgid(), .event = event_index };

		struct perf_event *parent = BPF_CORE_READ(ev, parent);
		__u64 fam = parent ? (__u64)parent : key;
		__u32 ei = event_index;

		bpf_map_update_elem(&thread_ev, &tk, &key, BPF_ANY);
		bpf_map_update_elem(&families, &fam, &ei, BPF_NOEXIST);
	}
	return d;
}

/* Everything but the stacks; shared by the two reservation sizes below. */
static __always_inline void fill(struct vpb_sample *s, struct bpf_perf_event_data *ctx,
				 __u64 id, bool kernel)
{
	s->kind = VPB_KIND_SAMPLE;
	s->cpu = bpf_get_smp_processor_id();
	s->time = bpf_ktime_get_ns();
	s->pid = id >> 32;
	s->tid = (__u32)id;
	s->ip = PT_REGS_IP(&ctx->regs);
	s->period = exact_period ? true_period(ctx) : ctx->sample_period;
	s->event = event_index;
	s->mode = kernel ? VPB_MODE_KERNEL : VPB_MODE_USER;
	s->flags = 0;
	s->kstack_bytes = 0;
	s->ustack_bytes = 0;
	s->walk_end = 0;
	s->nr_jframes = 0;
}


/* ---- The user stack walker.
 *
 * One frame per bpf_loop iteration. A frame's pc is classified: HotSpot's interpreter
 * (frame pointer always kept; Method* and bytecode pointer at fixed slots), HotSpot's code
 * heaps (compiled methods and stubs with a fixed frame size found through the code
 * heap's segment map), or a native mapping unwound with the rules derived from its
 * .eh_frame. Each step checks that the stack grows towards the caller, so a wrong rule
 * cannot loop. */

#define MAX_SEG_HOPS 16
#define BLOB_HDR 64              /* bytes of a CodeBlob header read at once */
#define MAX_STACK_SPAN (64u << 20)

/* Stack words come from a copy of the stack's top that grows a chunk at a time as the
 * walk goes up (a copy costs about as much per kilobyte as a frame does, so copying a
 * fixed large window would cost shallow stacks); anything else, and stack beyond the
 * window, is read from the process word by word. */
static __always_inline int read_u64(struct walk *w, __u64 addr, __u64 *v)
{
	__u64 off = addr - w->stk_base, len = w->stk_len;

	if (addr >= w->stk_base && off + 8 > len && off + 8 <= len + STK_CHUNK && len <= STK_BYTES - STK_CHUNK &&
	    !w->stk_stop) {
		if (bpf_probe_read_user(&w->stk[len & (STK_BYTES - 1)], STK_CHUNK, (const void *)(w->stk_base + len)))
			w->stk_stop = 1;     /* the stack ends within the chunk: read words */
		else
			w->stk_len = len = len + STK_CHUNK;
	}
	if (addr >= w->stk_base && off + 8 <= len && off <= STK_BYTES - 8) {
		__builtin_memcpy(v, &w->stk[off & (STK_BYTES - 1)], 8);
		return 0;
	}
	return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
}

static __always_inline long stop(struct walk *w, __u32 why)
{
	w->end = why;
	return 1;
}

/* Binary search of the process's mappings (sorted by start) for pc. */
static __always_inline struct vpb_mapping *find_mapping(struct vpb_proc *p, __u64 pc)
{
	__u32 lo = 0, hi = p->nr_maps;

	if (hi > VPB_MAX_MAPS)
		hi = VPB_MAX_MAPS;
	for (int i = 0; i < 10 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;

		if (mid >= VPB_MAX_MAPS)
			return NULL;
		if (pc < p->maps[mid].start)
			hi = mid;
		else if (pc >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
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

static __always_inline long interp_frame(struct walk *w, struct vpb_hotspot *hs, bool leaf)
{
	__u64 method = 0, bcp = 0, cm = 0, ra, sender_sp, link;
	__s64 bci = -1;
	__u64 fp = w->fp;

	if (fp <= w->sp || fp - w->sp > MAX_STACK_SPAN)
		return stop(w, VPB_WALK_BAD_FRAME);
	if (read_u64(w, fp + (__s64)hs->slot_method * 8, &method) == 0 && method) {
		if (leaf)
			bcp = w->r13;
		else
			read_u64(w, fp + (__s64)hs->slot_bcp * 8, &bcp);
		if (read_u64(w, method + hs->method_const, &cm) == 0 && cm && bcp > cm)
			bci = (__s64)(bcp - cm - hs->constmethod_size);
		if (bci < 0 || bci > 65535)
			bci = -1;
		if (w->nj < VPB_MAX_JFRAMES) {
			__u32 j = w->nj;

			w->s.jframes[j].method = method;
			w->s.jframes[j].frame = (__u16)(w->n - 1);
			w->s.jframes[j].bci = (__s32)bci;
			w->nj = j + 1;
		}
	}
	if (read_u64(w, fp + 8, &ra) || read_u64(w, fp, &link) ||
	    read_u64(w, fp + (__s64)hs->slot_sender_sp * 8, &sender_sp))
		return stop(w, VPB_WALK_UNREADABLE);
	/* A compiled caller's frame is found from its unextended SP, which the interpreter
	 * saved in its sender_sp slot; everything else uses the frame pointer chain. */
	if (sender_sp <= w->sp || sender_sp > fp + MAX_STACK_SPAN)
		sender_sp = fp + 16;
	w->pc = ra;
	w->sp = sender_sp;
	w->fp = link;
	return 0;
}

/* Before a compiled method's frame is complete. C2 without a stack bang allocates it
 * first ("sub rsp, F-8; mov [rsp+F-16], rbp"), C1 and C2 with one push rbp first
 * ("push rbp; sub rsp, F-16"). At the mov the frame is all there but rbp is still the
 * caller's; right after the push (pc at the sub, the byte before it the push) only rbp
 * and the return address are; before either, only the return address (the stack
 * bang, the sub of the first form). Small methods are sampled here often: taking the
 * whole prologue for "nothing pushed" made their callers [unknown]. */
static __always_inline __u64 prologue_cfa(struct walk *w, __u64 cfa, bool *rbp_saved)
{
	__u8 c[8], prev = 0;

	*rbp_saved = false;
	if (bpf_probe_read_user(c, sizeof(c), (const void *)w->pc))
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
	    bpf_probe_read_user(&prev, 1, (const void *)(w->pc - 1)) == 0 && prev == 0x55) {
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
static __always_inline __u64 epilogue_cfa(struct walk *w, __u64 cfa)
{
	__u8 c[16];

	if (bpf_probe_read_user(c, sizeof(c), (const void *)w->pc))
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

/* Finds the code blob holding pc through heap i's segment map. 0 or a stop. */
static __always_inline long jit_frame(struct walk *w, struct vpb_hotspot *hs, struct vpb_codeheap *h,
				      bool leaf)
{
	__u64 seg = (w->pc - h->lo) >> (h->log2_seg & 63), blob, cfa, ra, code;
	__u8 hdr[BLOB_HDR], b;
	__s32 fsize = 0, fc = -1;
	__u32 off;
	bool rbp_saved = true;

	for (int i = 0; i < MAX_SEG_HOPS; i++) {
		if (bpf_probe_read_user(&b, 1, (const void *)(h->segmap + seg)))
			return stop(w, VPB_WALK_UNREADABLE);
		if (b == 0xff)
			return stop(w, VPB_WALK_NO_RULE);
		if (b == 0)
			break;
		if (seg < b)
			return stop(w, VPB_WALK_BAD_FRAME);
		seg -= b;
	}
	if (b != 0)
		return stop(w, VPB_WALK_NO_RULE);
	blob = h->lo + (seg << (h->log2_seg & 63)) + hs->heapblock_size;
	if (bpf_probe_read_user(hdr, sizeof(hdr), (const void *)blob))
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
		if (leaf && read_u64(w, w->sp, &ra) == 0 && in_java_code(hs, ra)) {
			w->pc = ra;
			w->sp += 8;
			return 0;
		}
		bool fp_ok = w->fp > w->sp && w->fp - w->sp <= MAX_STACK_SPAN;
		if (fp_ok && (read_u64(w, w->fp + 8, &ra) || !ra))
			fp_ok = false;
		if (!fp_ok && leaf && read_u64(w, w->sp + 8, &ra) == 0 && in_java_code(hs, ra) &&
		    read_u64(w, w->sp, &code) == 0) {
			w->pc = ra;
			w->sp += 16;
			w->fp = code;
			return 0;
		}
		if (!fp_ok)
			return stop(w, VPB_WALK_BAD_FRAME);
		if (read_u64(w, w->fp + 8, &ra) || read_u64(w, w->fp, &code))
			return stop(w, VPB_WALK_UNREADABLE);
		w->pc = ra;
		w->sp = w->fp + 16;
		w->fp = code;
		return 0;
	}
	cfa = w->sp + (__u64)fsize * 8;
	if (leaf) {
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
	if (rbp_saved && cfa != w->sp + 8 && read_u64(w, cfa - 16, &w->fp))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = ra;
	w->sp = cfa;
	return 0;
}

static __always_inline long native_frame(struct walk *w, struct vpb_mapping *m, bool leaf)
{
	__u64 lookup = leaf ? w->pc : w->pc - 1, cfa, ra, fp = w->fp;
	struct vpb_rule *r;

	if (m->table == VPB_NO_TABLE) {
		/* No unwind information at all: frame pointers are all there is. */
		if (fp <= w->sp || fp - w->sp > MAX_STACK_SPAN)
			return stop(w, VPB_WALK_NO_RULE);
		if (read_u64(w, fp + 8, &ra) || read_u64(w, fp, &w->fp))
			return stop(w, VPB_WALK_UNREADABLE);
		w->pc = ra;
		w->sp = fp + 16;
		return 0;
	}
	r = find_rule(m->table, lookup - m->bias);
	if (!r)
		return stop(w, VPB_WALK_NO_RULE);
	switch (r->kind) {
	case VPB_RULE_SP:
		cfa = w->sp + (__s64)r->cfa_off * 8;
		break;
	case VPB_RULE_FP:
		cfa = fp + (__s64)r->cfa_off * 8;
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
	if (r->fp_off != VPB_FP_SAME && read_u64(w, cfa + (__s64)r->fp_off * 8, &w->fp))
		return stop(w, VPB_WALK_UNREADABLE);
	w->pc = ra;
	w->sp = cfa;
	return 0;
}

static long walk_step(__u32 i, void *ctx)
{
	__u32 zero = 0;
	struct walk *w = bpf_map_lookup_elem(&scratch, &zero);
	struct vpb_proc *p;
	struct vpb_mapping *m;
	__u64 old_sp, pc;
	bool leaf = i == 0;
	long rc;

	if (!w)
		return 1;
	p = bpf_map_lookup_elem(&unwind_procs, &w->slot);
	if (!p)
		return stop(w, VPB_WALK_NO_PROC);
	pc = w->pc;
	if (pc == 0)
		return stop(w, VPB_WALK_ROOT);
	if (w->n >= VPB_MAX_USTACK)
		return stop(w, VPB_WALK_DEPTH);
	{
		__u32 n = w->n;

		if (n < VPB_MAX_USTACK)
			w->s.ustack[n] = pc;
		w->n = n + 1;
	}
	old_sp = w->sp;
	if (p->hs.nr_heaps && pc >= p->hs.interp_lo && pc < p->hs.interp_hi) {
		rc = interp_frame(w, &p->hs, leaf);
	} else {
		struct vpb_codeheap *h = NULL;

		for (int k = 0; k < VPB_MAX_HEAPS; k++)
			if (k < p->hs.nr_heaps && pc >= p->hs.heaps[k].lo && pc < p->hs.heaps[k].hi)
				h = &p->hs.heaps[k];
		if (h) {
			rc = jit_frame(w, &p->hs, h, leaf);
		} else {
			m = find_mapping(p, pc);
			if (!m)
				return stop(w, VPB_WALK_NO_RULE);
			rc = native_frame(w, m, leaf);
		}
	}
	if (rc)
		return rc;
	if (w->pc == 0)
		return stop(w, VPB_WALK_ROOT);
	if (w->sp <= old_sp)
		return stop(w, VPB_WALK_BAD_FRAME);
	return 0;
}

/* Walks the user stack of the current task into w->s.ustack; returns false when the
 * process has no tables yet (the caller falls back to frame pointers). */
static __always_inline bool walk_user(struct walk *w, struct bpf_perf_event_data *ctx, bool kernel,
				      struct task_struct *task)
{
	__u32 tgid = w->s.pid, *slot = bpf_map_lookup_elem(&proc_slots, &tgid);

	if (!slot)
		return false;
	if (kernel) {
		struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);

		if (!r)
			return false;
		w->pc = BPF_CORE_READ(r, ip);
		w->sp = BPF_CORE_READ(r, sp);
		w->fp = BPF_CORE_READ(r, bp);
		w->r13 = BPF_CORE_READ(r, r13);
	} else {
		w->pc = PT_REGS_IP(&ctx->regs);
		w->sp = PT_REGS_SP(&ctx->regs);
		w->fp = PT_REGS_FP(&ctx->regs);
		w->r13 = ctx->regs.r13;
	}
	w->slot = *slot;
	/* The stack is copied in chunks as the walk reaches them (read_u64). */
	w->stk_base = w->sp;
	w->stk_len = 0;
	w->stk_stop = 0;
	w->n = 0;
	w->nj = 0;
	w->end = VPB_WALK_DEPTH;
	bpf_loop(VPB_MAX_USTACK, walk_step, NULL, 0);
	w->s.ustack_bytes = (__s32)(w->n * 8);
	w->s.walk_end = (__u16)w->end;
	w->s.nr_jframes = (__u16)w->nj;
	return true;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	bool kernel = is_kernel_ip(ctx);
	struct vpb_sample *s;

	if (target_mode == VPB_TARGET_TRACKED && !bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	if (filter_uid != (__u32)-1 && !owned(bpf_get_current_task_btf()))
		return 0;

	if (!callchain) {
		s = bpf_ringbuf_reserve(&events, VPB_SAMPLE_HDR, 0);
		if (!s) {
			count_lost(VPB_LOST_RINGBUF);
			return 0;
		}
		fill(s, ctx, id, kernel);
		/* No wakeup: a wakeup per sample collapses the delivered rate on a VM;
		 * user space consumes on a timer instead. */
		bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
		return 0;
	}

	if (unwind) {
		__u32 zero = 0;
		struct walk *w = bpf_map_lookup_elem(&scratch, &zero);
		struct task_struct *task = bpf_get_current_task_btf();

		if (!w)
			return 0;
		fill(&w->s, ctx, id, kernel);
		if (kernel) {
			w->s.kstack_bytes = bpf_get_stack(ctx, w->s.kstack, sizeof(w->s.kstack), 0);
			if (w->s.kstack_bytes < 0) {
				w->s.flags |= VPB_F_KERNEL_ERROR;
				count_lost(VPB_LOST_STACK);
			}
		}
		if (!(task->flags & PF_KTHREAD) && !walk_user(w, ctx, kernel, task)) {
			/* Tables not loaded yet (a process seen for the first time): frame
			 * pointers, and say so. */
			w->s.walk_end = VPB_WALK_NO_PROC;
			w->s.ustack_bytes = bpf_get_stack(ctx, w->s.ustack, sizeof(w->s.ustack),
							  BPF_F_USER_STACK);
			if (w->s.ustack_bytes < 0) {
				w->s.flags |= VPB_F_USER_ERROR;
				count_lost(VPB_LOST_STACK);
			}
		}
		if (bpf_ringbuf_output(&events, &w->s, sizeof(w->s), BPF_RB_NO_WAKEUP))
			count_lost(VPB_LOST_RINGBUF);
		return 0;
	}

	s = bpf_ringbuf_reserve(&events, sizeof(*s), 0);
	if (!s) {
		count_lost(VPB_LOST_RINGBUF);
		return 0;
	}
	fill(s, ctx, id, kernel);
	if (kernel) {
		s->kstack_bytes = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
		if (s->kstack_bytes < 0) {
			s->flags |= VPB_F_KERNEL_ERROR;
			count_lost(VPB_LOST_STACK);
		}
	}
	/* Kernel threads have no user stack; asking for one is not a failure. */
	struct task_struct *task = bpf_get_current_task_btf();
	if (!(task->flags & PF_KTHREAD)) {
		s->ustack_bytes = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
		if (s->ustack_bytes < 0) {
			s->flags |= VPB_F_USER_ERROR;
			count_lost(VPB_LOST_STACK);
		}
	}
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Launch and -p modes follow children: a fork whose parent's process is tracked makes
 * the child's process tracked too (threads share the tgid and need nothing). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&tracked, &ptgid))
		bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	return 0;
}

/* A thread exits (before the kernel folds its perf events into their parents): what
 * its event counted since its last sample is in no sample yet. It goes to user space,
 * which charges it to the thread's last sampled stack (sampler-kernel/tails.h). A
 * thread never sampled has no event here: its count stays in the totals only. */
#define MAX_TASK_EVENTS 16

/* The task's copy of this program's event, among the events of its perf context
 * (Linux 6.2+: one context per task), by its parent; 0 when not found. */
static __always_inline __u64 task_event(struct task_struct *p)
{
	struct perf_event_context *ctx = BPF_CORE_READ(p, perf_event_ctxp);
	__u64 head, pos;

	if (!ctx)
		return 0;
	head = (__u64)ctx + bpf_core_field_offset(struct perf_event_context, event_list);
	pos = (__u64)BPF_CORE_READ(ctx, event_list.next);
	for (int i = 0; i < MAX_TASK_EVENTS && pos && pos != head; i++) {
		struct perf_event *e = (struct perf_event *)(pos - bpf_core_field_offset(struct perf_event, event_entry));
		__u64 par = (__u64)BPF_CORE_READ(e, parent);
		__u32 *ei = par ? bpf_map_lookup_elem(&families, &par) : NULL;

		if (ei && *ei == event_index)
			return (__u64)e;
		pos = (__u64)BPF_CORE_READ((struct list_head *)pos, next);
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	struct vpb_thread_key tk = { .tid = (__u32)p->pid, .event = event_index };
	__u64 *evp = bpf_map_lookup_elem(&thread_ev, &tk), key, count = 0, *last, rest;
	struct perf_event *ev;
	struct vpb_tail *t;

	/* A thread never sampled: its inherited copy of the event, if any. */
	key = evp ? *evp : task_event(p);
	if (!key)
		return 0;
	ev = (struct perf_event *)key;
	if (evp)
		bpf_map_delete_elem(&thread_ev, &tk);
	if (bpf_probe_read_kernel(&count, sizeof(count), __builtin_preserve_access_index(&ev->count)))
		return 0;
	last = bpf_map_lookup_elem(&last_count, &key);
	__u64 lastv = last ? *last : 0;
	rest = last ? (count > lastv ? count - lastv : 0) : count;
	bpf_map_delete_elem(&last_count, &key);
	if (!rest)
		return 0;
	t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);
	if (!t) {
		count_lost(VPB_LOST_RINGBUF);
		return 0;
	}
	t->kind = VPB_KIND_TAIL;
	t->cpu = bpf_get_smp_processor_id();
	t->time = bpf_ktime_get_ns();
	t->pid = p->tgid;
	t->tid = p->pid;
	t->event = event_index;
	t->pad = 0;
	t->count = rest;
	bpf_ringbuf_submit(t, 0);
	return 0;
}

/* Every context switch on every CPU, for steal-time victim attribution. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct vpb_switch *w = bpf_ringbuf_reserve(&events, sizeof(*w), 0);

	if (!w) {
		count_lost(VPB_LOST_RINGBUF);
		return 0;
	}
	w->kind = VPB_KIND_SWITCH;
	w->cpu = bpf_get_smp_processor_id();
	w->time = bpf_ktime_get_ns();
	w->prev_pid = prev->tgid;
	w->prev_tid = prev->pid;
	w->next_pid = next->tgid;
	w->next_tid = next->pid;
	/* Another user's task shows as the idle task: who ran is not theirs to see. */
	if (!owned(prev))
		w->prev_pid = w->prev_tid = 0;
	if (!owned(next))
		w->next_pid = w->next_tid = 0;
	bpf_ringbuf_submit(w, BPF_RB_NO_WAKEUP);
	return 0;
}
