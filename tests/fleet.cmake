# The fleet store in ClickHouse (issue 36): servers started by the test from Debian's
# clickhouse-server (skipped without it), two serves in network namespaces pushing to a
# two-shard cluster; one ctest entry per scenario (tests/test-fleet.sh says what each holds).
foreach(s roundtrip outage layers tls escapes)
  add_test(NAME test-fleet-${s} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test-fleet.sh ${s} $<TARGET_FILE:viprof>
           $<TARGET_FILE:split3> WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-fleet-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "live;tools" RUN_SERIAL TRUE)
endforeach()
# GC epochs from a JVM's agent (the jvm lane: JDK 17 and the test classes).
add_test(NAME test-fleet-gc COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test-fleet.sh gc $<TARGET_FILE:viprof>
         $<TARGET_FILE:split3> ${VIPROF_JDK_HOME}/bin/java ${VIPROF_JAVA_CLASSES} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-fleet-gc PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "jvm" RUN_SERIAL TRUE)
# The encoding of an interval into rows (unit: no server).
viprof_test(test-fleet-encode SOURCES test-fleet-encode.c LIBS vp_fleet LABELS unit TIMEOUT 30)
