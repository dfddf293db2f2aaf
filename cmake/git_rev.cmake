# Run at every build (not only at configure time): writes OUT with this checkout's short commit, and
# only when it changed, so that `zerodp --version` and `zerodp info` name the commit actually built
# while an unchanged commit rebuilds nothing. Arguments: -DGIT=... -DSRC=... -DOUT=...
set(rev "unknown")
if(DEFINED ENV{ZERODP_COMMIT} AND NOT "$ENV{ZERODP_COMMIT}" STREQUAL "")
  set(rev "$ENV{ZERODP_COMMIT}")  # a copy of the tree without .git (a lent GPU machine) says which commit
elseif(GIT)
  execute_process(COMMAND ${GIT} rev-parse --short HEAD WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE out
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND NOT out STREQUAL "")
    set(rev "${out}")
  endif()
endif()
set(content "// Generated at build time by cmake/git_rev.cmake.\n#pragma once\n#define ZERODP_GIT_REV \"${rev}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL content)
  file(WRITE ${OUT} "${content}")
endif()
