/* Helpers shared by the JSON, HTML and pprof writers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/report_util.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one. Overlong
 * forms, surrogates and code points past U+10FFFF count as invalid. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	int n;
	unsigned cp;
	if ((c & 0xe0) == 0xc0) {
		n = 2;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	static const unsigned min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void vp_json_str(struct vp_out *o, const char *s, bool html_safe)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char buf[512];
	size_t n = 0;
	buf[n++] = '"';
	while (*p) {
		/* Flush early so that one escape (at most 6 bytes) always fits. */
		if (n > sizeof(buf) - 8) {
			vp_out__write(o, buf, n);
			n = 0;
		}
		unsigned c = *p;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
			p++;
		} else if (c < 0x20 || c == 0x7f) {
			static const char esc[] = { ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't' };
			if (c < sizeof(esc) && esc[c]) {
				buf[n++] = '\\';
				buf[n++] = esc[c];
			} else {
				n += (size_t)snprintf(buf + n, 7, "\\u%04x", c);
			}
			p++;
		} else if (html_safe && (c == '<' || c == '>' || c == '&')) {
			n += (size_t)snprintf(buf + n, 7, "\\u%04x", c);
			p++;
		} else if (c < 0x80) {
			buf[n++] = (char)c;
			p++;
		} else {
			int l = utf8_len(p);
			if (l == 0) {
				n += (size_t)snprintf(buf + n, 7, "\\ufffd");
				p++;
			} else {
				memcpy(buf + n, p, (size_t)l);
				n += (size_t)l;
				p += l;
			}
		}
	}
	buf[n++] = '"';
	vp_out__write(o, buf, n);
}

struct vp_frame_count *vp_frame_counts(const struct vp_profile *p, int event)
{
	size_t n = p->nframes ? p->nframes : 1;
	struct vp_frame_count *c = calloc(n, sizeof(*c));
	/* seen[f] == stack index + 1 when f was already counted for this stack. */
	size_t *seen = calloc(n, sizeof(*seen));
	if (!c || !seen) {
		free(c);
		free(seen);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t v = s->samples[event];
		if (!v || !s->nframes)
			continue;
		c[s->frames[s->nframes - 1]].self += v;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[k];
			if (seen[f] == i + 1)
				continue;
			seen[f] = i + 1;
			c[f].total += v;
		}
	}
	free(seen);
	return c;
}

uint64_t vp_event_samples(const struct vp_profile *p, int event)
{
	uint64_t t = 0;
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++)
		t += p->stacks[i].samples[event];
	return t;
}

uint64_t vp_event_weight(const struct vp_profile *p, int event)
{
	uint64_t t = 0;
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++)
		t += p->stacks[i].weight[event];
	return t;
}

int vp_event_match(const struct vp_profile *p, int event, const struct vp_profile *base)
{
	if (!base || event < 0 || event >= p->nevents)
		return -1;
	for (int i = 0; i < base->nevents; i++)
		if (!strcmp(base->events[i].name, p->events[event].name))
			return i;
	return -1;
}

int vp_keyspace__init(struct vp_keyspace *k, const struct vp_profile *p, const struct vp_profile *base)
{
	memset(k, 0, sizeof(*k));
	k->u = vp_profile__new();
	if (!k->u)
		return -ENOMEM;
	for (size_t i = 0; i < p->nframes; i++)
		if (vp_profile__frame(k->u, &p->frames[i]) != i)
			goto fail;
	if (base) {
		k->base_map = malloc((base->nframes ? base->nframes : 1) * sizeof(*k->base_map));
		if (!k->base_map)
			goto fail;
		for (size_t i = 0; i < base->nframes; i++) {
			k->base_map[i] = vp_profile__frame(k->u, &base->frames[i]);
			if (k->base_map[i] == UINT32_MAX)
				goto fail;
		}
	}
	return 0;
fail:
	vp_keyspace__fini(k);
	return -ENOMEM;
}

void vp_keyspace__fini(struct vp_keyspace *k)
{
	vp_profile__free(k->u);
	free(k->base_map);
	memset(k, 0, sizeof(*k));
}
