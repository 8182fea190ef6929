# viprof serve's HTTP side (issue 14 items 3 and 4): the HTTP server, the pprof
# endpoint read by the real pprof, continuous recording with retention and a CPU budget.
viprof_test(test-http SOURCES test-http.c LIBS vp_service LABELS unit)
