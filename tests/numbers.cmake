# Issue 23: numbers you can trust (steal only where a steal clock runs, multiplexing
# scaled per interval, asserts that keep doubles).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  # Integer asserts with floating arguments compare truncated values: flag them.
  add_test(NAME check-float-asserts COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/check-float-asserts.py)
  set_tests_properties(check-float-asserts PROPERTIES LABELS unit TIMEOUT 60)
endif()
