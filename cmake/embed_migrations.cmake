# Writes a C++ source with every migration file as a raw string literal.
# Inputs: OUT (path of the .cc to write), FILES (the .sql files, sorted, separated by "|").
include(${CMAKE_CURRENT_LIST_DIR}/embed_write.cmake)
string(REPLACE "|" ";" FILES "${FILES}")
set(entries "")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  string(REGEX MATCH "^[0-9]+" num ${name})
  math(EXPR version "${num}")
  file(READ ${f} sql)
  string(APPEND entries "      {${version}, \"${name}\", R\"tessel_sql(${sql})tessel_sql\"},\n")
endforeach()
tessel_write_embedded(${OUT} embed_migrations.cmake schema/sql schema/migrations.h tessel Migration
                      Migrations "${entries}")
