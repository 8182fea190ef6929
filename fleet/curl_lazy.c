/* libcurl, loaded at its first use rather than at every start of viprof.
 *
 * Only the push client (daemon/push.c) and the fleet client (fleet/fleet.c) speak HTTP,
 * yet a viprof linked with -lcurl loads libcurl and the thirty libraries it needs
 * (TLS, Kerberos, LDAP, IDN, ...) before main at every start: 5 ms of CPU of a `viprof
 * record` that takes 100 (a program linked with the same libraries as viprof but
 * libcurl starts in 1.5 ms, with it in 6.6 ms). The functions below have libcurl's
 * names and prototypes: those two files call them unchanged, and the first call loads
 * libcurl.so.4 and forwards to it. They are hidden (-fvisibility=hidden), so libcurl's
 * own calls still reach libcurl's functions.
 *
 * Where libcurl cannot be loaded, every call fails as libcurl's own do when it cannot
 * work (CURLE_FAILED_INIT, NULL), and curl_easy_strerror names the cause and the fix. */
#define CURL_DISABLE_TYPECHECK 1   /* the typecheck macros would rename the definitions */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <curl/curl.h>

#define LIBCURL_SONAME "libcurl.so.4"

static struct {
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	CURLcode (*easy_perform)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	int ok;
	char why[256];
} lc;

static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

static void lc_load(void)
{
	void *h = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(lc.why, sizeof(lc.why), "cannot load %s (%s); install libcurl (Debian: apt-get install libcurl4)",
			 LIBCURL_SONAME, dlerror());
		return;
	}
#define SYM(field, name)                                                                                        \
	do {                                                                                                    \
		*(void **)&lc.field = dlsym(h, name);                                                           \
		if (!lc.field) {                                                                                \
			snprintf(lc.why, sizeof(lc.why), "%s has no %s; install a libcurl 7.x or later", LIBCURL_SONAME, \
				 name);                                                                         \
			return;                                                                                 \
		}                                                                                               \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(global_cleanup, "curl_global_cleanup");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(easy_escape, "curl_easy_escape");
	SYM(free, "curl_free");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
	lc.ok = 1;   /* the handle stays open for the life of the process */
}

static int lc_ready(void)
{
	pthread_once(&lc_once, lc_load);
	return lc.ok;
}

CURLcode curl_global_init(long flags)
{
	return lc_ready() ? lc.global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
	if (lc_ready())
		lc.global_cleanup();
}

CURL *curl_easy_init(void)
{
	return lc_ready() ? lc.easy_init() : NULL;
}

void curl_easy_cleanup(CURL *c)
{
	if (lc_ready())
		lc.easy_cleanup(c);
}

/* Every option's value is one long, pointer or curl_off_t (libcurl reads it as one of
 * those): each is one 64-bit integer argument on x86-64 and the other 64-bit ABIs
 * viprof builds for, so it is passed on as it came. */
_Static_assert(sizeof(long) == sizeof(void *) && sizeof(curl_off_t) == sizeof(void *),
	       "curl_easy_setopt's value is forwarded as one pointer-sized word");

CURLcode curl_easy_setopt(CURL *c, CURLoption o, ...)
{
	va_list ap;
	void *v;

	va_start(ap, o);
	v = va_arg(ap, void *);
	va_end(ap);
	return lc_ready() ? lc.easy_setopt(c, o, v) : CURLE_FAILED_INIT;
}

CURLcode curl_easy_getinfo(CURL *c, CURLINFO i, ...)
{
	va_list ap;
	void *v;

	va_start(ap, i);
	v = va_arg(ap, void *);    /* always a pointer to where the answer goes */
	va_end(ap);
	return lc_ready() ? lc.easy_getinfo(c, i, v) : CURLE_FAILED_INIT;
}

CURLcode curl_easy_perform(CURL *c)
{
	return lc_ready() ? lc.easy_perform(c) : CURLE_FAILED_INIT;
}

const char *curl_easy_strerror(CURLcode e)
{
	return lc_ready() ? lc.easy_strerror(e) : lc.why;
}

char *curl_easy_escape(CURL *c, const char *s, int len)
{
	return lc_ready() ? lc.easy_escape(c, s, len) : NULL;
}

void curl_free(void *p)
{
	if (lc_ready())
		lc.free(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	return lc_ready() ? lc.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
	if (lc_ready())
		lc.slist_free_all(l);
}
