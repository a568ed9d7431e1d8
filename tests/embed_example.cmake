# Installs floodgate into a scratch prefix, then configures, builds and runs
# examples/embed against it with find_package(floodgate): what a user project does.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK_DIR}/build
  -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring examples/embed failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building examples/embed failed: ${rc}")
endif()
# Runs one program of examples/embed and checks that it succeeded and printed `expected`.
function(run_example program expected)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(rc)
    message(FATAL_ERROR "examples/embed ${program} exited with ${rc}")
  endif()
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "examples/embed ${program} printed an unexpected result")
  endif()
endfunction()
run_example(embed_example "allowed 3 of 5.*prepared: allowed 2 of 3")
# The fleet: 40 jobs on a quota of 100/s, burst 5, delay=1s: the queue never reaches 1 s
# (40 slots are 0.35 s past the burst), so every job waits its turn and none is requeued.
run_example(fleet_example "called 40 of 40, requeued 0")
