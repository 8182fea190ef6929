/* Kernel symbol snapshot: see kallsyms.h. */
#include "recorder/kallsyms.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ksym {
	uint64_t addr;
	uint32_t name_off;    /* into names */
	uint32_t module_off;  /* into names; 0 is the empty string */
};

struct vp_kallsyms {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uint64_t *emitted;    /* one bit per symbol */
	/* The last symbol has no successor; kallsyms gives no end, so its size is a guess. */
	uint64_t last_size;
};

#define LAST_SYMBOL_SIZE 4096

static int names_add(struct vp_kallsyms *k, const char *s, size_t len, uint32_t *off)
{
	if (vp_grow((void **)&k->names, &k->names_cap, k->names_len + len + 1, 1))
		return -ENOMEM;
	if (k->names_len > UINT32_MAX - len - 1)
		return -E2BIG;
	memcpy(k->names + k->names_len, s, len);
	k->names[k->names_len + len] = '\0';
	*off = (uint32_t)k->names_len;
	k->names_len += len + 1;
	return 0;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Stable-ish for aliases at one address: keep the first name read (e.g. _stext
	 * after srso_alias_untrain_ret) deterministic by name offset. */
	return x->name_off < y->name_off ? -1 : x->name_off > y->name_off;
}

static struct vp_kallsyms *load_file(const char *path, bool *all_zero)
{
	struct vp_kallsyms *k = calloc(1, sizeof(*k));
	FILE *f = NULL;
	char *line = NULL;
	size_t linecap = 0;
	int err = 0;
	bool any_nonzero = false;
	uint32_t off;

	if (!k)
		return NULL;
	/* Offset 0 is the empty module name. */
	if ((err = names_add(k, "", 0, &off)))
		goto fail;
	f = fopen(path ? path : "/proc/kallsyms", "re");
	if (!f) {
		err = -errno;
		goto fail;
	}
	/* stdio sizes its buffer by st_blksize, 1 KiB for /proc files: 5000+ read calls
	 * for 5 MB, each restarting the kernel's symbol iterator. 1 MiB reads cut the
	 * kernel's time by a third. */
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	while (getline(&line, &linecap, f) > 0) {
		char *p = line, *end;
		uint64_t addr = strtoull(p, &end, 16);
		if (end == p || *end != ' ')
			continue;
		char type = end[1];
		if (end[2] != ' ')
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		char *name = end + 3;
		size_t nlen = strcspn(name, "\t\n");
		char *mod = name + nlen, *modend;
		size_t mlen = 0;
		if (*mod == '\t' && mod[1] == '[' && (modend = strchr(mod + 2, ']'))) {
			mod += 2;
			mlen = (size_t)(modend - mod);
		}
		if (addr)
			any_nonzero = true;
		if (vp_grow((void **)&k->syms, &k->cap, k->n + 1, sizeof(*k->syms))) {
			err = -ENOMEM;
			goto fail;
		}
		struct ksym *s = &k->syms[k->n];
		s->addr = addr;
		if ((err = names_add(k, name, nlen, &s->name_off)))
			goto fail;
		s->module_off = 0;
		if (mlen && (err = names_add(k, mod, mlen, &s->module_off)))
			goto fail;
		k->n++;
	}
	if (ferror(f)) {
		err = -EIO;
		goto fail;
	}
	fclose(f);
	f = NULL;
	free(line);
	line = NULL;
	if (all_zero)
		*all_zero = k->n > 0 && !any_nonzero;
	if (!any_nonzero)
		k->n = 0;   /* addresses hidden: nothing can be resolved */
	vp_sort(k->syms, k->n, sizeof(*k->syms), cmp_ksym);
	k->emitted = calloc(k->n / 64 + 1, sizeof(uint64_t));
	if (!k->emitted) {
		err = -ENOMEM;
		goto fail;
	}
	k->last_size = LAST_SYMBOL_SIZE;
	return k;
fail:
	if (f)
		fclose(f);
	free(line);
	vp_kallsyms__free(k);
	errno = -err;
	return NULL;
}

/* A copy with its own emitted marks (none yet). */
static struct vp_kallsyms *clone(const struct vp_kallsyms *k)
{
	struct vp_kallsyms *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	*c = *k;
	c->syms = malloc((k->n ? k->n : 1) * sizeof(*k->syms));
	c->names = malloc(k->names_len ? k->names_len : 1);
	c->emitted = calloc(k->n / 64 + 1, sizeof(uint64_t));
	if (!c->syms || !c->names || !c->emitted) {
		free(c->syms);
		free(c->names);
		free(c->emitted);
		free(c);
		return NULL;
	}
	memcpy(c->syms, k->syms, k->n * sizeof(*k->syms));
	memcpy(c->names, k->names, k->names_len);
	c->cap = k->n;
	c->names_cap = k->names_len;
	return c;
}

/* What /proc/kallsyms depends on besides boot: the loaded modules and who reads. */
static uint64_t kernel_key(void)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)geteuid();
	char line[1024];
	FILE *f = fopen("/proc/modules", "re");
	while (f && fgets(line, sizeof(line), f)) {
		/* The name and the load address only: use counts change all the time. */
		size_t nl = strcspn(line, " \n");
		const char *addr = strrchr(line, ' ');
		for (size_t i = 0; i < nl; i++)
			h = (h ^ (unsigned char)line[i]) * 0x100000001b3ull;
		for (const char *c = addr ? addr : ""; *c && *c != '\n'; c++)
			h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
		h = (h ^ '\n') * 0x100000001b3ull;
	}
	if (f)
		fclose(f);
	return h;
}

/* The last /proc/kallsyms read, kept for the next recording (the service rotates its
 * recorder every interval, and reading the file is 50-150 ms of kernel CPU each time,
 * most of a quiet interval's cost): read again only when the modules changed. BPF
 * programs loaded since keep their addresses unnamed until then. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vp_kallsyms *cache;
static uint64_t cache_key;
static bool cache_zero;

struct vp_kallsyms *vp_kallsyms__load(const char *path, bool *all_zero)
{
	if (path)
		return load_file(path, all_zero);
	uint64_t key = kernel_key();
	pthread_mutex_lock(&cache_lock);
	if (cache && cache_key == key) {
		struct vp_kallsyms *k = clone(cache);
		if (all_zero)
			*all_zero = cache_zero;
		pthread_mutex_unlock(&cache_lock);
		if (k)
			return k;
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_unlock(&cache_lock);
	bool zero = false;
	struct vp_kallsyms *k = load_file(NULL, &zero);
	if (all_zero)
		*all_zero = zero;
	struct vp_kallsyms *c = k ? clone(k) : NULL;
	if (c) {
		pthread_mutex_lock(&cache_lock);
		vp_kallsyms__free(cache);
		cache = c;
		cache_key = key;
		cache_zero = zero;
		pthread_mutex_unlock(&cache_lock);
	}
	return k;
}

void vp_kallsyms__free(struct vp_kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k->emitted);
	free(k);
}

size_t vp_kallsyms__count(const struct vp_kallsyms *k) { return k->n; }

/* Size of symbol i: up to the next symbol at a higher address (aliases share one
 * address and must not get size 0). */
static uint64_t sym_size(const struct vp_kallsyms *k, size_t i)
{
	for (size_t j = i + 1; j < k->n; j++)
		if (k->syms[j].addr > k->syms[i].addr)
			return k->syms[j].addr - k->syms[i].addr;
	return k->last_size;
}

long vp_kallsyms__find(const struct vp_kallsyms *k, uint64_t addr)
{
	if (!k->n || addr < k->syms[0].addr)
		return -1;
	size_t lo = 0, hi = k->n;   /* find the last symbol with addr <= the address */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	/* Of aliases at one address, report the first (lowest index). */
	while (lo > 0 && k->syms[lo - 1].addr == k->syms[lo].addr)
		lo--;
	if (addr - k->syms[lo].addr >= sym_size(k, lo))
		return -1;
	return (long)lo;
}

void vp_kallsyms__info(const struct vp_kallsyms *k, long idx, struct vp_kallsym_info *out)
{
	const struct ksym *s = &k->syms[idx];
	out->addr = s->addr;
	out->size = sym_size(k, (size_t)idx);
	out->name = k->names + s->name_off;
	out->module = k->names + s->module_off;
}

bool vp_kallsyms__mark(struct vp_kallsyms *k, long idx)
{
	uint64_t bit = 1ull << (idx & 63);
	if (k->emitted[idx / 64] & bit)
		return false;
	k->emitted[idx / 64] |= bit;
	return true;
}

struct vp_kallsyms_loader {
	pthread_t thread;
	char *path;
	struct vp_kallsyms *ks;
	int err;
	bool all_zero;
	bool done;   /* written by the thread last (release), read with acquire */
};

static void *loader_main(void *arg)
{
	struct vp_kallsyms_loader *l = arg;

	l->ks = vp_kallsyms__load(l->path, &l->all_zero);
	l->err = l->ks ? 0 : errno;
	__atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
	return NULL;
}

struct vp_kallsyms_loader *vp_kallsyms_loader__start(const char *path)
{
	struct vp_kallsyms_loader *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return NULL;
	if (path && !(l->path = strdup(path))) {
		free(l);
		return NULL;
	}
	rc = pthread_create(&l->thread, NULL, loader_main, l);
	if (rc) {
		free(l->path);
		free(l);
		errno = rc;
		return NULL;
	}
	return l;
}

bool vp_kallsyms_loader__done(const struct vp_kallsyms_loader *l)
{
	return l && __atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
}

struct vp_kallsyms *vp_kallsyms_loader__join(struct vp_kallsyms_loader *l, bool *all_zero)
{
	struct vp_kallsyms *ks;
	int err;

	if (!l) {
		errno = EINVAL;
		return NULL;
	}
	pthread_join(l->thread, NULL);
	ks = l->ks;
	err = l->err;
	if (all_zero)
		*all_zero = l->all_zero;
	free(l->path);
	free(l);
	if (!ks)
		errno = err;
	return ks;
}
