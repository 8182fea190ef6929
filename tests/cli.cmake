# Issue 12: an event the machine cannot count is refused alike by stat and record
# (exit status 2, one line naming cause and fix, the command not run).
viprof_test(test-event-refusal SOURCES test-event-refusal.c LIBS vp_common LABELS live TIMEOUT 60)
target_compile_definitions(test-event-refusal PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-event-refusal viprof)
