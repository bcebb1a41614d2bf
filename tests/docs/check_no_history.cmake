# Fails when the product pages carry history that git already keeps: a commit-hash-like token
# or a date in README.md, CHANGELOG.md or docs/*.md, or a README longer than 180 lines.
#
#   cmake -DSOURCE_DIR=<checkout> -P check_no_history.cmake       the repository's pages
#   cmake -DFILES="a.md;b.md" -P check_no_history.cmake           given files (the self-test)
#
# A hash-like token is 7 to 40 lowercase hex digits with at least one digit and one letter a-f,
# standing alone (between characters that are not letters, digits or '_'), so words ("faced"),
# numbers ("1024") and identifiers ("abc123_x") do not count. A token of exactly 16 digits on a
# line that says "fingerprint" is a plan's 64-bit fingerprint (docs/plan-format.md), not a commit.
# CHANGELOG.md is grouped by version, so only hashes count there, not dates.
cmake_minimum_required(VERSION 3.24)

set(readme_line_limit 180)
set(hex7 "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]")
set(date_pattern "[0-9][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]")

if(NOT DEFINED FILES)
  file(GLOB doc_pages "${SOURCE_DIR}/docs/*.md")
  set(FILES "${SOURCE_DIR}/README.md" ${doc_pages})
  if(EXISTS "${SOURCE_DIR}/CHANGELOG.md")
    list(APPEND FILES "${SOURCE_DIR}/CHANGELOG.md")
  endif()
endif()

set(findings 0)
foreach(page IN LISTS FILES)
  get_filename_component(page_name "${page}" NAME)
  file(STRINGS "${page}" lines ENCODING UTF-8)
  # file(STRINGS) drops empty lines; count them as wc -l does.
  file(READ "${page}" text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines line_count)
  if(page_name STREQUAL "README.md" AND line_count GREATER readme_line_limit)
    message(SEND_ERROR "${page}: ${line_count} lines, more than ${readme_line_limit}")
    math(EXPR findings "${findings} + 1")
  endif()
  foreach(line IN LISTS lines)
    if(NOT page_name STREQUAL "CHANGELOG.md" AND line MATCHES "(^|[^0-9])(${date_pattern})([^0-9]|$)")
      message(SEND_ERROR "${page}: date ${CMAKE_MATCH_2} in: ${line}")
      math(EXPR findings "${findings} + 1")
    endif()
    if(NOT line MATCHES "${hex7}")
      continue()
    endif()
    # Every run of letters, digits and '_' becomes one list element.
    string(REGEX REPLACE "[^0-9A-Za-z_]+" ";" tokens "${line}")
    foreach(token IN LISTS tokens)
      string(LENGTH "${token}" token_length)
      if(token_length LESS 7 OR token_length GREATER 40 OR NOT token MATCHES "^[0-9a-f]+$"
         OR NOT token MATCHES "[0-9]" OR NOT token MATCHES "[a-f]")
        continue()
      endif()
      if(token_length EQUAL 16 AND line MATCHES "fingerprint")
        continue()
      endif()
      message(SEND_ERROR "${page}: commit-hash-like token ${token} in: ${line}")
      math(EXPR findings "${findings} + 1")
    endforeach()
  endforeach()
endforeach()

if(findings GREATER 0)
  message(FATAL_ERROR "${findings} finding(s): say what is true now, with its command; git keeps the history")
endif()
list(LENGTH FILES page_count)
message(STATUS "no history in ${page_count} pages")
