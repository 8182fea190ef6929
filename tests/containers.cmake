# Containers. The rules that name a process's container from its cgroup path
# and namespaces (unit), and JVMs in an unshare'd pid+mount namespace with a private
# /tmp, run as nobody, recorded from the host with -p, -a and serve --continuous (jvm:
# root, live sampling, util-linux unshare, JDK 17 and Temurin 25).
viprof_test(test-container-id SOURCES test-container-id.c LIBS vp_postproc vp_common LABELS unit TIMEOUT 30)
add_executable(test-container-jvm test-container-jvm.c)
target_include_directories(test-container-jvm PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR})
target_link_libraries(test-container-jvm PRIVATE vp_postproc vp_maps vp_daemon vp_common)
target_compile_definitions(test-container-jvm PRIVATE VIPROF_AGENT_SO="${CMAKE_BINARY_DIR}/jvm-agent/libviprof-jvmti.so"
  VIPROF_JAVA_CLASSES="${VIPROF_JAVA_CLASSES}" VIPROF_JDK17_HOME="${VIPROF_JDK_HOME}"
  VIPROF_JDK25_HOME="${VIPROF_JDK25_HOME}" VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-container-jvm viprof viprof-jvmti java-fixtures)
foreach(s p a continuous)
  foreach(j 17 25)
    set(_n test-container-jvm-${s})
    if(j STREQUAL 25)
      set(_n test-container-jvm-${s}-jdk25)
    endif()
    add_test(NAME ${_n} COMMAND test-container-jvm ${j} ${s} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(${_n} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "jvm" RUN_SERIAL TRUE)
  endforeach()
endforeach()
# Stacks through frameless HotSpot stubs (itable/vtable stubs, arraycopy)
# and through compiled methods' prologues and epilogues reach Thread.run (jvm).
viprof_jvm_test(test-stub-walk 180 vp_postproc vp_common)
# viprof serve --continuous with another user's JVM (named in every interval)
# and JVMs with the attach mechanism off (never signalled twice, no thread dumps, nothing
# in their output) (jvm, JDK 17 and Temurin 25).
add_executable(test-serve-jvms test-serve-jvms.c)
target_include_directories(test-serve-jvms PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR})
target_link_libraries(test-serve-jvms PRIVATE vp_postproc vp_maps vp_daemon vp_common)
target_compile_definitions(test-serve-jvms PRIVATE VIPROF_AGENT_SO="${CMAKE_BINARY_DIR}/jvm-agent/libviprof-jvmti.so"
  VIPROF_JAVA_CLASSES="${VIPROF_JAVA_CLASSES}" VIPROF_JDK17_HOME="${VIPROF_JDK_HOME}"
  VIPROF_JDK25_HOME="${VIPROF_JDK25_HOME}" VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-serve-jvms viprof viprof-jvmti java-fixtures)
add_test(NAME test-serve-jvms COMMAND test-serve-jvms 17 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME test-serve-jvms-jdk25 COMMAND test-serve-jvms 25 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-serve-jvms test-serve-jvms-jdk25 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 400 LABELS "jvm" RUN_SERIAL TRUE)
