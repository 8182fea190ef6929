/* Container identity from cgroup paths and namespaces: see container.h. */
#include "common/container.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A 64-hex id inside one path component [s, e), bounded by the component's ends or by
 * '-', '.', ':' (docker-<id>.scope, cri-containerd-<id>.scope, crio-conmon-<id>, ...). */
static bool component_id(const char *s, const char *e, char *id)
{
	for (const char *p = s; p + 64 <= e; p++) {
		if (p > s && p[-1] != '-' && p[-1] != ':' && p[-1] != '.')
			continue;
		size_t k = 0;
		while (k < 64 && is_hex(p[k]))
			k++;
		if (k == 64 && (p + 64 == e || p[64] == '.' || p[64] == '-' || p[64] == ':')) {
			/* conmon's own cgroup names the container it watches, but is not it. */
			if (p - s >= 7 && !memcmp(p - 7, "conmon-", 7))
				return false;
			memcpy(id, p, 64);
			id[64] = '\0';
			return true;
		}
	}
	return false;
}

/* "pod" + a UID (8-4-4-4-12 hex, '-' or '_' between) in one component. */
static bool component_pod(const char *s, const char *e, char *pod)
{
	for (const char *p = s; p + 3 + 36 <= e; p++) {
		if (memcmp(p, "pod", 3))
			continue;
		const char *u = p + 3;
		bool ok = true;
		for (int i = 0; i < 36 && ok; i++) {
			if (i == 8 || i == 13 || i == 18 || i == 23)
				ok = u[i] == '-' || u[i] == '_';
			else
				ok = is_hex(u[i]);
		}
		if (!ok)
			continue;
		for (int i = 0; i < 36; i++)
			pod[i] = u[i] == '_' ? '-' : u[i];
		pod[36] = '\0';
		return true;
	}
	return false;
}

void vp_container__describe(const char *cgroup, uint64_t pidns, uint64_t host_pidns, struct vp_container_id *out)
{
	memset(out, 0, sizeof(*out));
	bool kube = cgroup && strstr(cgroup, "kubepods");
	for (const char *s = cgroup; s && *s;) {
		while (*s == '/')
			s++;
		const char *e = s + strcspn(s, "/");
		if (e > s) {
			char id[65];

			if (component_id(s, e, id))
				memcpy(out->id, id, sizeof(id));   /* the innermost wins */
			if (kube && !out->pod[0])
				component_pod(s, e, out->pod);
		}
		s = e;
	}
	if (!out->id[0] && pidns && host_pidns && pidns != host_pidns)
		snprintf(out->id, sizeof(out->id), "pidns-%" PRIu64, pidns);
}

size_t vp_container__pick_cgroup(const char *text, char *out, size_t outlen)
{
	const char *v2 = NULL, *v1 = NULL, *withid = NULL;
	size_t v2l = 0, v1l = 0, withidl = 0;

	for (const char *line = text; line && *line;) {
		const char *end = line + strcspn(line, "\n");
		const char *c1 = memchr(line, ':', (size_t)(end - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
		if (c2) {
			const char *path = c2 + 1;
			size_t pl = (size_t)(end - path);
			char buf[4096];
			struct vp_container_id id;

			snprintf(buf, sizeof(buf), "%.*s", (int)(pl < sizeof(buf) ? pl : sizeof(buf) - 1), path);
			vp_container__describe(buf, 0, 0, &id);
			if (id.id[0] && !withid) {
				withid = path;
				withidl = pl;
			}
			if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
				v2 = path;
				v2l = pl;
			} else if (!v1 && !(pl == 1 && path[0] == '/') && pl) {
				v1 = path;
				v1l = pl;
			}
		}
		line = *end ? end + 1 : end;
	}
	const char *pick = withid ? withid : (v2 && !(v2l == 1 && v2[0] == '/')) ? v2 : v1 ? v1 : v2;
	size_t pl = withid ? withidl : pick == v2 ? v2l : v1l;
	if (!pick || !pl) {
		pick = "/";
		pl = 1;
	}
	if (!outlen)
		return 0;
	if (pl >= outlen)
		pl = outlen - 1;
	memcpy(out, pick, pl);
	out[pl] = '\0';
	return pl;
}

bool vp_container__matches(const char *filter, const char *cgroup, const struct vp_container_id *c)
{
	size_t fl = strlen(filter);

	if (!fl)
		return true;
	if (!strcmp(filter, "host"))
		return !c->id[0];
	if (fl >= 4 && c->id[0] && !strncmp(c->id, filter, fl))
		return true;
	if (fl >= 4 && c->pod[0] && !strncmp(c->pod, filter, fl))
		return true;
	if (filter[0] == '/' && cgroup) {
		while (fl > 1 && filter[fl - 1] == '/')
			fl--;
		if (!strncmp(cgroup, filter, fl) && (cgroup[fl] == '\0' || cgroup[fl] == '/' || fl == 1))
			return true;
	}
	return false;
}
