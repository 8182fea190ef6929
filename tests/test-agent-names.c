/* Readable Java names from JVM signatures (jvm-agent/names.c), without a JVM. */
#include "test.h"

#include "jvm-agent/names.h"

static void check(const char *cls, const char *name, const char *sig, const char *want)
{
	char out[256];
	vp_java_readable_name(cls, name, sig, out, sizeof(out));
	ASSERT_STREQ(out, want);
}

int main(void)
{
	check("Ljava/util/HashMap;", "get", "(Ljava/lang/Object;)Ljava/lang/Object;", "java.util.HashMap.get(Object)");
	check("LJitSplit;", "hotA", "(J)V", "JitSplit.hotA(long)");
	check("LJitSplit;", "work", "(JI)J", "JitSplit.work(long, int)");
	check("Lp/Outer$Inner;", "<init>", "([[I[Ljava/lang/String;ZBCDFS)V",
	      "p.Outer$Inner.<init>(int[][], String[], boolean, byte, char, double, float, short)");
	check("[Ljava/lang/Object;", "clone", "()Ljava/lang/Object;", "java.lang.Object[].clone()");
	check("Lx/Y;", "m", "()V", "x.Y.m()");
	/* Malformed input is copied as far as it parses, never overrun. */
	check("Lx/Y", "m", "(Lfoo", "Lx/Y.m()");
	check(NULL, NULL, NULL, ".?");
	char small[8];
	vp_java_readable_name("Ljava/util/HashMap;", "get", "(I)V", small, sizeof(small));
	ASSERT_STREQ(small, "java.ut");
	return 0;
}
