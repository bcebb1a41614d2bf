# Checks the ten-line integration claim (CTest example.mpi.ten_line_integration.lines):
#
#   cmake -DPLAIN=<plain_training_loop.cpp> -DDCP=<ten_line_integration.cpp> -DLIMIT=10
#         [-DCOMMENT=<line comment, default //>] [-DDIFF=<GNU diff>] [-DWORK=<scratch folder>]
#         -P check_ten_lines.cmake
#
# COMMENT is the language's line comment (`//` for C++, `#` for Python). Between the lines
# `<COMMENT> example-begin training` and `<COMMENT> example-end training` of both files:
#  - DCP has at most LIMIT lines marked with a trailing `<COMMENT> dcp` comment, PLAIN has none;
#  - with DIFF: the lines that DCP adds or changes relative to PLAIN are exactly the marked ones
#    (changes that only add or remove blank lines do not count).
# Prints the counts (added or changed, and removed) either way.

cmake_minimum_required(VERSION 3.24)

foreach(required PLAIN DCP LIMIT)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "check_ten_lines: -D${required}=... is required")
  endif()
endforeach()
if(NOT DEFINED COMMENT OR COMMENT STREQUAL "")
  set(COMMENT "//")
endif()
if(NOT COMMENT MATCHES "^(//|#|--)$")
  message(FATAL_ERROR "check_ten_lines: COMMENT = '${COMMENT}', expected //, # or --")
endif()
set(mark "${COMMENT} dcp")
if(NOT DEFINED WORK OR WORK STREQUAL "")
  set(WORK "${CMAKE_CURRENT_BINARY_DIR}")
endif()

# The text between the begin and end markers, ending with a newline.
function(read_region path out)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "check_ten_lines: ${path} does not exist")
  endif()
  file(READ "${path}" text)
  set(begin_marker "${COMMENT} example-begin training\n")
  string(FIND "${text}" "${begin_marker}" begin)
  string(FIND "${text}" "${COMMENT} example-end training" end)
  if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
    message(FATAL_ERROR "check_ten_lines: ${path} lacks the example-begin/example-end training lines")
  endif()
  string(LENGTH "${begin_marker}" skip)
  math(EXPR begin "${begin} + ${skip}")
  math(EXPR length "${end} - ${begin}")
  string(SUBSTRING "${text}" ${begin} ${length} region)
  set(${out} "${region}" PARENT_SCOPE)
endfunction()

# Lines marked `<COMMENT> dcp` at their end (or `<COMMENT> dcp: why`) in `text`.
function(count_marked text out)
  string(REGEX MATCHALL "${mark}(:[^\n]*)?\n" marks "${text}")
  list(LENGTH marks n)
  set(${out} ${n} PARENT_SCOPE)
endfunction()

read_region("${PLAIN}" plain)
read_region("${DCP}" dcp)
cmake_path(GET PLAIN FILENAME plain_name)
cmake_path(GET DCP FILENAME dcp_name)
count_marked("${plain}" plain_marked)
count_marked("${dcp}" marked)

set(problems "")
if(plain_marked GREATER 0)
  string(APPEND problems "\n  ${plain_name} has ${plain_marked} lines marked ${mark}; the plain loop should have none")
endif()
if(marked GREATER LIMIT)
  string(APPEND problems "\n  ${dcp_name} marks ${marked} lines ${mark}, more than ${LIMIT}")
endif()

if(DIFF)
  # One character per differing line: M (added or changed, marked), U (added or changed, not
  # marked), R (removed from the plain loop).
  file(MAKE_DIRECTORY "${WORK}")
  file(WRITE "${WORK}/plain.region" "${plain}")
  file(WRITE "${WORK}/dcp.region" "${dcp}")
  execute_process(
    COMMAND "${DIFF}" "--old-line-format={{removed}}%L" "--new-line-format={{added}}%L" "--unchanged-line-format="
            "${WORK}/plain.region" "${WORK}/dcp.region"
    OUTPUT_VARIABLE changes ERROR_VARIABLE diff_error RESULT_VARIABLE diff_status)
  if(NOT diff_status MATCHES "^[01]$")
    message(FATAL_ERROR "check_ten_lines: ${DIFF} failed (${diff_status}): ${diff_error}")
  endif()
  string(REGEX REPLACE "{{(added|removed)}}[ \t]*\n" "" changes "${changes}")  # blank lines
  string(REPLACE "{{removed}}" "- " listing "${changes}")
  string(REPLACE "{{added}}" "+ " listing "${listing}")
  string(REGEX REPLACE "{{added}}[^\n]*${mark}(:[^\n]*)?\n" "M" changes "${changes}")
  string(REGEX REPLACE "{{added}}[^\n]*\n" "U" changes "${changes}")
  string(REGEX REPLACE "{{removed}}[^\n]*\n" "R" changes "${changes}")
  if(NOT changes MATCHES "^[MUR]*$")
    message(FATAL_ERROR "check_ten_lines: could not read the output of ${DIFF}:\n${listing}")
  endif()
  string(REGEX REPLACE "[^M]" "" added_marked "${changes}")
  string(REGEX REPLACE "[^U]" "" added_unmarked "${changes}")
  string(REGEX REPLACE "[^R]" "" removed "${changes}")
  string(LENGTH "${added_marked}" added_marked)
  string(LENGTH "${added_unmarked}" added_unmarked)
  string(LENGTH "${removed}" removed)
  math(EXPR added "${added_marked} + ${added_unmarked}")
  if(added_unmarked GREATER 0)
    string(APPEND problems "\n  ${added_unmarked} added or changed lines lack the ${mark} mark")
  endif()
  if(NOT added_marked EQUAL marked)
    math(EXPR unchanged "${marked} - ${added_marked}")
    string(APPEND problems "\n  ${unchanged} lines marked ${mark} are not changes to the plain loop")
  endif()
  if(added GREATER LIMIT)
    string(APPEND problems "\n  ${added} lines added or changed, more than ${LIMIT}")
  endif()
  message(STATUS "${dcp_name} vs ${plain_name}: ${added} lines added or changed (limit ${LIMIT}), "
                 "${marked} marked ${mark}; ${removed} lines of the plain loop removed")
  message(STATUS "the changes (- plain, + dcp):\n${listing}")
else()
  message(STATUS "${dcp_name}: ${marked} lines marked ${mark} (limit ${LIMIT}); no diff program, so the "
                 "marks were not compared with ${plain_name}")
endif()

if(problems)
  message(FATAL_ERROR "check_ten_lines failed:${problems}")
endif()
