# Issue 25: what a Java developer reaches for. The report's views on synthetic profiles
# (names normalised, simple names, include/exclude, Java only, minwidth), one entry per
# part (unit); the same lambda program recorded twice and diffed (jvm, JDK 17 and 25).
viprof_test(test-report-views SOURCES test-report-views.c LIBS vp_postproc ARGS names LABELS unit)
foreach(part norm-merge filters)
  add_test(NAME test-report-views-${part} COMMAND test-report-views ${part} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-report-views-${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS unit)
endforeach()
viprof_jvm_test(test-report-norm-jvm 240)
