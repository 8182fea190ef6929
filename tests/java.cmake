# Java: repeated attach, full thread names, the dynamic-agent warning.
# Thread names from FORK/COMM in stream order and, later, from the agent's THREAD_NAME
# records, on synthetic sessions (unit).
viprof_test(test-thread-names SOURCES test-thread-names.c LIBS vp_report vp_common LABELS unit TIMEOUT 60)
# Repeated attach: one JVM recorded with `record -p` three times (the third recorder
# killed); each session's map is its own, closed when its recording ends, and names the
# JIT samples as well as the first (jvm, JDK 17 and Temurin 25).
viprof_jvm_test(test-reattach 240 vp_report vp_common)
# The JDK 21+ "A JVM TI agent has been loaded dynamically" warning stays out of the
# application's stderr on attach (jvm, JDK 17 and Temurin 25).
viprof_jvm_test(test-attach-quiet 120)
# A JVM with -XX:+DisableAttachMechanism from an @argfile or a -XX:Flags= file is not signalled by any viprof
# process (the flag read from its perf data): two `viprof attach` runs, no thread dump
# in its output (jvm, JDK 17 and Temurin 25).
viprof_jvm_test(test-attach-argfile 120)
# Full Java thread names (THREAD_NAME) in a `record -p` report: a thread running before
# the attach and one started during it, longer than 15 characters (jvm, JDK 17 and 25).
viprof_jvm_test(test-thread-names-jvm 120 vp_report vp_common)
# Issue 26: the GC that ended each code-map epoch (id, kind, collector) under G1 and Serial,
# full and young, and 'viprof maps' printing it.
viprof_jvm_test(test-maps-gc 240 vp_common)
# record -p of a JVM caught after it handles SIGQUIT but before JVMTI's live phase (a
# fixture agent holds it there 3 s): the recorder waits for the live phase (the JVM's
# perf data) and the agent names its code (jvm, JDK 17 and Temurin 25).
add_library(slowstart-agent MODULE fixtures/slowstart-agent.c)
target_include_directories(slowstart-agent PRIVATE ${VIPROF_JDK_HOME}/include ${VIPROF_JDK_HOME}/include/linux)
target_compile_options(slowstart-agent PRIVATE -fno-sanitize=all)
target_link_options(slowstart-agent PRIVATE -fno-sanitize=all)
viprof_jvm_test(test-attach-young 180)
target_compile_definitions(test-attach-young PRIVATE SLOWSTART_SO="$<TARGET_FILE:slowstart-agent>")
add_dependencies(test-attach-young slowstart-agent)
