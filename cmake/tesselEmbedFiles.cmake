# tessel_embed_files(OUT SCRIPT FILES... COMMENT text): a custom command that runs
# cmake/SCRIPT with -DOUT=OUT -DFILES=<FILES joined by "|"> to write the generated source OUT,
# rerun when a file, SCRIPT or cmake/embed_write.cmake changes. FILES is joined by "|" so the
# list reaches the script as one argument.
function(tessel_embed_files out script)
  cmake_parse_arguments(ARG "" "COMMENT" "FILES" ${ARGN})
  string(REPLACE ";" "|" files_arg "${ARG_FILES}")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DFILES=${files_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/${script}
    DEPENDS ${ARG_FILES} ${PROJECT_SOURCE_DIR}/cmake/${script}
            ${PROJECT_SOURCE_DIR}/cmake/embed_write.cmake
            ${PROJECT_SOURCE_DIR}/cmake/tesselEmbedFiles.cmake
    COMMENT "${ARG_COMMENT}"
    VERBATIM)
endfunction()
