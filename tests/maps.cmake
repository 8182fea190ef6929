# The code-map library (maps/): the epoch-on-overlap rule that the agent and the readers share.
viprof_test(test-epoch-rule SOURCES test-epoch-rule.c LIBS vp_maps LABELS unit)
