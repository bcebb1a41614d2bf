# Runs a plain training loop and its dcp version and checks that they print the same losses
# (CTest example.<framework>.ten_line_integration.same_losses):
#
#   cmake [-DLINES=<regex>] -P same_losses.cmake -- <plain command...> -- <dcp command...>
#
# Each command must exit 0. The lines of their standard output that match LINES (default
# `^step `, the loops' `step N  loss X` lines) must be the same, in the same order, and there
# must be at least one. The loops print their losses with %.12g, so this holds only if dcp's
# plan leaves the mathematics of every step unchanged.

cmake_minimum_required(VERSION 3.24)

if(NOT DEFINED LINES OR LINES STREQUAL "")
  set(LINES "^step ")
endif()

set(commands_found 0)
set(current "")
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(CMAKE_ARGV${i} STREQUAL "--")
    if(commands_found GREATER 0)
      set(command_${commands_found} "${current}")
    endif()
    math(EXPR commands_found "${commands_found} + 1")
    set(current "")
  elseif(commands_found GREATER 0)
    list(APPEND current "${CMAKE_ARGV${i}}")
  endif()
endforeach()
set(command_${commands_found} "${current}")
if(NOT commands_found EQUAL 2 OR NOT command_1 OR NOT command_2)
  message(FATAL_ERROR "same_losses: expected -- <plain command> -- <dcp command>")
endif()

foreach(k 1 2)
  execute_process(COMMAND ${command_${k}} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  list(GET command_${k} -1 name)
  if(NOT status STREQUAL "0")
    message(FATAL_ERROR "same_losses: ${name} failed (${status}):\n${output}\n${errors}")
  endif()
  string(REPLACE ";" "," output "${output}")
  string(REGEX MATCHALL "[^\n]+" all_lines "${output}")
  set(losses_${k} "")
  foreach(line IN LISTS all_lines)
    if(line MATCHES "${LINES}")
      list(APPEND losses_${k} "${line}")
    endif()
  endforeach()
  list(LENGTH losses_${k} count_${k})
  message(STATUS "${name}: ${count_${k}} loss lines")
  foreach(line IN LISTS losses_${k})
    message(STATUS "  ${line}")
  endforeach()
endforeach()

if(count_1 EQUAL 0)
  message(FATAL_ERROR "same_losses: the plain loop printed no line matching /${LINES}/")
endif()
if(NOT losses_1 STREQUAL losses_2)
  message(FATAL_ERROR "same_losses: the dcp loop's losses differ from the plain loop's")
endif()
message(STATUS "same_losses: the ${count_1} loss lines are identical")
