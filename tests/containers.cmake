# Containers. The rules that name a process's container from its cgroup path
# and namespaces (unit), and JVMs in an unshare'd pid+mount namespace with a private
# /tmp, run as nobody, recorded from the host with -p, -a and serve --continuous (jvm:
# root, live sampling, util-linux unshare, JDK 17 and Temurin 25).
viprof_test(test-container-id SOURCES test-container-id.c LIBS vp_report vp_common LABELS unit TIMEOUT 30)
viprof_jvm_test(test-container-jvm 300 vp_report vp_common SCENARIOS p a continuous RUN_SERIAL)
# Stacks through frameless HotSpot stubs (itable/vtable stubs, arraycopy)
# and through compiled methods' prologues and epilogues reach Thread.run (jvm).
viprof_jvm_test(test-stub-walk 180 vp_report vp_common)
# viprof serve --continuous with another user's JVM (named in every interval)
# and JVMs with the attach mechanism off (never signalled twice, no thread dumps, nothing
# in their output) (jvm, JDK 17 and Temurin 25).
viprof_jvm_test(test-serve-jvms 400 vp_report vp_common RUN_SERIAL)
