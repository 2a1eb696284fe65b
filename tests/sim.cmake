# Tests of the SimGrid executor (sim/), included from tests/CMakeLists.txt.
if(TARGET refit_sim)
  add_executable(test_sim test_sim.c)
  target_link_libraries(test_sim PRIVATE refit_sim)
  add_test(NAME sim COMMAND test_sim)
  set_tests_properties(sim PROPERTIES ENVIRONMENT "REFIT_DATA_DIR=${CMAKE_SOURCE_DIR}" TIMEOUT 300)
endif()
