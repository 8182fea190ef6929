# An event the machine cannot count is refused alike by stat and record
# (exit status 2, one line naming cause and fix, the command not run).
viprof_test(test-event-refusal SOURCES test-event-refusal.c LIBS vp_common LABELS live TIMEOUT 60)
target_compile_definitions(test-event-refusal PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-event-refusal viprof)

# What misled a newcomer, one entry per scenario (tests/test-first-hour.sh).
foreach(s nocmd rate notsession plain progress diskfull unpriv)
  add_test(NAME test-first-hour-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-first-hour.sh ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>)
  set_tests_properties(test-first-hour-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
endforeach()

# The README's quick start, verbatim, on a fresh clone (builds viprof again).
add_test(NAME test-quickstart COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-quickstart.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(test-quickstart PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS live)

# What every command loads before main: not libcurl (fleet/curl_lazy.c loads it when the
# push or fleet client first calls it).
add_test(NAME test-start-libs COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-start-libs.sh $<TARGET_FILE:viprof>)
set_tests_properties(test-start-libs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 30 LABELS unit)
