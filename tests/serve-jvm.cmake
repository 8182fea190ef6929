# viprof serve --continuous and the JVM agent: a JVM started after the
# service gets the agent and is named in later intervals; one with VIPROF_NO_AGENT=1 does
# not, nor does one of a user --jvm-attach does not name; one started during an interval is
# named in it from 5 s after its start (early). One entry per scenario and JDK
# (jvm: root, live sampling, a JDK).
viprof_jvm_test(test-serve-jvm 300 vp_report vp_common SCENARIOS agent optout select early RUN_SERIAL)
# The attach as a way in (issue 31): scenarios of test-serve-attack.sh that need a JVM of
# a user made by the test (jvm: root, live sampling, JDK 17).
foreach(s attach-stop attach-plant attach-tmp)
  add_test(NAME test-serve-attack-${s}
           COMMAND env VP_JAVA=${VIPROF_JDK_HOME}/bin/java VP_JAVA_CLASSES=${VIPROF_JAVA_CLASSES}
                   ${CMAKE_CURRENT_SOURCE_DIR}/test-serve-attack.sh ${s} $<TARGET_FILE:viprof> $<TARGET_FILE_DIR:serve-client>)
  set_tests_properties(test-serve-attack-${s} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS jvm RUN_SERIAL TRUE)
endforeach()
