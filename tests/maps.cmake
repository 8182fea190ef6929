# The code-map library (maps/): the epoch-on-overlap rule that the agent and the readers share.
viprof_test(test-epoch-rule SOURCES test-epoch-rule.c LIBS vp_maps LABELS unit)
# The compact records of agent version 2 (INLINE2, METHOD_LOAD2) read back as the old ones.
viprof_test(test-codemap-v2 SOURCES test-codemap-v2.c LIBS vp_maps LABELS unit)
# The GC record (which GC began an epoch) read back, attached to its epoch only.
viprof_test(test-codemap-gc SOURCES test-codemap-gc.c LIBS vp_maps LABELS unit)
# 'viprof maps export-*' as root: no FIFO, no other user's file, new files 0600.
viprof_test(test-maps-export SOURCES test-maps-export.c LIBS vp_common LABELS tools)
target_compile_definitions(test-maps-export PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-maps-export viprof)
# A code map made to exhaust its reader (root reads users' maps): refused within a budget
# proportional to its bytes, in a child whose peak memory is measured.
viprof_test(test-codemap-bomb SOURCES test-codemap-bomb.c LIBS vp_maps LABELS unit)
# Write -> read with the real writer and reader: seeded random record scripts (the libFuzzer
# target fuzz-codemap-roundtrip runs the same checks on its own inputs).
viprof_test(test-codemap-roundtrip SOURCES ${CMAKE_SOURCE_DIR}/fuzz/fuzz-codemap-roundtrip.c LIBS vp_maps LABELS unit)
target_compile_definitions(test-codemap-roundtrip PRIVATE RT_MAIN)
target_include_directories(test-codemap-roundtrip PRIVATE ${CMAKE_SOURCE_DIR}/fuzz)
