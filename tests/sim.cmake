# Tests of the SimGrid executor (sim/: the executor, the calibration fit, the advise search),
# included from tests/CMakeLists.txt.
if(TARGET refit_sim)
  foreach(t sim fit advise_search)
    add_executable(test_${t} test_${t}.c)
    target_link_libraries(test_${t} PRIVATE refit_sim)
    add_test(NAME ${t} COMMAND test_${t})
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "REFIT_DATA_DIR=${CMAKE_SOURCE_DIR}"
                                         LABELS unit TIMEOUT 300)
  endforeach()
endif()
