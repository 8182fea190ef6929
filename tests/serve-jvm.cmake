# viprof serve --continuous and the JVM agent: a JVM started after the
# service gets the agent and is named in later intervals; one with VIPROF_NO_AGENT=1 does
# not, nor does one of a user --jvm-attach does not name; one started during an interval is
# named in it from 5 s after its start (early). One entry per scenario and JDK
# (jvm: root, live sampling, a JDK).
viprof_jvm_test(test-serve-jvm 300 vp_postproc vp_common SCENARIOS agent optout select early RUN_SERIAL)
