# Sample weights add up to the true count, both backends, with the
# default -F and with -c; one ctest entry per scenario (tests/test-weights.c).
add_executable(paced fixtures/weights/paced.c)
target_compile_options(paced PRIVATE -O1 -fno-omit-frame-pointer)
viprof_test(test-weights-perf-csw-F SOURCES test-weights.c LIBS vp_report
	    ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:paced> perf context-switches F TIMEOUT 120 LABELS live)
add_dependencies(test-weights-perf-csw-F viprof paced)
foreach(scn "perf;page-faults;F;pf-F" "perf;context-switches;50;csw-c" "perf;page-faults;50;pf-c"
	    "bpf;context-switches;F;csw-F" "bpf;page-faults;F;pf-F" "bpf;context-switches;50;csw-c"
	    "bpf;page-faults;50;pf-c")
  list(GET scn 0 be)
  list(GET scn 1 ev)
  list(GET scn 2 rate)
  list(GET scn 3 tag)
  add_test(NAME test-weights-${be}-${tag}
	   COMMAND test-weights-perf-csw-F $<TARGET_FILE:viprof> $<TARGET_FILE:paced> ${be} ${ev} ${rate}
	   WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-weights-${be}-${tag} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live)
endforeach()
# Page faults at the default -F on the bursty fixture (test-weights-{perf,bpf}-pf-F): it
# sleeps between bursts of 400 faults, so the kernel's frequency loop lets the period
# grow to thousands and takes 7-20 samples, and up to 80% of the faults come after
# each thread's last sample. Each backend reads every thread's final count (perf: the
# inherited copies' PERF_RECORD_READ at exit and the thread's own fd at stop; bpf: the
# perf_event's count at sched_process_exit) and charges the rest to the thread's last
# sampled stack (sampler-kernel/tails.h), so these hold within 2% like the others.
# The same event at the same -F on a steady stream of faults (pf-F-steady) needs no
# tail to speak of.
foreach(be perf bpf)
  add_test(NAME test-weights-${be}-pf-F-steady
	   COMMAND test-weights-perf-csw-F $<TARGET_FILE:viprof> $<TARGET_FILE:paced> ${be} page-faults F "2000 0 100"
	   WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-weights-${be}-pf-F-steady PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live)
endforeach()
# Xen on synthetic sessions and a stand-in /sys/hypervisor tree.
viprof_test(test-xen-session SOURCES test-xen-session.c LIBS vp_recorder vp_report ARGS $<TARGET_FILE:xen-fixture> LABELS unit)
add_dependencies(test-xen-session xen-fixture)
viprof_test(test-xen-restore SOURCES test-xen-restore.c LIBS vp_hvglue LABELS unit)
# viprof stat --per-thread -p gives what no thread row holds a row of its own.
add_executable(burst-threads fixtures/weights/burst-threads.c)
target_link_libraries(burst-threads PRIVATE pthread)
viprof_test(test-stat-unattributed SOURCES test-stat-unattributed.c ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:burst-threads> LABELS live TIMEOUT 60)
add_dependencies(test-stat-unattributed viprof burst-threads)
# viprof probe recognises Firecracker and does not promise counters the kernel lacks.
viprof_test(test-probe-vmm SOURCES test-probe-vmm.c LIBS vp_hvglue LABELS unit)
add_test(NAME test-probe-vmm-live COMMAND test-probe-vmm $<TARGET_FILE:viprof> live WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-probe-vmm-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# One hypervisor name (issue 30): the kernel log's forms, and every message saying the same.
viprof_test(test-hv-identity SOURCES test-hv-identity.c LIBS vp_hvglue LABELS unit)
add_test(NAME test-hv-identity-live COMMAND test-hv-identity $<TARGET_FILE:viprof> live WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-hv-identity-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# No ":u" event that always reads 0 is offered to unprivileged users.
viprof_test(test-events-user SOURCES test-events-user.c LIBS vp_hvglue LABELS live TIMEOUT 60)
# Another user's process: the real cause (ptrace access), not perf_event_paranoid.
viprof_test(test-perm-other SOURCES test-perm-other.c ARGS $<TARGET_FILE:viprof> LABELS live TIMEOUT 60)
add_dependencies(test-perm-other viprof)
# Counters corrected for steal (synthetic source, then live).
viprof_test(test-counters-steal SOURCES test-counters-steal.c LIBS vp_hvglue LABELS unit)
add_test(NAME test-counters-steal-live COMMAND test-counters-steal live WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-counters-steal-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
viprof_test(test-stat-steal SOURCES test-stat-steal.c LIBS vp_hvglue ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:test-stat-steal> LABELS live TIMEOUT 60)
add_dependencies(test-stat-steal viprof)
# The napper scenario of issue 34 item 4: context-switch weights of comm napper within
# 1% of perf stat's count in the same run (bpf backend, switch tracer on as root).
add_executable(napper fixtures/weights/napper.c)
viprof_test(test-weights-napper SOURCES test-weights-napper.c LIBS vp_report
	    ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:napper> 3 TIMEOUT 120 LABELS live)
add_dependencies(test-weights-napper viprof napper)
# Counts before an exec belong to the comm before it, those after to the new one (the
# napper scenario's +3 under load: perf stat's child switched before its exec), for
# context switches and page faults, bpf backend.
add_executable(execsplit fixtures/weights/execsplit.c)
viprof_test(test-weights-exec-csw SOURCES test-weights-exec.c LIBS vp_report
	    ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:execsplit> csw TIMEOUT 120 LABELS live)
add_dependencies(test-weights-exec-csw viprof execsplit)
add_test(NAME test-weights-exec-pf COMMAND test-weights-exec-csw $<TARGET_FILE:viprof> $<TARGET_FILE:execsplit> pf
	 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-weights-exec-pf PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live)
# The same at the default rate, where the program after the exec is sampled too.
add_test(NAME test-weights-exec-csw-F999 COMMAND test-weights-exec-csw $<TARGET_FILE:viprof> $<TARGET_FILE:execsplit> csw 999
	 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-weights-exec-csw-F999 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live)
