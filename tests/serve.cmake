# viprof serve --socket: users recording through the service.
# Root, live sampling, real users made by useradd; one ctest entry per scenario.
foreach(s split refuse two-users kill client flood)
  add_test(NAME test-serve-socket-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-socket.sh ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:split3>)
  set_tests_properties(test-serve-socket-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live RUN_SERIAL TRUE)
endforeach()

# The socket as an attacker uses it: root does for a user no more than the
# kernel would let that user do. The fixtures: a raw protocol client, a non-dumpable
# process, a dump of a session's process side band, and a count of the kernel addresses
# in a session.
add_executable(serve-client fixtures/serve-client.c ${CMAKE_SOURCE_DIR}/daemon/sock_proto.c)
target_link_libraries(serve-client PRIVATE vp_recorder vp_common)
add_executable(nodump fixtures/nodump.c)
add_executable(session-sideband fixtures/session-sideband.c)
target_link_libraries(session-sideband PRIVATE vp_common)
add_executable(session-kwords fixtures/session-kwords.c)
target_link_libraries(session-kwords PRIVATE vp_common)
foreach(s foreign-fd userns setuid nodump mute rate audit overlay trickle stopcheck diskfull cmdpath linger offcpu)
  add_test(NAME test-serve-attack-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-attack.sh ${s} $<TARGET_FILE:viprof>
                   $<TARGET_FILE_DIR:serve-client>)
  set_tests_properties(test-serve-attack-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live RUN_SERIAL TRUE)
endforeach()
# Issue 31: subordinate uids against the per-user limits; an execute-only program.
foreach(s subuid execonly contdir)
  add_test(NAME test-serve-attack-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-attack.sh ${s} $<TARGET_FILE:viprof>
                   $<TARGET_FILE_DIR:serve-client>)
  set_tests_properties(test-serve-attack-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live RUN_SERIAL TRUE)
endforeach()

# packaging/viprof.service: hardened (systemd-analyze) and working with its capability set.
foreach(s security caps missing)
  add_test(NAME test-serve-unit-${s}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-unit.sh ${s} $<TARGET_FILE:viprof> $<TARGET_FILE:zcaller>
                   ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  set_tests_properties(test-serve-unit-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live RUN_SERIAL TRUE)
endforeach()

# The whole-VM recording's JVM watch: only live libjvm.so mappings make a process watched.
viprof_test(test-jvm-watch SOURCES test-jvm-watch.c LIBS vp_recorder vp_common LABELS unit TIMEOUT 30)
# The rotation's scan of /proc: unchanged processes replayed, changed ones read again.
viprof_test(test-procsynth-cache SOURCES test-procsynth-cache.c LIBS vp_recorder vp_common LABELS unit TIMEOUT 30)
