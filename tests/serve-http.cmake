# viprof serve's HTTP side: the HTTP server, the pprof
# endpoint read by the real pprof, continuous recording with retention and a CPU budget.
viprof_test(test-http SOURCES test-http.c LIBS vp_daemon LABELS unit)
# --push specs and the /metrics exposition, without a network.
viprof_test(test-push SOURCES test-push.c LIBS vp_daemon LABELS unit)
# One binary, one ctest entry per scenario (root, live sampling; pprof needs go).
add_executable(test-serve-http test-serve-http.c)
target_include_directories(test-serve-http PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(test-serve-http PRIVATE TESTS_SRC="${CMAKE_CURRENT_SOURCE_DIR}")
add_dependencies(test-serve-http viprof split3)
foreach(s pprof token continuous)
  add_test(NAME test-serve-http-${s} COMMAND test-serve-http ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-serve-http-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "live;tools" RUN_SERIAL TRUE)
endforeach()
# Who may read (users made with useradd), slow heads and the shared recording
# for concurrent scrapers (its own entry: it holds 16 connections), the continuous DIR.
foreach(s access slow contdir jvmattach)
  add_test(NAME test-serve-http-${s} COMMAND test-serve-http ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-serve-http-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "live;tools" RUN_SERIAL TRUE)
endforeach()
# /metrics scraped by a real Prometheus (Debian's prometheus; skipped without it).
add_test(NAME test-serve-http-metrics COMMAND test-serve-http metrics $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-serve-http-metrics PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS "live;tools" RUN_SERIAL TRUE)
# --push to a Pyroscope and an OTLP receiver run by the test (pprof, protoc).
add_test(NAME test-serve-http-push COMMAND test-serve-http push $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-serve-http-push PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240 LABELS "live;tools" RUN_SERIAL TRUE)
# (issue 31) --push with --http: the hostname pushed is hostname's; a 400 is a failure in /metrics.
# A squatter on a loopback push port and on a unix: socket gets no byte (a user made with
# useradd); https with a CA file and a client certificate (openssl, python3's ssl).
foreach(s push-host push-rejected push-squatter push-handoff push-unix push-https)
  add_test(NAME test-serve-http-${s} COMMAND test-serve-http ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test-serve-http-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS "live;tools" RUN_SERIAL TRUE)
endforeach()
# One report pipeline: an interval's /flame and /pprof pages equal `viprof report` of it.
add_test(NAME test-serve-http-same-report COMMAND test-serve-http same-report $<TARGET_FILE:viprof> $<TARGET_FILE:split3>
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-serve-http-same-report PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "live;tools" RUN_SERIAL TRUE)
