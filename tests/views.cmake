# What a Java developer reaches for. The report's views on synthetic profiles
# (names normalised, simple names, include/exclude, Java only, minwidth), one entry per
# part (unit); the same lambda program recorded twice and diffed (jvm, JDK 17 and 25).
viprof_test(test-report-views SOURCES test-report-views.c LIBS vp_report ARGS names LABELS unit)
foreach(part norm-merge filters merge-tiers threads-reverse)
  add_test(NAME test-report-views-${part} COMMAND test-report-views ${part} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-report-views-${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS unit)
endforeach()
viprof_jvm_test(test-report-norm-jvm 240)
# The flame graph's include/exclude/min-width controls in headless chromium (tools).
add_test(NAME test-report-views-html COMMAND test-report-views html WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-views-html PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS tools)
# Compile tiers: METHOD_LOAD2's level and OSR flag through the reader, the resolver and the
# reports, old and new records (unit); C1 (TieredStopAtLevel=1) and C2 code of a real JVM
# marked so in text, folded and `maps show` (jvm, JDK 17 and 25).
viprof_test(test-codemap-tier SOURCES test-codemap-tier.c LIBS vp_report vp_maps ARGS map LABELS unit)
foreach(part layout reports)
  add_test(NAME test-codemap-tier-${part} COMMAND test-codemap-tier ${part} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-codemap-tier-${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS unit)
endforeach()
viprof_jvm_test(test-tier-jvm 300)
# JFR output read by the JDK's own jfr tool (summary, print, print --json): event count,
# top methods' shares against the text report, frame types, thread names (jvm, JDK 17
# and 25, each JDK reading with its own jfr).
viprof_jvm_test(test-report-jfr-jvm 300)
target_compile_definitions(test-report-jfr-jvm PRIVATE SRCDIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(test-report-jfr-jvm PRIVATE vp_report)
# ... and its real times (issue 33): a fixture's sleeps, monitor and ReentrantLock waits
# of known lengths recorded with lock, alloc and --off-cpu, each wait an event of its own
# start and duration (test-report-jfr-check.py), the environment events, jfr view's max
# (jvm, root for --off-cpu; JDK 17 and 25).
# The same writer on a hand-built profile: exact times in, exact times out, sums of short
# off-CPU intervals left out, no made-up events without sample times (jvm: the jfr tool).
foreach(jdk 17 25)
  foreach(part times synth)
    set(n test-report-jfr-${part})
    if(jdk EQUAL 25)
      set(n test-report-jfr-${part}-jdk25)
    endif()
    add_test(NAME ${n} COMMAND test-report-jfr-jvm ${jdk} ${part} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(${n} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS jvm)
  endforeach()
endforeach()
# record -e alloc: the agent's JVMTI allocation sampling, a 75/25 split of bytes in two
# classes (jvm, JDK 17 and 25).
viprof_jvm_test(test-alloc-jvm 240)
# ... and side by side with async-profiler's -e alloc on the same run (ASPROF_HOME: an
# async-profiler build; skipped without one, as in CI).
foreach(jdk 17 25)
  set(n test-alloc-asprof-jvm)
  if(jdk EQUAL 25)
    set(n test-alloc-asprof-jvm-jdk25)
  endif()
  add_test(NAME ${n} COMMAND test-alloc-jvm ${jdk} asprof WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(${n} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240 LABELS jvm)
endforeach()
# record -e alloc and -e lock on running JVMs (-p): the options passed on attach and with
# each later session, the lock profile's monitors-only limit said (jvm, JDK 17 and 25).
viprof_jvm_test(test-profiles-attach-jvm 300)
# record -e lock: a contended monitor and a contended ReentrantLock with their classes and
# waiting stacks, time waited within 10% of the fixture's own and the agent's own frames
# under 1% of the blocked time, launched and attached (jvm, JDK 17 and 25).
viprof_jvm_test(test-lock-jvm 300 SCENARIOS launch natives vthreads attach)
