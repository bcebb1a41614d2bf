# dcp_add_mpi_test: register a CTest test that runs a program under mpiexec.
#
#   dcp_add_mpi_test(NAME <test> TARGET <executable target> [RANKS <n>] [TIMEOUT <seconds>]
#                    [LABELS <label>...] [ARGS <argument>...]
#                    [EXPECT_FAILURE [MATCHES <regex>...]])
#
# Runs `mpiexec -n <RANKS> <MPIEXEC_PREFLAGS> [--oversubscribe] <target> <MPIEXEC_POSTFLAGS>
# <ARGS>`, RANKS 4 and TIMEOUT 120 unless given. With EXPECT_FAILURE the job is expected to END
# with a non-zero exit (a rank failed and the job was aborted): this file, run as a `cmake -P`
# script, runs mpiexec and fails the test when the job exits 0, when it has not ended 10 s before
# TIMEOUT (a hang; mpiexec is killed), or when its output (stdout and stderr) misses a MATCHES
# regex (no semicolons in them). --oversubscribe (Open MPI only) lets more ranks
# than cores run. The test gets the labels `mpi` and LABELS, PROCESSORS <RANKS>, and an
# environment that lets Open MPI run as root (CI does) without the rsh agent (ranks are local);
# with DCP_SANITIZE, LeakSanitizer is off (it reports Open MPI's own allocations, which
# MPI_Finalize never frees). Needs find_package(MPI) first (MPIEXEC_EXECUTABLE).

# --- script mode: cmake -D_dcp_mpi_expect_failure=<seconds> [-D_dcp_mpi_match_<i>=<regex>]...
#     -P DcpMpiTest.cmake -- <command>...
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND DEFINED _dcp_mpi_expect_failure)
  set(command "")
  set(after_dashes FALSE)
  math(EXPR last "${CMAKE_ARGC} - 1")
  foreach(i RANGE ${last})
    if(after_dashes)
      list(APPEND command "${CMAKE_ARGV${i}}")
    elseif(CMAKE_ARGV${i} STREQUAL "--")
      set(after_dashes TRUE)
    endif()
  endforeach()
  if(NOT command)
    message(FATAL_ERROR "DcpMpiTest.cmake: no command after --")
  endif()
  string(TIMESTAMP started "%s")
  execute_process(COMMAND ${command} TIMEOUT ${_dcp_mpi_expect_failure}
    RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  string(TIMESTAMP ended "%s")
  math(EXPR seconds "${ended} - ${started}")
  message("${output}")
  if(status MATCHES "timeout")
    message(FATAL_ERROR "the job did not end within ${_dcp_mpi_expect_failure} s (a hang): ${status}")
  elseif(status STREQUAL "0")
    message(FATAL_ERROR "the job exited 0 after ${seconds} s; a failing rank must end it with a non-zero code")
  endif()
  foreach(i RANGE 0 15)
    if(DEFINED _dcp_mpi_match_${i} AND NOT output MATCHES "${_dcp_mpi_match_${i}}")
      message(FATAL_ERROR "the job ended (${status}) but its output lacks /${_dcp_mpi_match_${i}}/")
    endif()
  endforeach()
  message(STATUS "the job ended with '${status}' after ${seconds} s, as expected")
  return()
endif()

include_guard(GLOBAL)

# Sets `out` to --oversubscribe when mpiexec is Open MPI's, else to nothing; asks mpiexec once.
function(_dcp_mpiexec_oversubscribe_flag out)
  get_property(known GLOBAL PROPERTY DCP_MPIEXEC_OVERSUBSCRIBE SET)
  if(NOT known)
    execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version
      OUTPUT_VARIABLE version ERROR_VARIABLE version RESULT_VARIABLE status)
    set(flag "")
    if(version MATCHES "Open MPI|OpenRTE")
      set(flag --oversubscribe)
    endif()
    set_property(GLOBAL PROPERTY DCP_MPIEXEC_OVERSUBSCRIBE "${flag}")
  endif()
  get_property(flag GLOBAL PROPERTY DCP_MPIEXEC_OVERSUBSCRIBE)
  set(${out} "${flag}" PARENT_SCOPE)
endfunction()

function(dcp_add_mpi_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "EXPECT_FAILURE" "NAME;TARGET;RANKS;TIMEOUT" "LABELS;ARGS;MATCHES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dcp_add_mpi_test: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_NAME OR NOT arg_TARGET)
    message(FATAL_ERROR "dcp_add_mpi_test: NAME and TARGET are required")
  endif()
  if(NOT TARGET "${arg_TARGET}")
    message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): ${arg_TARGET} is not a target")
  endif()
  if(NOT MPIEXEC_EXECUTABLE)
    message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): no MPIEXEC_EXECUTABLE; call find_package(MPI) first")
  endif()
  if(NOT DEFINED arg_RANKS)
    set(arg_RANKS 4)
  endif()
  if(NOT arg_RANKS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): RANKS = '${arg_RANKS}', must be a positive integer")
  endif()
  if(NOT DEFINED arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()

  if(arg_MATCHES AND NOT arg_EXPECT_FAILURE)
    message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): MATCHES needs EXPECT_FAILURE")
  endif()
  list(LENGTH arg_MATCHES match_count)
  if(match_count GREATER 16)
    message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): ${match_count} MATCHES, at most 16")
  endif()

  _dcp_mpiexec_oversubscribe_flag(oversubscribe)
  set(command "${MPIEXEC_EXECUTABLE}" ${MPIEXEC_NUMPROC_FLAG} ${arg_RANKS} ${MPIEXEC_PREFLAGS} ${oversubscribe}
              "$<TARGET_FILE:${arg_TARGET}>" ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  if(arg_EXPECT_FAILURE)
    if(arg_TIMEOUT LESS_EQUAL 10)
      message(FATAL_ERROR "dcp_add_mpi_test(${arg_NAME}): EXPECT_FAILURE needs TIMEOUT > 10 s, got ${arg_TIMEOUT}")
    endif()
    math(EXPR within "${arg_TIMEOUT} - 10")
    set(matches "")
    set(i 0)
    foreach(regex IN LISTS arg_MATCHES)
      list(APPEND matches "-D_dcp_mpi_match_${i}=${regex}")
      math(EXPR i "${i} + 1")
    endforeach()
    set(command "${CMAKE_COMMAND}" "-D_dcp_mpi_expect_failure=${within}" ${matches}
                -P "${CMAKE_CURRENT_FUNCTION_LIST_FILE}" -- ${command})
  endif()
  add_test(NAME "${arg_NAME}" COMMAND ${command})

  set(environment
    OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_plm_rsh_agent=)
  if(DCP_SANITIZE)
    list(APPEND environment
      "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1")
  endif()
  set_tests_properties("${arg_NAME}" PROPERTIES
    LABELS "mpi;${arg_LABELS}"
    TIMEOUT ${arg_TIMEOUT}
    PROCESSORS ${arg_RANKS}
    ENVIRONMENT "${environment}")
endfunction()
