# Issue 25: what a Java developer reaches for. The report's views on synthetic profiles
# (names normalised, simple names, include/exclude, Java only, minwidth), one entry per
# part (unit); the same lambda program recorded twice and diffed (jvm, JDK 17 and 25).
viprof_test(test-report-views SOURCES test-report-views.c LIBS vp_postproc ARGS names LABELS unit)
foreach(part norm-merge filters)
  add_test(NAME test-report-views-${part} COMMAND test-report-views ${part} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-report-views-${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS unit)
endforeach()
viprof_jvm_test(test-report-norm-jvm 240)
# The flame graph's include/exclude/min-width controls in headless chromium (tools).
add_test(NAME test-report-views-html COMMAND test-report-views html WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-views-html PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS tools)
