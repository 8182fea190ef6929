# Tests of the report path and of the shared helpers it uses (JSON escaping, HTML views,
# report scale).
viprof_test(test-json SOURCES test-json.c LIBS vp_common LABELS unit)
viprof_test(test-strtab SOURCES test-strtab.c LIBS vp_common LABELS unit)
viprof_test(test-pbuf SOURCES test-pbuf.c LIBS vp_common LABELS unit)
viprof_test(test-calltree SOURCES test-calltree.c LIBS vp_report LABELS unit)
# The flame graph's views (orientation, callers, per thread, event, tooltip) in chromium.
viprof_test(test-report-html-views SOURCES test-report-html-views.c LIBS vp_report TIMEOUT 300 LABELS tools)
# Issue 33 item 7: every control of the view round-trips through the URL fragment, and an
# edited fragment is applied live (hashchange), in chromium.
viprof_test(test-report-html-hash SOURCES test-report-html-hash.c LIBS vp_report TIMEOUT 120 LABELS tools)
# Issue 26: the HTML time strip. The embedded per-bucket data equals the profile's (unit);
# a drag over the strip in chromium narrows the flame graph to that window (tools).
viprof_test(test-report-html-time SOURCES test-report-html-time.c LIBS vp_report LABELS unit)
add_test(NAME test-report-html-time-browser COMMAND test-report-html-time browser WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-html-time-browser PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS tools)
add_test(NAME test-report-html-time-live COMMAND test-report-html-time live $<TARGET_FILE:viprof> $<TARGET_FILE:vdso-loop>
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-html-time-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
add_dependencies(test-report-html-time viprof vdso-loop)
# What export-jitdump's help promises (not perf inject --jit).
viprof_test(test-export-jitdump-help SOURCES test-export-jitdump-help.c LIBS vp_common LABELS unit)
target_compile_definitions(test-export-jitdump-help PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-export-jitdump-help viprof)
# The one child launcher (record -- CMD; stat -- CMD once hv-glue uses it).
viprof_test(test-launch SOURCES test-launch.c LIBS vp_common LABELS unit)
# The time spans the report's address cache reuses answers for.
viprof_test(test-procmaps-span SOURCES test-procmaps-span.c LIBS vp_report LABELS unit)
# The pprof report of real recordings (native with off-CPU states, a JVM with
# JIT code) read back by the real pprof: addresses inside their mappings, no 0x0/0x0
# mapping claiming functions, the main executable first. One entry per scenario.
viprof_test(test-report-pprof-live-native SOURCES test-report-pprof-live.c LIBS vp_common ARGS native TIMEOUT 300 LABELS tools)
target_compile_definitions(test-report-pprof-live-native PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>"
  OFFCPU_FIXTURE="$<TARGET_FILE:offcpu-fixture>" JAVA17="${VIPROF_JDK_HOME}/bin/java" JAVA25="${VIPROF_JDK25_HOME}/bin/java"
  JAVA_CLASSES="${VIPROF_JAVA_CLASSES}" SPLIT3="$<TARGET_FILE:split3>")
add_dependencies(test-report-pprof-live-native viprof offcpu-fixture viprof-jvmti java-fixtures split3)
add_test(NAME test-report-pprof-live-jvm COMMAND test-report-pprof-live-native jvm WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-pprof-live-jvm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "tools;jvm")
add_test(NAME test-report-pprof-live-jvm25 COMMAND test-report-pprof-live-native jvm25 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-pprof-live-jvm25 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "tools;jvm")
# A whole-VM recording (two JVMs and a C program) names each sample's
# process, the profile after the VM, and counts its [unknown] frames by reason.
add_test(NAME test-report-pprof-live-wholevm COMMAND test-report-pprof-live-native wholevm WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-report-pprof-live-wholevm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "tools;jvm;live" RUN_SERIAL TRUE)
# Issue 35: every report format byte-identical on stored sessions (tests/fixtures/golden:
# native, JVM off-CPU, JVM alloc/lock, whole-VM, damaged, cut) in every view of
# scripts/report-views.sh; a deliberate change: scripts/golden-update.sh.
add_test(NAME test-report-golden COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test-report-golden.sh $<TARGET_FILE:viprof> ${CMAKE_SOURCE_DIR})
set_tests_properties(test-report-golden PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS unit)
