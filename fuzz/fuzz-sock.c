/* The service's socket requests (daemon/sock_proto.c), as any local user can send
 * them: decoding never fails unsafely, and what decodes re-encodes to a request that
 * decodes to the same options; the audit line's escaping leaves no control byte. */
#include <assert.h>

#include "common/util.h"
#include "fuzz-util.h"
#include "daemon/sock_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char a[VP_SOCK_MAX_MSG], b[VP_SOCK_MAX_MSG], c[VP_SOCK_MAX_MSG], esc[VP_SOCK_MAX_MSG];
	struct vp_record_opts o, o2;
	struct vp_sock_jvm jv[RECORD_MAX_PIDS], jv2[RECORD_MAX_PIDS];
	char *cmdv[2], *cmdv2[2], err[512];
	int nj = 0, nj2 = 0;

	if (size >= sizeof(a))
		size = sizeof(a) - 1;
	memcpy(a, data, size);
	a[size] = '\0';
	memcpy(c, a, size + 1);
	vp_escape_controls(c, esc, sizeof(esc));
	for (const char *p = esc; *p; p++)
		assert((unsigned char)*p >= 0x20 && *p != 0x7f);
	if (vp_sock__decode_request(a, &o, cmdv, jv, &nj, err, sizeof(err)))
		return 0;
	assert(nj <= RECORD_MAX_PIDS && o.npids <= RECORD_MAX_PIDS);
	if (vp_sock__encode_request(&o, jv, nj, b, sizeof(b)))
		return 0;   /* a value too long to send back: fine */
	assert(vp_sock__decode_request(b, &o2, cmdv2, jv2, &nj2, err, sizeof(err)) == 0);
	assert(o2.target == o.target && o2.npids == o.npids && o2.freq == o.freq && o2.period == o.period);
	assert(nj2 == nj);
	for (int i = 0; i < o.npids; i++)
		assert(o2.pids[i] == o.pids[i]);
	for (int i = 0; i < nj; i++)
		assert(jv2[i].pid == jv[i].pid && jv2[i].flags == jv[i].flags);
	return 0;
}
