/* Kernel symbol snapshot: see kallsyms.h. */
#include "recorder/kallsyms.h"
#include "common/util.h"

#include "common/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	/* Read from the per-boot cache: vmlinux and modules only, without the symbols that
	 * come and go while the kernel runs (BPF programs, ftrace and kprobe trampolines).
	 * An address is answered from it only where those cannot be (trusted()); any other
	 * makes vp_kallsyms__find read /proc/kallsyms in full, once (upgrade()). */
	bool partial;
	bool upgrade_failed;
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

/* ---- the per-boot cache --------------------------------------------------------- */

/* Symbols that exist only while something runs: BPF programs and their trampolines
 * ("[bpf]"), ftrace and kprobe trampolines ("[__builtin__ftrace]", ...). They live
 * outside the text of vmlinux and of every module, so they are never between two
 * symbols of one of those. */
static bool dynamic_module(const char *m)
{
	return !strcmp(m, "bpf") || !strncmp(m, "__builtin__", 11);
}

static int read_line_file(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(out, (int)len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

int vp_kallsyms__key(struct vp_kallsyms_key *key)
{
	char rel[128], ver[128];
	int e;

	memset(key, 0, sizeof(*key));
	if ((e = read_line_file("/proc/sys/kernel/random/boot_id", key->boot_id, sizeof(key->boot_id))) ||
	    (e = read_line_file("/proc/sys/kernel/osrelease", rel, sizeof(rel))) ||
	    (e = read_line_file("/proc/sys/kernel/version", ver, sizeof(ver))))
		return e;
	snprintf(key->build, sizeof(key->build), "%s %s", rel, ver);
	key->modules = kernel_key();
	return 0;
}

#define CACHE_NAME "kallsyms.v1"
#define CACHE_MAGIC "VPKSYMC"
#define CACHE_VERSION 1
#define CACHE_MAX_SYMS (1u << 24)

/* Native byte order: the cache never leaves the machine that wrote it. */
struct cache_hdr {
	char magic[8];
	uint32_t version, hdr_size;
	struct vp_kallsyms_key key;
	uint64_t n, names_len;
};

static int read_exact(int fd, void *p, size_t n)
{
	for (char *c = p; n;) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EBADMSG;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int vp_kallsyms__cache_open(void)
{
	const char *env = getenv("VIPROF_KSYM_CACHE");
	const char *path = env && *env ? env : "/var/cache/viprof";
	char why[256];
	struct stat st;
	int fd, e;

	/* Root's only: another user's cache could name kernel frames anything. */
	if ((env && !strcmp(env, "off")) || geteuid() != 0)
		return -ENOENT;
	fd = vp_safe_opendir(path, VP_SAFE_CREATE | VP_SAFE_TRUSTED_LINKS);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		e = -errno;
		goto fail;
	}
	if (st.st_uid != 0 || (st.st_mode & 022) || vp_safe_check_parents(fd, why, sizeof(why))) {
		e = -EPERM;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return e;
}

/* The cache as it would be read from /proc/kallsyms: vmlinux and modules only. */
static struct vp_kallsyms *static_part(const struct vp_kallsyms *k)
{
	struct vp_kallsyms *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->syms = malloc((k->n ? k->n : 1) * sizeof(*k->syms));
	c->names = malloc(k->names_len ? k->names_len : 1);
	if (!c->syms || !c->names)
		goto fail;
	/* The names are copied whole (offsets unchanged); only the symbols are filtered. */
	memcpy(c->names, k->names, k->names_len);
	c->names_len = c->names_cap = k->names_len;
	for (size_t i = 0; i < k->n; i++)
		if (!dynamic_module(k->names + k->syms[i].module_off))
			c->syms[c->n++] = k->syms[i];
	c->cap = c->n;
	c->emitted = calloc(c->n / 64 + 1, sizeof(uint64_t));
	if (!c->emitted)
		goto fail;
	c->last_size = k->last_size;
	c->partial = true;
	return c;
fail:
	vp_kallsyms__free(c);
	return NULL;
}

int vp_kallsyms__cache_store(int dirfd, const struct vp_kallsyms *k, const struct vp_kallsyms_key *key)
{
	struct vp_kallsyms *c = static_part(k);
	struct cache_hdr h = { .magic = CACHE_MAGIC, .version = CACHE_VERSION, .hdr_size = sizeof(h) };
	char tmp[64];
	int fd = -1, e = 0;

	if (!c)
		return -ENOMEM;
	h.key = *key;
	h.n = c->n;
	h.names_len = c->names_len;
	snprintf(tmp, sizeof(tmp), "." CACHE_NAME ".%d", (int)getpid());
	unlinkat(dirfd, tmp, 0);   /* a writer of ours that died with this pid */
	fd = vp_safe_create(dirfd, tmp, 0600);
	if (fd < 0) {
		e = fd;
		fd = -1;
		goto cleanup;
	}
	if ((e = vp_write_all(fd, &h, sizeof(h))) || (e = vp_write_all(fd, c->syms, c->n * sizeof(*c->syms))) ||
	    (e = vp_write_all(fd, c->names, c->names_len)))
		goto cleanup;
	/* Readers see the old file or the whole new one, never a part. */
	if (renameat(dirfd, tmp, dirfd, CACHE_NAME))
		e = -errno;
cleanup:
	if (fd >= 0) {
		close(fd);
		if (e)
			unlinkat(dirfd, tmp, 0);
	}
	vp_kallsyms__free(c);
	return e;
}

struct vp_kallsyms *vp_kallsyms__cache_load(int dirfd, const struct vp_kallsyms_key *key)
{
	struct vp_kallsyms *k = NULL;
	struct cache_hdr h;
	struct stat st;
	int fd, e = 0;

	fd = openat(dirfd, CACHE_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		errno = errno == ELOOP ? EPERM : errno;
		return NULL;
	}
	/* Trusted only if nobody but root could have written it: a plain file of root's,
	 * writable by no one else, with one name (a hard link from elsewhere could be
	 * written through that name). */
	if (fstat(fd, &st)) {
		e = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) || st.st_nlink != 1) {
		e = -EPERM;
		goto fail;
	}
	if ((e = read_exact(fd, &h, sizeof(h))))
		goto fail;
	if (memcmp(h.magic, CACHE_MAGIC, sizeof(h.magic)) || h.version != CACHE_VERSION || h.hdr_size != sizeof(h) ||
	    h.n > CACHE_MAX_SYMS || !h.names_len || h.names_len > UINT32_MAX ||
	    (uint64_t)st.st_size != sizeof(h) + h.n * sizeof(struct ksym) + h.names_len) {
		e = -EBADMSG;
		goto fail;
	}
	/* Another boot, kernel or set of modules: the addresses are not these. */
	if (strncmp(h.key.boot_id, key->boot_id, sizeof(key->boot_id)) ||
	    strncmp(h.key.build, key->build, sizeof(key->build)) || h.key.modules != key->modules) {
		e = -ESTALE;
		goto fail;
	}
	if (!(k = calloc(1, sizeof(*k)))) {
		e = -ENOMEM;
		goto fail;
	}
	k->n = k->cap = h.n;
	k->names_len = k->names_cap = h.names_len;
	k->syms = malloc((h.n ? h.n : 1) * sizeof(*k->syms));
	k->names = malloc(h.names_len);
	k->emitted = calloc(h.n / 64 + 1, sizeof(uint64_t));
	if (!k->syms || !k->names || !k->emitted) {
		e = -ENOMEM;
		goto fail;
	}
	if ((e = read_exact(fd, k->syms, h.n * sizeof(*k->syms))) || (e = read_exact(fd, k->names, h.names_len)))
		goto fail;
	if (k->names[h.names_len - 1] != '\0') {
		e = -EBADMSG;
		goto fail;
	}
	for (size_t i = 0; i < k->n; i++)
		if (k->syms[i].name_off >= h.names_len || k->syms[i].module_off >= h.names_len ||
		    (i && k->syms[i].addr < k->syms[i - 1].addr)) {
			e = -EBADMSG;
			goto fail;
		}
	k->last_size = LAST_SYMBOL_SIZE;
	k->partial = true;
	close(fd);
	return k;
fail:
	close(fd);
	vp_kallsyms__free(k);
	errno = -e;
	return NULL;
}

/* Whether /proc/kallsyms shows this process real addresses (its first line is enough:
 * kptr_restrict hides all or none). A process it hides them from, such as a service
 * without CAP_SYSLOG, must not get them from the cache either: the kernel decides
 * who may see kernel addresses, not a file root wrote. */
static bool kernel_shows_addresses(void)
{
	char buf[128];
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strtoull(buf, NULL, 16) != 0;
}

/* Below the in-process cache: root's per-boot file, else a full read (which then
 * refreshes the file). */
static struct vp_kallsyms *load_system(bool *all_zero)
{
	struct vp_kallsyms_key key;
	struct vp_kallsyms *k;
	int dirfd = kernel_shows_addresses() ? vp_kallsyms__cache_open() : -1;

	if (dirfd >= 0 && vp_kallsyms__key(&key) == 0) {
		if ((k = vp_kallsyms__cache_load(dirfd, &key))) {
			close(dirfd);
			*all_zero = false;
			vp_timing("kallsyms: read from the per-boot cache");
			return k;
		}
	} else if (dirfd >= 0) {
		close(dirfd);
		dirfd = -1;
	}
	k = load_file(NULL, all_zero);
	vp_timing("kallsyms: /proc/kallsyms read in full");
	/* Hidden addresses (kptr_restrict=2 hides them from root too) are not kept. */
	if (k && dirfd >= 0 && k->n)
		vp_kallsyms__cache_store(dirfd, k, &key);
	if (dirfd >= 0)
		close(dirfd);
	return k;
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
	struct vp_kallsyms *k = load_system(&zero);
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
bool vp_kallsyms__partial(const struct vp_kallsyms *k) { return k->partial; }

/* Index of the next symbol at a higher address than symbol i's, or k->n. */
static size_t successor(const struct vp_kallsyms *k, size_t i)
{
	size_t j = i + 1;
	while (j < k->n && k->syms[j].addr <= k->syms[i].addr)
		j++;
	return j;
}

/* Size of symbol i: up to the next symbol at a higher address (aliases share one
 * address and must not get size 0). */
static uint64_t sym_size(const struct vp_kallsyms *k, size_t i)
{
	size_t j = successor(k, i);
	return j < k->n ? k->syms[j].addr - k->syms[i].addr : k->last_size;
}

static long find_in(const struct vp_kallsyms *k, uint64_t addr)
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

/* Whether a partial table answers addr as a full read would: the address lies between
 * two symbols of one module (or of vmlinux), whose text is one piece that nothing
 * dynamic is placed in; so the symbol and its size are those of the full table. */
static bool trusted(const struct vp_kallsyms *k, long idx)
{
	if (idx < 0)
		return false;
	size_t j = successor(k, (size_t)idx);
	return j < k->n && !strcmp(k->names + k->syms[j].module_off, k->names + k->syms[idx].module_off);
}

/* Replaces a partial table by a full read of /proc/kallsyms, keeping its emitted marks
 * (by address: aliases keep their order in both tables). */
static int upgrade(struct vp_kallsyms *k)
{
	bool zero = false;
	struct vp_kallsyms *f = load_file(NULL, &zero);
	if (!f)
		return -errno;
	vp_timing("kallsyms: read in full for an address the per-boot cache cannot answer");
	for (size_t i = 0; i < k->n; i++) {
		if (!(k->emitted[i / 64] & (1ull << (i & 63))))
			continue;
		long j = find_in(f, k->syms[i].addr);
		if (j >= 0)
			vp_kallsyms__mark(f, j);
	}
	free(k->syms);
	free(k->names);
	free(k->emitted);
	*k = *f;
	free(f);
	return 0;
}

long vp_kallsyms__find(struct vp_kallsyms *k, uint64_t addr)
{
	long idx = find_in(k, addr);
	if (k->partial && !k->upgrade_failed && !trusted(k, idx)) {
		if (upgrade(k) == 0)
			idx = find_in(k, addr);
		else
			k->upgrade_failed = true;   /* the cached answer, as good as it gets */
	}
	return idx;
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
