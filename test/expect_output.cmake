# Runs a command and passes only if it exits with status 0 and its output (stdout and stderr)
# matches EXPECT. ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status: a program that
# printed the expected lines and then failed (a failed close, a crash in a destructor) passed.
#
#   cmake -DEXPECT=<regular expression> -P expect_output.cmake <command> [<argument>...]
if(NOT DEFINED EXPECT)
  message(FATAL_ERROR "expect_output.cmake: -DEXPECT=<regular expression> is required")
endif()
# CMAKE_ARGV0 is cmake, then the options up to and including the script; the command follows.
set(command)
set(after_script FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_script)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} MATCHES "expect_output\\.cmake$")
    set(after_script TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "expect_output.cmake: no command given")
endif()
execute_process(COMMAND ${command} OUTPUT_VARIABLE output ERROR_VARIABLE output
  RESULT_VARIABLE status)
message("${output}")
if(NOT status STREQUAL "0")
  message(FATAL_ERROR "expect_output.cmake: the command exited with status ${status}")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "expect_output.cmake: the output does not match '${EXPECT}'")
endif()
