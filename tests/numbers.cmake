# Numbers you can trust (steal only where a steal clock runs, multiplexing
# scaled per interval, asserts that keep doubles).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  # Integer asserts with floating arguments compare truncated values: flag them.
  add_test(NAME check-float-asserts COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/check-float-asserts.py)
  set_tests_properties(check-float-asserts PROPERTIES LABELS unit TIMEOUT 60)
endif()
# The counters library scales each interval by its own multiplexing ratio: the
# arithmetic (unit), and the software stand-in, a per-task event bound to one CPU (live).
viprof_test(test-counters-mux SOURCES test-counters-mux.c LIBS vp_hvglue ARGS unit LABELS unit)
add_test(NAME test-counters-mux-live COMMAND test-counters-mux live WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-counters-mux-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# record's weights: each interval between the sampler's running totals scaled by its own ratio.
viprof_test(test-mux-weights SOURCES test-mux-weights.c LIBS vp_recorder vp_report LABELS unit)
# Overflow callbacks (i-mode): per-thread page-fault overflows, each in its own thread.
viprof_test(test-counters-page SOURCES test-counters-page.c LIBS vp_hvglue LABELS unit)
viprof_test(test-counters-overflow SOURCES test-counters-overflow.c LIBS viprof-counters Threads::Threads LABELS live)
# Time-correct JIT names under churn (24 generations, code addresses reused), 5 runs per
# agent mode under load, per JDK: the stress test of time-correct names. Label stress: it takes
# minutes, so it is not in the jvm lane's default run.
viprof_jvm_test(test-jit-churn 1500 vp_report LABELS stress)
# Issue 32: GC churn on JDK 25 G1 beside two CPU hogs, 5 runs of 24 generations with the
# code-heap walk: every generation named, no sample in code that no code map holds.
add_test(NAME test-jit-churn-g1-jdk25 COMMAND test-jit-churn 25 g1 5 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-jit-churn-g1-jdk25 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500 LABELS stress)
# One group read: a thread's task-clock, page faults and context switches from one read()
# at one instant, with each software pmu as the leader in turn.
viprof_test(test-counters-group SOURCES test-counters-group.c LIBS vp_hvglue Threads::Threads LABELS live TIMEOUT 60)
# Steal estimated from late sampler timers where no steal clock runs (issue 34 item 1):
# the rule and a simulated hrtimer on a vCPU the host stops (unit), and a spinner's own
# gaps against the estimate for it in one recording (live; skips naming the figures
# when the host took too little to compare).
viprof_test(test-steal-est SOURCES test-steal-est.c LIBS vp_common LABELS unit)
add_executable(gap-spinner fixtures/steal/gap-spinner.c)
viprof_test(test-steal-est-live SOURCES test-steal-est-live.c LIBS vp_common
            ARGS $<TARGET_FILE:viprof> $<TARGET_FILE:gap-spinner> LABELS live TIMEOUT 90)
add_dependencies(test-steal-est-live viprof gap-spinner)
add_test(NAME test-steal-est-stat COMMAND test-steal-est-live $<TARGET_FILE:viprof> $<TARGET_FILE:gap-spinner> stat
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-steal-est-stat PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 90 LABELS live)
# ... and in every view, apart from measured steal, on a synthetic session without a steal clock.
viprof_test(test-steal-est-views SOURCES test-steal-est-views.c LIBS vp_report PkgConfig::ZLIB LABELS unit)
