# Tests of the real executor (real/): included from tests/CMakeLists.txt.
if(TARGET refit_real)
  add_executable(test_real test_real.c)
  target_link_libraries(test_real PRIVATE refit_real)
  add_test(NAME real COMMAND test_real)
  # the copy-bandwidth lists of the GPU check on the host backend: every destination byte checked
  add_test(NAME real_copy_check COMMAND test_real --copy-bw 16 host)

  # MPI runs of `refit run`: one process per rank, host backend, every strategy.
  set(_real_sh ${CMAKE_CURRENT_SOURCE_DIR}/test_real.sh)
  foreach(mode mpi-spec mpi-model mpi-layouts mpi-lanes mpi-lane-comms emulated-lane-comms errors
               advise)
    add_test(NAME real_${mode}
             COMMAND ${_real_sh} ${mode} $<TARGET_FILE:refit> $<TARGET_FILE:test_real> ${MPIEXEC_EXECUTABLE})
  endforeach()
  # Needs a GPU: skipped (exit 77) with a message where there is none or no CUDA backend.
  add_test(NAME real_cuda
           COMMAND ${_real_sh} cuda $<TARGET_FILE:refit> $<TARGET_FILE:test_real> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(real_cuda PROPERTIES SKIP_RETURN_CODE 77)

  set(_real_tests real real_copy_check real_mpi-spec real_mpi-model real_mpi-layouts real_mpi-lanes
                  real_mpi-lane-comms real_emulated-lane-comms real_errors real_advise real_cuda)
  set(_real_mpi_tests real_mpi-spec real_mpi-model real_mpi-layouts real_mpi-lanes
                      real_mpi-lane-comms real_emulated-lane-comms real_errors real_advise real_cuda)

  # experiments/validate end to end with the host backend (the measured side of a smoke test only).
  find_program(REFIT_PYTHON3 python3)
  if(TARGET refit_sim AND REFIT_PYTHON3)
    add_test(NAME real_validate
             COMMAND ${REFIT_PYTHON3} ${CMAKE_SOURCE_DIR}/experiments/validate --backend host
                     --refit $<TARGET_FILE:refit> --gpus 8 --case "tiny-moe TP2xPP2 TP4"
                     --launcher "${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np {n}"
                     --iters 2 --warmup 1 --topology dgx-h100 --out ${CMAKE_BINARY_DIR}/validate-smoke)
    list(APPEND _real_tests real_validate)
    list(APPEND _real_mpi_tests real_validate)
    # refit run on the emulated network against refit sim of the same schedule (docs/real.md,
    # Emulated network): one case, m2n, the median of 5 refits within 15% of the prediction.
    add_test(NAME real_emulated
             COMMAND ${REFIT_PYTHON3} ${CMAKE_SOURCE_DIR}/experiments/emulated.py
                     --refit $<TARGET_FILE:refit> --case "tiny-moe TP2xPP2 TP4" --strategy m2n
                     --iters 5 --check 0.15
                     --launcher "${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np {n}"
                     --out ${CMAKE_BINARY_DIR}/emulated-smoke)
    list(APPEND _real_tests real_emulated)
    list(APPEND _real_mpi_tests real_emulated)
  endif()

  set_tests_properties(${_real_tests} PROPERTIES
                       ENVIRONMENT "REFIT_DATA_DIR=${CMAKE_SOURCE_DIR}" TIMEOUT 300)
  set_tests_properties(real PROPERTIES LABELS unit)
  if(TEST real_validate)
    # Open MPI leaks by design: under ASan, these MPI runs check everything but leaks.
    set_tests_properties(real_validate real_emulated PROPERTIES ENVIRONMENT
                         "REFIT_DATA_DIR=${CMAKE_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=0")
  endif()
  # The MPI tests use every core: do not run them beside each other.
  set_tests_properties(${_real_mpi_tests} PROPERTIES RESOURCE_LOCK mpi LABELS mpi)
endif()
