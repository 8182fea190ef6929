# viprof serve --continuous and the JVM agent: a JVM started after the
# service gets the agent and is named in later intervals; one with VIPROF_NO_AGENT=1 does
# not, nor does one of a user --jvm-attach does not name. One entry per scenario and JDK
# (jvm: root, live sampling, a JDK).
add_executable(test-serve-jvm test-serve-jvm.c)
target_include_directories(test-serve-jvm PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR})
target_link_libraries(test-serve-jvm PRIVATE vp_postproc vp_maps vp_daemon vp_common)
target_compile_definitions(test-serve-jvm PRIVATE VIPROF_AGENT_SO="${CMAKE_BINARY_DIR}/jvm-agent/libviprof-jvmti.so"
  VIPROF_JAVA_CLASSES="${VIPROF_JAVA_CLASSES}" VIPROF_JDK17_HOME="${VIPROF_JDK_HOME}"
  VIPROF_JDK25_HOME="${VIPROF_JDK25_HOME}" VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-serve-jvm viprof viprof-jvmti java-fixtures)
foreach(s agent optout select)
  foreach(j 17 25)
    set(_n test-serve-jvm-${s})
    if(j STREQUAL 25)
      set(_n test-serve-jvm-${s}-jdk25)
    endif()
    add_test(NAME ${_n} COMMAND test-serve-jvm ${j} ${s} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(${_n} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "jvm" RUN_SERIAL TRUE)
  endforeach()
endforeach()
