# Issue 12, Java: repeated attach, full thread names, the dynamic-agent warning.
# Thread names from FORK/COMM in stream order and, later, from the agent's THREAD_NAME
# records, on synthetic sessions (unit).
viprof_test(test-thread-names SOURCES test-thread-names.c LIBS vp_postproc vp_common LABELS unit TIMEOUT 60)
