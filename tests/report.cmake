# Tests of the report path and of the shared helpers it uses (JSON escaping, HTML views,
# report scale).
viprof_test(test-json SOURCES test-json.c LIBS vp_common LABELS unit)
# The flame graph's views (orientation, callers, per thread, event, tooltip) in chromium.
viprof_test(test-report-html-views SOURCES test-report-html-views.c LIBS vp_postproc TIMEOUT 300 LABELS tools)
# What export-jitdump's help promises (not perf inject --jit).
viprof_test(test-export-jitdump-help SOURCES test-export-jitdump-help.c LIBS vp_common LABELS unit)
target_compile_definitions(test-export-jitdump-help PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-export-jitdump-help viprof)
# The one child launcher (record -- CMD; stat -- CMD once hv-glue uses it).
viprof_test(test-launch SOURCES test-launch.c LIBS vp_common LABELS unit)
# The time spans the report's address cache reuses answers for.
viprof_test(test-procmaps-span SOURCES test-procmaps-span.c LIBS vp_postproc LABELS unit)
