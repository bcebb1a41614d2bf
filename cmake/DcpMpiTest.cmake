# dcp_add_mpi_test: register a CTest test that runs a program under mpiexec.
#
#   dcp_add_mpi_test(NAME <test> TARGET <executable target> [RANKS <n>] [TIMEOUT <seconds>]
#                    [LABELS <label>...] [ARGS <argument>...])
#
# Runs `mpiexec -n <RANKS> <MPIEXEC_PREFLAGS> [--oversubscribe] <target> <MPIEXEC_POSTFLAGS>
# <ARGS>`, RANKS 4 and TIMEOUT 120 unless given. --oversubscribe (Open MPI only) lets more ranks
# than cores run. The test gets the labels `mpi` and LABELS, PROCESSORS <RANKS>, and an
# environment that lets Open MPI run as root (CI does) without the rsh agent (ranks are local);
# with DCP_SANITIZE, LeakSanitizer is off (it reports Open MPI's own allocations, which
# MPI_Finalize never frees). Needs find_package(MPI) first (MPIEXEC_EXECUTABLE).

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
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;TARGET;RANKS;TIMEOUT" "LABELS;ARGS")
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

  _dcp_mpiexec_oversubscribe_flag(oversubscribe)
  add_test(NAME "${arg_NAME}"
    COMMAND "${MPIEXEC_EXECUTABLE}" ${MPIEXEC_NUMPROC_FLAG} ${arg_RANKS} ${MPIEXEC_PREFLAGS} ${oversubscribe}
            "$<TARGET_FILE:${arg_TARGET}>" ${MPIEXEC_POSTFLAGS} ${arg_ARGS})

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
