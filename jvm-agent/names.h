/* Java names as people read them, from JVM signatures. Shared by the agent and tests. */
#ifndef VIPROF_JVM_NAMES_H
#define VIPROF_JVM_NAMES_H

#include <stddef.h>

/* "Ljava/util/HashMap;" + "get" + "(Ljava/lang/Object;)Ljava/lang/Object;"
 *   -> "java.util.HashMap.get(Object)". Parameter types lose their package; arrays get
 * "[]". Never fails: malformed input is copied through as far as it parses. out is always
 * NUL-terminated (truncated to outlen). Does not allocate: safe in JVMTI callbacks. */
void vp_java_readable_name(const char *class_sig, const char *name, const char *sig,
			   char *out, size_t outlen);
/* Its two halves, joined by "." in vp_java_readable_name: the class
 * ("java.util.HashMap") and the method ("get(Object)"). Same rules. */
void vp_java_readable_class(const char *class_sig, char *out, size_t outlen);
void vp_java_readable_method(const char *name, const char *sig, char *out, size_t outlen);

#endif
