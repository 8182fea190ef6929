# viprof serve --socket (issue 14 items 1-2): users recording through the service.
# Root, live sampling, real users made by useradd; one ctest entry per scenario.
foreach(s split refuse two-users kill client flood)
  add_test(NAME test-serve-socket-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-socket.sh ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>)
  set_tests_properties(test-serve-socket-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live RUN_SERIAL TRUE)
endforeach()
