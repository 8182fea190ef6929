/* The rules that name a process's container (common/container.h): which line of
 * /proc/PID/cgroup, which id in the path for each runtime's naming, the pod UID, the
 * pid namespace fallback, and what --container matches. */
#include <string.h>

#include "common/container.h"
#include "test-helpers.h"

#define ID "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"

static void id_of(const char *cg, const char *want_id, const char *want_pod)
{
	struct vp_container_id c;
	vp_container__describe(cg, 0, 0, &c);
	ASSERT_STREQ(c.id, want_id);
	ASSERT_STREQ(c.pod, want_pod);
}

int main(void)
{
	/* Docker (systemd and cgroupfs drivers), containerd, CRI-O, podman. */
	id_of("/system.slice/docker-" ID ".scope", ID, "");
	id_of("/docker/" ID, ID, "");
	id_of("/system.slice/containerd.service/kubepods-burstable-pod0d5f1a2b_3c4d_4e5f_8a9b_0c1d2e3f4a5b.slice:cri-containerd:" ID,
	      ID, "0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
	id_of("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0d5f1a2b_3c4d_4e5f_8a9b_0c1d2e3f4a5b.slice/"
	      "crio-" ID ".scope", ID, "0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
	id_of("/kubepods/burstable/pod0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/" ID, ID, "0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b");
	id_of("/machine.slice/libpod-" ID ".scope/container", ID, "");
	/* Not containers: conmon's own cgroup, a 32-hex name, a longer hex run, the root. */
	id_of("/machine.slice/libpod-conmon-" ID ".scope", "", "");
	id_of("/process_api/7d2fd309aeb1d21983dfb613b1745321", "", "");
	id_of("/x/" ID "0", "", "");
	id_of("/", "", "");
	id_of("/user.slice/user-1000.slice/session-2.scope", "", "");

	/* A pid namespace of its own without a runtime's cgroup: pidns-<inode>. */
	struct vp_container_id c;
	vp_container__describe("/user.slice", 4026532178ull, 4026531836ull, &c);
	ASSERT_STREQ(c.id, "pidns-4026532178");
	vp_container__describe("/user.slice", 4026531836ull, 4026531836ull, &c);
	ASSERT_STREQ(c.id, "");
	vp_container__describe("/docker/" ID, 4026532178ull, 4026531836ull, &c);
	ASSERT_STREQ(c.id, ID);   /* the runtime's id wins */

	/* Which line: the one naming a container; else v2; else the first v1 not "/". */
	char out[256];
	ASSERT_EQ(vp_container__pick_cgroup("12:pids:/\n4:memory:/docker/" ID "\n0::/\n", out, sizeof(out)),
		  (int64_t)strlen("/docker/" ID));
	ASSERT_STREQ(out, "/docker/" ID);
	vp_container__pick_cgroup("0::/system.slice/docker-" ID ".scope\n", out, sizeof(out));
	ASSERT_STREQ(out, "/system.slice/docker-" ID ".scope");
	vp_container__pick_cgroup("9:name=systemd:/\n4:memory:/process_api/7d2f\n0::/\n", out, sizeof(out));
	ASSERT_STREQ(out, "/process_api/7d2f");
	vp_container__pick_cgroup("0::/user.slice\n", out, sizeof(out));
	ASSERT_STREQ(out, "/user.slice");
	vp_container__pick_cgroup("", out, sizeof(out));
	ASSERT_STREQ(out, "/");
	vp_container__pick_cgroup("garbage without colons", out, sizeof(out));
	ASSERT_STREQ(out, "/");
	vp_container__pick_cgroup("0::/a/very/long/path", out, 8);
	ASSERT_STREQ(out, "/a/very");

	/* --container: id prefixes of 4+, pod UID prefixes, cgroup subtrees, host. */
	vp_container__describe("/kubepods/burstable/pod0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/" ID, 0, 0, &c);
	const char *cg = "/kubepods/burstable/pod0d5f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/" ID;
	ASSERT_TRUE(vp_container__matches("3f4e5d6c7b8a", cg, &c));
	ASSERT_TRUE(vp_container__matches(ID, cg, &c));
	ASSERT_FALSE(vp_container__matches("3f4", cg, &c));
	ASSERT_FALSE(vp_container__matches("3f4e5d6c7b8b", cg, &c));
	ASSERT_TRUE(vp_container__matches("0d5f1a2b", cg, &c));
	ASSERT_TRUE(vp_container__matches("/kubepods/burstable", cg, &c));
	ASSERT_TRUE(vp_container__matches("/kubepods/burstable/", cg, &c));
	ASSERT_FALSE(vp_container__matches("/kubepods/burst", cg, &c));
	ASSERT_FALSE(vp_container__matches("host", cg, &c));
	struct vp_container_id h;
	vp_container__describe("/user.slice", 0, 0, &h);
	ASSERT_TRUE(vp_container__matches("host", "/user.slice", &h));
	ASSERT_FALSE(vp_container__matches("pidns", "/user.slice", &h));
	printf("ok\n");
	return 0;
}
