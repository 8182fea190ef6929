# Tests of the report path and of the shared helpers it uses (JSON escaping, HTML views,
# report scale).
viprof_test(test-json SOURCES test-json.c LIBS vp_common LABELS unit)
