# Off-CPU time, exact steal and the wall view (record --off-cpu, report --wall).
add_executable(offcpu-fixture fixtures/offcpu/offcpu-fixture.c)
target_compile_options(offcpu-fixture PRIVATE "SHELL:-O1 -fno-omit-frame-pointer")
target_link_libraries(offcpu-fixture PRIVATE Threads::Threads)
foreach(scenario split compete steal)
  viprof_test(test-offcpu-${scenario} SOURCES test-offcpu.c LIBS vp_postproc ARGS ${scenario} TIMEOUT 120 LABELS live)
  target_compile_definitions(test-offcpu-${scenario} PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>"
                             OFFCPU_FIXTURE="$<TARGET_FILE:offcpu-fixture>")
  add_dependencies(test-offcpu-${scenario} viprof offcpu-fixture)
endforeach()
viprof_test(test-wall SOURCES test-wall.c LIBS vp_postproc LABELS unit)
# Whole stacks at switch-out (the sampler's walker), wait states, units.
add_executable(nap-fixture fixtures/offcpu/nap-fixture.c)
target_compile_options(nap-fixture PRIVATE "SHELL:-O1 -fomit-frame-pointer")
# One binary: "nap" (the C fixture) and, through viprof_jvm_test, WaitSplit on JDK 17
# (test-offcpu-walk) and Temurin 25 (test-offcpu-walk-jdk25).
viprof_jvm_test(test-offcpu-walk 120 vp_postproc vp_common LABELS live jvm)
target_compile_definitions(test-offcpu-walk PRIVATE NAP_FIXTURE="$<TARGET_FILE:nap-fixture>")
add_dependencies(test-offcpu-walk nap-fixture)
add_test(NAME test-offcpu-walk-nap COMMAND test-offcpu-walk nap WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-offcpu-walk-nap PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
