# Finding 05: a translation unit that includes dcp/default_scheduler.hpp and calls plan() must
# not instantiate the planner — its object file only refers to DataCentricScheduler<>::plan —
# while src/default_scheduler.cpp defines it. Compiles both with CXX and reads them with NM.
foreach(variant IN ITEMS user instance)
  if(variant STREQUAL "user")
    set(source "${SOURCE_DIR}/bench/compile_time/plan_one_batch.cpp")
    set(defines -DDCP_BENCH_EXTERN)
  else()
    set(source "${SOURCE_DIR}/src/default_scheduler.cpp")
    set(defines)
  endif()
  execute_process(
    COMMAND "${CXX}" -std=c++20 -O2 -I${SOURCE_DIR}/include ${defines} -c "${source}"
            -o "${WORK_DIR}/${variant}.o"
    RESULT_VARIABLE status ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "compiling ${source} failed:\n${errors}")
  endif()
  execute_process(COMMAND "${NM}" -C "${WORK_DIR}/${variant}.o" OUTPUT_VARIABLE symbols
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${variant}.o")
  endif()
  string(REGEX MATCHALL "[^\n]*DataCentricScheduler<[^\n]*::plan\\(std::span[^\n]*" ${variant}_plan
         "${symbols}")
endforeach()
if(NOT user_plan MATCHES "^ +U ")
  message(FATAL_ERROR "the user's translation unit defines or lacks plan():\n${user_plan}")
endif()
if(NOT instance_plan MATCHES " [TW] ")
  message(FATAL_ERROR "src/default_scheduler.cpp does not define plan():\n${instance_plan}")
endif()
message(STATUS "plan() is only referenced by the user's file:\n${user_plan}\ndefined by default_scheduler.cpp:\n${instance_plan}")
