# tessel_generate_header(OUTPUT <file>
#                        (SNAPSHOT <snapshot file> | SERVER <host:port> | DB <tessel.db>)
#                        [KERNELS <kernel>...])
#
# At configure time, writes a C++ header with the tuned configs as constexpr tables
# (namespace tessel_tuned: kEntries, kDefaults, BestConfig(), ParamValue()) by running
# `tessel export --format header`. Fails the configure step with tessel's message when the
# source cannot be read. The snapshot file (when used) is a configure dependency: changing it
# regenerates the header.
function(tessel_generate_header)
  cmake_parse_arguments(ARG "" "OUTPUT;SNAPSHOT;SERVER;DB" "KERNELS" ${ARGN})
  if(NOT ARG_OUTPUT)
    message(FATAL_ERROR "tessel_generate_header: OUTPUT is required")
  endif()
  set(source_args)
  set(sources 0)
  if(ARG_SNAPSHOT)
    list(APPEND source_args --from-snapshot ${ARG_SNAPSHOT})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ARG_SNAPSHOT})
    math(EXPR sources "${sources} + 1")
  endif()
  if(ARG_SERVER)
    list(APPEND source_args --server ${ARG_SERVER})
    math(EXPR sources "${sources} + 1")
  endif()
  if(ARG_DB)
    list(APPEND source_args --db ${ARG_DB})
    math(EXPR sources "${sources} + 1")
  endif()
  if(NOT sources EQUAL 1)
    message(FATAL_ERROR "tessel_generate_header: give exactly one of SNAPSHOT, SERVER or DB")
  endif()
  set(kernel_args)
  foreach(kernel ${ARG_KERNELS})
    list(APPEND kernel_args --kernel ${kernel})
  endforeach()
  if(NOT TESSEL_EXECUTABLE)
    message(FATAL_ERROR "tessel_generate_header: TESSEL_EXECUTABLE is not set")
  endif()
  execute_process(
    COMMAND ${TESSEL_EXECUTABLE} export --format header --out ${ARG_OUTPUT} ${source_args}
            ${kernel_args}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE error)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "tessel_generate_header: ${error}")
  endif()
  message(STATUS "tessel: ${output}")
endfunction()
